from rest_framework import serializers

from accounts.serializers import AccountBriefSerializer
from iam.http.fields import Boolean, Description, Integer, Invalid, Name, PermissionName, String, Url, Uuid
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest
from iam.platform import egress
from rbac.serializers import Deleted, GrantPath
from tenancy.serializers import WorkspaceSerializer

from .models import Client


class ClientSerializer(ResourceSerializer):
    """describe, list and update: never the secret, which only create and regenerate-secret answer."""

    workspace = WorkspaceSerializer(read_only=True)  # docs/api.md#clients: the full workspace, embedded
    workspace_id = serializers.UUIDField(read_only=True)

    class Meta:
        model = Client
        fields = ["id", "workspace", "workspace_id", "name", "endpoint", "description", *RECORD_TAIL]


class ClientWithSecret(ClientSerializer):
    secret = serializers.CharField(read_only=True)

    class Meta(ClientSerializer.Meta):
        fields = [*ClientSerializer.Meta.fields, "secret"]


class ClientRef(serializers.Serializer):
    id = Uuid()


class ClientDeleted(Deleted):
    pass


class SecretRegenerated(serializers.Serializer):
    id = serializers.UUIDField()
    secret = serializers.CharField()


class WebhookUrl(Url):
    """A URL that every parser reads as the same host and port (`egress.check_form`), said in its own
    words before the generic `invalid endpoint`."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                egress.check_form(data)
            except egress.EndpointRefused as exc:
                raise Invalid(f"{self.field_name} {exc}") from exc
        return super().to_internal_value(data)


class ClientCreateRequest(RecordRequest):
    name = Name(min_length=1)
    endpoint = WebhookUrl(
        required=False,
        allow_null=True,
        help_text="http(s) URL that receives the push events; no user name, password or backslash",
    )
    description = Description()


class ClientUpdateRequest(UpdateRequest, ClientRef, ClientCreateRequest):
    pass


class ValidateRequest(serializers.Serializer):
    SECRET_MAX = 1024
    TOKEN_MAX = 8192

    client_id = Uuid()
    client_secret = String(max_length=SECRET_MAX)
    token = String(max_length=TOKEN_MAX)
    permission = PermissionName(required=False, allow_null=True)
    project_id = Uuid(required=False, allow_null=True)
    workspace_id = Uuid(
        required=False,
        allow_null=True,
        help_text="a client of the root workspace: answer about this workspace (members, grants, MFA policy)",
    )
    explain = Boolean(
        required=False, allow_null=True, help_text="add `matched`: every grant path behind `allowed`"
    )


class ServiceAccountBrief(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()


class ValidateResponse(serializers.Serializer):
    """The answer of `clients/validate` (documentation only: `clients.validation` builds the payload)."""

    authorized = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)
    account = AccountBriefSerializer(allow_null=True)
    service_account = ServiceAccountBrief(allow_null=True, help_text="a service account's key or token")
    workspace_id = serializers.UUIDField(allow_null=True)
    roles = serializers.ListField(child=serializers.CharField())
    permissions = serializers.ListField(child=serializers.CharField())
    allowed = serializers.BooleanField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    matched = GrantPath(many=True, required=False, help_text="only with `explain: true`")


class EventsRequest(serializers.Serializer):
    client_id = Uuid()
    client_secret = String(max_length=ValidateRequest.SECRET_MAX)
    after = String(required=False, allow_null=True, max_length=64)
    limit = Integer(required=False, min_value=1, max_value=1000, default=100)


class EventResource(serializers.Serializer):
    type = serializers.CharField()
    id = serializers.UUIDField()


class EventData(serializers.Serializer):
    account_ids = serializers.ListField(child=serializers.UUIDField())
    resource = EventResource()


class EventSerializer(serializers.Serializer):
    """The body of a push event and of each `clients/events` item (documentation only: the log stores
    it as sent)."""

    id = serializers.UUIDField()
    type = serializers.CharField()
    workspace_id = serializers.UUIDField()
    occurred_at = serializers.DateTimeField()
    data = EventData()


class EventsPage(serializers.Serializer):
    events = EventSerializer(many=True)
    next_cursor = serializers.CharField(help_text="pass as `after` to read on; store it once processed")
    has_more = serializers.BooleanField(help_text="a full page: more events wait")
