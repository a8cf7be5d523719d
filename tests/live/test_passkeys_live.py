"""Passkeys as deployed (docs/pages.md#passkeys), in Chromium with its virtual authenticator (CDP
`WebAuthn.addVirtualAuthenticator`: CTAP2, internal, resident keys, user verification): a web tier whose
`IAM_PUBLIC_URL` is `http://localhost:<port>` (an IP address is no RP id; browsers take localhost as a
secure context), so the RP id is `localhost` and the origin the tier's. A person adds a passkey on the
account page (`Passkey name`, `Add a passkey`), signs out, signs in with `Sign in with a passkey` (the
one script, the service's own file, no address typed), then a password sign-in asks for the passkey on
`/signin/code` and the passkey completes it; the pages pass axe-core. A device holding no passkey signs
nobody in."""

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.authn.soft_authenticator import SoftAuthenticator
from tests.pages.chromium import CHROMIUM, unavailable, violations

from .api import err, ok
from .conftest import PASSWORD, free_port, web_command


class Tier:
    """A web tier whose public URL (and so its RP id and origin) is `http://localhost:<port>`, or, for a
    second tier of the same service, `public_url`."""

    def __init__(self, live, public_url: str | None = None):
        port = free_port()
        self.url = f"http://localhost:{port}"
        self.public_url = public_url or self.url
        env = {"IAM_PUBLIC_URL": self.public_url}
        process = live.spawn(f"web-passkeys-{port}", web_command(port, 2), env)
        live.wait_for_web(process, f"http://127.0.0.1:{port}")

    def post(self, path: str, body: dict, token: str | None = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.post(f"{self.url}{path}", json=body, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def tier(live):
    return Tier(live)


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


class Device:
    """A browser profile with one platform authenticator of its own, as a phone or a laptop is."""

    def __init__(self, chromium, tier: Tier):
        self.tier = tier
        self.context = chromium.new_context()
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.scripts: list[str] = []
        self.page.on("request", lambda request: self._saw(request))
        cdp = self.context.new_cdp_session(self.page)
        cdp.send("WebAuthn.enable", {"enableUI": False})
        self.authenticator = cdp.send(
            "WebAuthn.addVirtualAuthenticator",
            {
                "options": {
                    "protocol": "ctap2",
                    "transport": "internal",
                    "hasResidentKey": True,
                    "hasUserVerification": True,
                    "isUserVerified": True,
                    "automaticPresenceSimulation": True,
                }
            },
        )["authenticatorId"]
        self.cdp = cdp

    def _saw(self, request) -> None:
        if request.resource_type == "script":
            self.scripts.append(request.url)

    def open(self, path: str) -> None:
        self.page.goto(f"{self.tier.url}{path}")

    def press(self, name: str, role: str = "button") -> None:
        with self.page.expect_navigation():
            self.page.get_by_role(role, name=name, exact=True).click()

    def sign_in_with_password(self, email: str) -> None:
        self.open("/signin")
        self.page.get_by_label("Email").fill(email)
        self.press("Continue")
        self.page.get_by_label("Password").fill(PASSWORD)
        self.press("Sign in")

    def sign_out(self) -> None:
        self.open("/signout")
        self.press("Sign out")
        assert self.page.locator("h1").inner_text() == "You are signed out"

    def credentials(self) -> list[dict]:
        found = self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.authenticator})
        return found["credentials"]

    def axe(self, name: str) -> list:
        """axe-core over the page this device shows, at 1280 and 320 px: in a context of its own with the
        device's cookies that lets axe's script past the CSP (this one keeps the pages' CSP, so the
        ceremonies run under it)."""
        auditor = self.context.browser.new_context(bypass_csp=True)
        try:
            auditor.add_cookies(self.context.cookies())
            page = auditor.new_page()
            page.goto(self.page.url)
            found = []
            for width in (1280, 320):
                page.set_viewport_size({"width": width, "height": 900})
                found += [(f"{name} @ {width}px", violation) for violation in violations(page)]
            return found
        finally:
            auditor.close()

    def close(self) -> None:
        self.context.close()


def sessions_of(live, token: str) -> list[dict]:
    return ok(live.post("/sessions/list", {}, token=token))["sessions"]


@pytest.mark.browser
def test_register_sign_out_sign_in_with_the_passkey_and_complete_an_mfa_token(live, tier, chromium):
    person = live.register()
    email, token = person["account"]["email"], person["access_token"]
    device = Device(chromium, tier)
    failures = []
    try:
        # signed in with the password, the person adds a passkey on the account page
        device.sign_in_with_password(email)
        device.page.wait_for_url(f"{tier.url}/signin/done")
        device.open("/account")
        failures += device.axe("account")
        device.page.get_by_label("Passkey name").fill("This laptop")
        device.press("Add a passkey")
        device.page.wait_for_url("**/account?done=passkey-added")
        assert "This laptop" in device.page.locator("#passkeys").inner_text()
        failures += device.axe("account: a passkey added")
        [passkey] = ok(live.post("/passkeys/list", {}, token=token))["passkeys"]
        assert passkey["name"] == "This laptop" and passkey["last_used_at"] is None
        [stored] = device.credentials()
        assert stored["isResidentCredential"] is True and stored["rpId"] == "localhost"
        device.sign_out()

        # signed out: Sign in with a passkey, no address typed
        device.open("/signin?next=/signin/done")
        failures += device.axe("sign in with a passkey offered")
        device.press("Sign in with a passkey")
        device.page.wait_for_url(f"{tier.url}/signin/done")
        assert email in device.page.locator("main").inner_text()
        assert any(url.startswith(f"{tier.url}/static/pages/passkeys.") for url in device.scripts), (
            device.scripts
        )
        assert any(session["amr"] == ["hwk", "user", "mfa"] for session in sessions_of(live, token)), (
            "no passkey session"
        )
        listed = ok(live.post("/passkeys/list", {}, token=token))["passkeys"]
        assert listed[0]["id"] == passkey["id"] and listed[0]["last_used_at"] is not None
        device.sign_out()

        # a password sign-in now asks for the second factor: the passkey completes the mfa_token
        device.sign_in_with_password(email)
        device.page.wait_for_url("**/signin/code?**")
        failures += device.axe("second factor: use a passkey")
        assert device.page.get_by_label("Code").count() == 0  # no authenticator app to ask a code of
        device.press("Use a passkey")
        device.page.wait_for_url(f"{tier.url}/signin/done")
        assert any(session["amr"] == ["pwd", "hwk", "mfa"] for session in sessions_of(live, token))
        # the API says the same to a password login
        assert ok(live.post("/auth/login", {"email": email, "password": PASSWORD}))["mfa_required"] is True
    finally:
        device.close()
    assert not failures, failures


@pytest.mark.browser
def test_a_device_without_a_passkey_signs_nobody_in(live, tier, chromium):
    ada = live.register()
    stranger = Device(chromium, tier)
    try:
        # a device holding no passkey of this RP: the browser finds none, the page stays and says so
        stranger.open("/signin")
        stranger.page.get_by_role("button", name="Sign in with a passkey", exact=True).click()
        alert = stranger.page.locator("[data-passkey-error]")
        alert.wait_for(state="visible")
        assert "No passkey was used" in alert.inner_text()
        assert stranger.page.url.startswith(f"{tier.url}/signin")
        assert not [session for session in sessions_of(live, ada["access_token"]) if "hwk" in session["amr"]]
    finally:
        stranger.close()


def test_a_challenge_works_once_across_web_processes(live, tier):
    """Two web tiers of one service (the same public URL, so the same RP id and origin), sharing only
    PostgreSQL and Redis: a challenge one handed out is checked by the other, and of 8 uses of one
    assertion sent at once to both, one signs in."""
    other = Tier(live, public_url=tier.url)
    person = live.register()
    key = SoftAuthenticator(origin=tier.url)
    options = ok(tier.post("/auth/passkeys/register/options", {}, person["access_token"]))
    registered = other.post(
        "/auth/passkeys/register/verify",
        {"credential": key.create(options), "name": "k"},
        person["access_token"],
    )
    assert ok(registered)["name"] == "k"
    options = ok(other.post("/auth/passkeys/login/options", {}))
    assertion = key.get(options)
    tiers = [tier, other] * 4
    with ThreadPoolExecutor(len(tiers)) as pool:
        answers = list(
            pool.map(lambda web: web.post("/auth/passkeys/login/verify", {"credential": assertion}), tiers)
        )
    assert sorted(answer.status_code for answer in answers) == [200] + [400] * 7, [a.text for a in answers]
    for answer in answers:
        if answer.status_code == 400:
            err(answer, 400, "passkey not accepted")
