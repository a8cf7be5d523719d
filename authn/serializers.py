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


class OAuthInitiateRequest(serializers.Serializer):
    redirect_url = String(max_length=2048)


class OAuthInitiated(serializers.Serializer):
    auth_url = serializers.CharField()
