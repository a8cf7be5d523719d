from rest_framework import serializers

from accounts.serializers import AccountBriefSerializer
from iam.fields import Email, Name, String


class RegisterRequest(serializers.Serializer):
    email = Email()
    password = String()
    name = Name(required=False, allow_null=True)


class LoginRequest(serializers.Serializer):
    # Both optional here so that either missing gives SPEC 7's single message.
    email = String(required=False, allow_blank=True, max_length=254)
    password = String(required=False, allow_blank=True)


class SessionSerializer(serializers.Serializer):
    access_token = serializers.CharField()
    refresh_token = serializers.CharField()


class SessionWithAccount(SessionSerializer):
    account = AccountBriefSerializer()


class Revoked(serializers.Serializer):
    account_id = serializers.UUIDField()
    revoked = serializers.BooleanField()


class EmailRequest(serializers.Serializer):
    email = Email()


class TokenRequest(serializers.Serializer):
    token = String()


class UpdatePasswordRequest(TokenRequest):
    password = String()


class Message(serializers.Serializer):
    message = serializers.CharField()


class Confirmed(serializers.Serializer):
    account_id = serializers.UUIDField()
    verified = serializers.BooleanField()


class PasswordUpdated(serializers.Serializer):
    account_id = serializers.UUIDField()
