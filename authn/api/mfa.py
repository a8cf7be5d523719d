"""The TOTP second factor of the caller's own account, and the second step of a login. No
`X-Workspace` and no permission: an account's factors are its own."""

from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.platform.addresses import client_ip, user_agent

from .. import mfa, passkeys, serializers, sessions
from .auth import session_payload


class TotpEnroll(Endpoint):
    """Starts adding an authenticator app (TOTP: SHA-1, 6 digits, 30-second steps): answers its base32
    `secret` and an `otpauth_uri` to show as a QR code. Nothing changes until `auth/mfa/totp/confirm`
    receives a first code; enrolling again before that replaces the pending secret. 409 `totp already
    enabled` while TOTP is active. Needs a sign-in of the last `IAM_REAUTH_SECONDS` (else 403 `recent
    authentication required`)."""

    summary = "Start adding an authenticator app"
    example_request = {}

    permission = None  # self-service: an account's own factors
    response_serializer = serializers.TotpEnrolled

    def handle(self, request: Request, data: dict) -> dict:
        sessions.require_recent_authentication(request.auth)
        return mfa.enroll(request.user)


class TotpConfirm(Endpoint):
    """Activates the pending authenticator with a current `code` and answers ten single-use recovery
    codes, shown this once (only their digests are kept). From now on a password or provider login asks
    for a code. A wrong code: 400 `invalid code`; after 5 wrong codes within 15 minutes, 429 with
    `Retry-After`. The account gets an e-mail."""

    summary = "Activate an authenticator app"
    example_request = {"code": "492039"}

    permission = None  # self-service: an account's own factors
    request_serializer = serializers.CodeRequest
    response_serializer = serializers.RecoveryCodes

    def handle(self, request: Request, data: dict) -> dict:
        return mfa.confirm(request.user, data["code"])


class TotpDisable(Endpoint):
    """Removes the authenticator and its recovery codes, proven by a current `code` or an unused
    `recovery_code`; every other session of the account ends and the account gets an e-mail. A wrong
    code: 400 `invalid code` (field `code` or `recovery_code`); after 5 wrong codes within 15 minutes,
    429 with `Retry-After`. Needs a sign-in of the last `IAM_REAUTH_SECONDS` (else 403 `recent
    authentication required`)."""

    summary = "Remove the authenticator app"
    example_request = {"code": "492039"}

    permission = None  # self-service: an account's own factors
    request_serializer = serializers.SecondFactorRequest
    response_serializer = serializers.TotpDisabled

    def handle(self, request: Request, data: dict) -> dict:
        sessions.require_recent_authentication(request.auth)
        mfa.disable(
            request.user, request.auth, code=data.get("code"), recovery_code=data.get("recovery_code")
        )
        return {"account_id": str(request.user.pk), "totp": False}


class MfaVerify(Endpoint):
    """The second step of a login for an account with a second factor: the `mfa_token` that
    `auth/login` (or the provider callback) answered, with a current `code`, an unused `recovery_code`,
    or a passkey's `credential` (over a challenge of `auth/passkeys/login/options` `{"mfa_token"}`; any
    failure: 400 `passkey not accepted`). Answers what `auth/login` answers: a session (its `amr` says
    `otp` and `mfa`, or `hwk` and `mfa` for a passkey) with the account. The `mfa_token` lives 5 minutes
    and works once; a code works once. A wrong code: 400 `invalid code`, and the token stays usable;
    after 5 wrong codes (or refused passkeys) for one account within 15 minutes, 429 with `Retry-After`
    without checking."""

    summary = "Complete a login with a one-time code or a passkey"
    example_request = {
        "mfa_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl",
        "code": "492039",
    }

    public = True
    request_serializer = serializers.MfaVerifyRequest
    response_serializer = serializers.SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        if "credential" in data:  # a passkey (docs/api.md#passkeys)
            account, session = passkeys.verify_second_factor(
                data["mfa_token"], data["credential"], ip=client_ip(request), user_agent=user_agent(request)
            )
            return session_payload(account, session)
        account, session = mfa.verify(
            data["mfa_token"],
            code=data.get("code"),
            recovery_code=data.get("recovery_code"),
            ip=client_ip(request),
            user_agent=user_agent(request),
        )
        return session_payload(account, session)
