"""Passkeys (docs/api.md#passkeys): registering one (Bearer, a recent sign-in), signing in with one
(discoverable) or completing a password login with one, and the caller's own passkeys. No `X-Workspace`
and no permission: an account's passkeys are its own."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.platform.addresses import client_ip, user_agent

from .. import passkeys, serializers, sessions
from ..models import Passkey
from .auth import session_payload

EXAMPLE_REGISTRATION = {
    "id": "m2VbWkTgZ3Xx3y4n2Z3ZlA",
    "rawId": "m2VbWkTgZ3Xx3y4n2Z3ZlA",
    "type": "public-key",
    "response": {
        "clientDataJSON": "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiLi4uIn0",
        "attestationObject": "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjF",
        "transports": ["internal"],
    },
    "clientExtensionResults": {},
    "authenticatorAttachment": "platform",
}
EXAMPLE_ASSERTION = {
    "id": "m2VbWkTgZ3Xx3y4n2Z3ZlA",
    "rawId": "m2VbWkTgZ3Xx3y4n2Z3ZlA",
    "type": "public-key",
    "response": {
        "clientDataJSON": "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiLi4uIn0",
        "authenticatorData": "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MdAAAAAQ",
        "signature": "MEUCIQDx",
        "userHandle": "5LjS9jpcTnudH2yKLkvQ2Q",
    },
    "clientExtensionResults": {},
    "authenticatorAttachment": "platform",
}


class PasskeyRegisterOptions(Endpoint):
    """Starts adding a passkey: the `PublicKeyCredentialCreationOptions` to hand to
    `navigator.credentials.create()` (base64url `challenge` and `user.id`; EdDSA, ES256 and RS256; the
    account's passkeys as `excludeCredentials`; a resident key and user verification required). The
    challenge works once, within 5 minutes, for this session's `auth/passkeys/register/verify`. Needs a
    sign-in of the last `IAM_REAUTH_SECONDS` (else 403 `recent authentication required`)."""

    summary = "Start adding a passkey"
    example_request = {}

    permission = None  # self-service: an account's own passkeys
    response_serializer = serializers.PasskeyOptions

    def handle(self, request: Request, data: dict) -> dict:
        sessions.require_recent_authentication(request.auth)
        return passkeys.registration_options(request.user, session_id=request.auth.get("sid"))


class PasskeyRegisterVerify(Endpoint):
    """Adds the passkey the browser created: `credential` is `PublicKeyCredential.toJSON()`, `name` a
    label of the caller's choice. Answers the Passkey. Any failure (a challenge not handed to this
    session, used or older than 5 minutes, another origin or RP id, no user verification, a credential
    already registered): 400 `passkey not accepted`. The account gets an e-mail; a password login then
    asks for a second factor."""

    summary = "Add a passkey"
    example_request = {"credential": EXAMPLE_REGISTRATION, "name": "Laptop"}

    permission = None  # self-service: an account's own passkeys
    request_serializer = serializers.PasskeyRegisterRequest
    response_serializer = serializers.PasskeySerializer

    def handle(self, request: Request, data: dict) -> dict:
        passkey = passkeys.register(
            request.user, data["credential"], name=data["name"], session_id=request.auth.get("sid")
        )
        return self.serialize(passkey)


class PasskeyLoginOptions(Endpoint):
    """The `PublicKeyCredentialRequestOptions` for `navigator.credentials.get()`: `{}` for a sign-in with
    any passkey (no `allowCredentials`: the authenticator offers its own), or `{"mfa_token"}` for the
    second step of a password login (its account's passkeys in `allowCredentials`; 400 `invalid
    mfa_token` for a token that is not live). The challenge works once, within 5 minutes, for the
    ceremony (and token) it was asked for. One client address asks at most
    `IAM_OAUTH_STARTS_PER_IP_PER_MINUTE` (600) a minute, then 429 with `Retry-After`."""

    summary = "Options for signing in with a passkey"
    example_request = {}

    public = True
    request_serializer = serializers.PasskeyLoginOptionsRequest
    response_serializer = serializers.PasskeyOptions

    def handle(self, request: Request, data: dict) -> dict:
        return passkeys.authentication_options(ip=client_ip(request), mfa_token=data.get("mfa_token"))[0]


class PasskeyLoginVerify(Endpoint):
    """Signs in with a passkey: `credential` is `PublicKeyCredential.toJSON()` of
    `navigator.credentials.get()` over a challenge of `auth/passkeys/login/options` `{}`. Answers what
    `auth/login` answers, with `amr` `["hwk", "user", "mfa"]` (the authenticator verified the user: two
    factors). Any failure: 400 `passkey not accepted`; a disabled account: 403 `account disabled`. Failures
    count towards the client address's login throttle (50 within 15 minutes, then 429 with
    `Retry-After`). A signature counter that went backwards is refused and recorded as
    `passkey.clone_suspected` in the root workspace's log."""

    summary = "Sign in with a passkey"
    example_request = {"credential": EXAMPLE_ASSERTION}

    public = True
    request_serializer = serializers.PasskeyLoginRequest
    response_serializer = serializers.SessionWithAccount

    def handle(self, request: Request, data: dict) -> dict:
        account, session = passkeys.login(
            data["credential"], ip=client_ip(request), user_agent=user_agent(request)
        )
        return session_payload(account, session)


class PasskeyList(ListEndpoint):
    """The caller's own passkeys: `id`, `name`, `created_at`, `last_used_at` (null until its first
    sign-in) and `backed_up` (the authenticator's backup-state flag: a synced passkey)."""

    summary = "List the caller's passkeys"
    example_request = {"options": {"limit": 20, "order_bys": ["!last_used_at"]}}

    permission = None  # self-service: an account's own passkeys
    list_key = "passkeys"
    response_serializer = serializers.PasskeySerializer
    filter_fields = {"id": "id", "name": "name", "backed_up": "backed_up"}
    order_fields = ("created_at", "last_used_at")

    def get_queryset(self, request: Request) -> QuerySet:
        return Passkey.objects.filter(account=request.user)


class PasskeyUpdate(Endpoint):
    """Renames one of the caller's passkeys; another account's is not found (404 `passkey not found`)."""

    summary = "Rename a passkey"
    example_request = {"id": "3f1c9a2e-7b4d-4e8a-9c6f-2d5e8a1b7c40", "name": "Phone"}

    permission = None  # self-service: an account's own passkeys
    request_serializer = serializers.PasskeyUpdateRequest
    response_serializer = serializers.PasskeySerializer

    def handle(self, request: Request, data: dict) -> dict:
        passkey = passkeys.find_passkey(request.user, data["id"], lock=True)
        return self.serialize(passkeys.rename(passkey, name=data["name"], actor=request.user))


class PasskeyDelete(Endpoint):
    """Removes one of the caller's passkeys; another account's is not found (404 `passkey not found`).
    Needs a sign-in of the last `IAM_REAUTH_SECONDS` (else 403 `recent authentication required`)."""

    summary = "Remove a passkey"
    example_request = {"id": "3f1c9a2e-7b4d-4e8a-9c6f-2d5e8a1b7c40"}

    permission = None  # self-service: an account's own passkeys
    request_serializer = serializers.PasskeyRef
    response_serializer = serializers.PasskeyDeleted

    def handle(self, request: Request, data: dict) -> dict:
        sessions.require_recent_authentication(request.auth)
        passkey = passkeys.find_passkey(request.user, data["id"], lock=True)
        passkey_id = passkey.pk
        passkeys.delete(passkey, actor=request.user)
        return {"id": str(passkey_id), "deleted": True}
