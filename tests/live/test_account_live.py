"""`/account` as deployed (gunicorn, DEBUG off, PostgreSQL, Redis), in Debian's Chromium (Playwright): a
person sets up an authenticator app from the page's secret and signs in with it; ends another of their
sessions from the page and sees its token refused by `clients/validate`; revokes an application's access
and is asked consent again at its next sign-in; and axe-core finds no serious or critical violation on
the pages, at 1280 and at 320 px (docs/pages.md#the-account-page)."""

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import psycopg
import pyotp
import pytest

from tests.pages.chromium import axe_script, launch, unavailable, violations

from .api import META, add_member, create_client, create_workspace, ok
from .conftest import PASSWORD

WIDTHS = (1280, 320)


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[dev]')")
    axe_script()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


class Person:
    """A person in a browser of their own; axe's script is let in past the pages' CSP (the CSP itself is
    tested in tests/pages)."""

    def __init__(self, chromium, live, *, javascript: bool = True):
        self.live = live
        self.context = chromium.new_context(bypass_csp=True, java_script_enabled=javascript)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.failures: dict[str, list] = {}

    def open(self, path: str) -> None:
        self.page.goto(f"{self.live.url}{path}" if path.startswith("/") else path)

    def press(self, name: str, within=None) -> None:
        scope = within if within is not None else self.page
        with self.page.expect_navigation():
            scope.get_by_role("button", name=name, exact=True).click()

    def sign_in(self, email: str, secret: str | None = None, *, at: float | None = None) -> None:
        self.page.get_by_label("Email").fill(email)
        self.press("Continue")
        self.page.get_by_label("Password").fill(PASSWORD)
        self.press("Sign in")
        if secret is not None:
            self.page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(secret).at(at or time.time()))
            self.press("Verify")

    def heading(self) -> str:
        return self.page.locator("h1").inner_text()

    def check(self, name: str) -> None:
        """axe-core at each width, and no sideways scroll."""
        for width in WIDTHS:
            self.page.set_viewport_size({"width": width, "height": 900})
            found = violations(self.page)
            overflow = self.page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if found:
                self.failures[f"{name} @ {width}px"] = found
            if overflow > 0:
                self.failures[f"{name} @ {width}px: scrolls sideways by {overflow}px"] = []

    def session_id(self) -> str:
        cookie = next(cookie for cookie in self.context.cookies() if cookie["name"] == "iam_session")
        return cookie["value"].split(".")[0]

    def close(self) -> None:
        self.context.close()


def sid_of(token: str) -> str:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sid"]


def age_session(live, session_id: str, seconds: int) -> None:
    """The sign-in that started the session happened `seconds` earlier (its `auth_time`)."""
    with psycopg.connect(live.env["DATABASE_URL"]) as connection:
        connection.execute(
            "UPDATE authn_session SET created_at = created_at - make_interval(secs => %s) WHERE id = %s",
            (seconds, session_id),
        )


def test_set_up_an_authenticator_from_the_page_and_sign_in_with_it(live, chromium):
    email = live.register()["account"]["email"]
    person = Person(chromium, live)
    person.open("/account")
    assert urlsplit(person.page.url).path == "/signin"
    person.sign_in(email)
    assert urlsplit(person.page.url).path == "/account" and person.heading() == "Your account"
    assert person.page.get_by_text(email, exact=True).count() == 1
    person.check("account")

    person.press("Set up authenticator app")
    assert person.page.locator(".qr svg").count() == 1
    secret = person.page.locator("#totp-secret").inner_text()
    person.check("account: set up")
    person.page.get_by_role("textbox", name="Code").fill("000000")
    person.press("Turn on")
    assert "Incorrect code." in person.page.locator(".field-error").inner_text()
    person.check("account: set up, wrong code")
    now = time.time()
    person.page.get_by_role("textbox", name="Code").fill(pyotp.TOTP(secret).at(now))
    person.press("Turn on")
    codes = person.page.locator("ul.codes li").all_inner_texts()
    assert len(codes) == 10
    person.check("account: recovery codes")
    with person.page.expect_navigation():
        person.page.get_by_role("link", name="Continue", exact=True).click()
    assert person.page.get_by_role("button", name="Turn off", exact=True).count() == 1
    person.check("account: authenticator on")

    person.open("/signout")
    person.press("Sign out")
    person.open("/account")
    person.sign_in(email, secret, at=now + 30)  # the next step's code: the first one is spent
    assert urlsplit(person.page.url).path == "/account" and person.heading() == "Your account"

    # An old sign-in: turning the app off asks for the password again first
    age_session(live, person.session_id(), 3600)
    person.page.get_by_role("textbox", name="Code").fill(codes[0])
    person.press("Turn off")
    assert urlsplit(person.page.url).path == "/account/confirm"
    person.check("account: confirm it's you")
    person.page.get_by_label("Password").fill(PASSWORD)
    person.press("Continue")
    person.page.get_by_role("textbox", name="Code").fill(codes[0])
    person.press("Turn off")
    assert "Your authenticator app is turned off." in person.page.locator(".notice").inner_text()
    assert person.page.get_by_role("button", name="Set up authenticator app", exact=True).count() == 1
    person.close()
    assert not person.failures, json.dumps(person.failures, indent=2)


def test_end_a_session_from_the_page_and_its_token_is_refused(live, chromium):
    _, _, operator = live.bootstrap_operator()
    tenant = create_workspace(live, operator)
    workspace = tenant["id"]
    client = create_client(live, operator, workspace)
    registered = live.register()
    email, token = registered["account"]["email"], registered["access_token"]
    add_member(live, operator, workspace, registered["account"]["id"])

    def validate(token: str) -> dict:
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": token}
        return ok(live.post("/clients/validate", body))

    assert validate(token)["authorized"] is True
    person = Person(chromium, live)
    person.open("/account")
    person.sign_in(email)
    mine = person.page.locator(f"#session-{person.session_id()}")
    assert "This device" in mine.inner_text()
    other = person.page.locator(f"#session-{sid_of(token)}")
    assert "This device" not in other.inner_text()
    assert tenant["name"] in person.page.locator("#workspaces").inner_text()
    person.check("account: two sessions")
    person.press("Sign out", within=other)
    assert "That session is signed out." in person.page.locator(".notice").inner_text()
    assert person.page.locator(f"#session-{sid_of(token)}").count() == 0
    answer = validate(token)
    assert (answer["authorized"], answer["reason"]) == (False, "token_revoked")
    assert person.page.locator(f"#session-{person.session_id()}").count() == 1  # this browser goes on
    person.close()
    assert not person.failures, json.dumps(person.failures, indent=2)


def authorize_url(live, application: dict, redirect_uri: str, state: str) -> str:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": application["client_id"],
        "redirect_uri": redirect_uri,
        "scope": "openid email",
        "state": state,
        "nonce": secrets.token_urlsafe(8),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"{live.url}/oauth2/authorize?{urlencode(query)}"


class NativeApp:
    """A native application's loopback redirect (RFC 8252 7.3): where the browser lands with its code."""

    def __init__(self):
        landed: list[str] = []

        class Callback(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/callback"):  # not the browser's favicon
                    landed.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"back in the app")

            def log_message(self, *args) -> None:
                pass

        self.landed = landed
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Callback)
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_revoke_an_applications_access_and_the_next_sign_in_asks_consent_again(live, chromium):
    _, _, operator = live.bootstrap_operator()
    acme = create_workspace(live, operator)
    registered = live.register()
    email = registered["account"]["email"]
    add_member(live, operator, acme["id"], registered["account"]["id"])
    app = NativeApp()
    redirect_uri = app.redirect_uri
    body = {"name": "Acme CRM", "type": "native", "redirect_uris": [redirect_uri], "tags": [], "meta": META}
    application = ok(live.post("/applications/create", body, token=operator, workspace=acme["id"]))
    landed = app.landed

    person = Person(chromium, live)
    person.open(authorize_url(live, application, redirect_uri, "one"))
    person.sign_in(email)
    assert person.heading() == "Acme CRM wants to access your account"
    person.press("Allow")
    assert parse_qs(urlsplit(landed[-1]).query)["state"] == ["one"]

    person.open(authorize_url(live, application, redirect_uri, "two"))  # consent remembered: no page
    assert parse_qs(urlsplit(landed[-1]).query)["state"] == ["two"] and len(landed) == 2

    person.open("/account")
    applications = person.page.locator("#applications")
    assert "Acme CRM" in applications.inner_text() and acme["name"] in applications.inner_text()
    person.check("account: an application")
    person.press("Revoke access", within=applications)
    assert "access is revoked" in person.page.locator(".notice").inner_text()
    assert "Acme CRM" not in person.page.locator("#applications").inner_text()

    person.open(authorize_url(live, application, redirect_uri, "three"))
    assert person.heading() == "Acme CRM wants to access your account"  # asked again
    assert len(landed) == 2
    person.close()
    app.close()
    assert not person.failures, json.dumps(person.failures, indent=2)


def test_change_the_password_without_javascript(live, chromium):
    registered = live.register()
    email, token = registered["account"]["email"], registered["access_token"]
    person = Person(chromium, live, javascript=False)
    page = person.page
    person.open("/account")
    person.sign_in(email)
    before = person.session_id()
    page.get_by_label("Current password").fill("not-my-password")
    page.get_by_label("New password").fill("a-brand-new-passphrase")
    person.press("Change password")
    assert "Incorrect password." in page.locator(".field-error").inner_text()
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password").fill("a-brand-new-passphrase")
    person.press("Change password")
    assert "Your password is changed." in page.locator(".notice").inner_text()
    assert person.session_id() != before  # this browser goes on in a new session
    assert live.post("/sessions/list", {}, token=token).status_code == 401  # every other one ended
    ok(live.post("/auth/login", {"email": email, "password": "a-brand-new-passphrase"}))
    person.close()
