import datetime as dt
import json
import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import cache, caches
from django.test import Client
from django.utils import timezone

from accounts.models import Account
from authn.sessions import issue_session
from tenancy.models import Workspace
from tenancy.workspace_cache import root_workspace
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)


def pytest_configure(config):
    # CI sets CI=true: a service that is not there must fail the run, never skip it.
    if os.environ.get("CI") and not os.environ.get("REDIS_URL"):
        raise pytest.UsageError("CI runs need REDIS_URL (and DATABASE_URL) pointing at the real services")
    config.addinivalue_line(
        "markers",
        "admin(*grants, operator=False): what the `admin` fixture holds in `workspace` (default: every "
        "permission, `*`); operator=True makes it the operator acting in `workspace`",
    )


LIVE_LAYER = Path(__file__).parent / "live"


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """The live layer (tests/live) runs in its own invocation, `pytest tests/live`: the unit suite's
    `pytest` leaves it out, so its service stack is not started once per xdist worker."""
    if collection_path != LIVE_LAYER:
        return None
    asked = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return not any(path == LIVE_LAYER or LIVE_LAYER in path.parents for path in asked)


class ApiClient(Client):
    """POSTs JSON bodies; `as_account()` adds a Bearer token and `in_workspace()` the X-Workspace header."""

    def __init__(self, token: str | None = None, workspace: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.token = token
        self.workspace = workspace

    def _headers(self, headers: dict | None) -> dict:
        merged = {}
        if self.token:
            merged["Authorization"] = f"Bearer {self.token}"
        if self.workspace:
            merged["X-Workspace"] = self.workspace
        merged.update(headers or {})
        return merged

    def call(
        self,
        path: str,
        body=None,
        *,
        headers: dict | None = None,
        raw: bytes | str | None = None,
        method: str = "POST",
        **extra,
    ):
        data = raw if raw is not None else json.dumps({} if body is None else body)
        return self.generic(
            method, path, data, content_type="application/json", headers=self._headers(headers), **extra
        )

    def get(self, path: str, data=None, **kwargs):
        kwargs["headers"] = self._headers(kwargs.get("headers"))
        return super().get(path, data, **kwargs)

    def in_workspace(self, workspace) -> "ApiClient":
        return ApiClient(self.token, str(getattr(workspace, "pk", workspace)))


def body_of(response) -> dict:
    """The JSON body, streamed or not (an answer of one large object is streamed)."""
    if response.streaming:
        return json.loads(b"".join(response.streaming_content))
    return response.json()


def ok(response) -> dict:
    body = body_of(response)
    assert response.status_code == 200, body
    assert body["success"] is True and body["status"] == 200, body
    return body["data"]


def err(response, status: int, message: str | None = None) -> dict:
    body = body_of(response)
    assert response.status_code == status, body
    assert body["success"] is False and body["status"] == status, body
    assert set(body) <= {"success", "status", "message", "field", "hint"}, body
    if message is not None:
        assert body["message"] == message, body
    return body


def token_for(account: Account) -> str:
    return issue_session(account, amr=["pwd"])["access_token"]


def client_for(account: Account, workspace=None) -> ApiClient:
    return ApiClient(token_for(account), str(workspace.pk) if workspace is not None else None)


def access_claims(account: Account, **overrides) -> dict:
    """The claims of an access token as `authn.sessions` issues them (docs/security.md#tokens), for a test
    that signs a token itself: `overrides` change claims, and a claim given as None is left out."""
    now = timezone.now()
    claims = {
        "sub": str(account.pk),
        "type": "access",
        "sv": account.session_version,
        "iat": int(now.timestamp()),
        "exp": int((now + dt.timedelta(minutes=5)).timestamp()),
        "jti": str(uuid.uuid4()),
        "iss": settings.IAM_JWT_ISSUER,
        "auth_time": int(now.timestamp()),
        **overrides,
    }
    return {name: value for name, value in claims.items() if value is not None}


CACHE_METHODS = ("get", "set", "add", "get_many", "set_many", "delete", "delete_many", "incr")


def break_cache(monkeypatch, *methods: str) -> None:
    """Makes the configured cache backend (local memory, or Redis in CI) raise on `methods`, as when it
    cannot be reached."""

    def unreachable(*args, **kwargs):
        raise ConnectionError("cache unreachable")

    backend = type(caches["default"])
    for name in methods or CACHE_METHODS:
        monkeypatch.setattr(backend, name, unreachable)


@pytest.fixture
def cache_down(monkeypatch):
    """Every cache call raises: `iam.platform.cache` falls back to the database."""
    break_cache(monkeypatch)


@pytest.fixture(autouse=True)
def _clean_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api(db) -> ApiClient:
    return ApiClient()


@pytest.fixture
def root(db):
    return root_workspace()


@pytest.fixture
def operator(db) -> Account:
    return AccountFactory(is_superuser=True, email="operator@example.com")


@pytest.fixture
def operator_api(operator) -> ApiClient:
    return client_for(operator)


@pytest.fixture
def admin_web(operator) -> Client:
    """A browser session of an operator signed in to the admin."""
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def account(db) -> Account:
    return AccountFactory()


@pytest.fixture
def account_api(account) -> ApiClient:
    return client_for(account)


@pytest.fixture
def member(db) -> Account:
    """An account that can log in: its password credential (PASSWORD) lives in the root workspace
    (docs/api.md#the-root-workspace)."""
    account = AccountFactory()
    CredentialFactory(account=account)
    return account


@pytest.fixture
def member_of(db):
    """`member_of(workspace, "projects:*", ...)`: an account with an active workspace-scope membership
    whose role holds those permissions, and its API client acting in that workspace."""

    def make(workspace=None, *permissions: str, account: Account | None = None, **membership):
        workspace = workspace or WorkspaceFactory()
        account = account or AccountFactory()
        role = RoleFactory(workspace=workspace, permissions=list(permissions))
        MembershipFactory(account=account, workspace=workspace, roles=[role], **membership)
        return account, client_for(account, workspace)

    return make


@pytest.fixture
def workspace(db) -> Workspace:
    """The workspace a test acts in: a tenant's own, not the root workspace."""
    return WorkspaceFactory()


@pytest.fixture
def admin_account(request, workspace, member_of) -> Account:
    """The account behind `admin`: a member of `workspace` holding every permission (`*`), or the grants a
    module names with `pytestmark = pytest.mark.admin("clients:*")`, so its tests also prove that those
    grants suffice. `pytest.mark.admin(operator=True)`: the operator instead, for what only operators may
    do (docs/api.md#validation)."""
    mark = request.node.get_closest_marker("admin")
    if mark is not None and mark.kwargs.get("operator"):
        return request.getfixturevalue("operator")
    grants = mark.args if mark is not None and mark.args else ("*",)
    return member_of(workspace, *grants)[0]


@pytest.fixture
def admin(admin_account, workspace) -> ApiClient:
    """`admin_account`'s API client, acting in `workspace`."""
    return client_for(admin_account, workspace)


@pytest.fixture
def embedded_outbox(transactional_db, settings):
    """The embedded mode as `make run` runs it: outbox messages run in background threads after commit,
    so the database really commits (the threads must see the rows). `outbox.drain()` waits for them; the
    fixture drains at the end too, so no thread outlives the test."""
    from iam.platform import outbox

    settings.IAM_OUTBOX_THREADS = 2
    yield outbox
    assert outbox.drain(), "the embedded outbox worker did not finish"
