"""OAuth login with idp_a (docs/api.md#oauth-login), driven end to end through a real stand-in
provider on loopback: initiate -> the provider's /authorize -> our callback -> the client app."""

import base64
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import jwt
import pytest
import requests
from django.test import Client, override_settings
from django.utils import timezone

from accounts.models import Account
from authn import oauth_provider
from authn.models import Credential, OAuthState
from iam.platform import crypto
from tenancy.workspace_cache import root_workspace
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

APP = "https://app.example.com/after-login"
ALLOWLIST = ["https://app.example.com", "http://localhost:3000"]
CLIENT_ID = "iam-client"
CLIENT_SECRET = "s3cret-of-the-client"
INITIATE = "/auth/oauth/idp_a/initiate"
CALLBACK = "/auth/oauth/idp_a/callback"


class StandInProvider:
    """A minimal OpenID Connect provider: authorization code with PKCE S256, client_secret_basic or
    client_secret_post, Bearer user-info. Tests set `claims`, `token_error`, `userinfo_body`, `delay`
    (before the token answer), `userinfo_delay`, `drip` (seconds between the bytes of the user-info
    answer)."""

    def __init__(self):
        self.claims = {
            "sub": "idp-user-1",
            "email": "Alice@Example.com",
            "email_verified": True,
            "name": "Alice Liddell",
            "picture": "https://cdn.example.com/alice.png",
        }
        self.token_error: str | None = None
        self.userinfo_body: bytes | None = None
        self.delay = 0.0
        self.userinfo_delay = 0.0
        self.drip = 0.0
        self.granted_scope: str | None = None
        self.codes: dict[str, dict] = {}
        self.access_tokens: set[str] = set()
        self.token_requests = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path == "/authorize":
                    provider.authorize(self, dict(parse_qsl(parts.query)))
                elif parts.path == "/userinfo":
                    provider.userinfo(self)
                else:
                    provider.answer(self, 404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if urlsplit(self.path).path == "/token":
                    provider.token(self, form)
                else:
                    provider.answer(self, 404, {"error": "not_found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def answer(handler, status: int, body, headers: dict | None = None, drip: float = 0.0):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        if not drip:
            handler.wfile.write(raw)
            return
        handler.wfile.flush()
        for index in range(len(raw)):
            handler.wfile.write(raw[index : index + 1])
            handler.wfile.flush()
            time.sleep(drip)

    def authorize(self, handler, query: dict):
        if (
            query.get("response_type") != "code"
            or query.get("client_id") != CLIENT_ID
            or not query.get("redirect_uri")
            or not query.get("state")
            or not query.get("code_challenge")
            or query.get("code_challenge_method") != "S256"
        ):
            return self.answer(handler, 400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"challenge": query["code_challenge"], "redirect_uri": query["redirect_uri"]}
        location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _client_authenticated(self, handler, form: dict) -> bool:
        header = handler.headers.get("Authorization", "")
        if header.startswith("Basic "):
            pair = base64.b64decode(header[6:]).decode()
            return pair == f"{CLIENT_ID}:{CLIENT_SECRET}"
        return form.get("client_id") == CLIENT_ID and form.get("client_secret") == CLIENT_SECRET

    def token(self, handler, form: dict):
        self.token_requests += 1
        time.sleep(self.delay)
        if self.token_error:
            return self.answer(handler, 400, {"error": self.token_error})
        if not self._client_authenticated(handler, form):
            return self.answer(handler, 401, {"error": "invalid_client"})
        grant = self.codes.pop(form.get("code", ""), None)  # codes are single-use
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if (
            form.get("grant_type") != "authorization_code"
            or grant is None
            or form.get("redirect_uri") != grant["redirect_uri"]
            or digest != grant["challenge"]
        ):
            return self.answer(handler, 400, {"error": "invalid_grant"})
        access_token = secrets.token_urlsafe(24)
        self.access_tokens.add(access_token)
        body = {"access_token": access_token, "token_type": "Bearer", "expires_in": 3600}
        if self.granted_scope:
            body["scope"] = self.granted_scope
        self.answer(handler, 200, body, {"Cache-Control": "no-store"})

    def userinfo(self, handler):
        time.sleep(self.userinfo_delay)
        header = handler.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or header[7:] not in self.access_tokens:
            return self.answer(handler, 401, {"error": "invalid_token"})
        if self.userinfo_body is not None:
            return self.answer(handler, 200, self.userinfo_body)
        self.answer(handler, 200, self.claims, drip=self.drip)


@pytest.fixture
def provider():
    stand_in = StandInProvider()
    yield stand_in
    stand_in.stop()


def provider_settings(base: str) -> dict:
    return {
        "IAM_IDP_A_CLIENT_ID": CLIENT_ID,
        "IAM_IDP_A_CLIENT_SECRET": CLIENT_SECRET,
        "IAM_IDP_A_AUTHORIZE_URL": f"{base}/authorize",
        "IAM_IDP_A_TOKEN_URL": f"{base}/token",
        "IAM_IDP_A_USERINFO_URL": f"{base}/userinfo",
        "IAM_IDP_A_SCOPE": "openid email profile",
        "IAM_PUBLIC_URL": "http://testserver",
        "IAM_OAUTH_REDIRECT_ALLOWLIST": ALLOWLIST,
    }


@pytest.fixture
def configured(provider, root):
    with override_settings(**provider_settings(provider.base)):
        yield provider


def initiate(api, redirect_url: str = APP, **headers) -> str:
    return ok(api.call(INITIATE, {"redirect_url": redirect_url}, headers=headers))["auth_url"]


def authorize(auth_url: str) -> str:
    """The browser at the provider: answers our callback's path and query from the provider's 302."""
    response = requests.get(auth_url, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    location = urlsplit(response.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"http://testserver{CALLBACK}"
    return f"{location.path}?{location.query}"


def callback(api, path: str) -> tuple[str, dict]:
    """Our callback: answers the redirect's target (without the query) and its query parameters."""
    response = api.get(path)
    assert response.status_code == 302, response.content
    target = urlsplit(response["Location"])
    return f"{target.scheme}://{target.netloc}{target.path}", dict(parse_qsl(target.query))


def sign_in(api, redirect_url: str = APP, **headers) -> dict:
    target, query = callback(api, authorize(initiate(api, redirect_url, **headers)))
    assert target == redirect_url.split("?")[0]
    return query


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def describe(token: str, account_id) -> dict:
    return ok(ApiClient(token).call("/accounts/describe", {"id": str(account_id)}))


# success


def test_new_account_is_created_and_signed_in(api, configured, root, caplog):
    caplog.set_level(logging.DEBUG)
    auth_url = initiate(api)
    query = parse_qs(urlsplit(auth_url).query)
    assert auth_url.startswith(f"{configured.base}/authorize?")
    assert query["client_id"] == [CLIENT_ID]
    assert query["redirect_uri"] == [f"http://testserver{CALLBACK}"]
    assert query["scope"] == ["openid email profile"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["state"][0]) >= 43
    callback_path = authorize(auth_url)
    caplog.clear()  # the stand-in browser's own request logs the URL; what follows is the service

    target, tokens = callback(api, callback_path)

    assert target == APP
    assert set(tokens) == {"access_token"}
    account = Account.objects.get(email="alice@example.com")
    assert (
        describe(tokens["access_token"], account.pk).items()
        >= {
            "email": "alice@example.com",
            "name": "Alice Liddell",
            "verified": True,
            "enabled": True,
        }.items()
    )
    assert account.avatar_url == "https://cdn.example.com/alice.png"
    assert not account.has_usable_password()
    credential = Credential.objects.get(account=account)
    assert (credential.kind, credential.provider, credential.provider_id, credential.status) == (
        "oauth",
        "idp_a",
        "idp-user-1",
        "active",
    )
    assert credential.workspace == root and credential.email == "alice@example.com"
    assert credential.last_used_at is not None
    # No refresh token in the URL: the app trades the access token for a pair of the same session, and
    # that refresh token is a real one.
    paired = ok(ApiClient(tokens["access_token"]).call("/auth/refresh"))
    assert set(paired) == {"access_token", "refresh_token"}
    assert claims_of(paired["refresh_token"])["sid"] == claims_of(tokens["access_token"])["sid"]
    refreshed = ok(ApiClient(paired["refresh_token"]).call("/auth/refresh"))
    describe(refreshed["access_token"], account.pk)
    # neither the code, the state, the verifier nor any token reaches the log
    code, state = (parse_qs(urlsplit(callback_path).query)[k][0] for k in ("code", "state"))
    for secret in (code, state, tokens["access_token"], *configured.access_tokens):
        assert secret not in caplog.text


def test_state_is_kept_as_a_digest_and_the_verifier_encrypted(api, configured):
    state = parse_qs(urlsplit(initiate(api)).query)["state"][0]
    row = OAuthState.objects.get()
    assert row.state_digest == hashlib.sha256(state.encode()).hexdigest()
    assert state not in row.state_digest and len(row.code_verifier) > 64
    assert row.expires_at - row.created_at == pytest.approx(timedelta(minutes=10), abs=timedelta(seconds=1))
    assert row.redirect_url == APP and row.used_at is None


def test_returning_sub_finds_its_account(api, configured):
    first = sign_in(api)
    account = Account.objects.get(email="alice@example.com")
    configured.claims = {**configured.claims, "email": "alice.new@example.com", "name": "Other"}

    second = sign_in(api)

    assert Account.objects.count() == 1 and Credential.objects.count() == 1
    assert describe(second["access_token"], account.pk)["email"] == "alice@example.com"
    assert first["access_token"] != second["access_token"]


def test_new_account_from_an_unverified_provider_email_stays_unverified(api, configured):
    configured.claims = {**configured.claims, "email_verified": False}
    tokens = sign_in(api)
    account = Account.objects.get(email="alice@example.com")
    assert describe(tokens["access_token"], account.pk)["verified"] is False


def test_name_defaults_to_the_local_part_and_a_bad_picture_is_dropped(api, configured):
    configured.claims = {"sub": "x-1", "email": "bob@example.com", "email_verified": True, "picture": "nope"}
    sign_in(api)
    account = Account.objects.get(email="bob@example.com")
    assert (account.name, account.avatar_url) == ("bob", None)


def test_the_credential_is_the_root_workspaces_whatever_x_workspace_says(api, configured):
    """docs/api.md#the-root-workspace: `X-Workspace` on the initiate is ignored (it once let a tenant hold the
    credential and so the account)."""
    workspace = WorkspaceFactory()
    sign_in(api, **{"X-Workspace": workspace.slug})
    assert Credential.objects.get(provider_id="idp-user-1").workspace == root_workspace()
    ok(api.call(INITIATE, {"redirect_url": APP}, headers={"X-Workspace": "nowhere"}))


def test_redirect_url_with_a_query_and_fragment_keeps_them(api, configured):
    auth_url = initiate(api, "http://localhost:3000/cb?next=%2Fhome&lang=en#top")
    response = api.get(authorize(auth_url))
    target = urlsplit(response["Location"])
    assert (target.scheme, target.netloc, target.path) == ("http", "localhost:3000", "/cb")
    assert target.fragment == "top"
    query = dict(parse_qsl(target.query))
    assert query["next"] == "/home" and query["lang"] == "en"
    assert {"access_token"} <= set(query)
    assert response["Cache-Control"] == "no-store" and response["Referrer-Policy"] == "no-referrer"


# linking (docs/api.md#oauth-login)


def test_verified_provider_email_links_to_the_existing_verified_account(api, configured, root):
    account = AccountFactory(email="alice@example.com", verified=True)
    password = CredentialFactory(account=account, workspace=root)

    tokens = sign_in(api)

    assert describe(tokens["access_token"], account.pk)["id"] == str(account.pk)
    assert Account.objects.count() == 1
    oauth_credential = Credential.objects.get(account=account, kind="oauth")
    assert oauth_credential.provider_id == "idp-user-1" and oauth_credential.status == "active"
    password.refresh_from_db()
    assert password.status == "active"
    ok(api.call("/auth/login", {"email": account.email, "password": PASSWORD}))


def test_provider_granting_another_scope_still_signs_in(api, configured):
    configured.granted_scope = "openid https://www.example.com/auth/userinfo.email"
    assert set(sign_in(api)) == {"access_token"}


def test_unverified_provider_email_never_links(api, configured, root):
    account = AccountFactory(email="alice@example.com", verified=True)
    configured.claims = {**configured.claims, "email_verified": False}

    assert sign_in(api) == {"error": "oauth_failed"}

    assert not Credential.objects.filter(account=account).exists()
    assert Account.objects.count() == 1


def test_pre_registration_hijack_is_defeated(api, configured, root):
    """Someone registered the victim's address with their own password before the victim arrived with a
    verified provider e-mail: the squatter's password and sessions end."""
    squatting = {"email": "alice@example.com", "password": "squatters-password"}
    squatter = ok(api.call("/auth/register", squatting))
    old_token = squatter["access_token"]
    account_id = squatter["account"]["id"]
    describe(old_token, account_id)

    tokens = sign_in(api)

    account = Account.objects.get(pk=account_id)
    assert account.verified is True
    assert Credential.objects.get(account=account, kind="password").status == "revoked"
    err(ApiClient(old_token).call("/accounts/describe", {"id": account_id}), 401)
    err(ApiClient(squatter["refresh_token"]).call("/auth/refresh"), 401)
    err(api.call("/auth/login", squatting), 401, "invalid credentials")
    assert describe(tokens["access_token"], account_id)["verified"] is True


def test_hijack_defence_also_ends_an_identity_with_an_unverified_email(api, configured):
    configured.claims = {"sub": "squatter", "email": "alice@example.com", "email_verified": False}
    squatter = sign_in(api)
    account = Account.objects.get(email="alice@example.com")
    configured.claims = {"sub": "alice", "email": "alice@example.com", "email_verified": True}

    alice = sign_in(api)

    assert describe(alice["access_token"], account.pk)["verified"] is True
    err(ApiClient(squatter["access_token"]).call("/accounts/describe", {"id": str(account.pk)}), 401)
    configured.claims = {"sub": "squatter", "email": "alice@example.com", "email_verified": False}
    assert sign_in(api) == {"error": "oauth_failed"}
    statuses = dict(Credential.objects.values_list("provider_id", "status"))
    assert statuses == {"squatter": "revoked", "alice": "active"}


def test_disabled_account_gets_no_tokens_when_linking(api, configured, root):
    account = AccountFactory(email="alice@example.com", verified=False, enabled=False)
    CredentialFactory(account=account, workspace=root, status="pending")

    assert sign_in(api) == {"error": "oauth_failed"}

    account.refresh_from_db()
    assert account.verified is False and not Credential.objects.filter(kind="oauth").exists()
    assert Credential.objects.get(account=account).status == "pending"


def test_disabled_account_gets_no_tokens_when_returning(api, configured):
    sign_in(api)
    Account.objects.filter(email="alice@example.com").update(enabled=False)
    assert sign_in(api) == {"error": "oauth_failed"}


def test_revoked_oauth_credential_gets_no_tokens(api, configured):
    sign_in(api)
    Credential.objects.filter(kind="oauth").update(status="revoked")
    assert sign_in(api) == {"error": "oauth_failed"}


# state (docs/api.md#oauth-login: single use)


def test_expired_state_is_refused(api, configured):
    path = authorize(initiate(api))
    OAuthState.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert callback(api, path) == (APP, {"error": "invalid_state"})
    assert configured.token_requests == 0 and not Account.objects.exists()


def test_state_works_once(api, configured):
    path = authorize(initiate(api))
    callback(api, path)

    assert callback(api, path) == (APP, {"error": "invalid_state"})
    assert configured.token_requests == 1


def test_forged_state_goes_to_the_first_allowed_origin(api, configured):
    path = authorize(initiate(api))
    code = parse_qs(urlsplit(path).query)["code"][0]

    forged = callback(api, f"{CALLBACK}?{urlencode({'code': code, 'state': secrets.token_urlsafe(32)})}")
    assert forged == ("https://app.example.com", {"error": "invalid_state"})
    assert callback(api, f"{CALLBACK}?code={code}") == ("https://app.example.com", {"error": "invalid_state"})
    assert configured.token_requests == 0


def test_redirect_url_removed_from_the_allowlist_meanwhile_is_not_used(api, configured):
    path = authorize(initiate(api))
    with override_settings(IAM_OAUTH_REDIRECT_ALLOWLIST=["http://localhost:3000"]):
        assert callback(api, path) == ("http://localhost:3000", {"error": "invalid_state"})
    assert configured.token_requests == 0


def test_callback_answers_only_get(api, configured):
    """CSRF protection (for the admin's cookie session) once answered a POST here 403: it is enforced, as
    for a browser, and the answer is 405 all the same."""
    for client in (api, Client(enforce_csrf_checks=True)):
        response = client.post(CALLBACK)
        err(response, 405, "use GET")
        assert response["Allow"] == "GET"


# the provider fails


def test_provider_error_on_the_token_exchange(api, configured):
    configured.token_error = "invalid_grant"
    assert sign_in(api) == {"error": "oauth_failed"}
    assert not Account.objects.exists()


def test_wrong_pkce_verifier_is_refused_by_the_provider(api, configured):
    path = authorize(initiate(api))
    row = OAuthState.objects.get()
    row.code_verifier = crypto.encrypt("x" * 64)
    row.save()
    assert callback(api, path) == (APP, {"error": "oauth_failed"})


def test_provider_answering_an_error_instead_of_a_code(api, configured):
    state = parse_qs(urlsplit(initiate(api)).query)["state"][0]
    path = f"{CALLBACK}?{urlencode({'error': 'access_denied', 'state': state})}"
    assert callback(api, path) == (APP, {"error": "oauth_failed"})


def test_provider_down(api, configured):
    path = authorize(initiate(api))
    configured.stop()
    assert callback(api, path) == (APP, {"error": "oauth_failed"})


def test_provider_too_slow(api, configured, monkeypatch):
    monkeypatch.setattr(oauth_provider, "PROVIDER_TIMEOUT_SECONDS", 0.1)
    configured.delay = 0.5
    assert sign_in(api) == {"error": "oauth_failed"}


def test_the_providers_two_calls_share_one_budget(api, configured, settings):
    """The token and the user-info answer each well within a call's own timeout; together, past the
    request's network budget (docs/api.md#waiting-on-the-network)."""
    configured.delay = configured.userinfo_delay = 0.8
    settings.IAM_NETWORK_BUDGET_SECONDS = 1.2
    assert sign_in(api) == {"error": "oauth_failed"}
    settings.IAM_NETWORK_BUDGET_SECONDS = 5
    assert set(sign_in(api)) == {"access_token"}


def test_a_provider_dripping_its_answer_is_cut_at_the_budget(api, configured, settings):
    """Each byte comes well within a socket's timeout, the whole answer well past the budget: the
    budget bounds the call, not each read."""
    configured.drip = 0.02  # about 150 bytes: 3 s
    settings.IAM_NETWORK_BUDGET_SECONDS = 1
    assert sign_in(api) == {"error": "oauth_failed"}


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'{"email": "a@example.com"}', b'{"sub": 7, "email": "a@example.com"}'],
)
def test_bad_user_info(api, configured, body):
    configured.userinfo_body = body
    assert sign_in(api) == {"error": "oauth_failed"}
    assert not Account.objects.exists()


def test_user_info_without_an_email_creates_nothing(api, configured):
    configured.claims = {"sub": "idp-user-1", "email_verified": True}
    assert sign_in(api) == {"error": "oauth_failed"}
    assert not Account.objects.exists()


# initiate's validation and configuration


def test_redirect_url_required(api, configured):
    err(api.call(INITIATE, {}), 400, "redirect_url required")
    err(api.call(INITIATE, {"redirect_url": ""}), 400, "redirect_url required")
    err(api.call(INITIATE, {"redirect_url": 5}), 400, "redirect_url must be a string")


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com/after-login",
        "http://app.example.com/after-login",
        "https://app.example.com:8443/after-login",
        "https://app.example.com@evil.example.com/",
        "https://app.example.com.evil.example.com/",
        "http://localhost:3001/",
        "javascript:alert(1)",
        "/relative",
        "https://app.example.com:notaport/",
        "https://app.example.com/a\r\nSet-Cookie: x=1",
        "https://app.example.com\\@evil.example.com/",
        " https://app.example.com/",
    ],
)
def test_redirect_url_not_allowed(api, configured, url):
    body = err(api.call(INITIATE, {"redirect_url": url}), 400, "redirect_url not allowed")
    assert body["field"] == "redirect_url"
    assert not OAuthState.objects.exists()


def test_allowed_origin_with_default_port_and_other_case(api, configured):
    initiate(api, "HTTPS://App.Example.com:443/x")


def test_not_configured(api, root, provider):
    settings = {**provider_settings(provider.base), "IAM_IDP_A_TOKEN_URL": ""}
    with override_settings(**settings):
        err(api.call(INITIATE, {"redirect_url": APP}), 503, "oauth provider not configured")
        failed = callback(api, f"{CALLBACK}?code=abc&state=xyz")
    assert failed == ("https://app.example.com", {"error": "oauth_failed"})


def test_configuration_removed_between_initiate_and_callback(api, configured):
    path = authorize(initiate(api))
    with override_settings(IAM_IDP_A_CLIENT_ID=""):
        assert callback(api, path) == (APP, {"error": "oauth_failed"})
    assert configured.token_requests == 0


@pytest.mark.parametrize(
    "setting", ["IAM_IDP_A_AUTHORIZE_URL", "IAM_IDP_A_TOKEN_URL", "IAM_IDP_A_USERINFO_URL"]
)
def test_plain_http_off_loopback_counts_as_not_configured(api, configured, setting):
    with override_settings(**{setting: "http://idp.example.com/x"}):
        err(api.call(INITIATE, {"redirect_url": APP}), 503, "oauth provider not configured")


def test_insecure_transport_is_allowed_only_around_loopback_calls(api, configured, monkeypatch):
    monkeypatch.delenv("OAUTHLIB_INSECURE_TRANSPORT", raising=False)
    for url in ("https://idp.example.com/token", "http://idp.example.com/token", "http://127.0.0.1.nip.io/"):
        with oauth_provider.transport_for(url):
            assert "OAUTHLIB_INSECURE_TRANSPORT" not in os.environ
    with oauth_provider.transport_for("http://127.0.0.1:9/token", "http://[::1]/userinfo"):
        assert os.environ["OAUTHLIB_INSECURE_TRANSPORT"] == "1"
    sign_in(api)
    assert "OAUTHLIB_INSECURE_TRANSPORT" not in os.environ


def test_initiate_is_throttled_per_ip(api, configured, monkeypatch):
    """Each start stores a state row: one address may not pile them up."""
    from authn import throttling

    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 3)
    for _ in range(3):
        initiate(api)
    response = api.call(INITIATE, {"redirect_url": APP})
    err(response, 429, "too many requests")
    assert 0 < int(response["Retry-After"]) <= 60
    assert OAuthState.objects.count() == 3
    other = api.call(INITIATE, {"redirect_url": APP}, REMOTE_ADDR="203.0.113.9")
    assert ok(other)["auth_url"]


def test_an_office_behind_one_address_starts_many_logins(api, configured):
    """600 starts a minute per address by default (docs/security.md#throttling-and-enumeration): a whole
    office signing in at nine through one NAT address is not refused at the thirty-first."""
    for _ in range(40):
        initiate(api)
    assert OAuthState.objects.count() == 40


def test_a_start_removes_the_states_that_expired(api, configured):
    """What a start stores ends with its state, so anonymous starts cannot pile rows up."""
    initiate(api)
    OAuthState.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    initiate(api)
    assert OAuthState.objects.count() == 1 and OAuthState.objects.get().expires_at > timezone.now()


# last_login


def test_the_callback_sets_last_login_of_a_new_account(api, configured):
    before = timezone.now()
    tokens = sign_in(api)
    assert set(tokens) == {"access_token"}
    assert before <= Account.objects.get(email="alice@example.com").last_login <= timezone.now()


def test_the_callback_sets_last_login_of_a_returning_account(api, configured):
    sign_in(api)
    account = Account.objects.get(email="alice@example.com")
    first = account.last_login
    sign_in(api)
    account.refresh_from_db()
    assert account.last_login > first


def test_a_refused_callback_leaves_last_login(api, configured):
    sign_in(api)
    account = Account.objects.get(email="alice@example.com")
    first = account.last_login
    Account.objects.filter(pk=account.pk).update(enabled=False)
    assert sign_in(api) == {"error": "oauth_failed"}
    account.refresh_from_db()
    assert account.last_login == first


@pytest.mark.parametrize("claim", ["sub", "email", "name", "picture", "email_verified"])
@pytest.mark.parametrize(
    "bad", ["\x00", chr(0xD800), chr(0xDFFF)], ids=["nul", "high-surrogate", "low-surrogate"]
)
def test_user_info_with_nul_or_a_lone_surrogate_fails_cleanly(api, configured, claim, bad):
    """JSON carries "\\u0000" and a lone "\\ud800" (json.dumps writes them so), which no column can hold: the
    callback redirects with `oauth_failed` instead of failing on the query or the insert."""
    value = {
        "sub": f"idp-{bad}-1",
        "email": f"alice{bad}@example.com",
        "name": f"Alice {bad}",
        "picture": f"https://cdn.example.com/a{bad}.png",
        "email_verified": f"true{bad}",
    }[claim]
    configured.claims = {**configured.claims, claim: value}
    assert sign_in(api) == {"error": "oauth_failed"}
    assert not Account.objects.exists() and not Credential.objects.exists()


@pytest.mark.parametrize("bad", ["\x00", chr(0xD800)], ids=["nul", "surrogate"])
def test_returning_account_with_a_bad_claim_fails_cleanly(api, configured, bad):
    sign_in(api)
    configured.claims = {**configured.claims, "sub": f"idp-user-1{bad}"}
    assert sign_in(api) == {"error": "oauth_failed"}
    configured.claims = {
        **configured.claims,
        "sub": "idp-user-1",
        "picture": f"https://cdn.example.com/{bad}",
    }
    assert sign_in(api) == {"error": "oauth_failed"}
    assert Credential.objects.count() == 1


@pytest.mark.parametrize("bad", ["%00", "%ED%A0%80", "%FF"], ids=["nul", "encoded-surrogate", "not-utf8"])
def test_callback_query_with_nul_or_bad_utf8_fails_cleanly(api, configured, bad):
    """The other provider-controlled strings, the callback's `state` and `code`, reach no column: the
    state is looked up by its digest and the code goes back to the provider."""
    assert callback(api, f"{CALLBACK}?code=abc&state={bad}") == (
        "https://app.example.com",
        {"error": "invalid_state"},
    )
    state = parse_qs(urlsplit(initiate(api)).query)["state"][0]
    assert callback(api, f"{CALLBACK}?code={bad}&state={state}") == (APP, {"error": "oauth_failed"})
    assert callback(api, f"{CALLBACK}?code=abc&state={state}{bad}") == (
        "https://app.example.com",
        {"error": "invalid_state"},
    )
    assert not Account.objects.exists()
