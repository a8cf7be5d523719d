"""`GET /.well-known/jwks.json` (RFC 7517): the public keys that verify this service's signatures, so
another service can check a token without calling it: the RS256 key the service always has (OpenID ID
tokens), and IAM_JWT_ALGORITHM's keys when it is EdDSA or ES256 (access and refresh tokens). Never empty;
an HS256 secret is never published. Not the envelope: JWKS clients (PyJWT's `PyJWKClient`, jose, ...)
read this format as is."""

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import keys

JWK = inline_serializer(
    name="Jwk",
    fields={
        "kty": serializers.CharField(help_text="RSA (RS256), OKP (EdDSA) or EC (ES256)"),
        "n": serializers.CharField(required=False, help_text="RSA keys only"),
        "e": serializers.CharField(required=False, help_text="RSA keys only"),
        "crv": serializers.CharField(required=False, help_text="Ed25519 or P-256 (OKP and EC keys)"),
        "x": serializers.CharField(required=False, help_text="OKP and EC keys"),
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
