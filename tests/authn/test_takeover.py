"""docs/security.md, tried as an attacker would: no one acts on an account but the account itself or an
operator. Each test replays an attack that worked before the fix, with a victim, an attacker and two
workspaces."""

import datetime as dt
import pickle
from urllib.parse import parse_qsl, urlsplit

import jwt
import pytest
from django.conf import settings
from django.core.cache import cache as django_cache

from accounts.account_cache import account_key
from accounts.models import Account
from authn.models import Credential
from tenancy.workspace_cache import root_workspace
from tests.conftest import ApiClient, access_claims, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

AUTH = "Authentication required or invalid credentials."
OPERATOR_ONLY = "only an operator may change this credential"
ATTACKER_PASSWORD = "attacker-chosen-passphrase"


def login(email: str, password: str = PASSWORD):
    return ApiClient().call("/auth/login", {"email": email, "password": password})


@pytest.fixture
def victim(db) -> Account:
    victim = AccountFactory(email="victim@example.com")
    CredentialFactory(account=victim)
    return victim


@pytest.fixture
def attacker_workspace(member_of):
    """A tenant: the attacker owns workspace A (role `*`); workspace B is someone else's."""
    workspace = WorkspaceFactory(slug="attackers")
    member_of(WorkspaceFactory(slug="bystanders"), "*")
    attacker, api = member_of(workspace, "*")
    return workspace, attacker, api


def ref(credential: Credential, **extra) -> dict:
    return {"id": str(credential.pk), "account_id": str(credential.account_id), **extra}


# Item 1: X-Workspace on register / OAuth chose the credential's workspace; its owner then took it over.


def test_registering_into_an_attackers_workspace_gives_it_no_credential(api, attacker_workspace):
    workspace, _, owner = attacker_workspace
    data = ok(
        api.call(
            "/auth/register",
            {"email": "newcomer@example.com", "password": "newcomer-passphrase"},
            headers={"X-Workspace": workspace.slug},
        )
    )
    credential = Credential.objects.get(account_id=data["account"]["id"])
    assert credential.workspace == root_workspace()
    assert ok(owner.call("/credentials/list"))["credentials"] == []
    # outside the owner's workspace: not found, before the operators' rule is looked at
    # (docs/api.md#credentials)
    for change in ({"secret": ATTACKER_PASSWORD}, {"status": "active"}, {"new_provider_id": "mine"}, {}):
        response = owner.call("/credentials/update", ref(credential, **change))
        err(response, 404, "credential not found")
    ok(login("newcomer@example.com", "newcomer-passphrase"))
    err(login("newcomer@example.com", ATTACKER_PASSWORD), 401, "invalid credentials")


@pytest.mark.parametrize(
    "change",
    [
        {"secret": ATTACKER_PASSWORD},
        {"status": "active"},
        {"status": "revoked"},
        {"kind": "oauth"},
        {"provider": "idp_a"},
        {"new_provider_id": "attacker-sub"},
        {"new_email": "attacker@example.com"},
    ],
)
def test_a_root_member_holding_credentials_update_cannot_take_over_the_operator(member_of, root, change):
    """A root member whose role holds only `credentials:update` set the operator's password and became
    operator."""
    operator = AccountFactory(is_superuser=True, email="ops@example.com")
    credential = CredentialFactory(account=operator)
    _, member = member_of(root, "credentials:*")
    err(member.call("/credentials/update", ref(credential, **change)), 403, OPERATOR_ONLY)
    err(member.call("/credentials/delete", ref(credential)), 403, OPERATOR_ONLY)
    credential.refresh_from_db()
    assert (credential.status, credential.provider_id, credential.kind) == ("active", None, "password")
    ok(login("ops@example.com"))
    err(login("ops@example.com", ATTACKER_PASSWORD), 401, "invalid credentials")


def test_a_root_member_may_still_tag_a_credential(member_of, root, victim):
    _, member = member_of(root, "credentials:update", "credentials:describe")
    credential = victim.credentials.get()
    data = ok(
        member.call(
            "/credentials/update",
            ref(credential, tags=["reviewed"], meta={"schema_version": "1"}, last_used_at=None),
        )
    )
    assert data["tags"] == ["reviewed"] and data["status"] == "active"


def test_a_revoked_credential_stays_revoked_for_anyone_but_an_operator(member_of, root, operator, victim):
    """The pre-registration defence revokes a hijacker's password; re-activating it was a takeover."""
    credential = victim.credentials.get()
    ok(client_for(operator, root).call("/credentials/update", ref(credential, status="revoked")))
    _, member = member_of(root, "credentials:*")
    err(member.call("/credentials/update", ref(credential, status="active")), 403, OPERATOR_ONLY)
    err(login(victim.email), 401, "invalid credentials")
    ok(client_for(operator, root).call("/credentials/update", ref(credential, status="active")))
    ok(login(victim.email))


def test_oauth_initiate_ignores_x_workspace(api, settings, attacker_workspace):
    settings.IAM_IDP_A_CLIENT_ID = "iam"
    settings.IAM_IDP_A_CLIENT_SECRET = "s"
    settings.IAM_IDP_A_AUTHORIZE_URL = "https://idp.example.com/authorize"
    settings.IAM_IDP_A_TOKEN_URL = "https://idp.example.com/token"
    settings.IAM_IDP_A_USERINFO_URL = "https://idp.example.com/userinfo"
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example.com"]
    workspace, _, _ = attacker_workspace
    response = api.call(
        "/auth/oauth/idp_a/initiate",
        {"redirect_url": "https://app.example.com/cb"},
        headers={"X-Workspace": workspace.slug},
    )
    ok(response)
    from authn.models import OAuthState

    assert not any(field.name == "workspace" for field in OAuthState._meta.get_fields())


# Item 6: revocation gaps.


def test_enabling_a_disabled_account_does_not_revive_its_old_tokens(api, operator_api, victim):
    session = ok(login(victim.email))
    ok(operator_api.call("/accounts/update", {"id": str(victim.pk), "enabled": False}))
    ok(operator_api.call("/accounts/update", {"id": str(victim.pk), "enabled": True}))
    err(ApiClient(session["access_token"]).call("/accounts/describe", {"id": str(victim.pk)}), 401, AUTH)
    err(ApiClient(session["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    ok(login(victim.email))


def test_revoke_commits_the_version_and_its_event_together(member_of, victim, monkeypatch):
    """`/auth/revoke` bumped the session version and recorded `session.revoked` in two transactions: a
    failure recording the event left the version bumped with no event owed. Now both or neither."""
    member_of(None, "*", account=victim)  # a workspace whose clients are told
    session = ok(login(victim.email))
    before = Account.objects.get(pk=victim.pk).session_version
    from iam.platform import events

    def broken(*args, **kwargs):
        raise RuntimeError("event log unavailable")

    monkeypatch.setattr(events, "store", broken)
    with pytest.raises(RuntimeError):
        ApiClient(session["access_token"]).call("/auth/revoke")
    assert Account.objects.get(pk=victim.pk).session_version == before


# Item 7: a session ends IAM_REFRESH_TOKEN_DAYS after its login, whatever refreshes happen.


def forged(account: Account, *, type: str, auth_time: dt.datetime, jti: str | None = None) -> str:
    claims = access_claims(
        account,
        type=type,
        auth_time=int(auth_time.timestamp()),
        jti=jti or "00000000-0000-4000-8000-000000000001",
    )
    return jwt.encode(claims, settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")


def test_refresh_keeps_auth_time_and_never_outlives_the_login(victim):
    session = ok(login(victim.email))
    first = jwt.decode(session["access_token"], options={"verify_signature": False})
    renewed = ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))
    again = ok(ApiClient(renewed["access_token"]).call("/auth/refresh"))
    for token in (*renewed.values(), *again.values()):
        assert jwt.decode(token, options={"verify_signature": False})["auth_time"] == first["auth_time"]
    refresh = jwt.decode(again["refresh_token"], options={"verify_signature": False})
    assert refresh["exp"] <= first["auth_time"] + settings.IAM_REFRESH_TOKEN_LIFETIME.total_seconds()


def test_a_stolen_access_token_cannot_be_refreshed_past_the_session_lifetime(victim):
    """An access token refreshed every hour was an endless session: now refresh answers 401 once its
    login is IAM_REFRESH_TOKEN_DAYS old, even though the token itself has not expired."""
    lifetime = settings.IAM_REFRESH_TOKEN_LIFETIME
    long_ago = dt.datetime.now(dt.UTC) - lifetime - dt.timedelta(seconds=5)
    token = forged(victim, type="access", auth_time=long_ago)
    ok(ApiClient(token).call("/accounts/describe", {"id": str(victim.pk)}))  # still valid itself
    err(ApiClient(token).call("/auth/refresh"), 401, AUTH)
    recent = dt.datetime.now(dt.UTC) - lifetime + dt.timedelta(minutes=10)
    renewed = ok(ApiClient(forged(victim, type="access", auth_time=recent)).call("/auth/refresh"))
    access = jwt.decode(renewed["access_token"], options={"verify_signature": False})
    assert access["exp"] <= int((recent + lifetime).timestamp())  # capped at the session's end


# Item 8: the cached account is a narrow record, never the password hash.


def test_the_cached_account_holds_no_hash(victim):
    session = ok(login(victim.email))
    ok(ApiClient(session["access_token"]).call("/accounts/describe", {"id": str(victim.pk)}))
    cached = django_cache.get(account_key(victim.pk))
    assert cached is not None
    stored = pickle.dumps(cached)  # what the cache holds, byte for byte (a cached model carries its hash)
    password_hash = Account.objects.get(pk=victim.pk).password
    assert b"argon2" not in stored and password_hash.encode() not in stored
    assert victim.email.encode() in stored


# Item 10: OAuth login CSRF. The app's own query parameters (its nonce) come back on the redirect.


def test_redirect_url_query_survives_so_an_app_can_bind_the_login_to_its_session():
    from authn.oauth_state import with_query

    target = with_query("https://app.example.com/cb?nonce=n-123&access_token=forged", {"access_token": "t"})
    query = parse_qsl(urlsplit(target).query)
    assert ("nonce", "n-123") in query
    assert [value for key, value in query if key == "access_token"] == ["t"]  # never the caller's own
