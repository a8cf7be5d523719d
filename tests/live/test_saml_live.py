"""SAML connections against a real SAML IdP this team did not write: mcguinness/saml-idp (over Auth0's
samlp, which builds, signs and posts the responses), run by node on loopback (tests/live/saml: `npm ci`
there installs it from the lock file; the fixture runs it when node_modules is missing). Headless
Chromium (Debian's, driven by Playwright) is the browser: it follows `auth/sso/initiate`'s URL to the
IdP, submits the IdP's sign-in form, and the IdP's page posts the response to the service's ACS (the
HTTP-POST binding), which sends it on to the app. Two workspaces, each with its own IdP, connection and
verified domain, on a web tier of the service whose IAM_PUBLIC_URL is its own address."""

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from tests.sso.saml_idp import new_signing_pair

from .api import META, create_workspace, ok, unique
from .conftest import Process, free_port, wait_for, web_command

SAML_DIR = Path(__file__).parent / "saml"
IDP = SAML_DIR / "node_modules" / "saml-idp" / "bin" / "run.js"
APP = "http://localhost:3000/after-saml"
CHROMIUM = os.environ.get("IAM_CHROMIUM", "/usr/bin/chromium")
NOT_LOOPBACK = re.compile(r"^https?://(?!127\.0\.0\.1[:/]|localhost[:/])")

pytestmark = pytest.mark.browser


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _node_ready() -> str | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "the SAML live test needs node and npm"
    if not IDP.exists():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=SAML_DIR,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci in tests/live/saml failed: {done.stderr[-500:]}"
    return None


class SamlIdp:
    """One saml-idp process: its own key and certificate, entity id and port. It is started once to
    publish its metadata, then again with the SP's entity id (the audience it asserts for)."""

    def __init__(self, live, name: str):
        self.live, self.name = live, name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.entity_id = f"urn:live:{name}:{unique('idp')}"
        key, certificate = new_signing_pair()
        self.key_file, self.cert_file = live.tmp / f"{name}-key.pem", live.tmp / f"{name}-cert.pem"
        self.key_file.write_text(key)
        self.cert_file.write_text(certificate)
        self.process: Process | None = None

    def start(self, *, audience: str, acs_url: str) -> None:
        self.stop()
        options = {
            "--host": "127.0.0.1",
            "--port": str(self.port),
            "--issuer": self.entity_id,
            "--acsUrl": acs_url,
            "--audience": audience,
            "--cert": str(self.cert_file),
            "--key": str(self.key_file),
        }
        command = ["node", str(IDP), *(part for pair in options.items() for part in pair)]
        env = {key: value for key, value in os.environ.items() if not key.startswith("NODE_")}
        self.process = Process(self.name, command, env, self.live.tmp / f"{self.name}.log")
        self.live.processes.append(self.process)

        def up() -> bool:
            assert self.process.alive(), self.process.tail()
            try:
                return requests.get(f"{self.url}/metadata", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(up, 30, what=f"{self.name} to serve its metadata")

    def metadata(self) -> str:
        return requests.get(f"{self.url}/metadata", timeout=5).text

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


@pytest.fixture(scope="module")
def saml_web(live):
    """A web tier (the Procfile's command) whose IAM_PUBLIC_URL is its own address: the ACS URL it
    publishes is where the browser posts."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = live.spawn(f"web-saml-{port}", web_command(port, 2), {"IAM_PUBLIC_URL": url})
    web = live.wait_for_web(process, url)
    yield url
    web.stop()


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -e '.[dev]')")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set IAM_CHROMIUM)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def idps(live):
    reason = _node_ready()
    if reason:
        _unavailable(reason)
    made = [SamlIdp(live, "saml-idp-acme"), SamlIdp(live, "saml-idp-beta")]
    yield made
    for idp in made:
        idp.stop()


def connect(live, base: str, token: str, workspace: dict, idp: SamlIdp, domain: str) -> dict:
    """The operator's set-up: the IdP's metadata into a connection, the domain verified, then the IdP
    configured with the SP's values from the answer."""
    idp.start(audience="urn:not-yet-known", acs_url="http://127.0.0.1:9/acs")

    def post(path: str, body: dict) -> dict:
        return ok(live.post(path, body, token=token, workspace=workspace["id"], base=base))

    permission = post("/permissions/create", {"name": "projects:list", "tags": [], "meta": META})
    role = post(
        "/roles/create",
        {"name": "sso-member", "permission_ids": [permission["id"]], "tags": [], "meta": META},
    )
    connection = post(
        "/sso/create",
        {
            "name": unique("saml"),
            "protocol": "saml",
            "idp_metadata_xml": idp.metadata(),
            "domains": [domain],
            "default_role_ids": [role["id"]],
            "tags": [],
            "meta": META,
        },
    )
    assert connection["idp_entity_id"] == idp.entity_id
    assert connection["acs_url"] == f"{base}/saml/{connection['id']}/acs"
    done = live.manage("verify_domain", "--workspace", workspace["slug"], "--domain", domain)
    assert done.returncode == 0, done.stdout + done.stderr
    metadata = requests.get(connection["metadata_url"], timeout=10)
    assert metadata.status_code == 200 and f'entityID="{connection["sp_entity_id"]}"' in metadata.text
    idp.start(audience=connection["sp_entity_id"], acs_url=connection["acs_url"])
    return connection


class Browser:
    """A browser session: loopback only; the client app at APP answered by the test. `posted` keeps each
    form the IdP's page posted to the service's ACS; with `hold`, those posts stop there (for a test
    to replay elsewhere)."""

    def __init__(self, chromium, base: str, *, hold: bool = False):
        self.context = chromium.new_context()
        self.context.set_default_timeout(20_000)
        self.landed: list[str] = []
        self.posted: list[str] = []
        self.context.route(NOT_LOOPBACK, lambda route: route.abort())
        self.context.route(f"{APP}**", self._app)
        self.context.route(f"{base}/saml/**", self._acs if not hold else self._held)
        self.page = self.context.new_page()

    def _app(self, route) -> None:
        self.landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/plain", body="the client app")

    def _acs(self, route) -> None:
        self.posted.append(route.request.post_data or "")
        route.continue_()

    def _held(self, route) -> None:
        self.posted.append(route.request.post_data or "")
        route.fulfill(status=204)

    def sign_in_at_idp(self, url: str | None, name_id: str) -> None:
        """The IdP's sign-in form (at `url`, or where the browser is), as a person fills it: the subject and
        its e-mail attribute."""
        if url is not None:
            self.page.goto(url)
        self.page.wait_for_selector("#userName")
        self.page.fill("#userName", name_id)
        self.page.fill("#email", name_id)
        self.page.click("#btn-sign-in")

    def until(self, predicate, what: str) -> None:
        """Waits in Playwright's own loop: its route handlers run only while it has the thread."""
        for _ in range(200):
            if predicate():
                return
            self.page.wait_for_timeout(100)
        raise AssertionError(f"timed out waiting for {what}")

    def app_query(self) -> dict:
        self.until(lambda: self.landed, "the browser to reach the client app")
        target = urlsplit(self.landed[-1])
        assert f"{target.scheme}://{target.netloc}{target.path}" == APP
        return dict(parse_qsl(target.query))

    def close(self) -> None:
        self.context.close()


def initiate(live, base: str, **body) -> str:
    return ok(live.post("/auth/sso/initiate", {"redirect_url": APP, **body}, base=base))["authorization_url"]


def post_form(base: str, connection: dict, form: str) -> dict:
    """A form the IdP's page posted, posted again to `connection`'s ACS: the app's query."""
    response = requests.post(
        f"{base}/saml/{connection['id']}/acs",
        data=form,
        allow_redirects=False,
        timeout=30,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 303, response.text[:500]
    return dict(parse_qsl(urlsplit(response.headers["Location"]).query))


def failures(live, base: str, token: str, workspace: dict) -> list[dict]:
    body = {"filter": {"fields": {"action": "sso.login_failed"}}}
    return ok(live.post("/audit/list", body, token=token, workspace=workspace["id"], base=base))["entries"]


def test_two_workspaces_sign_in_through_their_own_saml_idp(live, saml_web, browser, idps):
    base = saml_web
    acme_idp, beta_idp = idps
    _, _, operator = live.bootstrap_operator()
    acme, beta = create_workspace(live, operator), create_workspace(live, operator)
    acme_connection = connect(live, base, operator, acme, acme_idp, "acme-saml.test")
    beta_connection = connect(live, base, operator, beta, beta_idp, "beta-saml.test")

    # Alice: home-realm discovery by her address, through acme's IdP, in the browser.
    url = initiate(live, base, email="alice@acme-saml.test")
    assert url.startswith(f"{acme_idp.url}/saml/sso?SAMLRequest=")
    alice_browser = Browser(browser, base)
    alice_browser.sign_in_at_idp(url, "alice@acme-saml.test")
    alice = alice_browser.app_query()
    assert set(alice) == {"access_token"}, alice
    ok(live.post("/projects/list", {}, token=alice["access_token"], workspace=acme["id"], base=base))
    denied = live.post("/projects/list", {}, token=alice["access_token"], workspace=beta["id"], base=base)
    assert denied.status_code == 403 and denied.json()["message"] == "not a member of this workspace"
    sessions = ok(live.post("/sessions/list", {}, token=alice["access_token"], base=base))["sessions"]
    assert [session["amr"] for session in sessions] == [["fed"]]

    # Carol: the hosted sign-in page's home-realm discovery. The IdP's page posts to the ACS from its
    # own site, so the browser sends no SameSite=Lax cookie with it; the ACS hands the response on to the
    # SSO callback, a top-level GET, where the browser's cookie comes and the page signs her in.
    carol = Browser(browser, base)
    carol.page.goto(f"{base}/signin?next=/signin/done")
    carol.page.fill("#id_email", "carol@acme-saml.test")
    carol.page.click("button[type=submit]")
    carol.page.wait_for_url(f"{acme_idp.url}/**")
    carol.sign_in_at_idp(None, "carol@acme-saml.test")
    carol.page.wait_for_url(f"{base}/signin/done")
    assert "carol@acme-saml.test" in carol.page.content()
    assert "iam_session" in {cookie["name"] for cookie in carol.context.cookies()}
    carol.close()

    # The same response again (the browser's POST, replayed): its request was answered.
    (alice_form,) = alice_browser.posted
    assert post_form(base, acme_connection, alice_form) == {"error": "sso_failed"}
    alice_browser.close()

    # Bob: beta's IdP, by connection.
    bob_browser = Browser(browser, base)
    bob_browser.sign_in_at_idp(
        initiate(live, base, connection_id=beta_connection["id"]), "bob@beta-saml.test"
    )
    bob = bob_browser.app_query()
    assert set(bob) == {"access_token"}, bob
    ok(live.post("/projects/list", {}, token=bob["access_token"], workspace=beta["id"], base=base))
    bob_browser.close()

    # Beta's IdP answering a beta request, its form taken to acme's ACS: refused there.
    held = Browser(browser, base, hold=True)
    held.sign_in_at_idp(initiate(live, base, connection_id=beta_connection["id"]), "bob@beta-saml.test")
    held.until(lambda: held.posted, "the IdP's page to post its response")
    assert post_form(base, acme_connection, held.posted[0]) == {"error": "sso_failed"}
    held.close()
    # Acme's IdP vouching for an address of beta's domain links nobody.
    mallory = Browser(browser, base)
    mallory.sign_in_at_idp(
        initiate(live, base, connection_id=acme_connection["id"]), "mallory@beta-saml.test"
    )
    assert mallory.app_query() == {"error": "sso_failed"}
    mallory.close()

    reasons = [entry["changes"]["reason"] for entry in failures(live, base, operator, acme)]
    assert any("state expired or already used" in reason for reason in reasons), reasons
    assert any("RelayState names a request of another connection" in reason for reason in reasons), reasons
    assert any("the provider may not vouch for this e-mail" in reason for reason in reasons), reasons
    assert failures(live, base, operator, beta) == []
