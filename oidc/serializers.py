from typing import Any

from rest_framework import serializers

from iam.http.fields import Choice, Invalid, Name, Uuid
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest
from rbac.serializers import Deleted

from .models import Application
from .services import GRANT_TYPES

URIS_MAX = 20  # redirect URIs an application registers; each is checked by oidc/redirect_uris.py


class ApplicationSerializer(ResourceSerializer):
    """describe, list and update: never the secret, which only create and regenerate-secret answer."""

    workspace_id = serializers.UUIDField(read_only=True)
    client_id = serializers.CharField(read_only=True, help_text="the id, as a string")

    class Meta:
        model = Application
        fields = [
            "id",
            "workspace_id",
            "name",
            "type",
            "client_id",
            "redirect_uris",
            "post_logout_redirect_uris",
            "grant_types",
            "service_account_id",
            "first_party",
            *RECORD_TAIL,
        ]


class ApplicationWithSecret(ApplicationSerializer):
    client_secret = serializers.CharField(
        read_only=True, allow_null=True, help_text="a web application's secret, shown this once"
    )

    class Meta(ApplicationSerializer.Meta):
        fields = [*ApplicationSerializer.Meta.fields, "client_secret"]


class ApplicationRef(serializers.Serializer):
    id = Uuid()


class ApplicationDeleted(Deleted):
    pass


class UriList(serializers.ListField):
    """Strings, each checked by the registration rules when the application's type is known (services)."""

    child = serializers.CharField(allow_blank=True, trim_whitespace=False)

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", URIS_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, list) and not all(isinstance(item, str) for item in data):
            raise Invalid(f"{self.field_name} must be an array of strings")
        return list(dict.fromkeys(super().to_internal_value(data)))


class GrantTypes(serializers.ListField):
    child = serializers.CharField()

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, list) and not all(isinstance(item, str) and item in GRANT_TYPES for item in data):
            raise Invalid(f"{self.field_name} must hold only {', '.join(GRANT_TYPES)}")
        values = list(dict.fromkeys(super().to_internal_value(data)))
        if not values:
            raise Invalid(f"{self.field_name} must not be empty")
        return values


class ApplicationCreateRequest(RecordRequest):
    name = Name(min_length=1)
    type = Choice(Application.Type.values)
    redirect_uris = UriList()
    post_logout_redirect_uris = UriList(required=False)
    grant_types = GrantTypes(required=False, help_text="default: authorization_code, refresh_token")
    service_account_id = Uuid(required=False, allow_null=True)


class ApplicationUpdateRequest(UpdateRequest, ApplicationRef, ApplicationCreateRequest):
    type = None  # an application keeps its type (a web one its secret)
