"""The OpenID Provider as deployed (gunicorn, DEBUG off, PostgreSQL, Redis), with a relying party this team
did not write: panva's `openid-client` (OpenID Certified; tests/live/rp, `npm ci` there installs it from
the lock file), run by node as an app on https loopback, and a person in Debian's Chromium (Playwright)
signing in through the hosted pages: password, TOTP, a workspace that requires a second factor (set up
on the way), two workspaces and the chooser, consent for another workspace's application, then the app's
refresh, userinfo, introspection, revocation and RP-initiated logout; and the same through a workspace's
own SSO connection (panva's `oidc-provider`, as test_sso_live.py runs it). The browser lands back in
the app with a code: no access or refresh token ever travels in a URL."""

import datetime as dt
import ipaddress
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pyotp
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .api import META, add_member, create_workspace, ok, unique
from .conftest import PASSWORD, Process, free_port, wait_for, web_command
from .test_sso_live import OidcProvider, _node_ready

RP_DIR = Path(__file__).parent / "rp"
CHROMIUM = os.environ.get("IAM_CHROMIUM", "/usr/bin/chromium")


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _rp_ready() -> str | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "the OpenID Provider live test needs node and npm"
    if not (RP_DIR / "node_modules" / "openid-client").exists():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=RP_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci in tests/live/rp failed: {done.stderr[-500:]}"
    return None


def certificate(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: a web application's redirect URI is https."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "rp-cert.pem", tmp / "rp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class Tier:
    """A web tier whose IAM_PUBLIC_URL is its own address: the issuer relying parties discover."""

    def __init__(self, live):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        process = live.spawn(f"web-oidc-{port}", web_command(port, 2), {"IAM_PUBLIC_URL": self.url})
        live.wait_for_web(process, self.url)


class RelyingParty:
    """tests/live/rp/rp.mjs for one application; `call` asks it for one of its routes' JSON."""

    def __init__(self, live, tier: Tier, application: dict, *, port: int, name: str, cert: tuple[Path, Path]):
        self.port = port
        self.ca = str(cert[0])  # its own certificate: the test trusts it, as a browser told to would
        self.url = f"https://127.0.0.1:{self.port}"
        config = {
            "port": self.port,
            "issuer": tier.url,
            "client_id": application["client_id"],
            "client_secret": application.get("client_secret"),
            "cert": str(cert[0]),
            "key": str(cert[1]),
        }
        env = {key: value for key, value in os.environ.items() if not key.startswith("NODE_")}
        self.process = Process(
            name, ["node", str(RP_DIR / "rp.mjs"), json.dumps(config)], env, live.tmp / f"{name}.log"
        )
        live.processes.append(self.process)
        wait_for(
            lambda: "listening" in self.process.tail() or not self.process.alive(),
            30,
            what=f"{name} to listen",
        )
        assert self.process.alive(), self.process.tail()

    def call(self, route: str, **params) -> dict:
        response = requests.get(f"{self.url}{route}", params=params, verify=self.ca, timeout=30)
        assert response.status_code == 200, (route, response.text[:1000], self.process.tail())
        return response.json()


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[dev]')")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        unavailable(f"no Chromium at {CHROMIUM} (.ci/install-browser)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def world(live, tmp_path_factory):
    for reason in (_rp_ready(), _node_ready()):
        if reason:
            unavailable(reason)
    tier = Tier(live)
    _, _, operator = live.bootstrap_operator()
    acme, globex, vault = (create_workspace(live, operator) for _ in range(3))
    people = {}
    for name in ("alice", "bob", "carol"):
        people[name] = live.register(email=f"{name}-{unique('p')}@example.com")
    for person, workspace in (("alice", acme), ("alice", globex), ("bob", vault), ("carol", globex)):
        add_member(live, operator, workspace["id"], people[person]["account"]["id"])
    ok(live.post("/workspace/update", {"id": vault["id"], "mfa_required": True}, token=operator))
    carol_secret = ok(live.post("/auth/mfa/totp/enroll", {}, token=people["carol"]["access_token"]))["secret"]
    carol_code = pyotp.TOTP(carol_secret).at(time.time() - 30)  # the current step stays unused
    ok(live.post("/auth/mfa/totp/confirm", {"code": carol_code}, token=people["carol"]["access_token"]))
    cert = certificate(tmp_path_factory.mktemp("rp"))
    rp_ports = {name: free_port() for name in ("portal", "crm")}
    root = ok(live.post("/workspace/list", {}, token=operator))["workspaces"]
    root_id = next(workspace["id"] for workspace in root if workspace["slug"] == "root")

    def register(workspace_id: str, name: str) -> dict:
        body = {
            "name": name,
            "type": "web",
            "redirect_uris": [f"https://127.0.0.1:{rp_ports[name]}/callback"],
            "post_logout_redirect_uris": [f"https://127.0.0.1:{rp_ports[name]}/bye"],
            "tags": [],
            "meta": META,
        }
        return ok(live.post("/applications/create", body, token=operator, workspace=workspace_id))

    portal, crm = register(root_id, "portal"), register(acme["id"], "crm")
    apps = {
        name: RelyingParty(live, tier, application, port=rp_ports[name], name=f"rp-{name}", cert=cert)
        for name, application in (("portal", portal), ("crm", crm))
    }
    return {
        "tier": tier,
        "operator": operator,
        "acme": acme,
        "globex": globex,
        "vault": vault,
        "people": people,
        "carol_secret": carol_secret,
        "portal": apps["portal"],
        "crm": apps["crm"],
        "crm_application": crm,
    }


class Person:
    """A person in their own browser (a fresh Chromium context): every URL it requests is kept."""

    def __init__(self, chromium):
        self.context = chromium.new_context(ignore_https_errors=True)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.urls: list[str] = []
        self.page.on("request", lambda request: self.urls.append(request.url))

    def open(self, url: str) -> None:
        self.page.goto(url)

    def press(self, name: str, role: str = "button") -> None:
        with self.page.expect_navigation():
            self.page.get_by_role(role, name=name, exact=True).click()

    def sign_in(self, email: str, code_secret: str | None = None) -> None:
        self.page.get_by_label("Email").fill(email)
        self.press("Continue")
        self.page.get_by_label("Password").fill(PASSWORD)
        self.press("Sign in")
        if code_secret is not None:
            self.page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(code_secret).now())
            self.press("Verify")

    def json(self) -> dict:
        return json.loads(self.page.locator("body").inner_text())

    def heading(self) -> str:
        return self.page.locator("h1").inner_text()

    def no_token_in_any_url(self) -> None:
        for url in self.urls:
            query = parse_qs(urlsplit(url).query)
            assert not {"access_token", "refresh_token", "id_token"} & set(query), url

    def close(self) -> None:
        self.context.close()


def test_password_chooser_refresh_userinfo_revocation_and_logout(live, world, chromium):
    alice = world["people"]["alice"]["account"]
    person = Person(chromium)
    portal = world["portal"]
    person.open(f"{portal.url}/login")
    person.sign_in(alice["email"])
    assert person.heading() == "Choose a workspace"
    names = [button.inner_text() for button in person.page.get_by_role("button").all()]
    assert sorted(names) == sorted([world["acme"]["name"], world["globex"]["name"]])
    person.press(world["globex"]["name"])
    landed = person.json()
    assert parse_qs(urlsplit(landed["callback"]).query).keys() == {"code", "state", "iss"}
    claims = landed["signed_in"]
    assert (claims["sub"], claims["email"], claims["workspace_id"]) == (
        alice["id"],
        alice["email"],
        world["globex"]["id"],
    )
    assert claims["amr"] == ["pwd"] and claims["iss"] == world["tier"].url

    held = portal.call("/state")
    as_alice = live.post("/projects/list", {}, token=held["access_token"], workspace=world["globex"]["id"])
    assert as_alice.json()["message"] == "missing permission projects:list"  # her token, her (empty) role
    again = portal.call("/refresh")
    assert again["refresh_token"] != held["refresh_token"]
    assert again["claims"]["sid"] == claims["sid"]
    userinfo = portal.call("/userinfo")
    assert set(userinfo) == {"sub", "email", "email_verified", "name", "picture"}
    assert (userinfo["sub"], userinfo["email"]) == (alice["id"], alice["email"])
    assert portal.call("/introspect")["active"] is True
    portal.call("/revoke", token="refresh_token")
    assert portal.call("/introspect")["active"] is False
    assert live.post("/sessions/list", {}, token=again["access_token"]).status_code == 401

    # signed in still (the browser session): a new sign-in needs no password, then RP-initiated logout
    person.open(f"{portal.url}/login?workspace={world['acme']['slug']}")
    assert person.json()["signed_in"]["workspace_id"] == world["acme"]["id"]
    person.open(f"{portal.url}/logout")
    assert person.json() == {"signed_out": True, "state": "bye-state"}
    assert live.post("/sessions/list", {}, token=portal.call("/state")["access_token"]).status_code == 401
    person.open(f"{portal.url}/login")
    assert person.page.get_by_label("Email").count() == 1  # signed out: the sign-in page again
    person.no_token_in_any_url()
    person.close()


def test_totp_and_consent_for_another_workspaces_application(live, world, chromium):
    carol = world["people"]["carol"]["account"]
    alice = world["people"]["alice"]["account"]
    crm = world["crm"]
    person = Person(chromium)
    person.open(f"{crm.url}/login")
    person.sign_in(carol["email"], world["carol_secret"])  # a member of globex, not acme
    assert person.json()["error"] == "access_denied"  # openid-client read the error response
    person.close()

    person = Person(chromium)
    person.open(f"{crm.url}/login")
    person.sign_in(alice["email"])
    assert person.heading() == "crm wants to access your account"
    assert person.page.get_by_text(world["acme"]["name"]).count() >= 1
    person.press("Allow")
    claims = person.json()["signed_in"]
    assert (
        claims["workspace_id"] == world["acme"]["id"]
        and claims["aud"] == world["crm_application"]["client_id"]
    )
    held = crm.call("/state")
    refused = live.post("/projects/list", {}, token=held["access_token"], workspace=world["acme"]["id"])
    assert refused.status_code == 401  # another workspace's application's token never reaches the API
    person.open(f"{crm.url}/login")  # consent remembered: straight back
    assert person.json()["signed_in"]["sub"] == alice["id"]
    person.no_token_in_any_url()
    person.close()


def test_a_workspace_requiring_a_second_factor_sets_one_up_on_the_way(live, world, chromium):
    bob = world["people"]["bob"]["account"]
    person = Person(chromium)
    person.open(f"{world['portal'].url}/login")
    person.sign_in(bob["email"])  # his one workspace, vault, requires a second factor he does not have
    person.press("Set up authenticator app")
    secret = person.page.locator("#totp-secret").inner_text()
    person.page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(secret).now())
    person.press("Turn on")
    person.press("Continue", role="link")
    claims = person.json()["signed_in"]
    assert claims["workspace_id"] == world["vault"]["id"]
    assert "mfa" in claims["amr"]
    held = world["portal"].call("/state")
    as_bob = live.post("/projects/list", {}, token=held["access_token"], workspace=world["vault"]["id"])
    assert as_bob.json()["message"] == "missing permission projects:list"  # not `mfa required by ...`
    person.no_token_in_any_url()
    person.close()


def test_the_same_through_a_workspaces_sso_connection(live, world, chromium):
    tier, operator = world["tier"], world["operator"]
    workspace = create_workspace(live, operator)
    domain = f"{unique('sso')}.test"
    provider = OidcProvider(
        live,
        "oidc-for-pages",
        path="",
        client={"client_id": "pages-iam", "client_secret": "pages-secret-" + unique("s")},
        accounts={"erin": {"email": f"erin@{domain}", "email_verified": True, "name": "Erin"}},
        redirect_uri=f"{tier.url}/auth/sso/callback",
    )
    body = {
        "name": unique("idp"),
        "issuer": provider.issuer,
        "client_id": provider.client["client_id"],
        "client_secret": provider.client["client_secret"],
        "domains": [domain],
        "default_role_ids": [],
        "tags": [],
        "meta": META,
    }
    ok(live.post("/sso/create", body, token=operator, workspace=workspace["id"]))
    done = live.manage("verify_domain", "--workspace", workspace["slug"], "--domain", domain)
    assert done.returncode == 0, done.stdout + done.stderr

    person = Person(chromium)
    person.open(f"{world['portal'].url}/login?login_hint=erin@{domain}")
    assert person.page.get_by_label("Email").input_value() == f"erin@{domain}"
    with person.page.expect_response(lambda response: "/interaction/" in response.url):
        person.page.get_by_role("button", name="Continue", exact=True).click()
    person.open(f"{person.page.url}?sub=erin")  # the provider's login form, submitted as erin
    claims = person.json()["signed_in"]
    assert claims["email"] == f"erin@{domain}" and claims["amr"] == ["fed"]
    assert claims["workspace_id"] == workspace["id"]  # just-in-time member of its one workspace
    person.no_token_in_any_url()
    person.close()
    provider.process.stop()
