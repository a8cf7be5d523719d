from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from iam.http.endpoint import require_one
from iam.http.fields import (
    Boolean,
    Choice,
    DateTime,
    Description,
    Email,
    JsonObject,
    Name,
    PermissionName,
    String,
    Tags,
    Uuid,
    UuidList,
)
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest

from .models import Invitation, Membership, Permission, Role, ServiceAccount, ServiceAccountKey


class PermissionSerializer(ResourceSerializer):
    class Meta:
        model = Permission
        fields = ["id", "workspace_id", "name", "code", "description", *RECORD_TAIL]


class RoleSerializer(ResourceSerializer):
    permissions = PermissionSerializer(many=True, read_only=True)

    class Meta:
        model = Role
        fields = ["id", "workspace_id", "name", "description", "permissions", *RECORD_TAIL]


class MembershipSerializer(ResourceSerializer):
    roles = RoleSerializer(many=True, read_only=True)

    class Meta:
        model = Membership
        fields = [
            "id",
            "account_id",
            "workspace_id",
            "project_id",
            "scope",
            "status",
            "accepted_at",
            "roles",
            *RECORD_TAIL,
        ]


class IdRequest(serializers.Serializer):
    id = Uuid()


class Deleted(serializers.Serializer):
    id = serializers.UUIDField()


class PermissionRef(serializers.Serializer):
    id = Uuid(required=False)
    code = PermissionName(required=False)

    def validate(self, attrs: dict) -> dict:
        return require_one(attrs, "id", "code")


class PermissionCreateRequest(RecordRequest):
    name = PermissionName()
    code = PermissionName(required=False, allow_null=True)
    description = Description()


class PermissionUpdateRequest(UpdateRequest, IdRequest, PermissionCreateRequest):
    pass


class RoleCreateRequest(RecordRequest):
    name = Name()
    description = Description()
    permission_ids = UuidList(max_length=1000)


class RoleUpdateRequest(UpdateRequest, IdRequest, RoleCreateRequest):
    pass


class MembershipCreateRequest(RecordRequest):
    account_id = Uuid()
    scope = Choice(Membership.Scope.choices, listed=False)
    status = Choice(Membership.Status.choices, listed=False)
    project_id = Uuid(required=False, allow_null=True)
    role_ids = UuidList(max_length=100)


class MembershipUpdateRequest(UpdateRequest, IdRequest, MembershipCreateRequest):
    account_id = None  # a membership keeps its account
    meta = JsonObject(required=False, require_schema_version=False)  # docs/api.md#validation: optional here


class PermissionCheckRequest(serializers.Serializer):
    account_id = Uuid()
    permission = PermissionName()
    project_id = Uuid(required=False, allow_null=True)


class GrantPath(serializers.Serializer):
    """One way an account holds a permission: an active membership, one of its roles, the role's
    permission whose pattern matched (`*`, `resource:*`, `*:action` or the name itself)."""

    membership_id = serializers.UUIDField()
    scope = Choice(Membership.Scope.choices)
    project_id = serializers.UUIDField(allow_null=True)
    role_id = serializers.UUIDField()
    role = serializers.CharField()
    pattern = serializers.CharField()


class PermissionCheckResult(serializers.Serializer):
    """Documentation only: the payload is built by `rbac.explain.explain`."""

    allowed = serializers.BooleanField()
    matched = GrantPath(many=True)
    reason = Choice(
        ["not_a_member", "not_active", "no_matching_permission", "account_disabled"], allow_null=True
    )


class InvitationSerializer(ResourceSerializer):
    # docs/api.md#invitations (a comment: docstrings become the OpenAPI descriptions). `status` is what it is
    # now: `expired` once past `expires_at`.

    roles = RoleSerializer(many=True, read_only=True)
    status = Choice(Invitation.Status.choices, source="current_status", read_only=True)
    invited_by = serializers.UUIDField(source="invited_by_id", read_only=True, allow_null=True)

    class Meta:
        model = Invitation
        fields = [
            "id",
            "workspace_id",
            "email",
            "scope",
            "project_id",
            "roles",
            "status",
            "invited_by",
            "membership_id",
            "created_at",
            "expires_at",
            "accepted_at",
        ]


class MembershipAsInvitation(ResourceSerializer):
    # An invited membership in the shape of an invitation (`invitations/mine`, `invitations/accept` and
    # `invitations/decline` of one by its id): its own id, the account's address, `pending` while
    # invited (`accepted` once active; `context["status"]` says otherwise: `declined`), no inviter and no
    # expiry. A `ResourceSerializer`, so that `iam.http.encoder.Encoder` writes it, its roles read a few
    # at a time.

    email = serializers.EmailField(source="account.email", read_only=True)
    status = serializers.SerializerMethodField()
    invited_by = serializers.SerializerMethodField()
    membership_id = serializers.UUIDField(source="id", read_only=True)
    expires_at = serializers.SerializerMethodField()
    roles = RoleSerializer(many=True, read_only=True)

    class Meta:
        model = Membership
        fields = InvitationSerializer.Meta.fields

    def get_status(self, membership: Membership) -> str:
        if "status" in self.context:
            return self.context["status"]
        if membership.status == Membership.Status.INVITED:
            return Invitation.Status.PENDING
        return Invitation.Status.ACCEPTED

    def get_invited_by(self, membership: Membership) -> None:
        return None

    def get_expires_at(self, membership: Membership) -> None:
        return None


class InvitationCreateRequest(serializers.Serializer):
    email = Email()
    scope = Choice(Membership.Scope.choices, listed=False)
    project_id = Uuid(required=False, allow_null=True)
    role_ids = UuidList(max_length=100)
    tags = Tags(required=False)
    meta = JsonObject(required=False)


class InvitationRequest(serializers.Serializer):
    token = String(required=False, max_length=4096)
    id = Uuid(required=False)
    # Asked only when the link's holder has no verified account yet (docs/api.md#invitations).
    password = String(required=False, max_length=1024, trim_whitespace=False)
    name = Name(required=False)


class InvitationAccepted(serializers.Serializer):
    """Documentation only: `access_token` and `refresh_token` come when the account was created or
    reclaimed by the acceptance; `mfa_required` and `mfa_token` instead of them when that account holds
    a second factor (`auth/mfa/verify` completes the sign-in)."""

    invitation = InvitationSerializer()
    membership = MembershipSerializer()
    access_token = serializers.CharField(required=False)
    refresh_token = serializers.CharField(required=False)
    mfa_required = serializers.BooleanField(required=False)
    mfa_token = serializers.CharField(required=False)


class ServiceAccountKeySerializer(ResourceSerializer):
    # A live key as a service account lists it: never the key, nor its digest (docs/api.md#api-keys).
    class Meta:
        model = ServiceAccountKey
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at"]


class ServiceAccountSerializer(ResourceSerializer):
    roles = RoleSerializer(many=True, read_only=True)
    keys = serializers.SerializerMethodField()

    class Meta:
        model = ServiceAccount
        fields = [
            "id",
            "workspace_id",
            "name",
            "roles",
            "enabled",
            "created_at",
            "updated_at",
            "last_used_at",
            "keys",
            "tags",
            "meta",
        ]

    @extend_schema_field(ServiceAccountKeySerializer(many=True))
    def get_keys(self, service_account: ServiceAccount) -> list[dict]:
        """Its live keys (not revoked, not expired), oldest first: prefetched by a list page
        (`LIVE_KEYS`), else read."""
        keys = getattr(service_account, "live_keys", None)
        if keys is None:
            keys = live_keys(ServiceAccountKey.objects.filter(service_account=service_account))
        return ServiceAccountKeySerializer(keys, many=True).data


def live_keys(keys):
    live = keys.filter(revoked_at__isnull=True).exclude(expires_at__lte=timezone.now())
    return live.order_by("created_at", "id")


class ServiceAccountCreateRequest(RecordRequest):
    name = Name()
    role_ids = UuidList(max_length=100)
    enabled = Boolean(required=False)


class ServiceAccountUpdateRequest(UpdateRequest, IdRequest, ServiceAccountCreateRequest):
    pass


class KeyCreateRequest(serializers.Serializer):
    id = Uuid()
    name = Name()
    expires_at = DateTime(required=False, allow_null=True)


class KeyCreated(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    key = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)


class KeyRevokeRequest(serializers.Serializer):
    id = Uuid()
    key_id = Uuid()


class KeyRevoked(serializers.Serializer):
    id = serializers.UUIDField()
    revoked = serializers.BooleanField()
