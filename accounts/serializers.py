from rest_framework import serializers

from iam.http.fields import Boolean, Description, Email, JsonObject, Name, String, Tags, Url, Uuid
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest

from .models import Account


class AccountSerializer(ResourceSerializer):
    class Meta:
        model = Account
        fields = ["id", "email", "name", "description", "avatar_url", "enabled", "verified", *RECORD_TAIL]


class AccountBriefSerializer(ResourceSerializer):
    """The account inside register and login responses."""

    class Meta:
        model = Account
        fields = ["id", "email", "name", "verified", "enabled"]


class AccountRef(serializers.Serializer):
    id = Uuid(required=False)
    email = Email(required=False)

    def validate(self, attrs: dict) -> dict:
        if "id" not in attrs and "email" not in attrs:
            raise serializers.ValidationError(
                {"id": serializers.ErrorDetail("id or email required", code="iam")}
            )
        return attrs


class AccountCreateRequest(serializers.Serializer):
    email = Email()
    password = String()
    name = Name()
    description = Description()
    avatar_url = Url(required=False, allow_null=True)
    tags = Tags(required=False)
    meta = JsonObject(required=False)


class AccountUpdateRequest(UpdateRequest, AccountRef, RecordRequest):
    name = Name(required=False)
    description = Description()
    avatar_url = Url(required=False, allow_null=True)
    enabled = Boolean(required=False)
    verified = Boolean(required=False)


class AccountDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    email = serializers.EmailField()
