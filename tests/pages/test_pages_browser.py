"""The hosted sign-in pages in a real browser (Chromium through Playwright, against the live test server):
every page, at 1280 and at 320 px wide, has no serious or critical axe-core violation and no sideways
scroll; and a person signs in with a password and TOTP, and out, with JavaScript turned off."""

import time

import pyotp
import pytest
from django.db import connections

from authn import mfa
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

from .chromium import axe_script, launch, unavailable, violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 320)


@pytest.fixture
def chromium(monkeypatch):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[dev]')")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still plain
    # synchronous code, which Django would otherwise refuse.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()
            connections.close_all()  # the ORM's connections of Playwright's context (see the admin test)


def person(email: str, *, totp: bool = False):
    account = AccountFactory(email=email, name=email.split("@")[0].title())
    CredentialFactory(account=account)
    if not totp:
        return account, None
    secret = mfa.enroll(account)["secret"]
    mfa.confirm(account, pyotp.TOTP(secret).at(int(time.time()) - 30))  # the current step stays unused
    return account, secret


def submit(page, name: str, role: str = "button") -> None:
    """Clicks the button (or link) of exactly these words, and waits for the page it loads."""
    with page.expect_navigation():
        page.get_by_role(role, name=name, exact=True).click()


class Audit:
    """Checks each page it is shown at every width, and collects what fails."""

    def __init__(self, page):
        self.page = page
        self.failures: dict[str, list] = {}
        self.seen: list[str] = []

    def check(self, name: str) -> None:
        page = self.page
        self.seen.append(name)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            found = violations(page)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if found:
                self.failures[f"{name} @ {width}px"] = found
            if overflow > 0:
                self.failures[f"{name} @ {width}px: scrolls sideways by {overflow}px"] = []
        styled = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        assert styled == "rgb(243, 244, 246)", f"{name}: the stylesheet did not load"


def test_every_page_passes_axe_at_1280_and_320(chromium, live_server):
    axe_script()  # installed before the first page, not inside a timed step
    ada, secret = person("ada@example.com", totp=True)
    bob, _ = person("bob@example.com")
    context = chromium.new_context(
        bypass_csp=True
    )  # lets axe's script in; the pages' own CSP is tested apart
    page = context.new_page()
    page.set_default_timeout(15_000)
    audit = Audit(page)
    url = live_server.url

    page.goto(f"{url}/signin?next=/signin/done")
    audit.check("sign in: e-mail")
    page.fill("#id_email", "not an address")
    submit(page, "Continue")
    audit.check("sign in: e-mail refused")
    page.fill("#id_email", ada.email)
    submit(page, "Continue")
    audit.check("sign in: password")
    page.fill("#id_password", "a wrong password")
    submit(page, "Sign in")
    assert page.locator("text=Incorrect email or password.").count() == 1
    audit.check("sign in: password refused")
    page.fill("#id_password", PASSWORD)
    submit(page, "Sign in")
    page.wait_for_url("**/signin/code?**")
    audit.check("second factor: code")
    page.fill("#id_code", "000000")
    submit(page, "Verify")
    audit.check("second factor: code refused")
    submit(page, "Use a recovery code", role="link")
    audit.check("second factor: recovery code")
    submit(page, "Use your authenticator app", role="link")
    page.fill("#id_code", pyotp.TOTP(secret).now())
    submit(page, "Verify")
    page.wait_for_url(f"{url}/signin/done")
    audit.check("signed in")
    page.goto(f"{url}/signout")
    audit.check("sign out")
    submit(page, "Sign out")
    audit.check("signed out")

    # bob has no second factor: a workspace that requires one sends him to set one up
    page.goto(f"{url}/signin?next=/signin/mfa%3Fnext%3D/signin/done")
    page.fill("#id_email", bob.email)
    submit(page, "Continue")
    page.fill("#id_password", PASSWORD)
    submit(page, "Sign in")
    page.wait_for_url("**/signin/mfa?**")
    audit.check("set up: start")
    submit(page, "Set up authenticator app")
    audit.check("set up: QR code")
    bob_secret = page.locator("#totp-secret").inner_text()
    page.fill("#id_code", "000000")
    submit(page, "Turn on")
    audit.check("set up: code refused")
    page.fill("#id_code", pyotp.TOTP(bob_secret).now())
    submit(page, "Turn on")
    assert page.locator("ul.codes li").count() == 10
    audit.check("set up: recovery codes")
    submit(page, "Continue", role="link")
    page.wait_for_url(f"{url}/signin/done")

    # the step-up of a session signed in with one factor
    context.clear_cookies()
    bob_again = person("carol@example.com")[0]
    page.goto(f"{url}/signin?next=/signin/mfa%3Fnext%3D/signin/done")
    page.fill("#id_email", bob_again.email)
    submit(page, "Continue")
    page.fill("#id_password", PASSWORD)
    submit(page, "Sign in")
    page.wait_for_url("**/signin/mfa?**")
    carol_secret = mfa.enroll(bob_again)["secret"]
    mfa.confirm(bob_again, pyotp.TOTP(carol_secret).at(int(time.time()) - 30))
    page.reload()
    audit.check("step-up: code")

    # the wait after too many failures, and a form whose CSRF cookie is gone
    context.clear_cookies()
    for _ in range(6):
        page.goto(f"{url}/signin")
        page.fill("#id_email", "nobody@example.com")
        submit(page, "Continue")
        page.fill("#id_password", "a wrong password")
        submit(page, "Sign in")
    assert page.locator("h1").inner_text() == "Too many attempts"
    audit.check("too many attempts")
    page.goto(f"{url}/signin")
    context.clear_cookies()
    page.fill("#id_email", bob.email)
    submit(page, "Continue")
    assert page.locator("h1").inner_text() == "This page has expired"
    audit.check("page expired (CSRF)")

    context.close()
    assert not audit.failures, audit.failures
    assert len(audit.seen) == 17


def test_a_person_signs_in_with_password_and_totp_without_javascript(chromium, live_server):
    ada, secret = person("ada@example.com", totp=True)
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    responses = []
    page.on("response", lambda response: responses.append(response))
    url = live_server.url

    page.goto(f"{url}/signin")
    assert responses[0].headers["content-security-policy"].startswith("default-src 'self'")
    page.get_by_label("Email").fill(ada.email)
    with page.expect_navigation():
        page.get_by_role("button", name="Continue").click()
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/signin/code?**")
    page.get_by_label("Code").fill(pyotp.TOTP(secret).now())
    with page.expect_navigation():
        page.get_by_role("button", name="Verify").click()
    page.wait_for_url(f"{url}/signin/done")
    assert "ada@example.com" in page.locator("main").inner_text()
    cookie = next(cookie for cookie in context.cookies() if cookie["name"] == "iam_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"

    with page.expect_navigation():
        page.get_by_role("button", name="Sign out").click()
    assert page.locator("h1").inner_text() == "You are signed out"
    assert not [cookie for cookie in context.cookies() if cookie["name"] == "iam_session"]
    page.goto(f"{url}/signin/done")
    page.wait_for_url("**/signin?next=**")
    context.close()
