"""The self-service pages as deployed (gunicorn, DEBUG off, PostgreSQL, Redis, the worker mailing), with a
person in Debian's Chromium (Playwright): signing up and confirming with the link the worker mailed,
forgetting and resetting a password (every earlier token then refused by `clients/validate`), accepting
an invitation as the invited address and being refused it as another, two accounts in two workspaces.
The e-mails' links are the service's own pages (IAM_FRONTEND_URL unset). axe-core checks every page at
1280 and 320 px, in a context that lets its script in; the person's own context keeps the pages' CSP,
and no page breaks it."""

import os
import re
import shutil
from urllib.parse import urlsplit

import pytest

from tests.pages.chromium import axe_script, violations

from .api import META, create_client, create_role, create_workspace, ok, unique
from .conftest import PASSWORD

CHROMIUM = os.environ.get("IAM_CHROMIUM", "/usr/bin/chromium")
NEW_PASSWORD = "a brand new long passphrase"
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"  # IAM_PUBLIC_URL's default: the worker's links start with it
WIDTHS = (1280, 320)


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[dev]')")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        unavailable(f"no Chromium at {CHROMIUM} (.ci/install-browser)")
    axe_script()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield browser
        browser.close()


class Person:
    """A person in their own browser, with the pages' CSP in force: a violation would be logged."""

    def __init__(self, chromium, live):
        self.live = live
        self.context = chromium.new_context(java_script_enabled=False)  # the pages need none
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.csp_violations: list[str] = []
        self.page.on(
            "console",
            lambda message: (
                self.csp_violations.append(message.text)
                if "Content Security Policy" in message.text
                else None
            ),
        )

    def open(self, path: str) -> None:
        self.page.goto(f"{self.live.url}{path}")

    def fill(self, label: str, value: str) -> None:
        self.page.get_by_label(label, exact=True).fill(value)

    def press(self, name: str, role: str = "button") -> None:
        with self.page.expect_navigation():
            self.page.get_by_role(role, name=name, exact=True).click()

    def heading(self) -> str:
        return self.page.locator("h1").inner_text()

    def has(self, name: str, role: str = "button") -> bool:
        return self.page.get_by_role(role, name=name, exact=True).count() == 1

    def close(self) -> None:
        assert not self.csp_violations, self.csp_violations
        self.context.close()


class Axe:
    """Opens each page in a context that lets axe's script in, at every width."""

    def __init__(self, chromium, live):
        self.live = live
        self.context = chromium.new_context(bypass_csp=True)
        self.page = self.context.new_page()
        self.failures: dict[str, list] = {}

    def check(self, path: str, name: str, person: "Person | None" = None) -> None:
        """The page at `path` as `person`'s browser sees it (its cookies: signed in or not)."""
        self.context.clear_cookies()
        if person is not None:
            self.context.add_cookies(person.context.cookies())
        self.page.goto(f"{self.live.url}{path}")
        self._audit(name)

    def check_shown(self, person: "Person", name: str) -> None:
        """The page `person` is on (the answer of a POST, which cannot be opened again)."""
        self.page.goto(f"{self.live.url}/signin")  # the same origin: its stylesheet loads
        self.page.set_content(person.page.content())
        self._audit(name)

    def _audit(self, name: str) -> None:
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

    def close(self) -> None:
        self.context.close()
        assert not self.failures, self.failures


def mailed_link(live, address: str, subject: str) -> str:
    """The path of the link in the newest e-mail of `subject` the worker sent `address`."""
    messages = live.wait_for(
        lambda: [m for m in live.emails_to(address) if m["Subject"] == subject],
        what=f"the e-mail {subject!r} to {address}",
    )
    body = messages[-1].get_body(preferencelist=("plain",)).get_content()
    link = re.search(r"(https?://\S+/(?:confirm-email|reset-password|accept-invitation)\?token=\S+)", body)
    assert link, body
    parts = urlsplit(link.group(1))
    assert f"{parts.scheme}://{parts.netloc}" == DEFAULT_PUBLIC_URL  # the service's own pages
    return f"{parts.path}?{parts.query}"


@pytest.fixture(scope="module")
def world(live):
    _, _, operator = live.bootstrap_operator()
    acme, globex = create_workspace(live, operator), create_workspace(live, operator)
    # docs/pages.md#branding: a pale brand colour, which the pages darken until it reads
    branding = {"display_name": "Globex Portal", "primary_color": "#FFD700"}
    globex = ok(live.post("/workspace/update", {"id": globex["id"], "branding": branding}, token=operator))
    assert globex["branding"] == {"display_name": "Globex Portal", "primary_color": "#ffd700"}
    client = create_client(live, operator, acme["id"])
    roles = {
        workspace["id"]: create_role(live, operator, workspace["id"])["name"] for workspace in (acme, globex)
    }
    return {"operator": operator, "acme": acme, "globex": globex, "client": client, "roles": roles}


def validate(live, client: dict, token: str) -> dict:
    body = {"client_id": client["id"], "client_secret": client["secret"], "token": token}
    return ok(live.post("/clients/validate", body))


def invite(live, world, workspace: dict, email: str) -> None:
    role = next(
        role
        for role in ok(live.post("/roles/list", {}, token=world["operator"], workspace=workspace["id"]))[
            "roles"
        ]
        if role["name"] == world["roles"][workspace["id"]]
    )
    body = {"email": email, "scope": "workspace", "role_ids": [role["id"]], "meta": META}
    ok(live.post("/invitations/create", body, token=world["operator"], workspace=workspace["id"]))


def test_sign_up_confirm_forget_reset_and_invitations(live, world, chromium):
    axe = Axe(chromium, live)
    ada_email = f"{unique('ada')}@example.com"
    ada = Person(chromium, live)

    # Sign up, then confirm with the mailed link
    ada.open("/signup")
    axe.check("/signup", "sign up")
    ada.fill("Name", "Ada")
    ada.fill("Email", ada_email)
    ada.fill("Password", PASSWORD)
    ada.press("Create account")
    assert ada.heading() == "Check your email"
    axe.check_shown(ada, "check your email")
    confirm = mailed_link(live, ada_email, "Confirm your e-mail address")
    axe.check(confirm, "confirm email")
    ada.open(confirm)
    assert ada.heading() == "Confirm your email"  # opening it did nothing yet
    ada.press("Confirm email")
    assert ada.heading() == "Email confirmed"
    axe.check_shown(ada, "email confirmed")
    session = ok(live.post("/auth/login", {"email": ada_email, "password": PASSWORD}))
    assert session["account"]["verified"] is True

    # A bad link, and the form that sends a new one
    axe.check("/confirm-email?token=nope", "link no longer valid")
    ada.open("/confirm-email?token=nope")
    assert ada.heading() == "This link is no longer valid"
    ada.press("Send a new link", role="link")
    axe.check("/confirm-email/resend", "send a new link")
    ada.fill("Email", ada_email)
    ada.press("Send")
    assert ada.heading() == "Check your email"

    # Forget and reset the password: every earlier session ends
    account_id = session["account"]["id"]
    ok(
        live.post(
            "/memberships/create",
            {
                "account_id": account_id,
                "scope": "workspace",
                "status": "active",
                "role_ids": [],
                "tags": [],
                "meta": META,
            },
            token=world["operator"],
            workspace=world["acme"]["id"],
        )
    )
    assert validate(live, world["client"], session["access_token"])["authorized"] is True
    ada.open("/signin")
    ada.fill("Email", ada_email)
    ada.press("Continue")
    ada.fill("Password", PASSWORD)
    ada.press("Sign in")  # a browser session, which the new password ends too
    assert ada.page.url == f"{live.url}/signin/done"
    ada.open("/signin")
    ada.press("Forgot password?", role="link")
    axe.check("/forgot-password", "forgot password")
    ada.fill("Email", ada_email)
    ada.press("Send reset link")
    assert ada.heading() == "Check your email"
    reset = mailed_link(live, ada_email, "Reset your password")
    axe.check(reset, "reset password")
    ada.open(reset)
    ada.fill("New password", NEW_PASSWORD)
    ada.press("Set password")
    assert ada.heading() == "Password changed"
    axe.check_shown(ada, "password changed")
    answer = validate(live, world["client"], session["access_token"])
    assert answer["authorized"] is False, answer  # the earlier token is refused
    ada.open(reset)
    assert ada.heading() == "This link is no longer valid"  # works once
    ada.open("/signin/done")
    assert "/signin" in ada.page.url and ada.heading() == "Sign in"  # the browser session ended too

    # An invitation to Ada's address: signed out, she signs in from the page, comes back and accepts
    invite(live, world, world["globex"], ada_email)
    invitation = mailed_link(live, ada_email, "You are invited to a workspace")
    axe.check(invitation, "invitation, signed out")
    ada.open(invitation)
    assert "Join Globex Portal" in ada.page.locator("main").inner_text()
    assert ada.page.locator(".brand-name").inner_text() == "Globex Portal"
    # the colour came through the service's stylesheet, under the pages' CSP (darkened: #ffd700 is pale)
    accent = ada.page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent')")
    assert accent.strip() == "#7d6900", accent
    assert not ada.has("Accept")
    ada.press("Sign in", role="link")
    assert ada.page.get_by_label("Email").input_value() == ada_email
    ada.press("Continue")
    ada.fill("Password", NEW_PASSWORD)
    ada.press("Sign in")
    assert ada.page.url == f"{live.url}{invitation}"  # back on the invitation
    assert world["roles"][world["globex"]["id"]] in ada.page.locator("main").inner_text()
    axe.check(invitation, "invitation, signed in", ada)
    ada.press("Accept")
    assert ada.heading() == "Invitation accepted"
    axe.check_shown(ada, "invitation accepted")
    ada_token = ok(live.post("/auth/login", {"email": ada_email, "password": NEW_PASSWORD}))["access_token"]
    workspaces = ok(live.post("/workspace/list", {}, token=ada_token))["workspaces"]
    assert {world["globex"]["id"], world["acme"]["id"]} <= {workspace["id"] for workspace in workspaces}

    # Bob's invitation, opened in Ada's browser: it is not hers to accept
    bob_email = f"{unique('bob')}-with-a-rather-long-address@example-company.com"  # wraps at 320 px
    invite(live, world, world["acme"], bob_email)
    bobs = mailed_link(live, bob_email, "You are invited to a workspace")
    ada.open(bobs)
    assert f"This invitation is for {bob_email}" in ada.page.locator("main").inner_text()
    assert not ada.has("Accept") and ada.has("Sign out")
    axe.check(bobs, "invitation, another address", ada)
    # Her browser's own POST of Accept (with its CSRF token) is refused as `invitations/accept` would be
    csrf = ada.page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    forced = ada.context.request.post(
        f"{live.url}/accept-invitation",
        form={"csrfmiddlewaretoken": csrf, "token": bobs.split("token=", 1)[1], "action": "accept"},
    )
    assert forced.status == 403, forced.status
    pending = ok(
        live.post(
            "/invitations/list",
            {"filter": {"fields": {"email": bob_email}}},
            token=world["operator"],
            workspace=world["acme"]["id"],
        )
    )["invitations"]
    assert [invitation["status"] for invitation in pending] == ["pending"]
    ada.press("Sign out")
    assert ada.page.url == f"{live.url}{bobs}" and ada.has("Create account", "link")

    # Bob creates his account from the invitation, and accepts
    bob = Person(chromium, live)
    bob.open(bobs)
    bob.press("Create account", role="link")
    created = urlsplit(bob.page.url)
    axe.check(f"{created.path}?{created.query}", "invitation: create account")
    bob.fill("Name", "Bob")
    bob.fill("Password", PASSWORD)
    bob.press("Create account")
    assert bob.page.url == f"{live.url}{bobs}"
    assert bob.has("Accept") and bob.has("Decline")
    bob.press("Accept")
    assert bob.heading() == "Invitation accepted"
    bob_token = ok(live.post("/auth/login", {"email": bob_email, "password": PASSWORD}))["access_token"]
    bob_workspaces = ok(live.post("/workspace/list", {}, token=bob_token))["workspaces"]
    assert [workspace["id"] for workspace in bob_workspaces] == [world["acme"]["id"]]
    assert world["globex"]["id"] not in [workspace["id"] for workspace in bob_workspaces]

    ada.close()
    bob.close()
    axe.close()
