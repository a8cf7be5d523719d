from rest_framework import serializers

from iam.http.endpoint import require_one
from iam.http.fields import Boolean, Description, JsonObject, Name, Slug, String, Uuid
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest

from .models import Project, Workspace

CODE_MAX = 64


class WorkspaceSerializer(ResourceSerializer):
    class Meta:
        model = Workspace
        fields = ["id", "name", "slug", "description", "config", "mfa_required", *RECORD_TAIL]


class WorkspaceRef(serializers.Serializer):
    id = Uuid(required=False)
    slug = String(required=False, max_length=63)

    def validate(self, attrs: dict) -> dict:
        return require_one(attrs, "id", "slug")


class WorkspaceCreateRequest(RecordRequest):
    name = Name()
    slug = Slug(max_length=63)
    description = Description()
    config = JsonObject()
    mfa_required = Boolean(required=False)


class WorkspaceUpdateRequest(UpdateRequest, WorkspaceRef, WorkspaceCreateRequest):
    pass  # its slug is the reference's: an update does not change it


class WorkspaceDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()


class ProjectSerializer(ResourceSerializer):
    class Meta:
        model = Project
        fields = [
            "id",
            "workspace_id",
            "name",
            "code",
            "description",
            "config",
            "tags",
            "meta",
            "created_by",
            "created_at",
            "updated_at",
        ]


class ProjectRef(serializers.Serializer):
    id = Uuid(required=False)
    code = String(required=False, max_length=CODE_MAX)

    def validate(self, attrs: dict) -> dict:
        return require_one(attrs, "id", "code")


class ProjectCreateRequest(RecordRequest):
    name = Name()
    code = String(required=False, allow_null=True, min_length=1, max_length=CODE_MAX)
    description = Description()
    config = JsonObject()


class ProjectUpdateRequest(UpdateRequest, ProjectRef, RecordRequest):
    name = Name(required=False)
    new_code = String(required=False, allow_null=True, min_length=1, max_length=CODE_MAX)
    description = Description()
    config = JsonObject(required=False)


class ProjectDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    code = serializers.CharField(allow_null=True)
