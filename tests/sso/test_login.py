"""Login through a workspace's SSO connection (docs/api.md#sso), end to end through the HTTP API and a
stand-in OpenID provider on loopback: initiate -> the provider's /authorize -> our callback -> the client
app; and every takeover path the rules close."""

import socket
from urllib.parse import parse_qsl, urlsplit

import jwt
import pyotp
import pytest
import requests
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential, Session, Totp
from authn.oauth_state import begin
from iam.models import AuditEntry
from iam.platform import crypto
from rbac.models import Membership
from sso import services
from sso.models import SsoConnection
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    PASSWORD,
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)

from .conftest import connection_body
from .stand_ins import new_key

APP = "https://app.example.com/after-login?app_nonce=n1"
INITIATE = "/auth/sso/initiate"


@pytest.fixture(autouse=True)
def _public_urls(settings):
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example.com"]
    settings.IAM_PUBLIC_URL = "http://testserver"


def connect(admin, idp, *, verified=("acme.test",), unverified=(), roles=(), **overrides) -> SsoConnection:
    """A connection made through the API, its `verified` domains verified by an operator's word."""
    body = connection_body(
        idp, domains=[*verified, *unverified], default_role_ids=[str(role.pk) for role in roles], **overrides
    )
    connection = SsoConnection.objects.get(pk=ok(admin.call("/sso/create", body))["id"])
    for domain in verified:
        services.verify_domain(connection, domain, actor=None, by=services.BY_OPERATOR)
    return connection


def to_provider(api, **start) -> str:
    """Initiates and follows the provider's /authorize: the callback URL it sends the browser to."""
    start.setdefault("redirect_url", APP)
    url = ok(api.call(INITIATE, start))["authorization_url"]
    answer = requests.get(url, allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    return answer.headers["Location"]


def back_from_provider(api, callback_url: str) -> dict:
    parts = urlsplit(callback_url)
    assert parts.path == "/auth/sso/callback"
    response = api.get(f"{parts.path}?{parts.query}")
    assert response.status_code == 302
    assert response["Cache-Control"] == "no-store" and response["Referrer-Policy"] == "no-referrer"
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == "https://app.example.com/after-login"
    query = dict(parse_qsl(target.query))
    assert query.pop("app_nonce") == "n1"  # the app's own parameters are kept
    return query


def sso_login(api, **start) -> dict:
    return back_from_provider(api, to_provider(api, **start))


def test_login_by_email_creates_a_verified_member_with_the_default_roles(api, admin, idp, workspace):
    viewer = RoleFactory(workspace=workspace, name="viewer", permissions=["projects:list"])
    connection = connect(admin, idp, roles=[viewer])
    tokens = sso_login(api, email="Alice@ACME.test")
    assert set(tokens) == {"access_token"}
    account = Account.objects.get(email="alice@acme.test")
    assert account.verified and account.name == "Alice" and not account.has_usable_password()
    credential = Credential.objects.get(account=account)
    assert (credential.kind, credential.provider, credential.status) == ("sso", "idp_b", "active")
    assert credential.provider_id == f"{connection.pk}:user-1"
    membership = Membership.objects.get(account=account)
    assert (membership.workspace_id, membership.status, membership.scope) == (
        workspace.pk,
        "active",
        "workspace",
    )
    assert list(membership.roles.all()) == [viewer]
    user = ApiClient(tokens["access_token"], str(workspace.pk))
    assert ok(user.call("/projects/list", {}))["projects"] == []
    err(user.call("/roles/list", {}), 403, "missing permission roles:list")
    connection.refresh_from_db()
    assert connection.last_login_at is not None
    # PKCE S256, state and nonce went to the provider; the secret went by HTTP Basic.
    assert idp.token_auth == ["basic"]


def test_login_by_connection_and_a_returning_sub(api, admin, idp):
    connection = connect(admin, idp)
    first = sso_login(api, connection_id=str(connection.pk))
    idp.claims = {**idp.claims, "email": "alice.renamed@acme.test"}  # the same sub, a new address
    second = sso_login(api, connection_id=str(connection.pk))
    assert set(first) == set(second) == {"access_token"}
    assert Account.objects.count() == 2  # the admin and Alice, once
    assert not Account.objects.filter(email="alice.renamed@acme.test").exists()


def test_initiate_rules(api, admin, idp, workspace):
    connection = connect(admin, idp, unverified=("pending.test",))
    err(api.call(INITIATE, {"redirect_url": APP}), 400, "email or connection_id required")
    body = err(api.call(INITIATE, {"email": "a@acme.test", "redirect_url": "https://evil.example/x"}), 400,
               "redirect_url not allowed")  # fmt: skip
    assert body["field"] == "redirect_url"
    for email in ("a@pending.test", "a@nowhere.test", "a@sub.acme.test"):
        err(
            api.call(INITIATE, {"email": email, "redirect_url": APP}),
            404,
            "no sso connection for this domain",
        )
    err(api.call(INITIATE, {"connection_id": str(WorkspaceFactory().pk), "redirect_url": APP}), 404,
        "sso connection not found")  # fmt: skip
    ok(admin.call("/sso/update", {"id": str(connection.pk), "enabled": False}))
    err(
        api.call(INITIATE, {"email": "a@acme.test", "redirect_url": APP}),
        404,
        "no sso connection for this domain",
    )
    err(api.call(INITIATE, {"connection_id": str(connection.pk), "redirect_url": APP}), 404,
        "sso connection not found")  # fmt: skip


def test_the_authorization_url_carries_pkce_state_and_nonce(api, admin, idp):
    connect(admin, idp)
    url = ok(api.call(INITIATE, {"email": "a@acme.test", "redirect_url": APP}))["authorization_url"]
    query = dict(parse_qsl(urlsplit(url).query))
    assert url.startswith(f"{idp.issuer}/authorize?")
    assert query["response_type"] == "code" and query["client_id"] == idp.client_id
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert len(query["state"]) >= 32 and len(query["nonce"]) >= 32
    assert query["redirect_uri"] == "http://testserver/auth/sso/callback"
    assert set(query["scope"].split()) == {"openid", "email", "profile"}


# Takeover cases


def test_an_unverified_domain_links_nobody(api, admin, idp):
    connection = connect(admin, idp, verified=(), unverified=("acme.test",))
    victim = AccountFactory(email="alice@acme.test", verified=True)
    assert sso_login(api, connection_id=str(connection.pk)) == {"error": "sso_failed"}
    assert not Credential.objects.filter(kind="sso").exists()
    assert not Membership.objects.filter(account=victim).exists()


def test_an_address_outside_the_domains_fails(api, admin, idp):
    connection = connect(admin, idp)
    idp.claims = {**idp.claims, "email": "ceo@bank.test"}
    AccountFactory(email="ceo@bank.test", verified=True)
    assert sso_login(api, connection_id=str(connection.pk)) == {"error": "sso_failed"}
    assert Account.objects.filter(email="ceo@bank.test").count() == 1
    assert not Credential.objects.filter(kind="sso").exists()


def test_an_unverified_provider_address_fails(api, admin, idp):
    connect(admin, idp)
    idp.claims = {**idp.claims, "email_verified": False}
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Account.objects.filter(email="alice@acme.test").exists()


def test_a_squatter_account_loses_its_password_and_sessions(api, admin, idp, workspace):
    squatter = AccountFactory(email="alice@acme.test", verified=False)
    CredentialFactory(account=squatter)
    squatter_token = client_for(squatter)
    assert ok(api.call("/auth/login", {"email": "alice@acme.test", "password": PASSWORD}))
    connect(admin, idp)
    tokens = sso_login(api, email="alice@acme.test")
    assert set(tokens) == {"access_token"}
    squatter.refresh_from_db()
    assert squatter.verified and not squatter.has_usable_password()
    err(
        api.call("/auth/login", {"email": "alice@acme.test", "password": PASSWORD}),
        401,
        "invalid credentials",
    )
    err(squatter_token.call("/auth/refresh"), 401)
    assert Credential.objects.get(account=squatter, kind="password").status == "revoked"
    assert Membership.objects.get(account=squatter).workspace_id == workspace.pk


def test_a_verified_account_is_linked_and_keeps_its_password(api, admin, idp):
    owner = AccountFactory(email="alice@acme.test", verified=True)
    CredentialFactory(account=owner)
    connect(admin, idp)
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    assert ok(api.call("/auth/login", {"email": "alice@acme.test", "password": PASSWORD}))
    assert Credential.objects.filter(account=owner, kind="sso").count() == 1


def test_a_state_works_once(api, admin, idp):
    connect(admin, idp)
    callback = to_provider(api, email="alice@acme.test")
    assert set(back_from_provider(api, callback)) == {"access_token"}
    assert back_from_provider(api, callback) == {"error": "invalid_state"}


def test_an_unknown_state_or_one_of_idp_a_is_invalid(api, admin, idp, settings):
    connect(admin, idp)
    response = api.get("/auth/sso/callback?code=x&state=forged")
    assert response.status_code == 302
    assert dict(parse_qsl(urlsplit(response["Location"]).query)) == {"error": "invalid_state"}
    started = begin(Credential.Provider.IDP_A, redirect_url=APP)
    response = api.get(f"/auth/sso/callback?code=x&state={started.state}")
    assert dict(parse_qsl(urlsplit(response["Location"]).query)) == {"error": "invalid_state"}


@pytest.mark.parametrize(
    "overrides",
    [
        {"nonce": "another-login"},
        {"nonce": None},
        {"aud": "someone-else"},
        {"aud": ["someone-else", "iam-sso"]},  # several audiences, without our azp
        {"iss": "https://impostor.example.com"},
        {"exp": 1_000_000_000},
    ],
    ids=["wrong-nonce", "no-nonce", "wrong-audience", "several-audiences", "wrong-issuer", "expired"],
)
def test_an_id_token_that_fails_a_check_fails_the_login(api, admin, idp, overrides):
    connect(admin, idp)
    idp.id_token_overrides = overrides
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Account.objects.filter(email="alice@acme.test").exists()


def test_a_token_signed_by_another_key_fails(api, admin, idp):
    connect(admin, idp)
    idp.signing_key = new_key()
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Account.objects.filter(email="alice@acme.test").exists()


def test_the_provider_refusing_the_code_fails(api, admin, idp):
    connection = connect(admin, idp)
    SsoConnection.objects.filter(pk=connection.pk).update(
        client_secret_encrypted=services.crypto.encrypt("a-wrong-secret")
    )
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}


def test_a_jwks_uri_on_a_refused_address_is_never_fetched(api, admin, idp, settings, monkeypatch):
    """The keys go through the address guard like every other request to the provider: the token
    endpoint's host resolves to a public address (stood in for by the provider on loopback), the JWKS
    host to the cloud metadata address."""
    connection = connect(admin, idp)
    port = urlsplit(idp.issuer).port
    SsoConnection.objects.filter(pk=connection.pk).update(
        token_endpoint=f"http://idp.example.com:{port}/token", jwks_uri=f"http://keys.example.com:{port}/jwks"
    )
    answers = {"idp.example.com": "93.184.216.34", "keys.example.com": "169.254.169.254"}
    system = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return system(host, port, *args, **kwargs)

    connected, connect_to = [], socket.create_connection

    def to_stand_in(address, *args, **kwargs):
        connected.append(address[0])
        return connect_to(("127.0.0.1", address[1]), *args, **kwargs)

    callback = to_provider(api, email="alice@acme.test")
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket, "create_connection", to_stand_in)
    settings.IAM_WEBHOOK_ALLOW_PRIVATE = False
    assert back_from_provider(api, callback) == {"error": "sso_failed"}
    assert connected == ["93.184.216.34"]  # the token endpoint, answered; nothing else connected to
    assert "/jwks" not in idp.requests and not Account.objects.filter(email="alice@acme.test").exists()


def test_a_connection_disabled_meanwhile_fails(api, admin, idp):
    connection = connect(admin, idp)
    callback = to_provider(api, email="alice@acme.test")
    ok(admin.call("/sso/update", {"id": str(connection.pk), "enabled": False}))
    assert back_from_provider(api, callback) == {"error": "sso_failed"}


def test_a_disabled_account_fails(api, admin, idp):
    AccountFactory(email="alice@acme.test", verified=True, enabled=False)
    connect(admin, idp)
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Credential.objects.filter(kind="sso").exists()


def test_the_email_may_come_from_userinfo(api, admin, idp):
    connect(admin, idp)
    idp.email_in_id_token = False
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    assert Account.objects.get(email="alice@acme.test").verified


def test_client_secret_post_when_the_provider_takes_only_that(api, admin, idp):
    idp.discovery = {**idp.discovery, "token_endpoint_auth_methods_supported": ["client_secret_post"]}
    connect(admin, idp)
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    assert idp.token_auth == ["post"]


def test_memberships_kept_accepted_or_left_suspended(api, admin, idp, workspace):
    viewer = RoleFactory(workspace=workspace, name="viewer", permissions=["projects:list"])
    connect(admin, idp, roles=[viewer])
    invited = AccountFactory(email="alice@acme.test", verified=True)
    membership = MembershipFactory(account=invited, workspace=workspace, status="invited", roles=[])
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    membership.refresh_from_db()
    assert membership.status == "active" and membership.accepted_at is not None
    assert list(membership.roles.all()) == [viewer]
    suspended = AccountFactory(email="bob@acme.test", verified=True)
    kept = MembershipFactory(account=suspended, workspace=workspace, status="suspended", roles=[])
    idp.claims = {"sub": "user-2", "email": "bob@acme.test", "email_verified": True}
    assert set(sso_login(api, email="bob@acme.test")) == {"access_token"}
    kept.refresh_from_db()
    assert kept.status == "suspended" and list(kept.roles.all()) == []


def test_two_workspaces_with_their_own_connections_and_domains(
    api, admin, idp, other_idp, workspace, member_of
):
    beta = WorkspaceFactory()
    _, beta_admin = member_of(beta, "*")
    acme = connect(admin, idp)
    beta_connection = connect(beta_admin, other_idp, verified=("beta.test",))
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    other_idp.claims = {"sub": "b-1", "email": "bob@beta.test", "email_verified": True}
    assert set(sso_login(api, email="bob@beta.test")) == {"access_token"}
    alice = Account.objects.get(email="alice@acme.test")
    bob = Account.objects.get(email="bob@beta.test")
    assert list(Membership.objects.filter(account=alice).values_list("workspace_id", flat=True)) == [
        workspace.pk
    ]
    assert list(Membership.objects.filter(account=bob).values_list("workspace_id", flat=True)) == [beta.pk]
    # Beta's provider cannot vouch for an address of Acme's domain: no link, no membership in beta.
    other_idp.claims = {"sub": "b-2", "email": "alice@acme.test", "email_verified": True}
    assert sso_login(api, connection_id=str(beta_connection.pk)) == {"error": "sso_failed"}
    assert list(Membership.objects.filter(account=alice).values_list("workspace_id", flat=True)) == [
        workspace.pk
    ]
    # The same sub at two connections is two identities.
    other_idp.claims = {"sub": "user-1", "email": "carol@beta.test", "email_verified": True}
    assert set(sso_login(api, email="carol@beta.test")) == {"access_token"}
    assert (
        Credential.objects.get(provider_id=f"{beta_connection.pk}:user-1").account.email == "carol@beta.test"
    )
    assert Credential.objects.get(provider_id=f"{acme.pk}:user-1").account == alice


def test_an_account_with_totp_gets_an_mfa_token_then_a_session_of_fed_otp_mfa(api, admin, idp):
    connection = connect(admin, idp)
    alice = AccountFactory(email="alice@acme.test", verified=True)
    secret = pyotp.random_base32()
    Totp.objects.create(account=alice, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    query = sso_login(api, connection_id=str(connection.pk))
    assert set(query) == {"mfa_token"}
    assert not Session.objects.filter(account=alice).exists()
    err(ApiClient(query["mfa_token"]).call("/sessions/list"), 401)
    data = ok(
        api.call("/auth/mfa/verify", {"mfa_token": query["mfa_token"], "code": pyotp.TOTP(secret).now()})
    )
    assert data["account"]["id"] == str(alice.pk)
    assert jwt.decode(data["access_token"], options={"verify_signature": False})["amr"] == [
        "fed",
        "otp",
        "mfa",
    ]


def test_a_connection_that_trusts_its_providers_mfa_skips_the_totp_step_only_through_itself(
    api, admin, idp, other_idp, member_of
):
    """Off by default and answered; on, an account with TOTP logging in through that connection gets a
    session at once (amr `fed`), while another workspace's connection, which does not trust its provider,
    still asks for the code. The change is an audit entry; another workspace cannot turn it on."""
    connection = connect(admin, idp)
    assert ok(admin.call("/sso/describe", {"id": str(connection.pk)}))["trust_provider_mfa"] is False
    beta = WorkspaceFactory()
    _, beta_admin = member_of(beta, "*")
    beta_connection = connect(beta_admin, other_idp, verified=("beta.test",))
    err(beta_admin.call("/sso/update", {"id": str(connection.pk), "trust_provider_mfa": True}), 404)
    alice = AccountFactory(email="alice@acme.test", verified=True)
    secret = pyotp.random_base32()
    Totp.objects.create(account=alice, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    assert set(sso_login(api, connection_id=str(connection.pk))) == {"mfa_token"}

    updated = ok(admin.call("/sso/update", {"id": str(connection.pk), "trust_provider_mfa": True}))
    assert updated["trust_provider_mfa"] is True
    entry = AuditEntry.objects.filter(action="ssoconnection.update", resource_id=str(connection.pk)).latest(
        "occurred_at"
    )
    assert entry.changes["trust_provider_mfa"] == {"before": False, "after": True}
    query = sso_login(api, connection_id=str(connection.pk))
    assert set(query) == {"access_token"}
    assert jwt.decode(query["access_token"], options={"verify_signature": False})["amr"] == ["fed"]

    # Beta's connection still asks the same account for its code.
    other_idp.claims = {"sub": "a-1", "email": "alice@beta.test", "email_verified": True}
    bob = AccountFactory(email="alice@beta.test", verified=True)
    Totp.objects.create(account=bob, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    assert set(sso_login(api, connection_id=str(beta_connection.pk))) == {"mfa_token"}
