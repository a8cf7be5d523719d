"""The OpenID Provider's test world: two workspaces and two accounts, a first-party application of the
root workspace and a third-party one of a tenant's, and the steps of a sign-in (a browser session made
directly, an authorization request with PKCE, the code exchange)."""

import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from django.conf import settings
from django.http import HttpResponse
from django.test import Client

from authn import browser, keys
from authn import sessions as authn_sessions
from authn.models import Session
from oidc import services
from oidc.models import Application
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)


@dataclass
class App:
    application: Application
    secret: str | None
    redirect_uri: str

    @property
    def client_id(self) -> str:
        return self.application.client_id


@dataclass
class World:
    root: object
    acme: object  # a tenant: its application is third party
    globex: object
    alice: object  # active member of acme and globex
    bob: object  # active member of globex only
    portal: App  # first party (root), web
    portal_spa: App  # first party (root), spa
    crm: App  # third party (acme), web
    globex_app: App  # third party (globex), web


def make_app(workspace, name: str, kind: str = "web", **fields) -> App:
    host = name.lower().replace(" ", "-")
    uri = fields.pop("redirect_uri", f"https://{host}.example.com/cb")
    application, secret = services.create_application(
        workspace,
        actor=None,
        name=name,
        type=kind,
        redirect_uris=[uri],
        post_logout_redirect_uris=[f"https://{host}.example.com/bye"],
        tags=[],
        meta={"schema_version": "1"},
        **fields,
    )
    return App(application, secret, uri)


def member(account, workspace):
    MembershipFactory(account=account, workspace=workspace, roles=[RoleFactory(workspace=workspace)])


@pytest.fixture
def world(root) -> World:
    acme = WorkspaceFactory(name="Acme", slug="acme")
    globex = WorkspaceFactory(name="Globex", slug="globex")
    alice = AccountFactory(
        email="alice@example.com", name="Alice", avatar_url="https://pics.example.com/a.png"
    )
    bob = AccountFactory(email="bob@example.com", name="Bob")
    for account in (alice, bob):
        CredentialFactory(account=account)
    member(alice, acme)
    member(alice, globex)
    member(bob, globex)
    return World(
        root=root,
        acme=acme,
        globex=globex,
        alice=alice,
        bob=bob,
        portal=make_app(root, "Portal"),
        portal_spa=make_app(root, "Portal SPA", "spa"),
        crm=make_app(acme, "Acme CRM"),
        globex_app=make_app(globex, "Globex Wiki"),
    )


def sign_in(client: Client, account, *, amr=("pwd",), sso_workspace_id=None) -> Session:
    """A browser session made directly (the hosted sign-in pages make it the same way), its cookie given
    to `client`."""
    session = authn_sessions.open_browser_session(account, amr=list(amr), sso_workspace_id=sso_workspace_id)
    response = HttpResponse()
    browser.start_browser_session(response, session)
    client.cookies[browser.COOKIE] = response.cookies[browser.COOKIE].value
    return session


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


@dataclass
class Request:
    """One authorization request, and what its answer comes back with."""

    app: App
    verifier: str
    params: dict


def request_for(app: App, **params) -> Request:
    verifier, challenge = pkce()
    defaults = {
        "response_type": "code",
        "client_id": app.client_id,
        "redirect_uri": app.redirect_uri,
        "scope": "openid email profile offline_access",
        "state": "state-123",
        "nonce": "nonce-456",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    merged = {**defaults, **params}
    return Request(app, verifier, {name: value for name, value in merged.items() if value is not None})


def authorize(client: Client, app: App, **params):
    asked = request_for(app, **params)
    return asked, client.get("/oauth2/authorize", asked.params)


def redirected_to(response) -> tuple[str, dict]:
    """The Location's URL without query, and its query as a dict of single values."""
    assert response.status_code == 302, response.content[:500]
    parts = urlsplit(response["Location"])
    query = {name: values[0] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
    return f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.scheme else parts.path, query


def code_of(response, asked: Request) -> str:
    where, query = redirected_to(response)
    assert where == asked.app.redirect_uri, response["Location"]
    assert query["state"] == asked.params["state"]
    assert query["iss"] == settings.IAM_PUBLIC_URL
    assert "error" not in query, query
    return query["code"]


def basic(app: App) -> dict:
    credentials = base64.b64encode(f"{app.client_id}:{app.secret}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {credentials}"}


def exchange(client: Client, asked: Request, code: str, **form):
    """The code exchange as the application sends it: a web application with HTTP Basic, a public one
    with its client_id."""
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": asked.app.redirect_uri,
        "code_verifier": asked.verifier,
        **form,
    }
    extra = {}
    if asked.app.secret is None:
        body.setdefault("client_id", asked.app.client_id)
    else:
        extra = basic(asked.app)
    body = {name: value for name, value in body.items() if value is not None}
    return client.post("/oauth2/token", body, **extra)


def signed_in_tokens(client: Client, app: App, account, **params) -> dict:
    """A whole sign-in: the browser session, the authorization, the exchange; the token answer."""
    sign_in(client, account)
    asked, response = authorize(client, app, **params)
    answer = exchange(Client(), asked, code_of(response, asked))
    assert answer.status_code == 200, answer.content
    return answer.json()


def id_token_claims(id_token: str, app: App) -> dict:
    """The ID token verified as a relying party verifies it: RS256 against the JWKS, its issuer and
    audience."""
    kid = jwt.get_unverified_header(id_token)["kid"]
    [jwk] = [key for key in keys.published_keys() if key["kid"] == kid]
    public = jwt.algorithms.RSAAlgorithm.from_jwk(jwk)
    return jwt.decode(
        id_token, public, algorithms=["RS256"], audience=app.client_id, issuer=settings.IAM_PUBLIC_URL
    )
