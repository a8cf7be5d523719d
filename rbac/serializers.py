from rest_framework import serializers

from iam.api import require_one
from iam.fields import Description, JsonObject, Name, PermissionName, Tags, Uuid, UuidList

from .models import Membership, Permission, Role


class PermissionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Permission
        fields = [
            "id",
            "workspace_id",
            "name",
            "code",
            "description",
            "tags",
            "meta",
            "created_at",
            "updated_at",
        ]


class RoleSerializer(serializers.ModelSerializer):
    permissions = PermissionSerializer(many=True, read_only=True)

    class Meta:
        model = Role
        fields = [
            "id",
            "workspace_id",
            "name",
            "description",
            "permissions",
            "tags",
            "meta",
            "created_at",
            "updated_at",
        ]


class MembershipSerializer(serializers.ModelSerializer):
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
            "tags",
            "meta",
            "created_at",
            "updated_at",
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


class PermissionCreateRequest(serializers.Serializer):
    name = PermissionName()
    code = PermissionName(required=False, allow_null=True)
    description = Description()
    tags = Tags()
    meta = JsonObject()


class PermissionUpdateRequest(IdRequest):
    name = PermissionName(required=False)
    code = PermissionName(required=False, allow_null=True)
    description = Description()
    tags = Tags(required=False)
    meta = JsonObject(required=False)


class RoleCreateRequest(serializers.Serializer):
    name = Name()
    description = Description()
    permission_ids = UuidList(max_length=1000)
    tags = Tags()
    meta = JsonObject()


class RoleUpdateRequest(IdRequest):
    name = Name(required=False)
    description = Description()
    permission_ids = UuidList(required=False, max_length=1000)
    tags = Tags(required=False)
    meta = JsonObject(required=False)


class MembershipCreateRequest(serializers.Serializer):
    account_id = Uuid()
    scope = serializers.ChoiceField(choices=Membership.Scope.choices)
    status = serializers.ChoiceField(choices=Membership.Status.choices)
    project_id = Uuid(required=False, allow_null=True)
    role_ids = UuidList(max_length=100)
    tags = Tags()
    meta = JsonObject()


class MembershipUpdateRequest(IdRequest):
    scope = serializers.ChoiceField(choices=Membership.Scope.choices, required=False)
    status = serializers.ChoiceField(choices=Membership.Status.choices, required=False)
    project_id = Uuid(required=False, allow_null=True)
    role_ids = UuidList(required=False, max_length=100)
    tags = Tags(required=False)
    meta = JsonObject(required=False, require_schema_version=False)  # SPEC 4: optional here


class PermissionCheckRequest(serializers.Serializer):
    account_id = Uuid()
    permission = PermissionName()
    project_id = Uuid(required=False, allow_null=True)


class GrantPath(serializers.Serializer):
    """One way an account holds a permission: an active membership, one of its roles, the role's
    permission whose pattern matched (`*`, `resource:*`, `*:action` or the name itself)."""

    membership_id = serializers.UUIDField()
    scope = serializers.ChoiceField(choices=Membership.Scope.choices)
    project_id = serializers.UUIDField(allow_null=True)
    role_id = serializers.UUIDField()
    role = serializers.CharField()
    pattern = serializers.CharField()


class PermissionCheckResult(serializers.Serializer):
    """Documentation only: the payload is built by `rbac.policy.explain`."""

    allowed = serializers.BooleanField()
    matched = GrantPath(many=True)
    reason = serializers.ChoiceField(
        choices=["not_a_member", "not_active", "no_matching_permission", "account_disabled"], allow_null=True
    )
