from rest_framework import serializers

from iam.http.fields import Name, Uuid
from iam.http.serializers import ResourceSerializer
from rbac.serializers import Deleted

from .models import ScimToken


class ScimTokenCreateRequest(serializers.Serializer):
    name = Name()


class ScimTokenSerializer(ResourceSerializer):
    """list: never the token, nor its digest."""

    workspace_id = serializers.UUIDField(read_only=True)
    created_by = serializers.UUIDField(source="created_by_id", read_only=True)

    class Meta:
        model = ScimToken
        fields = ["id", "workspace_id", "name", "created_at", "last_used_at", "created_by"]


class ScimTokenCreated(serializers.Serializer):
    """create: the token itself, this once."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    token = serializers.CharField()
    created_at = serializers.DateTimeField()


class ScimTokenRef(serializers.Serializer):
    id = Uuid()


class ScimTokenDeleted(Deleted):
    pass
