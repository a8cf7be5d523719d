import re
from typing import Any

from rest_framework import serializers

from iam.http.fields import Boolean, Email, Invalid, Name, String, Url, Uuid, UuidList
from iam.http.serializers import RecordRequest, ResourceSerializer, UpdateRequest
from rbac.serializers import Deleted, RoleSerializer

from .models import SsoConnection, SsoDomain

# A host name of at least two labels, lower case (RFC 1123 labels; IDNs in their xn-- form).
DOMAIN_RE = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})"
)
DOMAINS_MAX = 50


class DomainName(String):
    default_error_messages = {"invalid": "invalid domain"}

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 253)
        super().__init__(**kwargs)

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


class SsoConnectionSerializer(ResourceSerializer):
    """Never the client secret."""

    workspace_id = serializers.UUIDField(read_only=True)
    domains = SsoDomainSerializer(many=True, read_only=True)
    default_roles = RoleSerializer(many=True, read_only=True)

    class Meta:
        model = SsoConnection
        fields = [
            "id",
            "workspace_id",
            "name",
            "issuer",
            "client_id",
            "domains",
            "default_roles",
            "enabled",
            "trust_provider_mfa",
            "created_at",
            "updated_at",
            "tags",
            "meta",
        ]


class SsoConnectionRef(serializers.Serializer):
    id = Uuid()


class SsoConnectionDeleted(Deleted):
    pass


class SsoConnectionCreateRequest(RecordRequest):
    name = Name(min_length=1)
    issuer = Url()
    client_id = String(min_length=1, max_length=255)
    client_secret = String(min_length=1, max_length=1024)
    domains = DomainList()
    default_role_ids = UuidList(max_length=50)
    enabled = Boolean(required=False)
    trust_provider_mfa = Boolean(required=False)


class SsoConnectionUpdateRequest(UpdateRequest, SsoConnectionRef, SsoConnectionCreateRequest):
    pass


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
