"""Passkeys (docs/api.md#passkeys, docs/security.md#passkeys): WebAuthn credentials registered by a
signed-in account, then a sign-in of their own (discoverable: no address typed) and a second factor after
a password. py_webauthn makes the options and checks every response (origin, RP id hash, user presence
and verification, signature, attestation "none"); what is ours is here: the challenges, stored
server-side, single-use, 5 minutes, bound to the ceremony and to whom it was handed; the signature
counter; one refusal for every cause."""

import hashlib
import json
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, generate_challenge
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from accounts.models import Account
from accounts.services import end_sessions
from iam.http.errors import ApiError
from iam.platform import audit, metrics
from tenancy.workspace_cache import root_workspace

from . import emails, mfa, sessions, throttling, tokens
from .models import MfaChallenge, Passkey, PasskeyChallenge, Session
from .tokens import TokenError

PASSKEY_NOT_ACCEPTED = "passkey not accepted"
PASSKEY_NOT_FOUND = "passkey not found"
CHALLENGE_LIFETIME = timedelta(minutes=5)
TIMEOUT_MS = int(CHALLENGE_LIFETIME.total_seconds() * 1000)
# EdDSA, ES256 and RS256, in this order of preference (docs/api.md#passkeys)
ALGORITHMS = [
    COSEAlgorithmIdentifier.EDDSA,
    COSEAlgorithmIdentifier.ECDSA_SHA_256,
    COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256,
]
LOGIN_AMR = ["hwk", "user", "mfa"]  # RFC 8176: a key, the user verified by it; two factors in one
Purpose = PasskeyChallenge.Purpose


class NotAccepted(mfa.CountedRefusal):
    """400 `passkey not accepted`, the same for every cause, so a caller learns nothing of which check
    failed. Its writes stand (the spent challenge, the audit of a suspected clone)."""

    def __init__(self) -> None:
        super().__init__(400, PASSKEY_NOT_ACCEPTED, commit=True)


def has_passkey(account: Account) -> bool:
    return Passkey.objects.filter(account=account).exists()


def user_handle(account: Account) -> bytes:
    """The WebAuthn user handle of an account: its id's 16 bytes, no address (WebAuthn 14.6.1)."""
    return account.pk.bytes


# Challenges


def _digest(challenge: bytes) -> str:
    return hashlib.sha256(challenge).hexdigest()


def _new_challenge(purpose: str, **binding: Any) -> bytes:
    """A fresh challenge stored by its digest with its ceremony and binding; expired ones are swept as
    new ones come, so anonymous sign-in options pile nothing up past 5 minutes."""
    now = timezone.now()
    PasskeyChallenge.objects.filter(expires_at__lte=now).delete()
    challenge = generate_challenge()
    PasskeyChallenge.objects.create(
        digest=_digest(challenge), purpose=purpose, expires_at=now + CHALLENGE_LIFETIME, **binding
    )
    return challenge


def _challenge_in(credential: dict) -> bytes:
    """The challenge the browser signed, read from the credential's clientDataJSON (untrusted: only a
    lookup key here; py_webauthn compares it again)."""
    response = credential.get("response")
    client_data = response.get("clientDataJSON") if isinstance(response, dict) else None
    if not isinstance(client_data, str) or len(client_data) > 4096:
        raise NotAccepted()
    try:
        challenge = json.loads(base64url_to_bytes(client_data))["challenge"]
        return base64url_to_bytes(challenge)
    except (ValueError, TypeError, KeyError) as exc:
        raise NotAccepted() from exc


def _spend(challenge: bytes, purpose: str, **binding: Any) -> None:
    """Marks the challenge used, if it was handed out for this ceremony and binding, is unused and
    unexpired: one conditional UPDATE, so of two concurrent uses one wins. Anything else: refused."""
    now = timezone.now()
    spent = PasskeyChallenge.objects.filter(
        digest=_digest(challenge), purpose=purpose, used_at__isnull=True, expires_at__gt=now, **binding
    ).update(used_at=now)
    if not spent:
        raise NotAccepted()


CREDENTIAL_FORM_MAX = 16 * 1024  # a credential's JSON: a few hundred bytes for any real authenticator


def credential_from_form(raw: str) -> Any:
    """The credential a page's form posts (the JSON static/pages/passkeys.js wrote), or None, which
    every check then refuses."""
    if not raw or len(raw) > CREDENTIAL_FORM_MAX:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _as_credential(credential: Any) -> dict:
    if not isinstance(credential, dict):
        raise NotAccepted()
    return credential


# Registration


def registration_options(account: Account, *, session_id: str | None) -> dict:
    """`PublicKeyCredentialCreationOptions` as JSON, its challenge bound to this account and session."""
    challenge = _new_challenge(Purpose.REGISTER, account=account, session_id=session_id)
    options = generate_registration_options(
        rp_id=settings.IAM_WEBAUTHN_RP_ID,
        rp_name=settings.IAM_SITE_NAME,
        user_id=user_handle(account),
        user_name=account.email,
        user_display_name=account.name or account.email,
        challenge=challenge,
        timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(credential_id))
            for credential_id in Passkey.objects.filter(account=account).values_list(
                "credential_id", flat=True
            )
        ],
        supported_pub_key_algs=ALGORITHMS,
    )
    return json.loads(options_to_json(options))


@transaction.atomic
def register(account: Account, credential: Any, *, name: str, session_id: str | None) -> Passkey:
    """Checks the browser's `PublicKeyCredential.toJSON()` against a challenge this account's session
    asked for, with user verification required, and keeps the credential. A credential id already
    registered (by anyone): refused like every other failure."""
    credential = _as_credential(credential)
    challenge = _challenge_in(credential)
    _spend(challenge, Purpose.REGISTER, account=account, session_id=session_id)
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=settings.IAM_WEBAUTHN_RP_ID,
            expected_origin=settings.IAM_WEBAUTHN_ORIGINS,
            require_user_verification=True,
            supported_pub_key_algs=ALGORITHMS,
        )
    except Exception as exc:  # a parser of untrusted bytes: whatever it raises is a refusal, never a 500
        raise NotAccepted() from exc
    credential_id = bytes_to_base64url(verified.credential_id)
    if Passkey.objects.filter(credential_id=credential_id).exists():
        raise NotAccepted()
    passkey = Passkey.objects.create(
        account=account,
        credential_id=credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        name=name,
        backed_up=verified.credential_backed_up,
    )
    audit.record(
        "passkey.create",
        resource=("passkey", passkey.pk),
        changes=audit.created(passkey, ["account_id", "name", "backed_up"]),
        actor=account,
    )
    emails.enqueue(emails.PASSKEY_ADDED, account.pk)
    return passkey


# Assertions: the sign-in and the second factor


def authentication_options(*, ip: str, mfa_token: str | None = None) -> tuple[dict, bytes]:
    """`PublicKeyCredentialRequestOptions` as JSON, and the challenge. Without `mfa_token`: a
    discoverable sign-in, no `allowCredentials`. With one: the challenge is bound to that token, and
    `allowCredentials` lists its account's passkeys. One client address asks at most
    `IAM_OAUTH_STARTS_PER_IP_PER_MINUTE` a minute (then 429), as it starts OAuth logins."""
    if retry_after := throttling.passkey_starts_by_ip.take(ip):
        raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
    if mfa_token is None:
        challenge = _new_challenge(Purpose.LOGIN)
        return _request_options(challenge, allowed=[]), challenge
    account, claims = _mfa_account(mfa_token)
    return second_factor_options(account, step_id=claims["jti"])


def second_factor_options(account: Account, *, step_id: uuid.UUID | str) -> tuple[dict, bytes]:
    """Request options for a second step of `account`'s sign-in: the challenge bound to that step (an
    `mfa_token`'s jti, or the admin sign-in's pending step) and the account's passkeys as
    `allowCredentials`."""
    challenge = _new_challenge(Purpose.MFA, account=account, mfa_jti=step_id)
    allowed = [
        PublicKeyCredentialDescriptor(id=base64url_to_bytes(credential_id))
        for credential_id in Passkey.objects.filter(account=account).values_list("credential_id", flat=True)
    ]
    return _request_options(challenge, allowed=allowed), challenge


def _request_options(challenge: bytes, *, allowed: list[PublicKeyCredentialDescriptor]) -> dict:
    options = generate_authentication_options(
        rp_id=settings.IAM_WEBAUTHN_RP_ID,
        challenge=challenge,
        timeout=TIMEOUT_MS,
        allow_credentials=allowed,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return json.loads(options_to_json(options))


def _mfa_account(mfa_token: str) -> tuple[Account, dict]:
    """The account of a live `mfa_token` (5 minutes, unspent: docs/api.md#second-factor-totp), else
    400 `invalid mfa_token`, as `auth/mfa/verify` says it."""
    try:
        claims = tokens.decode(mfa_token, types={tokens.MFA_CHALLENGE})
    except TokenError as exc:
        raise ApiError(400, mfa.INVALID_MFA_TOKEN, "mfa_token") from exc
    account = Account.objects.filter(pk=claims["sub"]).first()
    if (
        account is None
        or claims["sv"] != account.session_version
        or not claims.get("amr")
        or not MfaChallenge.objects.filter(jti=claims["jti"], account=account, used_at__isnull=True).exists()
    ):
        raise ApiError(400, mfa.INVALID_MFA_TOKEN, "mfa_token")
    return account, claims


def pending_factors(mfa_token: str) -> tuple[bool, bool]:
    """Which second factors the account of a pending sign-in holds, `(totp, passkey)`, for the
    second-factor page to offer; a token that is not live: `(True, False)`, the page then refuses it as
    it refuses a code."""
    try:
        account, _claims = _mfa_account(mfa_token)
    except ApiError:
        return True, False
    return mfa.has_totp(account), has_passkey(account)


def _assert(credential: Any, purpose: str, *, account: Account | None = None, **binding: Any) -> Passkey:
    """Checks an assertion (`navigator.credentials.get()`'s `toJSON()`) against a challenge handed out for
    `purpose` and `binding`, which it spends. `account`: the passkey must be this account's (the second
    factor); without it, the passkey names its account, and the user handle must be that account's.
    A valid signature with a counter not above the last one seen is refused and audited as a suspected
    clone. The passkey's counter, backup state and `last_used_at` are updated; answers the passkey."""
    credential = _as_credential(credential)
    challenge = _challenge_in(credential)
    _spend(challenge, purpose, **binding)
    credential_id = credential.get("id")
    if not isinstance(credential_id, str) or len(credential_id) > 1400:
        raise NotAccepted()
    passkeys = Passkey.objects.select_for_update().select_related("account")
    passkey = passkeys.filter(credential_id=credential_id).first()
    if passkey is None or (account is not None and passkey.account_id != account.pk):
        raise NotAccepted()
    if account is None and _user_handle_in(credential) != user_handle(passkey.account):
        raise NotAccepted()  # WebAuthn 7.2 step 6: the authenticator's user is the passkey's account
    try:
        # The counter is compared below, once the signature is known good: py_webauthn compares it
        # before the signature, and an unsigned counter must not be taken for a clone.
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=settings.IAM_WEBAUTHN_RP_ID,
            expected_origin=settings.IAM_WEBAUTHN_ORIGINS,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=0,
            require_user_verification=True,
        )
    except Exception as exc:  # a parser of untrusted bytes: whatever it raises is a refusal, never a 500
        raise NotAccepted() from exc
    if (verified.new_sign_count or passkey.sign_count) and verified.new_sign_count <= passkey.sign_count:
        audit.record(
            "passkey.clone_suspected",
            resource=("passkey", passkey.pk),
            workspace_id=root_workspace().pk,
            changes={
                "account_id": passkey.account_id,
                "passkey_id": passkey.pk,
                "name": passkey.name,
                "sign_count": {"stored": passkey.sign_count, "presented": verified.new_sign_count},
            },
            actor=None,
        )
        raise NotAccepted()
    passkey.sign_count = verified.new_sign_count
    passkey.backed_up = verified.credential_backed_up
    passkey.last_used_at = timezone.now()
    passkey.save(update_fields=["sign_count", "backed_up", "last_used_at"])
    return passkey


def _checked(credential: Any, purpose: str, **binding: Any) -> Passkey:
    """`_assert` in a transaction of its own whose writes stand when it refuses: the challenge stays
    spent and a suspected clone stays recorded, whoever calls (an endpoint, a page)."""
    refusal = None
    with transaction.atomic():
        try:
            return _assert(credential, purpose, **binding)
        except NotAccepted as exc:
            refusal = exc
    raise refusal


def _user_handle_in(credential: dict) -> bytes | None:
    handle = credential["response"].get("userHandle")
    if not isinstance(handle, str):
        return None
    try:
        return base64url_to_bytes(handle)
    except ValueError:
        return None


def login(
    credential: Any,
    *,
    ip: str,
    user_agent: str,
    browser: bool = False,
    challenge: bytes | None = None,
) -> tuple[Account, dict | Session]:
    """A discoverable sign-in: a session with `amr` `["hwk", "user", "mfa"]` (user verification is
    required, so the passkey is two factors). The sign-in throttle of a client address counts a refusal
    as a failed login (50 within 15 minutes, then 429 without checking). A disabled account: 403
    `account disabled`, told only once the passkey was good. `browser`: the hosted pages' sign-in (a
    `Session`, no tokens); `challenge`: the one that browser asked for, which the credential must
    present (no one else's sign-in finishes in this browser)."""
    if retry_after := throttling.login_failures_by_ip.retry_after(ip):
        metrics.LOGINS.labels("throttled").inc()
        raise ApiError(429, "too many failed login attempts", headers={"Retry-After": str(retry_after)})
    try:
        if challenge is not None and _challenge_in(_as_credential(credential)) != challenge:
            raise NotAccepted()
        passkey = _checked(credential, Purpose.LOGIN)
    except NotAccepted:
        throttling.login_failures_by_ip.hit(ip)
        metrics.LOGINS.labels("invalid").inc()
        raise
    account = passkey.account
    if not account.enabled:
        raise ApiError(403, "account disabled", commit=True)
    with transaction.atomic():
        start = sessions.open_browser_session if browser else sessions.start_session
        session = start(account, amr=LOGIN_AMR, ip=ip, user_agent=user_agent)
        audit.record(
            "account.login",
            resource=("account", account.pk),
            changes={"amr": LOGIN_AMR, "passkey_id": passkey.pk},
            actor=account,
        )
    metrics.LOGINS.labels("ok").inc()
    return account, session


def verify_second_factor(
    mfa_token: str, credential: Any, *, ip: str | None, user_agent: str, browser: bool = False
) -> tuple[Account, dict | Session]:
    """`auth/mfa/verify` with a passkey: the `mfa_token`'s account's passkey, over a challenge handed out
    for that token, completes the login with `amr` the first factor's and `hwk`, `mfa`. A refusal counts
    as a wrong code of the second-factor limit (5 per account within 15 minutes, then 429); the token stays
    usable (a new challenge); a good one spends it."""
    account, claims = _mfa_account(mfa_token)
    with mfa.counted_attempt(account):
        passkey = _checked(credential, Purpose.MFA, account=account, mfa_jti=claims["jti"])
    if not account.enabled:
        raise ApiError(403, "account disabled", commit=True)
    with transaction.atomic():
        if not MfaChallenge.objects.filter(
            Q(jti=claims["jti"], account=account, used_at__isnull=True)
        ).update(used_at=timezone.now()):
            raise ApiError(400, mfa.INVALID_MFA_TOKEN, "mfa_token")
        amr = [*claims["amr"], "hwk", "mfa"]
        start = sessions.open_browser_session if browser else sessions.start_session
        session = start(
            account, amr=amr, ip=ip, user_agent=user_agent, sso_workspace_id=mfa.sso_workspace(claims)
        )
        audit.record(
            "account.login",
            resource=("account", account.pk),
            changes={"amr": amr, "passkey_id": passkey.pk},
            actor=account,
        )
    return account, session


def check_second_step(account: Account, credential: Any, *, step_id: uuid.UUID | str) -> Passkey:
    """A second step proven by one of the account's passkeys over a challenge of `second_factor_options`
    for this step (the admin's sign-in): counted as a code of the wrong-code limit when refused."""
    with mfa.counted_attempt(account):
        return _checked(credential, Purpose.MFA, account=account, mfa_jti=step_id)


def step_up_options(session: Session) -> dict:
    """Request options for a browser session that steps up (a workspace asks for a second factor): the
    challenge bound to the account and this session, its passkeys allowed."""
    challenge = _new_challenge(Purpose.STEP_UP, account=session.account, session_id=session.pk)
    allowed = [
        PublicKeyCredentialDescriptor(id=base64url_to_bytes(credential_id))
        for credential_id in Passkey.objects.filter(account=session.account).values_list(
            "credential_id", flat=True
        )
    ]
    return _request_options(challenge, allowed=allowed)


def step_up(session: Session, credential: Any, *, ip: str | None, user_agent: str) -> Session:
    """`mfa.step_up` with a passkey: the browser session proven by one of its account's passkeys starts
    a session with `hwk` and `mfa`, which replaces the browser's. Refusals count as wrong codes."""
    account = session.account
    with mfa.counted_attempt(account):
        _checked(credential, Purpose.STEP_UP, account=account, session_id=session.pk)
    with transaction.atomic():
        return mfa.stepped_up(session, ip=ip, user_agent=user_agent, methods=("hwk", "mfa"))


# The caller's own passkeys


def find_passkey(account: Account, passkey_id: uuid.UUID, *, lock: bool = False) -> Passkey:
    """One of the account's own passkeys; another account's is not found, as one that does not exist."""
    passkeys = Passkey.objects.filter(account=account)
    if lock:
        passkeys = passkeys.select_for_update()
    passkey = passkeys.filter(pk=passkey_id).first()
    if passkey is None:
        raise ApiError(404, PASSKEY_NOT_FOUND)
    return passkey


@transaction.atomic
def rename(passkey: Passkey, *, name: str, actor: Account | None) -> Passkey:
    changes = audit.diff(passkey, {"name": name})
    if changes:
        passkey.name = name
        passkey.save(update_fields=["name"])
        audit.record("passkey.update", resource=("passkey", passkey.pk), changes=changes, actor=actor)
    return passkey


@transaction.atomic
def delete(passkey: Passkey, *, actor: Account | None, by_operator: bool = False) -> None:
    """Removes a passkey: it signs in no more. An operator's removal (the admin, for an account that lost
    it or whose passkey is suspected cloned) also ends every session of the account and e-mails it, as
    the second-factor reset does."""
    audit.record(
        "passkey.delete",
        resource=("passkey", passkey.pk),
        changes={**audit.removed(passkey, ["name"]), "account_id": passkey.account_id},
        actor=actor,
    )
    account = passkey.account
    passkey.delete()
    if by_operator:
        emails.enqueue(emails.PASSKEY_REMOVED, account.pk)
        end_sessions(account)  # a session the passkey started included
