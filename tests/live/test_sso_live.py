"""Enterprise SSO against a real OpenID provider this team did not write: panva's `oidc-provider` (OpenID
Certified), run by node on loopback (tests/live/oidc: `npm ci` there installs it from the lock file; the
fixture runs it when node_modules is missing). Two workspaces, each with its own provider, connection and
verified domain; the browser's part (the provider's login form, consent) is driven over HTTP."""

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qsl, urljoin, urlsplit

import psycopg
import pytest
import requests

from tests.sso.stand_ins import OpenIdProvider

from .api import META, create_workspace, ok, unique
from .conftest import Process, free_port, wait_for

OIDC_DIR = Path(__file__).parent / "oidc"
APP = "http://localhost:3000/after-sso"
# The live service runs without IAM_PUBLIC_URL: its callback URL is the default's, which the provider's
# client registration names; the test carries the browser from there to the service's real address.
DEFAULT_CALLBACK = "http://127.0.0.1:8000/auth/sso/callback"


def _node_ready() -> str | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "the SSO live test needs node and npm"
    if not (OIDC_DIR / "node_modules" / "oidc-provider").exists():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=OIDC_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci in tests/live/oidc failed: {done.stderr[-500:]}"
    return None


class OidcProvider:
    def __init__(
        self,
        live,
        name: str,
        *,
        path: str,
        client: dict,
        accounts: dict,
        redirect_uri: str = DEFAULT_CALLBACK,
    ):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}{path}"
        self.client = client
        config = {
            "port": self.port,
            "path": path,
            "clients": [{**client, "redirect_uris": [redirect_uri]}],
            "accounts": accounts,
        }
        env = {key: value for key, value in os.environ.items() if not key.startswith("NODE_")}
        self.process = Process(
            name, ["node", str(OIDC_DIR / "provider.mjs"), json.dumps(config)], env, live.tmp / f"{name}.log"
        )
        live.processes.append(self.process)
        wait_for(lambda: "listening" in self.process.tail(), 30, what=f"{name} to listen")

    def log_in(self, authorization_url: str, sub: str) -> str:
        """The browser at the provider: its login form submitted as `sub`, consent given; answers the URL
        the provider sends the browser back to."""
        browser = requests.Session()
        url, submitted = authorization_url, False
        for _ in range(10):
            response = browser.get(url, allow_redirects=False, timeout=10)
            assert response.status_code in (302, 303), (response.status_code, response.text[:500])
            location = urljoin(url, response.headers["Location"])
            if location.startswith(DEFAULT_CALLBACK):
                return location
            if "/interaction/" in location and not submitted:
                location, submitted = f"{location}?sub={sub}", True
            url = location
        raise AssertionError("the provider never sent the browser back")


@pytest.fixture(scope="module")
def providers(live):
    reason = _node_ready()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    acme = OidcProvider(
        live,
        "oidc-acme",
        path="",
        client={"client_id": "acme-iam", "client_secret": "acme-secret-" + unique("s")},
        accounts={
            "alice": {"email": "alice@acme.test", "email_verified": True, "name": "Alice"},
            "mallory": {"email": "mallory@beta.test", "email_verified": True, "name": "Mallory"},
        },
    )
    beta = OidcProvider(
        live,
        "oidc-beta",
        path="/realms/beta",
        client={
            "client_id": "beta-iam",
            "client_secret": "beta-secret-" + unique("s"),
            "token_endpoint_auth_method": "client_secret_post",
        },
        accounts={"bob": {"email": "bob@beta.test", "email_verified": True, "name": "Bob"}},
    )
    yield acme, beta
    for provider in (acme, beta):
        provider.process.stop()


def connect(live, token: str, workspace: dict, provider: OidcProvider, domain: str) -> dict:
    permission = ok(
        live.post(
            "/permissions/create",
            {"name": "projects:list", "tags": [], "meta": META},
            token=token,
            workspace=workspace["id"],
        )
    )
    role = ok(
        live.post(
            "/roles/create",
            {"name": "sso-member", "permission_ids": [permission["id"]], "tags": [], "meta": META},
            token=token,
            workspace=workspace["id"],
        )
    )
    body = {
        "name": unique("idp"),
        "issuer": provider.issuer,
        "client_id": provider.client["client_id"],
        "client_secret": provider.client["client_secret"],
        "domains": [domain],
        "default_role_ids": [role["id"]],
        "tags": [],
        "meta": META,
    }
    connection = ok(live.post("/sso/create", body, token=token, workspace=workspace["id"]))
    assert provider.client["client_secret"] not in json.dumps(connection)
    done = live.manage("verify_domain", "--workspace", workspace["slug"], "--domain", domain)
    assert done.returncode == 0, done.stdout + done.stderr
    return connection


def back_to_service(live, provider_redirect: str) -> dict:
    """The browser arrives at the service's callback and is sent on to the app: the app's query."""
    parts = urlsplit(provider_redirect)
    response = requests.get(f"{live.url}{parts.path}?{parts.query}", allow_redirects=False, timeout=30)
    assert response.status_code == 302, response.text[:500]
    target = urlsplit(response.headers["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == APP
    return dict(parse_qsl(target.query))


def test_two_workspaces_log_in_through_their_own_provider(live, providers):
    acme_idp, beta_idp = providers
    _, _, operator = live.bootstrap_operator()
    acme = create_workspace(live, operator)
    beta = create_workspace(live, operator)
    acme_connection = connect(live, operator, acme, acme_idp, "acme.test")
    connect(live, operator, beta, beta_idp, "beta.test")

    # Alice: home-realm discovery by her address, through acme's provider.
    url = ok(live.post("/auth/sso/initiate", {"email": "alice@acme.test", "redirect_url": APP}))
    assert url["authorization_url"].startswith(f"{acme_idp.issuer}/auth?")
    alice_redirect = acme_idp.log_in(url["authorization_url"], "alice")
    alice = back_to_service(live, alice_redirect)
    assert set(alice) == {"access_token"}, alice  # never a refresh token in a URL
    ok(live.post("/projects/list", {}, token=alice["access_token"], workspace=acme["id"]))
    denied = live.post("/projects/list", {}, token=alice["access_token"], workspace=beta["id"])
    assert denied.status_code == 403 and denied.json()["message"] == "not a member of this workspace"
    paired = ok(live.post("/auth/refresh", token=alice["access_token"]))
    refreshed = live.post("/auth/refresh", token=paired["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text

    # Bob: beta's provider (another issuer with a path, client_secret_post).
    url = ok(live.post("/auth/sso/initiate", {"email": "bob@beta.test", "redirect_url": APP}))
    assert url["authorization_url"].startswith(f"{beta_idp.issuer}/auth?")
    bob = back_to_service(live, beta_idp.log_in(url["authorization_url"], "bob"))
    assert set(bob) == {"access_token"}, bob
    ok(live.post("/projects/list", {}, token=bob["access_token"], workspace=beta["id"]))
    assert live.post("/projects/list", {}, token=bob["access_token"], workspace=acme["id"]).status_code == 403

    # Acme's provider vouching for an address of beta's domain links nobody.
    start = {"connection_id": acme_connection["id"], "redirect_url": APP}
    url = ok(live.post("/auth/sso/initiate", start))
    assert back_to_service(live, acme_idp.log_in(url["authorization_url"], "mallory")) == {
        "error": "sso_failed"
    }

    # A state works once.
    assert back_to_service(live, alice_redirect) == {"error": "invalid_state"}


@pytest.fixture
def stand_in_idp():
    idp = OpenIdProvider()
    yield idp
    idp.close()


def test_the_connection_quota_is_counted_under_the_workspace_lock(live, stand_in_idp):
    """A tenant (not an operator) one connection short of its quota of 10. While another transaction
    holds its workspace's row, two creates wait for it (each counts under that lock); once it is
    released they count one after the other: one gets in, the other is refused. Counted without the
    lock, both would have seen 9 and the workspace would hold 11."""
    tenant = live.register()
    token = tenant["access_token"]
    workspace = create_workspace(live, token)

    def create(i: int):
        body = {
            "name": f"idp-{i}",
            "issuer": stand_in_idp.issuer,
            "client_id": "c",
            "client_secret": "s",
            "domains": [f"d{i}.{unique('q')}.test"],
            "default_role_ids": [],
            "tags": [],
            "meta": META,
        }
        # A web process lets one request at a time wait on the network beside the others (`WEB_THREADS`
        # less one): a create that meets the other's discovery there is refused 429 and sent again, as a
        # client does.
        for _ in range(50):
            answer = live.post("/sso/create", body, token=token, workspace=workspace["id"])
            if answer.status_code != 429:
                return answer
            time.sleep(0.1)
        return answer

    for i in range(9):
        ok(create(i))
    with psycopg.connect(live.env["DATABASE_URL"]) as holder:
        holder.execute("SELECT id FROM tenancy_workspace WHERE id = %s FOR NO KEY UPDATE", (workspace["id"],))
        with ThreadPoolExecutor(2) as pool:
            racers = [pool.submit(create, i) for i in (9, 10)]
            time.sleep(2)
            early = [racer.result() for racer in racers if racer.done()]
            assert not early, [(answer.status_code, answer.text[:300]) for answer in early]  # did not wait
            holder.commit()
            answers = [racer.result(timeout=30) for racer in racers]
    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: 1, 403: 1}, [answer.text[:200] for answer in answers]
    refused = next(answer for answer in answers if answer.status_code == 403)
    assert refused.json()["message"] == "quota reached: sso connections (10)"
    listed = ok(live.post("/sso/list", {}, token=token, workspace=workspace["id"]))
    assert len(listed["sso_connections"]) == 10


def test_one_domain_verified_at_once_for_two_workspaces_goes_to_one(live, stand_in_idp):
    """While one workspace's verification of a domain is not yet committed, another workspace's
    verification of the same domain (an operator's command, another process) waits on the database's
    one-verified-domain constraint, and is refused `domain already claimed` once the first commits."""
    _, _, operator = live.bootstrap_operator()
    domain = f"{unique('claim')}.test"
    workspaces = []
    for _ in range(2):
        workspace = create_workspace(live, operator)
        body = {
            "name": unique("idp"),
            "issuer": stand_in_idp.issuer,
            "client_id": "c",
            "client_secret": "s",
            "domains": [domain],
            "default_role_ids": [],
            "tags": [],
            "meta": META,
        }
        ok(live.post("/sso/create", body, token=operator, workspace=workspace["id"]))
        workspaces.append(workspace)
    first, second = workspaces
    with psycopg.connect(live.env["DATABASE_URL"]) as holder:
        holder.execute(
            "UPDATE sso_ssodomain SET verified_at = now(), verified_by = 'dns' "
            "WHERE workspace_id = %s AND domain = %s",
            (first["id"], domain),
        )
        with ThreadPoolExecutor(1) as pool:
            command = pool.submit(
                live.manage, "verify_domain", "--workspace", second["slug"], "--domain", domain
            )
            time.sleep(8)  # the command starts Django, checks, then waits on the uncommitted row
            assert not command.done(), command.result().stdout + command.result().stderr
            holder.commit()
            result = command.result(timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "domain already claimed" in result.stderr
    described = ok(live.post("/sso/list", {}, token=operator, workspace=second["id"]))
    assert described["sso_connections"][0]["domains"][0]["verified"] is False
