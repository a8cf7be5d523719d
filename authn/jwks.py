"""`GET /.well-known/jwks.json` (RFC 7517): the public keys that verify this service's tokens when
`IAM_JWT_ALGORITHM` is EdDSA or ES256, so another service can check a token's signature and expiry
without calling it. Not the envelope: JWKS clients (PyJWT's `PyJWKClient`, jose, ...) read this format
as is. With HS256 the document is empty: a shared secret is never published."""

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import keys

JWK = inline_serializer(
    name="Jwk",
    fields={
        "kty": serializers.CharField(help_text="OKP (EdDSA) or EC (ES256)"),
        "crv": serializers.CharField(help_text="Ed25519 or P-256"),
        "x": serializers.CharField(),
        "y": serializers.CharField(required=False, help_text="EC keys only"),
        "kid": serializers.CharField(),
        "alg": serializers.CharField(),
        "use": serializers.CharField(),
    },
)


class Jwks(APIView):
    http_method_names = ["get"]
    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema(
        operation_id="jwks",
        tags=["auth"],
        summary="Public keys that verify tokens (JWKS, not the envelope)",
        responses={
            200: inline_serializer(name="JwksDocument", fields={"keys": serializers.ListField(child=JWK)})
        },
    )
    def get(self, request: Request) -> Response:
        response = Response({"keys": keys.published_keys()})
        response["Cache-Control"] = f"public, max-age={settings.IAM_JWKS_MAX_AGE_SECONDS}"
        return response
