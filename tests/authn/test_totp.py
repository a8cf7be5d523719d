"""TOTP with recovery codes (docs/api.md#second-factor-totp) over HTTP, with two accounts: enrolment, login in
two steps, single use of codes, recovery codes and mfa tokens, the throttle, recent authentication."""

import jwt
import pyotp
import pytest
from django.core import mail

from accounts.account_cache import forget_account
from accounts.models import Account
from authn import mfa
from authn.models import MfaChallenge, RecoveryCode, Session, Totp
from iam.models import AuditEntry
from iam.platform import crypto
from tests.authn import test_oauth as oauth_flow
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

provider = oauth_flow.provider  # the stand-in OpenID provider and its settings, as fixtures here
configured = oauth_flow.configured
sign_in = oauth_flow.sign_in
T0 = 1_900_000_005  # a chosen instant, 5 s into its 30-second step
INVALID = "invalid code"
AUTH = "Authentication required or invalid credentials."


@pytest.fixture
def clock(monkeypatch):
    """The server's clock for codes, frozen at `clock.now` (tests move it)."""

    class Clock:
        now = float(T0)

    stand_in = Clock()
    monkeypatch.setattr(mfa, "_now", lambda: stand_in.now)
    return stand_in


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """POSTs and runs what the request scheduled after commit (the outbox's e-mails)."""

    def call(client: ApiClient, path: str, body=None):
        with django_capture_on_commit_callbacks(execute=True):
            return client.call(path, body)

    return call


def person(root):
    account = AccountFactory()
    CredentialFactory(account=account)
    return account


def login(api, account):
    return api.call("/auth/login", {"email": account.email, "password": PASSWORD})


def signed_in(api, account) -> ApiClient:
    return ApiClient(ok(login(api, account))["access_token"])


def code(secret: str, at: float) -> str:
    return pyotp.TOTP(secret).at(at)


def enrolled(api, account, clock) -> tuple[ApiClient, str, list[str]]:
    """A fresh session of `account` with TOTP active: the client, the secret and the recovery codes."""
    client = signed_in(api, account)
    secret = ok(client.call("/auth/mfa/totp/enroll"))["secret"]
    codes = ok(client.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))["recovery_codes"]
    clock.now += 30  # the confirming code is spent: the next test code is of the next step
    return client, secret, codes


@pytest.fixture
def ada(root):
    return person(root)


@pytest.fixture
def bob(root):
    return person(root)


# enrolment


def test_enroll_confirm_answers_and_stores_the_secret_encrypted(api, ada, clock):
    client = signed_in(api, ada)
    enrolled_ = ok(client.call("/auth/mfa/totp/enroll"))
    assert set(enrolled_) == {"secret", "otpauth_uri"}
    secret = enrolled_["secret"]
    assert len(secret) == 32 and pyotp.TOTP(secret).now()  # base32
    assert enrolled_["otpauth_uri"].startswith("otpauth://totp/")
    assert f"secret={secret}" in enrolled_["otpauth_uri"]
    row = Totp.objects.get(account=ada)
    assert row.confirmed_at is None and secret not in row.secret_encrypted
    assert crypto.decrypt(row.secret_encrypted) == secret
    # pending: a login still answers a session
    assert "access_token" in ok(login(api, ada))

    answer = ok(client.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))
    assert set(answer) == {"recovery_codes"}
    codes = answer["recovery_codes"]
    assert len(codes) == 10 and len(set(codes)) == 10
    stored = list(RecoveryCode.objects.filter(account=ada).values_list("digest", flat=True))
    assert len(stored) == 10 and not set(codes) & set(stored)
    assert AuditEntry.objects.filter(action="account.mfa_enabled", resource_id=str(ada.pk)).exists()
    err(client.call("/auth/mfa/totp/enroll"), 409, "totp already enabled")
    err(client.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}), 409, "totp already enabled")


def test_confirm_with_a_wrong_code_or_without_enrolment(api, ada, bob, clock):
    client = signed_in(api, ada)
    err(client.call("/auth/mfa/totp/confirm", {"code": "123456"}), 409, "totp not enrolled")
    secret = ok(client.call("/auth/mfa/totp/enroll"))["secret"]
    wrong = "000000" if code(secret, clock.now) != "000000" else "111111"
    body = err(client.call("/auth/mfa/totp/confirm", {"code": wrong}), 400, INVALID)
    assert body["field"] == "code"
    # Bob cannot confirm Ada's enrolment, even with her code: his own has none
    bob_client = signed_in(api, bob)
    err(
        bob_client.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}), 409, "totp not enrolled"
    )
    assert Totp.objects.get(account=ada).confirmed_at is None
    assert not Totp.objects.filter(account=bob).exists()


def test_enroll_needs_a_token_and_no_workspace(api, ada):
    err(api.call("/auth/mfa/totp/enroll"), 401)


def test_enroll_and_disable_need_recent_authentication(api, ada, clock, settings):
    client, secret, _ = enrolled(api, ada, clock)
    settings.IAM_REAUTH_SECONDS = -1  # every login is too old
    err(
        client.call("/auth/mfa/totp/disable", {"code": code(secret, clock.now)}),
        403,
        "recent authentication required",
    )
    other = person(None)
    err(signed_in(api, other).call("/auth/mfa/totp/enroll"), 403, "recent authentication required")
    assert Totp.objects.filter(account=ada, confirmed_at__isnull=False).exists()


def test_confirm_mails_the_account(api, ada, clock, post):
    client = signed_in(api, ada)
    secret = ok(client.call("/auth/mfa/totp/enroll"))["secret"]
    mail.outbox.clear()
    ok(post(client, "/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))
    assert [message.to for message in mail.outbox] == [[ada.email]]
    assert "second factor was added" in mail.outbox[0].subject


# login in two steps


def test_login_answers_an_mfa_token_and_no_session(api, ada, clock):
    enrolled(api, ada, clock)
    sessions_before = Session.objects.filter(account=ada).count()
    answer = ok(login(api, ada))
    assert set(answer) == {"mfa_required", "mfa_token"} and answer["mfa_required"] is True
    claims = jwt.decode(answer["mfa_token"], options={"verify_signature": False})
    assert claims["type"] == "MfaChallenge" and claims["exp"] - claims["iat"] == 300
    assert Session.objects.filter(account=ada).count() == sessions_before


def test_verify_answers_what_login_answers_with_mfa_amr(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    data = ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}))
    assert set(data) == {"access_token", "refresh_token", "account"}
    assert data["account"]["id"] == str(ada.pk)
    claims = jwt.decode(data["access_token"], options={"verify_signature": False})
    assert claims["amr"] == ["pwd", "otp", "mfa"] and claims["sub"] == str(ada.pk)
    assert Session.objects.get(pk=claims["sid"]).amr == ["pwd", "otp", "mfa"]
    ok(ApiClient(data["access_token"]).call("/sessions/list"))


def test_mfa_token_works_once_and_survives_a_wrong_code(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    wrong = "000000" if code(secret, clock.now) != "000000" else "111111"
    assert (
        err(api.call("/auth/mfa/verify", {"mfa_token": token, "code": wrong}), 400, INVALID)["field"]
        == "code"
    )
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}))
    clock.now += 30
    body = err(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}), 400)
    assert body["message"] == "invalid mfa_token" and body["field"] == "mfa_token"


def test_a_code_works_once(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    now_code = code(secret, clock.now)
    ok(api.call("/auth/mfa/verify", {"mfa_token": ok(login(api, ada))["mfa_token"], "code": now_code}))
    clock.now += 10  # the same step
    token = ok(login(api, ada))["mfa_token"]
    err(api.call("/auth/mfa/verify", {"mfa_token": token, "code": now_code}), 400, INVALID)
    # an older step's code after a newer one was used: refused too
    err(
        api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now - 30)}), 400, INVALID
    )


def test_one_step_of_drift_either_way_and_no_more(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    clock.now += 300
    token = ok(login(api, ada))["mfa_token"]
    err(
        api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now - 60)}), 400, INVALID
    )
    err(
        api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now + 60)}), 400, INVALID
    )
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now - 30)}))
    ok(
        api.call(
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, ada))["mfa_token"], "code": code(secret, clock.now + 30)},
        )
    )


def test_a_token_of_one_account_never_verifies_for_the_other(api, ada, bob, clock):
    _, ada_secret, ada_codes = enrolled(api, ada, clock)
    _, bob_secret, _ = enrolled(api, bob, clock)
    bob_token = ok(login(api, bob))["mfa_token"]
    err(
        api.call("/auth/mfa/verify", {"mfa_token": bob_token, "code": code(ada_secret, clock.now)}),
        400,
        INVALID,
    )
    err(api.call("/auth/mfa/verify", {"mfa_token": bob_token, "recovery_code": ada_codes[0]}), 400, INVALID)
    data = ok(api.call("/auth/mfa/verify", {"mfa_token": bob_token, "code": code(bob_secret, clock.now)}))
    assert data["account"]["id"] == str(bob.pk)
    assert RecoveryCode.objects.filter(account=ada, used_at__isnull=True).count() == 10


def test_mfa_token_is_refused_as_bearer_everywhere(api, ada, clock):
    enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    bearer = ApiClient(token)
    for path in (
        "/sessions/list",
        "/auth/refresh",
        "/auth/revoke",
        "/auth/mfa/totp/enroll",
        "/accounts/describe",
    ):
        err(bearer.call(path, {"id": str(ada.pk)} if path == "/accounts/describe" else None), 401, AUTH)


def test_a_forged_or_other_type_token_does_not_verify(api, ada, clock):
    client, secret, _ = enrolled(api, ada, clock)
    access = ok(
        api.call(
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, ada))["mfa_token"], "code": code(secret, clock.now)},
        )
    )["access_token"]
    clock.now += 30
    for token in (access, "not-a-jwt", client.token):
        body = err(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}), 400)
        assert body["message"] == "invalid mfa_token"
    err(api.call("/auth/mfa/verify", {"code": "123456"}), 400)


def test_the_mfa_token_is_spent_in_the_database(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    jti = jwt.decode(token, options={"verify_signature": False})["jti"]
    assert MfaChallenge.objects.get(jti=jti).used_at is None
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}))
    assert MfaChallenge.objects.get(jti=jti).used_at is not None


# recovery codes


def test_each_recovery_code_works_once_and_is_audited_and_mailed(api, ada, clock, post):
    _, _, codes = enrolled(api, ada, clock)
    mail.outbox.clear()
    data = ok(
        post(
            api,
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, ada))["mfa_token"], "recovery_code": codes[0].upper()},
        )
    )
    claims = jwt.decode(data["access_token"], options={"verify_signature": False})
    assert claims["amr"] == ["pwd", "otp", "mfa"]
    assert [message.to for message in mail.outbox] == [[ada.email]]
    assert "recovery code" in mail.outbox[0].subject
    assert (
        AuditEntry.objects.filter(action="account.mfa_recovery_code_used", resource_id=str(ada.pk)).count()
        == 1
    )
    token = ok(login(api, ada))["mfa_token"]
    body = err(api.call("/auth/mfa/verify", {"mfa_token": token, "recovery_code": codes[0]}), 400, INVALID)
    assert body["field"] == "recovery_code"
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "recovery_code": codes[1]}))


# the throttle


def test_five_wrong_codes_throttle_the_account_without_checking(api, ada, bob, clock):
    _, secret, _ = enrolled(api, ada, clock)
    _, bob_secret, _ = enrolled(api, bob, clock)
    right = code(secret, clock.now)
    wrong = "000000" if right != "000000" else "111111"
    token = ok(login(api, ada))["mfa_token"]
    for _ in range(5):
        err(api.call("/auth/mfa/verify", {"mfa_token": token, "code": wrong}), 400, INVALID)
    response = api.call("/auth/mfa/verify", {"mfa_token": token, "code": right})
    err(response, 429, "too many failed codes")
    assert 0 < int(response["Retry-After"]) <= 900
    assert Totp.objects.get(account=ada).last_used_step < int(clock.now) // 30  # the code was not checked
    # another account is not throttled
    ok(
        api.call(
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, bob))["mfa_token"], "code": code(bob_secret, clock.now)},
        )
    )


# disable


def test_disable_with_a_code_ends_other_sessions_and_mails(api, ada, bob, clock, post):
    client, secret, _ = enrolled(api, ada, clock)
    other_session = ok(
        api.call(
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, ada))["mfa_token"], "code": code(secret, clock.now)},
        )
    )
    clock.now += 30
    bob_client = signed_in(api, bob)
    # Bob cannot disable Ada's: he has none
    err(
        bob_client.call("/auth/mfa/totp/disable", {"code": code(secret, clock.now)}), 409, "totp not enrolled"
    )
    mail.outbox.clear()
    answer = ok(post(client, "/auth/mfa/totp/disable", {"code": code(secret, clock.now)}))
    assert answer == {"account_id": str(ada.pk), "totp": False}
    assert (
        not Totp.objects.filter(account=ada).exists()
        and not RecoveryCode.objects.filter(account=ada).exists()
    )
    assert [message.to for message in mail.outbox] == [[ada.email]]
    assert AuditEntry.objects.filter(action="account.mfa_disabled", resource_id=str(ada.pk)).exists()
    ok(client.call("/sessions/list"))  # the current session lives on
    err(ApiClient(other_session["access_token"]).call("/sessions/list"), 401)
    ok(bob_client.call("/sessions/list"))
    assert "access_token" in ok(login(api, ada))  # a password login again


def test_disable_with_a_recovery_code_and_wrong_codes(api, ada, clock):
    client, secret, codes = enrolled(api, ada, clock)
    wrong = "000000" if code(secret, clock.now) != "000000" else "111111"
    assert err(client.call("/auth/mfa/totp/disable", {"code": wrong}), 400, INVALID)["field"] == "code"
    body = err(client.call("/auth/mfa/totp/disable", {"recovery_code": "nope-nope"}), 400, INVALID)
    assert body["field"] == "recovery_code"
    ok(client.call("/auth/mfa/totp/disable", {"recovery_code": codes[3]}))
    assert not Totp.objects.filter(account=ada).exists()


def test_disable_without_totp(api, ada):
    err(signed_in(api, ada).call("/auth/mfa/totp/disable", {"code": "123456"}), 409, "totp not enrolled")


def test_enroll_again_after_disable(api, ada, clock):
    client, secret, _ = enrolled(api, ada, clock)
    ok(client.call("/auth/mfa/totp/disable", {"code": code(secret, clock.now)}))
    assert ok(client.call("/auth/mfa/totp/enroll"))["secret"] != secret


def test_challenge_of_a_revoked_account_session_version_is_refused(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    from accounts.services import end_sessions

    end_sessions(ada)
    err(
        api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}),
        400,
        "invalid mfa_token",
    )


def test_a_login_with_totp_checks_the_password_once(api, ada, clock, monkeypatch):
    _, secret, _ = enrolled(api, ada, clock)
    from django.contrib.auth import hashers

    calls = []
    original = hashers.Argon2PasswordHasher.verify
    monkeypatch.setattr(
        hashers.Argon2PasswordHasher, "verify", lambda self, *a: calls.append(1) or original(self, *a)
    )
    token = ok(login(api, ada))["mfa_token"]
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}))
    assert len(calls) == 1


# provider logins


def test_the_oauth_callback_hands_back_an_mfa_token(api, root, configured, clock):
    alice = AccountFactory(email="alice@example.com", verified=True)
    CredentialFactory(account=alice)
    _, secret, _ = enrolled(api, alice, clock)
    sessions_before = Session.objects.filter(account=alice).count()
    query = sign_in(api)
    assert set(query) == {"mfa_token"}
    assert Session.objects.filter(account=alice).count() == sessions_before
    err(ApiClient(query["mfa_token"]).call("/sessions/list"), 401, AUTH)
    data = ok(
        api.call("/auth/mfa/verify", {"mfa_token": query["mfa_token"], "code": code(secret, clock.now)})
    )
    claims = jwt.decode(data["access_token"], options={"verify_signature": False})
    assert claims["amr"] == ["fed", "otp", "mfa"] and data["account"]["id"] == str(alice.pk)
    err(
        api.call("/auth/mfa/verify", {"mfa_token": query["mfa_token"], "code": code(secret, clock.now + 30)}),
        400,
        "invalid mfa_token",
    )


def test_the_oauth_callback_without_totp_still_answers_tokens(api, root, configured):
    assert set(sign_in(api)) == {"access_token"}  # and no refresh token in a URL


@pytest.mark.parametrize(
    "body",
    [
        {"code": 123456},
        {"code": None},
        {"recovery_code": ""},
        {"code": "\uff11\uff12\uff13\uff14\uff15\uff16"},  # fullwidth digits
        {"code": "12345\x00"},
        {"recovery_code": 5},
        {"code": "x" * 5000},
        [],
        "x",
    ],
)
def test_odd_bodies_get_a_400(api, ada, clock, body):
    client, _, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    verify_body = {**body, "mfa_token": token} if isinstance(body, dict) else body
    for caller, path, sent in (
        (api, "/auth/mfa/verify", verify_body),
        (client, "/auth/mfa/totp/confirm", body),
        (client, "/auth/mfa/totp/disable", body),
    ):
        response = caller.call(path, sent)
        assert response.status_code in (400, 409), (path, response.json())


def test_a_disabled_account_completes_no_login(api, ada, clock):
    _, secret, _ = enrolled(api, ada, clock)
    token = ok(login(api, ada))["mfa_token"]
    Account.objects.filter(pk=ada.pk).update(enabled=False)
    forget_account(ada.pk)
    err(
        api.call("/auth/mfa/verify", {"mfa_token": token, "code": code(secret, clock.now)}),
        403,
        "account disabled",
    )
    assert not MfaChallenge.objects.filter(used_at__isnull=False).exists()
