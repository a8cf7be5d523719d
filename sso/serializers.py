import re
from typing import Any

from rest_framework import serializers

from iam.http.fields import Boolean, Choice, Email, Invalid, Name, String, Url, Uuid, UuidList
from iam.http.serializers import RecordRequest, ResourceSerializer, UpdateRequest
from rbac.serializers import Deleted, RoleSerializer

from .models import SsoConnection, SsoDomain
from .saml import METADATA_MAX_CHARS

# A host name of at least two labels, lower case (RFC 1123 labels; IDNs in their xn-- form).
DOMAIN_RE = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})"
)
DOMAINS_MAX = 50


class DomainName(String):
    default_error_messages = {"invalid": "invalid domain"}
    defaults = {"max_length": 253}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data).strip().lower().rstrip(".")
        if not DOMAIN_RE.fullmatch(value):
            raise Invalid(f"{self.field_name or 'domain'} must be a domain name such as example.com")
        return value


class DomainList(serializers.ListField):
    child = DomainName()

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", DOMAINS_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, list) and not all(isinstance(item, str) for item in data):
            raise Invalid(f"{self.field_name} must be an array of domain names")
        if isinstance(data, list):
            for item in data:
                if not DOMAIN_RE.fullmatch(item.strip().lower().rstrip(".")):
                    raise Invalid(f"{self.field_name} must hold domain names such as example.com")
        return list(dict.fromkeys(super().to_internal_value(data)))


class SsoDomainSerializer(serializers.ModelSerializer):
    verified = serializers.BooleanField(read_only=True)

    class Meta:
        model = SsoDomain
        fields = ["domain", "verified", "verification_token"]


# What each protocol's connection answers of the other's fields: nothing (docs/api.md#sso).
OIDC_ONLY = frozenset({"issuer", "client_id"})
SAML_ONLY = frozenset({"idp_entity_id", "sp_entity_id", "acs_url", "metadata_url"})


class SsoConnectionSerializer(ResourceSerializer):
    """Never the client secret. An OpenID connection answers `issuer` and `client_id`, a SAML one
    `idp_entity_id`, `sp_entity_id`, `acs_url` and `metadata_url` instead."""

    workspace_id = serializers.UUIDField(read_only=True)
    # Not read-only: a response field marked so would be `required` in the schema, and each protocol's
    # answer leaves out the other's fields. (An answer's serializer takes no input.)
    idp_entity_id = serializers.CharField(required=False)
    sp_entity_id = serializers.CharField(required=False)
    acs_url = serializers.CharField(required=False)
    metadata_url = serializers.CharField(required=False)
    domains = SsoDomainSerializer(many=True, read_only=True)
    default_roles = RoleSerializer(many=True, read_only=True)

    class Meta:
        model = SsoConnection
        fields = [
            "id",
            "workspace_id",
            "name",
            "protocol",
            "issuer",
            "client_id",
            "idp_entity_id",
            "sp_entity_id",
            "acs_url",
            "metadata_url",
            "domains",
            "default_roles",
            "enabled",
            "trust_provider_mfa",
            "created_at",
            "updated_at",
            "tags",
            "meta",
        ]
        extra_kwargs = {name: {"required": False} for name in OIDC_ONLY} | {"protocol": {"required": True}}

    def represent_fields(self, instance: Any, zone: Any, plan: Any) -> dict[str, Any]:
        hidden = SAML_ONLY if instance.protocol == SsoConnection.Protocol.OIDC else OIDC_ONLY
        return super().represent_fields(instance, zone, [entry for entry in plan if entry[0] not in hidden])


class SsoConnectionRef(serializers.Serializer):
    id = Uuid()


class SsoConnectionDeleted(Deleted):
    pass


OIDC_FIELDS = ("issuer", "client_id", "client_secret")


def protocol_fields(attrs: dict, protocol: str) -> None:
    """A connection takes the fields of its protocol only: `issuer`, `client_id` and `client_secret` for
    `oidc`, `idp_metadata_xml` for `saml`."""
    others = ("idp_metadata_xml",) if protocol == SsoConnection.Protocol.OIDC else OIDC_FIELDS
    for name in others:
        if name in attrs:
            raise serializers.ValidationError(
                {name: serializers.ErrorDetail(f"{name} not used by {protocol} connections", code="iam")}
            )


class SsoConnectionCreateRequest(RecordRequest):
    name = Name(min_length=1)
    protocol = Choice(SsoConnection.Protocol.values, required=False)
    issuer = Url(required=False)
    client_id = String(min_length=1, max_length=255, required=False)
    client_secret = String(min_length=1, max_length=1024, required=False)
    idp_metadata_xml = String(min_length=1, max_length=METADATA_MAX_CHARS, required=False)
    domains = DomainList()
    default_role_ids = UuidList(max_length=50)
    enabled = Boolean(required=False)
    trust_provider_mfa = Boolean(required=False)

    def validate(self, attrs: dict) -> dict:
        protocol = attrs.get("protocol", SsoConnection.Protocol.OIDC)
        protocol_fields(attrs, protocol)
        needed = OIDC_FIELDS if protocol == SsoConnection.Protocol.OIDC else ("idp_metadata_xml",)
        for name in needed:
            if name not in attrs:
                raise serializers.ValidationError(
                    {name: serializers.ErrorDetail(f"{name} required", code="iam")}
                )
        return attrs


class SsoConnectionUpdateRequest(UpdateRequest, SsoConnectionRef, SsoConnectionCreateRequest):
    protocol = None  # a connection keeps its protocol

    def validate(self, attrs: dict) -> dict:
        return attrs  # which fields the connection's protocol takes: `services.update_connection`


class VerifyDomainRequest(SsoConnectionRef):
    domain = DomainName()


class SsoInitiateRequest(serializers.Serializer):
    email = Email(required=False)
    connection_id = Uuid(required=False)
    redirect_url = Url()

    def validate(self, attrs: dict) -> dict:
        if "email" not in attrs and "connection_id" not in attrs:
            raise serializers.ValidationError(
                {"email": serializers.ErrorDetail("email or connection_id required", code="iam")}
            )
        return attrs


class SsoInitiated(serializers.Serializer):
    authorization_url = serializers.CharField()
