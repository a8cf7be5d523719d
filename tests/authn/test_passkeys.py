"""Passkeys (docs/api.md#passkeys) over HTTP with a software authenticator and two accounts: registering,
signing in, the second factor, the caller's own passkeys, and each check that refuses an assertion:
every refusal is the one 400 `passkey not accepted`."""

from datetime import timedelta

import jwt
import pytest
from django.core import mail
from django.utils import timezone

from accounts.account_cache import forget_account
from accounts.models import Account
from authn import throttling
from authn.models import Passkey, PasskeyChallenge, Session
from iam.models import AuditEntry
from tests.authn.soft_authenticator import SoftAuthenticator, b64url
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

NOT_ACCEPTED = "passkey not accepted"
ORIGIN = "http://127.0.0.1:8000"  # IAM_PUBLIC_URL's origin in the tests; the RP id is its host


def person():
    account = AccountFactory()
    CredentialFactory(account=account)
    return account


def signed_in(api, account) -> ApiClient:
    """A fresh session of the account (a password sign-in's, even once a passkey asks for more)."""
    return client_for(account)


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    def call(client: ApiClient, path: str, body=None):
        with django_capture_on_commit_callbacks(execute=True):
            return client.call(path, body)

    return call


@pytest.fixture
def ada(root):
    return person()


@pytest.fixture
def bob(root):
    return person()


def register(api, account, authenticator: SoftAuthenticator, name: str = "Laptop") -> dict:
    client = signed_in(api, account)
    options = ok(client.call("/auth/passkeys/register/options"))
    credential = authenticator.create(options)
    return ok(client.call("/auth/passkeys/register/verify", {"credential": credential, "name": name}))


@pytest.fixture
def ada_key(api, ada) -> SoftAuthenticator:
    key = SoftAuthenticator()
    register(api, ada, key)
    return key


@pytest.fixture
def bob_key(api, bob) -> SoftAuthenticator:
    key = SoftAuthenticator()
    register(api, bob, key)
    return key


def login_options(api, mfa_token: str | None = None) -> dict:
    return ok(api.call("/auth/passkeys/login/options", {"mfa_token": mfa_token} if mfa_token else {}))


def passkey_login(api, credential):
    return api.call("/auth/passkeys/login/verify", {"credential": credential})


# Registering


def test_register_options_ask_for_a_discoverable_verified_credential(api, ada, ada_key):
    options = ok(signed_in(api, ada).call("/auth/passkeys/register/options"))
    assert options["rp"] == {"id": "127.0.0.1", "name": "IAM"}
    assert options["user"]["name"] == ada.email
    assert [param["alg"] for param in options["pubKeyCredParams"]] == [-8, -7, -257]
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert options["authenticatorSelection"]["userVerification"] == "required"
    assert [item["id"] for item in options["excludeCredentials"]] == [ada_key.id]
    assert len(options["challenge"]) >= 43


def test_register_answers_the_passkey_and_mails_the_account(api, ada, post):
    client = signed_in(api, ada)
    options = ok(client.call("/auth/passkeys/register/options"))
    mail.outbox.clear()
    passkey = ok(
        post(
            client,
            "/auth/passkeys/register/verify",
            {"credential": SoftAuthenticator().create(options), "name": "Laptop"},
        )
    )
    assert set(passkey) == {"id", "name", "created_at", "last_used_at", "backed_up"}
    assert passkey["name"] == "Laptop" and passkey["last_used_at"] is None and passkey["backed_up"] is True
    assert [message.to for message in mail.outbox] == [[ada.email]]
    assert "passkey was added" in mail.outbox[0].subject
    assert AuditEntry.objects.filter(action="passkey.create", resource_id=passkey["id"]).exists()


def test_register_keeps_the_backup_flag(api, ada):
    assert register(api, ada, SoftAuthenticator(backed_up=False))["backed_up"] is False


def test_register_needs_a_token_and_a_recent_sign_in(api, ada, settings):
    err(api.call("/auth/passkeys/register/options"), 401)
    client = signed_in(api, ada)
    settings.IAM_REAUTH_SECONDS = -1  # every sign-in is too old
    err(client.call("/auth/passkeys/register/options"), 403, "recent authentication required")


def test_register_needs_a_name(api, ada):
    client = signed_in(api, ada)
    options = ok(client.call("/auth/passkeys/register/options"))
    credential = SoftAuthenticator().create(options)
    err(client.call("/auth/passkeys/register/verify", {"credential": credential}), 400, "name required")
    err(client.call("/auth/passkeys/register/verify", {"name": "x"}), 400, "credential required")


@pytest.mark.parametrize(
    "spoil",
    [
        {"origin": "https://evil.example"},
        {"rp_id": "evil.example"},
        {"uv": False},
    ],
    ids=["wrong origin", "wrong rp id", "no user verification"],
)
def test_register_refuses(api, ada, spoil):
    client = signed_in(api, ada)
    options = ok(client.call("/auth/passkeys/register/options"))
    credential = SoftAuthenticator().create(options, **spoil)
    err(
        client.call("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        400,
        NOT_ACCEPTED,
    )
    assert not Passkey.objects.exists()


def test_register_challenge_works_once(api, ada):
    client = signed_in(api, ada)
    options = ok(client.call("/auth/passkeys/register/options"))
    ok(
        client.call(
            "/auth/passkeys/register/verify", {"credential": SoftAuthenticator().create(options), "name": "a"}
        )
    )
    again = SoftAuthenticator().create(options)
    err(client.call("/auth/passkeys/register/verify", {"credential": again, "name": "b"}), 400, NOT_ACCEPTED)
    assert Passkey.objects.filter(account=ada).count() == 1


def test_register_challenge_expires(api, ada):
    client = signed_in(api, ada)
    options = ok(client.call("/auth/passkeys/register/options"))
    PasskeyChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    credential = SoftAuthenticator().create(options)
    err(
        client.call("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        400,
        NOT_ACCEPTED,
    )


def test_register_challenge_is_bound_to_the_account_and_session_that_asked(api, ada, bob):
    options = ok(signed_in(api, ada).call("/auth/passkeys/register/options"))
    credential = SoftAuthenticator().create(options)
    # bob presents ada's challenge; then another session of ada's does
    err(
        signed_in(api, bob).call("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        400,
        NOT_ACCEPTED,
    )
    err(
        signed_in(api, ada).call("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        400,
        NOT_ACCEPTED,
    )
    assert not Passkey.objects.exists()


def test_register_refuses_a_sign_in_challenge(api, ada):
    client = signed_in(api, ada)
    sign_in = login_options(api)
    options = ok(client.call("/auth/passkeys/register/options"))
    credential = SoftAuthenticator().create({**options, "challenge": sign_in["challenge"]})
    err(
        client.call("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        400,
        NOT_ACCEPTED,
    )


def test_register_refuses_a_credential_another_account_holds(api, ada, bob, ada_key):
    client = signed_in(api, bob)
    options = ok(client.call("/auth/passkeys/register/options"))
    err(
        client.call("/auth/passkeys/register/verify", {"credential": ada_key.create(options), "name": "x"}),
        400,
        NOT_ACCEPTED,
    )
    assert not Passkey.objects.filter(account=bob).exists()


def client_data(raw: bytes) -> dict:
    return {"id": "x", "rawId": "x", "type": "public-key", "response": {"clientDataJSON": b64url(raw)}}


@pytest.mark.parametrize(
    "credential",
    [
        None,
        "x",
        [],
        {},
        {"response": {"clientDataJSON": "!!"}},
        {"response": []},
        client_data(b"[]"),
        client_data(b'"text"'),
        client_data(b'{"challenge": 5}'),
        client_data(b'{"challenge": {"a": 1}}'),
        client_data(b"\xff\xfe"),
        client_data(b'{"type": "webauthn.get", "challenge": "AAAA", "origin": "http://127.0.0.1:8000"}'),
    ],
)
def test_malformed_credentials_are_refused_without_a_500(api, ada, credential):
    client = signed_in(api, ada)
    ok(client.call("/auth/passkeys/register/options"))
    for path, body in (
        ("/auth/passkeys/register/verify", {"credential": credential, "name": "x"}),
        ("/auth/passkeys/login/verify", {"credential": credential}),
    ):
        response = client.call(path, body)
        assert response.status_code == 400, response.content


# Signing in


def test_sign_in_with_a_passkey(api, ada, ada_key):
    options = login_options(api)
    assert options["rpId"] == "127.0.0.1" and options["userVerification"] == "required"
    assert not options.get("allowCredentials")
    answer = ok(passkey_login(api, ada_key.get(options)))
    assert answer["account"]["id"] == str(ada.pk)
    claims = claims_of(answer["access_token"])
    assert claims["amr"] == ["hwk", "user", "mfa"]
    assert Session.objects.get(pk=claims["sid"]).amr == ["hwk", "user", "mfa"]
    passkey = Passkey.objects.get(account=ada)
    assert passkey.last_used_at is not None and passkey.sign_count == 1
    me = ok(ApiClient(answer["access_token"]).call("/passkeys/list"))["passkeys"]
    assert me[0]["last_used_at"] is not None


def test_two_accounts_each_sign_in_as_themselves(api, ada, bob, ada_key, bob_key):
    assert ok(passkey_login(api, bob_key.get(login_options(api))))["account"]["id"] == str(bob.pk)
    assert ok(passkey_login(api, ada_key.get(login_options(api))))["account"]["id"] == str(ada.pk)


@pytest.mark.parametrize(
    "spoil",
    [
        {"origin": "https://evil.example"},
        {"rp_id": "evil.example"},
        {"uv": False},
        {"bad_signature": True},
    ],
    ids=["wrong origin", "wrong rp id", "no user verification", "bad signature"],
)
def test_sign_in_refuses(api, ada, ada_key, spoil):
    err(passkey_login(api, ada_key.get(login_options(api), **spoil)), 400, NOT_ACCEPTED)
    assert not Session.objects.filter(account=ada).exclude(amr=["pwd"]).exists()


def test_sign_in_challenge_works_once(api, ada_key):
    options = login_options(api)
    ok(passkey_login(api, ada_key.get(options)))
    err(passkey_login(api, ada_key.get(options)), 400, NOT_ACCEPTED)


def test_sign_in_challenge_expires(api, ada_key):
    options = login_options(api)
    PasskeyChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    err(passkey_login(api, ada_key.get(options)), 400, NOT_ACCEPTED)


def test_sign_in_refuses_a_challenge_never_handed_out(api, ada_key):
    made_up = {"challenge": "A" * 43, "rpId": "127.0.0.1"}
    err(passkey_login(api, ada_key.get(made_up)), 400, NOT_ACCEPTED)


def test_sign_in_refuses_a_registration_challenge(api, ada, ada_key):
    options = ok(signed_in(api, ada).call("/auth/passkeys/register/options"))
    err(
        passkey_login(api, ada_key.get({"challenge": options["challenge"], "rpId": "127.0.0.1"})),
        400,
        NOT_ACCEPTED,
    )


def test_a_counter_going_backwards_is_refused_and_audited(api, root, ada, ada_key):
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=5)))
    err(passkey_login(api, ada_key.get(login_options(api), sign_count=5)), 400, NOT_ACCEPTED)
    err(passkey_login(api, ada_key.get(login_options(api), sign_count=3)), 400, NOT_ACCEPTED)
    passkey = Passkey.objects.get(account=ada)
    assert passkey.sign_count == 5
    entries = AuditEntry.objects.filter(action="passkey.clone_suspected")
    assert entries.count() == 2
    entry = entries.first()
    assert entry.workspace_id == root.pk
    assert entry.resource_id == passkey.pk
    assert entry.changes["account_id"] == str(ada.pk) and entry.changes["passkey_id"] == str(passkey.pk)
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=6)))


def test_a_bad_signature_with_a_low_counter_is_no_clone(api, ada, ada_key):
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=5)))
    err(
        passkey_login(api, ada_key.get(login_options(api), sign_count=1, bad_signature=True)),
        400,
        NOT_ACCEPTED,
    )
    assert not AuditEntry.objects.filter(action="passkey.clone_suspected").exists()


def test_authenticators_without_a_counter_sign_in_again(api, ada, ada_key):
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=0)))
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=0)))


def test_sign_in_refuses_another_accounts_passkey_id(api, ada, bob, ada_key, bob_key):
    # ada's key signs, but names bob's credential: bob's public key does not verify it
    err(
        passkey_login(api, ada_key.get(login_options(api), credential_id=bob_key.credential_id)),
        400,
        NOT_ACCEPTED,
    )
    # ada's credential presented as bob's user: the user handle is not the passkey's account
    err(
        passkey_login(api, ada_key.get(login_options(api), user_handle=bob_key.user_handle)),
        400,
        NOT_ACCEPTED,
    )


def test_a_disabled_account_is_told_after_a_good_passkey(api, ada, ada_key):
    Account.objects.filter(pk=ada.pk).update(enabled=False)
    forget_account(ada.pk)
    err(passkey_login(api, ada_key.get(login_options(api))), 403, "account disabled")
    err(passkey_login(api, SoftAuthenticator().get(login_options(api))), 400, NOT_ACCEPTED)


def test_sign_in_failures_count_towards_the_address_throttle(api, ada, ada_key, monkeypatch):
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 3)
    stranger = SoftAuthenticator()
    for _ in range(3):
        err(passkey_login(api, stranger.get(login_options(api))), 400, NOT_ACCEPTED)
    response = passkey_login(api, ada_key.get(login_options(api)))
    err(response, 429, "too many failed login attempts")
    assert int(response["Retry-After"]) > 0


def test_sign_in_options_are_limited_per_address(api, monkeypatch):
    monkeypatch.setattr(throttling.passkey_starts_by_ip, "limit", 2)
    login_options(api)
    login_options(api)
    response = api.call("/auth/passkeys/login/options", {})
    err(response, 429, "too many requests")
    assert int(response["Retry-After"]) > 0
    assert PasskeyChallenge.objects.count() == 2


# The second factor


@pytest.fixture
def mfa_token(api, ada, ada_key) -> str:
    answer = ok(api.call("/auth/login", {"email": ada.email, "password": PASSWORD}))
    assert answer == {"mfa_required": True, "mfa_token": answer["mfa_token"]}
    return answer["mfa_token"]


def bob_mfa_token(api, bob) -> str:
    return ok(api.call("/auth/login", {"email": bob.email, "password": PASSWORD}))["mfa_token"]


def mfa_verify(api, token: str, credential):
    return api.call("/auth/mfa/verify", {"mfa_token": token, "credential": credential})


def test_a_password_login_asks_for_the_passkey(api, ada, ada_key, mfa_token):
    options = login_options(api, mfa_token)
    assert [item["id"] for item in options["allowCredentials"]] == [ada_key.id]
    answer = ok(mfa_verify(api, mfa_token, ada_key.get(options)))
    assert answer["account"]["id"] == str(ada.pk)
    assert claims_of(answer["access_token"])["amr"] == ["pwd", "hwk", "mfa"]
    # the token is spent
    err(mfa_verify(api, mfa_token, ada_key.get(login_options(api))), 400)


def test_second_factor_options_need_a_live_token(api, ada_key):
    err(api.call("/auth/passkeys/login/options", {"mfa_token": "nope"}), 400, "invalid mfa_token")


def test_second_factor_refuses_another_accounts_passkey(api, ada, bob, ada_key, bob_key, mfa_token):
    err(mfa_verify(api, mfa_token, bob_key.get(login_options(api, mfa_token))), 400, NOT_ACCEPTED)
    # and ada's passkey does not complete bob's login
    token = bob_mfa_token(api, bob)
    err(mfa_verify(api, token, ada_key.get(login_options(api, token))), 400, NOT_ACCEPTED)


def test_second_factor_challenge_is_bound_to_its_token(api, ada, ada_key, mfa_token):
    other_token = ok(api.call("/auth/login", {"email": ada.email, "password": PASSWORD}))["mfa_token"]
    options = login_options(api, other_token)
    err(mfa_verify(api, mfa_token, ada_key.get(options)), 400, NOT_ACCEPTED)
    # a sign-in challenge does not complete a second step either
    err(mfa_verify(api, mfa_token, ada_key.get(login_options(api))), 400, NOT_ACCEPTED)
    ok(mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token))))


@pytest.mark.parametrize(
    "spoil",
    [{"origin": "https://evil.example"}, {"rp_id": "evil.example"}, {"uv": False}, {"bad_signature": True}],
    ids=["wrong origin", "wrong rp id", "no user verification", "bad signature"],
)
def test_second_factor_refuses(api, ada_key, mfa_token, spoil):
    err(mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token), **spoil)), 400, NOT_ACCEPTED)
    # the token stays usable
    ok(mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token))))


def test_second_factor_challenge_works_once_and_expires(api, ada_key, mfa_token):
    options = login_options(api, mfa_token)
    PasskeyChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    err(mfa_verify(api, mfa_token, ada_key.get(options)), 400, NOT_ACCEPTED)
    options = login_options(api, mfa_token)
    credential = ada_key.get(options)
    err(mfa_verify(api, mfa_token, {**credential, "id": "x", "rawId": "x"}), 400, NOT_ACCEPTED)
    err(mfa_verify(api, mfa_token, credential), 400, NOT_ACCEPTED)  # spent by the refusal


def test_second_factor_refusals_count_as_wrong_codes(api, ada_key, mfa_token, settings, monkeypatch):
    monkeypatch.setattr(throttling.mfa_failures_by_account, "limit", 2)
    for _ in range(2):
        err(
            mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token), uv=False)),
            400,
            NOT_ACCEPTED,
        )
    err(mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token))), 429)


def test_second_factor_counter_going_backwards(api, root, ada, ada_key, mfa_token):
    ok(passkey_login(api, ada_key.get(login_options(api), sign_count=9)))
    err(
        mfa_verify(api, mfa_token, ada_key.get(login_options(api, mfa_token), sign_count=2)),
        400,
        NOT_ACCEPTED,
    )
    assert AuditEntry.objects.filter(action="passkey.clone_suspected", workspace_id=root.pk).count() == 1


# The caller's own passkeys


def test_list_update_delete_own_only(api, ada, bob, ada_key, bob_key, settings):
    ada_api, bob_api = signed_in(api, ada), signed_in(api, bob)
    listed = ok(ada_api.call("/passkeys/list"))["passkeys"]
    assert [item["name"] for item in listed] == ["Laptop"]
    ada_passkey = listed[0]["id"]
    bob_passkey = ok(bob_api.call("/passkeys/list"))["passkeys"][0]["id"]
    assert bob_passkey != ada_passkey
    assert ok(ada_api.call("/passkeys/list", {"filter": {"fields": {"id": bob_passkey}}}))["passkeys"] == []
    renamed = ok(ada_api.call("/passkeys/update", {"id": ada_passkey, "name": "Phone"}))
    assert renamed["name"] == "Phone" and renamed["id"] == ada_passkey
    err(ada_api.call("/passkeys/update", {"id": bob_passkey, "name": "mine"}), 404, "passkey not found")
    err(ada_api.call("/passkeys/delete", {"id": bob_passkey}), 404, "passkey not found")
    assert Passkey.objects.get(pk=bob_passkey).name == "Laptop"
    assert ok(ada_api.call("/passkeys/delete", {"id": ada_passkey})) == {"id": ada_passkey, "deleted": True}
    assert not Passkey.objects.filter(pk=ada_passkey).exists()
    assert AuditEntry.objects.filter(action="passkey.delete", resource_id=ada_passkey).exists()
    # without a passkey, the password signs in alone again
    assert "access_token" in ok(api.call("/auth/login", {"email": ada.email, "password": PASSWORD}))


def test_delete_needs_a_recent_sign_in(api, ada, ada_key, settings):
    client = signed_in(api, ada)
    passkey = Passkey.objects.get(account=ada)
    settings.IAM_REAUTH_SECONDS = -1
    err(client.call("/passkeys/delete", {"id": str(passkey.pk)}), 403, "recent authentication required")
    assert Passkey.objects.filter(pk=passkey.pk).exists()


def test_passkey_endpoints_need_a_token(api):
    for path in ("/passkeys/list", "/passkeys/update", "/passkeys/delete", "/auth/passkeys/register/verify"):
        err(api.call(path, {}), 401)
