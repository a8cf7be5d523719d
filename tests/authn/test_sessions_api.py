"""Register, login, refresh, revoke (docs/api.md#conventions, #errors, docs/security.md#tokens,
docs/api.md#throttling) over HTTP."""

import datetime as dt
import uuid

import jwt
import pytest
from django.conf import settings
from django.core.cache import cache

from accounts.models import Account
from authn import services, tokens
from authn.models import Credential
from tenancy.workspace_cache import root_workspace
from tests.conftest import ApiClient, access_claims, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

AUTH = "Authentication required or invalid credentials."
REGISTER = {"email": "Reg@Example.com", "password": "a-long-passphrase", "name": "Reg"}


def login(api, account, password=PASSWORD, **extra):
    return api.call("/auth/login", {"email": account.email, "password": password}, **extra)


# register


def test_register_answers_tokens_and_the_account(api, root):
    data = ok(api.call("/auth/register", REGISTER))
    assert set(data) == {"access_token", "refresh_token", "account"}
    assert data["account"] == {
        "id": data["account"]["id"],
        "email": "reg@example.com",
        "name": "Reg",
        "verified": False,
        "enabled": True,
    }
    claims = jwt.decode(data["access_token"], options={"verify_signature": False})
    assert claims["type"] == "access" and claims["exp"] - claims["iat"] == 3600
    credential = Credential.objects.get(account_id=data["account"]["id"])
    assert (credential.kind, credential.provider, credential.status, credential.workspace) == (
        "password",
        "local",
        "pending",
        root,
    )
    # the access token works
    me = ApiClient(data["access_token"])
    assert ok(me.call("/accounts/describe", {"id": data["account"]["id"]}))["email"] == "reg@example.com"


def test_register_name_defaults_to_the_local_part(api):
    assert (
        ok(api.call("/auth/register", {"email": "jo@example.com", "password": "a-long-passphrase"}))[
            "account"
        ]["name"]
        == "jo"
    )


def test_register_ignores_x_workspace(api):
    """docs/api.md#the-root-workspace: the header once chose the credential's workspace, which handed its
    owner the account through `credentials/update`. The credential is the root workspace's, whatever is
    sent."""
    workspace = WorkspaceFactory()
    data = ok(api.call("/auth/register", REGISTER, headers={"X-Workspace": workspace.slug}))
    assert Credential.objects.get(account_id=data["account"]["id"]).workspace == root_workspace()
    ok(api.call("/auth/register", {**REGISTER, "email": "b@example.com"}, headers={"X-Workspace": "nope"}))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"password": "a-long-passphrase"}, "email required"),
        ({"email": "", "password": "a-long-passphrase"}, "email required"),
        ({"email": "a@example.com"}, "password required"),
        ({"email": "a@example.com", "password": ""}, "password required"),
        ({"email": "a@example.com", "password": "short"}, "password must have at least 8 characters"),
        ({"email": "a@example.com", "password": "12345678"}, "password is too common"),
    ],
)
def test_register_validation(api, body, message):
    err(api.call("/auth/register", body), 400, message)


def test_register_twice_is_400_email_already_exists(api):
    ok(api.call("/auth/register", REGISTER))
    err(api.call("/auth/register", {**REGISTER, "email": "REG@example.com"}), 400, "email already exists")


# login


def test_login_answers_tokens_and_records_last_use(api, member):
    data = ok(login(api, member))
    assert data["account"]["id"] == str(member.pk)
    assert Credential.objects.get(account=member).last_used_at is not None


def test_login_is_case_insensitive_on_email(api, member):
    ok(api.call("/auth/login", {"email": member.email.upper(), "password": PASSWORD}))


@pytest.mark.parametrize(
    "body", [{}, {"email": "a@example.com"}, {"password": "x"}, {"email": "", "password": ""}]
)
def test_login_missing_fields(api, body):
    err(api.call("/auth/login", body), 400, "email and password required")


def test_wrong_password_and_unknown_email_look_the_same(api, member):
    wrong = err(login(api, member, "wrong password"), 401, "invalid credentials")
    unknown = err(api.call("/auth/login", {"email": "ghost@example.com", "password": PASSWORD}), 401)
    assert wrong == unknown


def test_unknown_email_still_verifies_a_hash(api, monkeypatch):
    # docs/api.md#throttling: unknown e-mails cost what a wrong password costs.
    from django.contrib.auth import hashers

    calls = []
    original = hashers.check_password
    monkeypatch.setattr(services, "check_password", lambda *a, **k: calls.append(1) or original(*a, **k))
    err(api.call("/auth/login", {"email": "ghost@example.com", "password": PASSWORD}), 401)
    assert calls == [1]


def test_disabled_account_with_right_password_is_403(api, member):
    Account.objects.filter(pk=member.pk).update(enabled=False)
    err(login(api, member), 403, "account disabled")
    err(login(api, member, "wrong password"), 401, "invalid credentials")


def test_revoked_password_credential_logs_in_nowhere(api, member):
    Credential.objects.filter(account=member).update(status=Credential.Status.REVOKED)
    err(login(api, member), 401, "invalid credentials")


def test_pending_credential_can_log_in(api, member):
    Credential.objects.filter(account=member).update(status=Credential.Status.PENDING)
    ok(login(api, member))


def test_login_upgrades_a_hash_made_with_other_parameters(api, member):
    from django.contrib.auth.hashers import Argon2PasswordHasher

    member.password = Argon2PasswordHasher().encode(
        PASSWORD, Argon2PasswordHasher().salt()
    )  # Django's defaults
    member.save(update_fields=["password"])
    ok(login(api, member))
    member.refresh_from_db()
    assert "m=19456,t=2,p=1" in member.password


def test_five_failures_for_one_email_lock_it_for_the_window(api, member):
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL):
        err(login(api, member, "wrong password"), 401, "invalid credentials")
    response = login(api, member)  # the right password is not even checked
    err(response, 429, "too many failed login attempts")
    assert 1 <= int(response["Retry-After"]) <= 15 * 60
    other = AccountFactory()
    CredentialFactory(account=other)
    ok(login(api, other))  # other e-mails from the same IP go on


def test_failures_from_one_ip_lock_every_email_from_it(api, member, monkeypatch):
    from authn import throttling

    # 50 in production (docs/api.md#throttling)
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 3)
    for n in range(3):
        err(api.call("/auth/login", {"email": f"ghost{n}@example.com", "password": "x" * 8}), 401)
    err(login(api, member), 429, "too many failed login attempts")
    elsewhere = api.call("/auth/login", {"email": member.email, "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert ok(elsewhere)["account"]["id"] == str(member.pk)


def test_success_resets_the_email_counter(api, member):
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL - 1):
        err(login(api, member, "wrong password"), 401)
    ok(login(api, member))
    err(login(api, member, "wrong password"), 401)
    ok(login(api, member))


# refresh and revoke


def test_refresh_with_an_access_token(api, member):
    session = ok(login(api, member))
    data = ok(ApiClient(session["access_token"]).call("/auth/refresh"))
    assert set(data) == {"access_token", "refresh_token"}
    claims = jwt.decode(data["access_token"], options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 3600


def test_refresh_token_rotates_and_reuse_ends_every_session(api, member):
    session = ok(login(api, member))
    rotated = ok(ApiClient(session["refresh_token"]).call("/auth/refresh", {}))
    assert ok(ApiClient(rotated["access_token"]).call("/accounts/describe", {"id": str(member.pk)}))
    # the used refresh token again: reuse (RFC 9700 4.14)
    err(ApiClient(session["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    for token in (rotated["access_token"], rotated["refresh_token"], session["access_token"]):
        err(ApiClient(token).call("/auth/refresh"), 401, AUTH)


def test_refresh_without_a_token(api):
    err(api.call("/auth/refresh"), 401, AUTH)


IN_THE_HEADER = "send the refresh token as Authorization: Bearer <token>"


def test_a_refresh_token_in_the_body_is_a_401_that_says_where_it_goes(api, member):
    """docs/api.md#conventions: a 401 keeps its fixed message and status; the teaching is in `hint`."""
    session = ok(login(api, member))
    body = {"refresh_token": session["refresh_token"]}
    for client, sent in (
        (api, body),
        (ApiClient("not-a-token"), body),
        (api, {"refresh_token": None}),
    ):
        response = client.call("/auth/refresh", sent)
        answer = err(response, 401, AUTH)
        assert answer["hint"] == IN_THE_HEADER and "field" not in answer
        assert response["WWW-Authenticate"] == 'Bearer realm="iam"'
    err(api.call("/auth/refresh", body, method="GET"), 405, "use POST")  # the method first
    # the token in the body was not spent: in the header, it works once
    assert set(ok(ApiClient(session["refresh_token"]).call("/auth/refresh", body))) == {
        "access_token",
        "refresh_token",
    }


@pytest.mark.parametrize("raw", ['{"token": "x"}', "{bad", "[]", '"refresh_token"'])
def test_refresh_without_a_bearer_and_no_refresh_token_in_the_body_is_401(api, raw):
    assert "hint" not in err(api.call("/auth/refresh", raw=raw), 401, AUTH)


def test_revoke_ends_the_session_and_its_refresh_token(api, member):
    session = ok(login(api, member))
    access = ApiClient(session["access_token"])
    ok(access.call("/accounts/describe", {"id": str(member.pk)}))  # cached now
    assert ok(access.call("/auth/revoke")) == {"account_id": str(member.pk), "revoked": True}
    err(access.call("/accounts/describe", {"id": str(member.pk)}), 401, AUTH)
    err(access.call("/auth/revoke"), 401, AUTH)
    err(ApiClient(session["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    ok(login(api, member))  # a new login works


def test_revoked_tokens_fail_with_the_cache_flushed_and_with_the_cache_down(api, member, monkeypatch):
    session = ok(login(api, member))
    ok(ApiClient(session["access_token"]).call("/auth/revoke"))
    cache.clear()
    err(ApiClient(session["access_token"]).call("/accounts/describe", {"id": str(member.pk)}), 401, AUTH)
    err(ApiClient(session["refresh_token"]).call("/auth/refresh"), 401, AUTH)

    def down(*args, **kwargs):
        raise ConnectionError("cache down")

    from django.core.cache import cache as django_cache

    for name in ("get", "set", "get_many", "delete_many", "add", "incr"):
        monkeypatch.setattr(django_cache, name, down)
    err(ApiClient(session["access_token"]).call("/accounts/describe", {"id": str(member.pk)}), 401, AUTH)
    fresh = ok(login(api, member))  # logins and checks go on from the database
    ok(ApiClient(fresh["access_token"]).call("/accounts/describe", {"id": str(member.pk)}))


def test_revoke_with_a_stale_cache_entry_for_the_account(api, member):
    """A revocation purges the cached account even when another request cached it mid-transaction."""
    session = ok(login(api, member))
    client = ApiClient(session["access_token"])
    ok(client.call("/accounts/describe", {"id": str(member.pk)}))
    ok(client.call("/auth/revoke"))
    err(client.call("/accounts/describe", {"id": str(member.pk)}), 401, AUTH)


# token checks (docs/security.md#tokens)


def forge(member, *, key: str | None = None, algorithm: str = "HS256", **overrides):
    return jwt.encode(
        access_claims(member, **overrides), key or settings.IAM_JWT_SIGNING_KEY, algorithm=algorithm
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"type": "refresh"},
        {"type": "PasswordReset"},
        {"type": "AccountConfirm"},
        {"exp": 1_000_000},
        {"iss": "someone-else"},
        {"sv": 99},
        {"sv": "1"},
        {"sub": str(uuid.uuid4())},
        {"sub": "not-a-uuid"},
        {"jti": None},
        {"auth_time": None},  # docs/security.md#tokens: every session token carries its login time
        {"auth_time": "1700000000"},
        {"key": "another-key-" + "k" * 64},
        {"algorithm": "HS512", "key": "k" * 64},
        {"algorithm": "HS512"},
    ],
)
@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_only_valid_access_tokens_open_the_api(member, overrides):
    err(ApiClient(forge(member, **overrides)).call("/accounts/describe", {"id": str(member.pk)}), 401, AUTH)


def test_a_forged_token_is_accepted_only_when_it_is_right(member):
    ok(ApiClient(forge(member)).call("/accounts/describe", {"id": str(member.pk)}))


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Basic abc", "Token x", "Bearer not.a.jwt", "Bearer eyJhbGciOiJub25lIn0.e30."],
)
def test_malformed_authorization_headers(api, header):
    err(api.call("/accounts/list", {}, headers={"Authorization": header}), 401, AUTH)


def test_unsigned_token_is_refused(member):
    token = jwt.encode({"sub": str(member.pk), "type": "access"}, None, algorithm="none")
    err(ApiClient(token).call("/accounts/list", {}), 401, AUTH)


def test_tokens_module_rejects_wrong_types():
    token, _ = tokens.issue(
        uuid.uuid4(), type=tokens.PASSWORD_RESET, session_version=1, lifetime=dt.timedelta(hours=1)
    )
    with pytest.raises(tokens.TokenError):
        tokens.decode(token, types={tokens.ACCESS})
    assert tokens.decode(token, types={tokens.PASSWORD_RESET})["type"] == "PasswordReset"


def test_public_endpoints_ignore_a_bad_bearer_header(api):
    ok(api.call("/auth/register", REGISTER, headers={"Authorization": "Bearer junk"}))


def test_operator_flag_is_not_granted_by_token_claims(member):
    err(client_for(member).call("/accounts/list", {}), 403, "missing permission accounts:list")
