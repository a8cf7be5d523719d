"""TOTP second factor with recovery codes (docs/api.md#second-factor-totp): enrolment, the second step of a
login (`mfa_token`), and removal. RFC 6238 with SHA-1, 6 digits, 30-second steps and one step of drift either
way; each code is accepted once (the account keeps the last time step used)."""

import secrets
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pyotp
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from accounts.models import Account
from accounts.services import end_sessions
from iam.http.errors import ApiError
from iam.platform import audit, crypto
from rbac.policy import SSO_WORKSPACE_CLAIM

from . import emails, sessions, throttling, tokens
from .models import MfaChallenge, Passkey, PasskeyChallenge, RecoveryCode, Session, Totp
from .tokens import TokenError

INVALID_CODE = "invalid code"
TOTP_ALREADY_ENABLED = "totp already enabled"
TOTP_NOT_ENROLLED = "totp not enrolled"
INVALID_MFA_TOKEN = "invalid mfa_token"
TOO_MANY_CODES = "too many failed codes"
RECOVERY_CODES = 10
STEP_SECONDS = 30
DRIFT_STEPS = 1
_RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i to misread


def _now() -> float:
    return time.time()


def _totp(secret: str) -> pyotp.TOTP:
    return pyotp.TOTP(secret, digits=6, interval=STEP_SECONDS)  # SHA-1 by default


def has_totp(account: Account) -> bool:
    return Totp.objects.filter(account=account, confirmed_at__isnull=False).exists()


def has_second_factor(account: Account) -> bool:
    """Whether a door that starts a session must ask this account for a second factor first (password
    login, the provider callbacks, accepting an invitation): every factor it can hold, TOTP and passkeys."""
    return has_totp(account) or Passkey.objects.filter(account=account).exists()


def second_factor_annotations() -> dict:
    """`has_second_factor` as annotations of an `Account` query, for a door that reads the account anyway
    (the password login): the same factors, read in the account's own statement; `holds_second_factor`
    reads them back."""
    return {
        "holds_totp": Exists(Totp.objects.filter(account=OuterRef("pk"), confirmed_at__isnull=False)),
        "holds_passkey": Exists(Passkey.objects.filter(account=OuterRef("pk"))),
    }


def holds_second_factor(account: Account) -> bool:
    """`has_second_factor` of an account read with `second_factor_annotations`."""
    return account.holds_totp or account.holds_passkey


# Every model that holds something an account set up as a second factor, each keyed by `account`: what
# `remove_second_factors` deletes. A new kind of factor joins this list.
SECOND_FACTOR_MODELS = (Totp, RecoveryCode, MfaChallenge, Passkey, PasskeyChallenge)


def remove_second_factors(account: Account, *, actor: Account | None, reason: str) -> bool:
    """Deletes every second factor of the account, pending or active, its recovery codes and the
    `mfa_token`s handed out for it, in the caller's transaction; recorded as `account.mfa_removed` when
    there was any. Sessions are the caller's to end. For reclaiming an account: what its earlier holder
    set must not stand between the mailbox's owner and the account, nor let that holder back in
    (docs/security.md#consent-nobody-is-put-into-a-workspace)."""
    removed = {
        model._meta.model_name: model.objects.filter(account=account).delete()[0]
        for model in SECOND_FACTOR_MODELS
    }
    if not (removed["totp"] or removed["recoverycode"] or removed["passkey"]):
        return False
    audit.record(
        "account.mfa_removed",
        resource=("account", account.pk),
        changes={
            "totp": removed["totp"] > 0,
            "recovery_codes": removed["recoverycode"],
            "passkeys": removed["passkey"],
            "reason": reason,
        },
        actor=actor,
    )
    return True


# Enrolment


@transaction.atomic
def enroll(account: Account) -> dict:
    """A new pending secret (replacing a pending one); 409 while TOTP is active."""
    existing = Totp.objects.select_for_update().filter(account=account).first()
    if existing is not None and existing.confirmed_at is not None:
        raise ApiError(409, TOTP_ALREADY_ENABLED)
    secret = pyotp.random_base32()
    Totp.objects.update_or_create(
        account=account,
        defaults={
            "secret_encrypted": crypto.encrypt(secret),
            "created_at": timezone.now(),
            "confirmed_at": None,
            "last_used_step": None,
        },
    )
    uri = _totp(secret).provisioning_uri(name=account.email, issuer_name=settings.IAM_JWT_ISSUER)
    return {"secret": secret, "otpauth_uri": uri}


def pending_enrollment(account: Account) -> dict | None:
    """What `enroll` answered, while it waits for its first code (the admin's set-up page and the
    sign-in's set-up page show the same secret again); None without a pending enrollment."""
    totp = Totp.objects.filter(account=account, confirmed_at__isnull=True).first()
    if totp is None:
        return None
    secret = crypto.decrypt(totp.secret_encrypted)
    uri = _totp(secret).provisioning_uri(name=account.email, issuer_name=settings.IAM_JWT_ISSUER)
    return {"secret": secret, "otpauth_uri": uri}


@transaction.atomic
def confirm(account: Account, code: str) -> dict:
    """Activates a pending enrolment with a first code: answers the ten recovery codes, shown once."""
    with counted_attempt(account):
        totp = Totp.objects.select_for_update().filter(account=account).first()
        if totp is None:
            raise ApiError(409, TOTP_NOT_ENROLLED)
        if totp.confirmed_at is not None:
            raise ApiError(409, TOTP_ALREADY_ENABLED)
        if not _accept_code(totp, code):
            raise _WrongCode("code")
    totp.confirmed_at = timezone.now()
    totp.save(update_fields=["confirmed_at"])
    codes = _new_recovery_codes(account)
    audit.record(
        "account.mfa_enabled", resource=("account", account.pk), changes={"method": "totp"}, actor=account
    )
    emails.enqueue(emails.MFA_ADDED, account.pk)
    return {"recovery_codes": codes}


@transaction.atomic
def disable(account: Account, claims: dict, *, code: str | None, recovery_code: str | None) -> None:
    """Removes TOTP and its recovery codes after a code (or a recovery code) proves the factor; every
    other session of the account ends."""
    if code is None and recovery_code is None:
        raise ApiError(400, "code or recovery_code required", "code")
    with counted_attempt(account):
        totp = Totp.objects.select_for_update().filter(account=account, confirmed_at__isnull=False).first()
        if totp is None:
            raise ApiError(409, TOTP_NOT_ENROLLED)
        _check_second_factor(account, totp, code=code, recovery_code=recovery_code)
    Totp.objects.filter(account=account).delete()
    RecoveryCode.objects.filter(account=account).delete()
    audit.record(
        "account.mfa_disabled", resource=("account", account.pk), changes={"method": "totp"}, actor=account
    )
    emails.enqueue(emails.MFA_REMOVED, account.pk)
    sessions.end_other_sessions(account, keep=claims.get("sid"), actor=account)


@transaction.atomic
def reset(account: Account, *, actor: Account | None) -> bool:
    """An operator's reset (the admin), for an account that lost its authenticator and its recovery
    codes: removes TOTP, pending or active, and every recovery code, and ends every session of the
    account (a session that passed the second factor included). Recorded with the operator as actor;
    the account is e-mailed. False, and nothing changes, when the account has no second factor."""
    Account.objects.select_for_update().filter(pk=account.pk).first()  # one reset at a time
    had_totp = Totp.objects.filter(account=account).delete()[0] > 0
    had_codes = RecoveryCode.objects.filter(account=account).delete()[0] > 0
    if not (had_totp or had_codes):
        return False
    audit.record(
        "account.mfa_reset",
        resource=("account", account.pk),
        changes={"method": "totp", "recovery_codes_removed": had_codes},
        actor=actor,
    )
    emails.enqueue(emails.MFA_RESET, account.pk)
    end_sessions(account)
    return True


# Codes


def _accept_code(totp: Totp, code: str) -> bool:
    """Whether `code` is the code of the current step or one step either side, and newer than the last
    accepted one; the step is then recorded, in the caller's transaction (the row is locked)."""
    code = (code or "").strip()
    if len(code) != 6 or not (code.isascii() and code.isdigit()):
        return False
    otp = _totp(crypto.decrypt(totp.secret_encrypted))
    current = int(_now()) // STEP_SECONDS
    for step in range(current - DRIFT_STEPS, current + DRIFT_STEPS + 1):
        if totp.last_used_step is not None and step <= totp.last_used_step:
            continue
        if secrets.compare_digest(otp.at(step * STEP_SECONDS), code):
            totp.last_used_step = step
            totp.save(update_fields=["last_used_step"])
            return True
    return False


def _normalize_recovery(code: str) -> str:
    return "".join(char for char in (code or "").lower() if char.isalnum())


def _new_recovery_codes(account: Account) -> list[str]:
    RecoveryCode.objects.filter(account=account).delete()
    codes = []
    for _ in range(RECOVERY_CODES):
        raw = "".join(secrets.choice(_RECOVERY_ALPHABET) for _ in range(10))
        codes.append(f"{raw[:5]}-{raw[5:]}")
    RecoveryCode.objects.bulk_create(
        [RecoveryCode(account=account, digest=crypto.digest(_normalize_recovery(code))) for code in codes]
    )
    return codes


def _use_recovery_code(account: Account, recovery_code: str) -> bool:
    normalized = _normalize_recovery(recovery_code)
    if not normalized:
        return False
    spent = RecoveryCode.objects.filter(
        account=account, digest=crypto.digest(normalized), used_at__isnull=True
    ).update(used_at=timezone.now())
    if not spent:
        return False
    audit.record("account.mfa_recovery_code_used", resource=("account", account.pk), actor=account)
    emails.enqueue(emails.RECOVERY_CODE_USED, account.pk)
    return True


class CountedRefusal(ApiError):
    """A refusal that keeps its attempt counted (a wrong code, a passkey not accepted): any other one
    gives the count back."""


class _WrongCode(CountedRefusal):
    """400 `invalid code`."""

    def __init__(self, field: str):
        super().__init__(400, INVALID_CODE, field)


@contextmanager
def counted_attempt(account: Account) -> Iterator[None]:
    """One try of a code. It is counted before the code is checked, and the count read after: past
    `IAM_MFA_FAILURES_PER_ACCOUNT` it is refused with 429 and the code is not checked, so of any number of
    tries sent at once no more than the limit are checked
    (docs/security.md#second-factors-and-the-workspace-mfa-policy). Only a wrong code (`_WrongCode`) keeps its
    count: a right one, or a refusal for another reason, gives it back. A passkey's refusal counts as a
    wrong code (`CountedRefusal`)."""
    key = str(account.pk)
    if retry_after := throttling.mfa_failures_by_account.take(key):
        raise ApiError(429, TOO_MANY_CODES, headers={"Retry-After": str(retry_after)})
    try:
        yield
    except CountedRefusal:
        raise
    except BaseException:
        throttling.mfa_failures_by_account.give_back(key)
        raise
    throttling.mfa_failures_by_account.give_back(key)


def _check_second_factor(
    account: Account, totp: Totp, *, code: str | None, recovery_code: str | None
) -> None:
    """A TOTP code, else a recovery code: 400 `invalid code` (counted) unless it is right and unused."""
    if code is not None:
        if not _accept_code(totp, code):
            raise _WrongCode("code")
    elif not _use_recovery_code(account, recovery_code or ""):
        raise _WrongCode("recovery_code")


@transaction.atomic
def check_code(account: Account, entry: str) -> None:
    """A second factor typed in one field (the admin's sign-in): six digits are a TOTP code, anything
    else a recovery code. The same rules as `verify`: throttled per account (429 without checking), a
    code once, a recovery code once (recorded and e-mailed); a wrong one: 400 `invalid code`."""
    with counted_attempt(account):
        totp = Totp.objects.select_for_update().filter(account=account, confirmed_at__isnull=False).first()
        if totp is None:
            raise ApiError(400, INVALID_CODE, "code")
        entry = (entry or "").strip()
        if len(entry) == 6 and entry.isascii() and entry.isdigit():
            _check_second_factor(account, totp, code=entry, recovery_code=None)
        else:
            _check_second_factor(account, totp, code=None, recovery_code=entry)


# The second step of a login


def challenge(account: Account, *, amr: list[str], sso_workspace_id: uuid.UUID | None = None) -> str:
    """An `mfa_token` (5 minutes, single use) for an account that proved a first factor (`amr`;
    `sso_workspace_id`: through that workspace's own SSO connection, which the session keeps)."""
    jti = uuid.uuid4()
    extra = {"amr": list(amr)}
    if sso_workspace_id is not None:
        extra[SSO_WORKSPACE_CLAIM] = str(sso_workspace_id)
    token, expires_at = tokens.issue(
        account.pk,
        type=tokens.MFA_CHALLENGE,
        session_version=account.session_version,
        lifetime=settings.IAM_MFA_TOKEN_LIFETIME,
        jti=jti,
        extra=extra,
    )
    MfaChallenge.objects.create(jti=jti, account=account, expires_at=expires_at)
    return token


def challenge_answer(account: Account, *, amr: list[str]) -> dict:
    """What a door answers, instead of a session, to an account with a second factor (`auth/login`,
    `invitations/accept`): the first factor is proven, `auth/mfa/verify` takes the second."""
    return {"mfa_required": True, "mfa_token": challenge(account, amr=amr)}


def verify(
    mfa_token: str,
    *,
    code: str | None,
    recovery_code: str | None,
    ip: str | None,
    user_agent: str,
    browser: bool = False,
) -> tuple[Account, dict | Session]:
    """Completes a login: the `mfa_token` and a second factor start the session (`amr` the first factor's
    with `otp` and `mfa`). A wrong code leaves the token usable; a right one spends it. `browser`: the
    hosted pages' sign-in, whose session is a browser session (a `Session`, no tokens)."""
    try:
        claims = tokens.decode(mfa_token, types={tokens.MFA_CHALLENGE})
    except TokenError as exc:
        raise ApiError(400, INVALID_MFA_TOKEN, "mfa_token") from exc
    account = Account.objects.filter(pk=claims["sub"]).first()
    if account is None or claims["sv"] != account.session_version or not claims.get("amr"):
        raise ApiError(400, INVALID_MFA_TOKEN, "mfa_token")
    if code is None and recovery_code is None:
        raise ApiError(400, "code or recovery_code required", "code")
    with counted_attempt(account), transaction.atomic():
        open_challenge = Q(jti=claims["jti"], account=account, used_at__isnull=True)
        if not MfaChallenge.objects.filter(open_challenge).exists():
            raise ApiError(400, INVALID_MFA_TOKEN, "mfa_token")
        totp = Totp.objects.select_for_update().filter(account=account, confirmed_at__isnull=False).first()
        if totp is None:
            raise ApiError(400, INVALID_MFA_TOKEN, "mfa_token")
        _check_second_factor(account, totp, code=code, recovery_code=recovery_code)
        if not account.enabled:
            raise ApiError(403, "account disabled")
        # Spent by one conditional UPDATE: of concurrent uses, the others find it spent and undo their
        # own work (a recovery code or a code's step) with the 400.
        if not MfaChallenge.objects.filter(open_challenge).update(used_at=timezone.now()):
            raise ApiError(400, INVALID_MFA_TOKEN, "mfa_token")
        amr = [*claims["amr"], "otp", "mfa"]
        start = sessions.open_browser_session if browser else sessions.start_session
        session = start(
            account, amr=amr, ip=ip, user_agent=user_agent, sso_workspace_id=sso_workspace(claims)
        )
        audit.record("account.login", resource=("account", account.pk), changes={"amr": amr}, actor=account)
    return account, session


def sso_workspace(claims: dict) -> uuid.UUID | None:
    """The workspace whose own SSO connection the first factor came through, as its `mfa_token` says."""
    value = claims.get(SSO_WORKSPACE_CLAIM)
    return uuid.UUID(value) if value else None


# The hosted pages' step-up: a browser session signed in with one factor adds the second


def step_up(
    session: Session, *, code: str | None, recovery_code: str | None, ip: str | None, user_agent: str
) -> Session:
    """A browser session whose `amr` lacks `mfa` (a workspace asks for it) proves the account's second
    factor, by the rules of `verify`: a second-factor completion starts a session (`amr` with `otp` and
    `mfa`), which replaces the browser's. 409 `totp not enrolled` without a factor (set one up first)."""
    account = session.account
    if code is None and recovery_code is None:
        raise ApiError(400, "code or recovery_code required", "code")
    with counted_attempt(account), transaction.atomic():
        totp = Totp.objects.select_for_update().filter(account=account, confirmed_at__isnull=False).first()
        if totp is None:
            raise ApiError(409, TOTP_NOT_ENROLLED)
        _check_second_factor(account, totp, code=code, recovery_code=recovery_code)
        return stepped_up(session, ip=ip, user_agent=user_agent)


@transaction.atomic
def confirm_in_browser(session: Session, code: str, *, ip: str | None, user_agent: str) -> dict:
    """`confirm` for the hosted pages' set-up: the first code that turns the factor on also proves it,
    so the browser session steps up with it. Answers the recovery codes and the new `session`."""
    answer = confirm(session.account, code)
    return {**answer, "session": stepped_up(session, ip=ip, user_agent=user_agent)}


def stepped_up(
    session: Session, *, ip: str | None, user_agent: str, methods: tuple[str, ...] = ("otp", "mfa")
) -> Session:
    """The browser session that replaces `session` once a second factor proved it: `amr` with `methods`
    (`hwk` and `mfa` for a passkey)."""
    account = session.account
    amr = [*session.amr, *(method for method in methods if method not in session.amr)]
    stepped = sessions.open_browser_session(
        account, amr=amr, ip=ip, user_agent=user_agent, sso_workspace_id=session.sso_workspace_id
    )
    sessions.replace_browser_session(session, stepped, actor=account)
    audit.record("account.login", resource=("account", account.pk), changes={"amr": amr}, actor=account)
    return stepped
