from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.serializers import AccountBriefSerializer
from iam.http.fields import Boolean, Choice, DateTime, Email, JsonObject, Name, String, Tags, Uuid
from iam.http.serializers import RECORD_TAIL, ResourceSerializer
from rbac.serializers import Deleted

from .models import Credential, Passkey, Session


@extend_schema_field(OpenApiTypes.OBJECT)
class CredentialJson(serializers.Field):
    """The browser's `PublicKeyCredential.toJSON()`, taken as sent: the passkey checks refuse anything
    that is not one with the one message `passkey not accepted`."""

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


class RegisterRequest(serializers.Serializer):
    email = Email()
    password = String()
    name = Name(required=False, allow_null=True)


class LoginRequest(serializers.Serializer):
    # Both optional here so that either missing gives the docs/api.md#errors single message.
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


class OAuthInitiateRequest(serializers.Serializer):
    redirect_url = String(max_length=2048)


class OAuthInitiated(serializers.Serializer):
    auth_url = serializers.CharField()


# Credentials (docs/api.md#credentials, #answers)


class CredentialSerializer(ResourceSerializer):
    account_id = serializers.UUIDField()
    workspace_id = serializers.UUIDField()

    class Meta:
        model = Credential
        fields = [
            "id",
            "account_id",
            "workspace_id",
            "kind",
            "provider",
            "status",
            "provider_id",
            "email",
            "last_used_at",
            *RECORD_TAIL,
        ]


class CredentialRef(serializers.Serializer):
    """`id` and `account_id` together name the credential; `provider_id` and `email`, when
    sent, must be its current values."""

    id = Uuid()
    account_id = Uuid()
    provider_id = String(required=False, max_length=255)
    email = Email(required=False)


class CredentialUpdateRequest(CredentialRef):
    kind = Choice(Credential.Kind.choices, required=False)
    provider = Choice(Credential.Provider.choices, required=False)
    status = Choice(Credential.Status.choices, required=False)
    new_provider_id = String(required=False, allow_null=True, min_length=1, max_length=255)
    new_email = Email(required=False, allow_null=True)
    secret = String(required=False)
    last_used_at = DateTime(required=False, allow_null=True)
    tags = Tags(required=False)
    meta = JsonObject(required=False)


class CredentialDeleted(Deleted):
    pass


# Sessions (docs/api.md#sessions)


class RevokeRequest(serializers.Serializer):
    except_current = Boolean(required=False, default=False)


class SessionRecordSerializer(ResourceSerializer):
    account_id = serializers.UUIDField()

    class Meta:
        model = Session
        fields = ["id", "account_id", "created_at", "last_used_at", "expires_at", "ip", "user_agent", "amr"]


class SessionRevokeRequest(serializers.Serializer):
    id = Uuid()


class SessionRevoked(serializers.Serializer):
    id = serializers.UUIDField()
    revoked = serializers.BooleanField()


# Second factor (docs/api.md#second-factor-totp)


class TotpEnrolled(serializers.Serializer):
    secret = serializers.CharField()
    otpauth_uri = serializers.CharField()


class CodeRequest(serializers.Serializer):
    code = String(max_length=16)


class RecoveryCodes(serializers.Serializer):
    recovery_codes = serializers.ListField(child=serializers.CharField())


class SecondFactorRequest(serializers.Serializer):
    code = String(required=False, max_length=16)
    recovery_code = String(required=False, max_length=64)


class MfaVerifyRequest(SecondFactorRequest):
    mfa_token = String(max_length=4096)
    credential = CredentialJson(required=False)  # a passkey's assertion (docs/api.md#passkeys)


class TotpDisabled(serializers.Serializer):
    account_id = serializers.UUIDField()
    totp = serializers.BooleanField()


# Passkeys (docs/api.md#passkeys)


class PasskeyOptions(serializers.Serializer):
    """WebAuthn options as JSON (`PublicKeyCredentialCreationOptions` or `...RequestOptions`), base64url
    binary fields."""

    def to_representation(self, instance):
        return instance


class PasskeyRegisterRequest(serializers.Serializer):
    credential = CredentialJson()
    name = Name(max_length=100)


class PasskeyLoginOptionsRequest(serializers.Serializer):
    mfa_token = String(required=False, max_length=4096)


class PasskeyLoginRequest(serializers.Serializer):
    credential = CredentialJson()


class PasskeySerializer(ResourceSerializer):
    class Meta:
        model = Passkey
        fields = ["id", "name", "created_at", "last_used_at", "backed_up"]


class PasskeyRef(serializers.Serializer):
    id = Uuid()


class PasskeyUpdateRequest(PasskeyRef):
    name = Name(max_length=100)


class PasskeyDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    deleted = serializers.BooleanField()
