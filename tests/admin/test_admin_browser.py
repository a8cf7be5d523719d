"""The admin in a real browser: headless Chromium from Debian (`/usr/bin/chromium`, installed by
`.ci/install-browser`) driven by Playwright, against the live test server. Outside CI a machine without
Chromium skips this; in CI (CI=true) a missing browser fails the run."""

import os
import shutil

import pytest
from django.db import connections

from clients.models import Client
from iam.platform import crypto
from rbac.models import Membership, Role
from tenancy.models import Workspace
from tests.factories import PASSWORD, AccountFactory, WorkspaceFactory

CHROMIUM = os.environ.get("IAM_CHROMIUM", "/usr/bin/chromium")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the browser test: see .ci/install-browser)")
    pytest.skip(reason)


@pytest.fixture
def browser(monkeypatch):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -e '.[dev]')")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set IAM_CHROMIUM)")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still plain
    # synchronous code, which Django would otherwise refuse.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
            # ORM calls made while Playwright's loop runs get database connections of their own context
            # (Django keeps connections in context-local storage); close them, or the test database
            # cannot be dropped at the end of the run.
            connections.close_all()


def test_operator_signs_in_creates_a_workspace_and_a_role(browser, live_server, tmp_path):
    operator = AccountFactory(email="operator@example.com", is_superuser=True)
    page = browser.new_page()
    page.set_default_timeout(15_000)

    page.goto(f"{live_server.url}/admin/")
    assert "/admin/login/" in page.url
    page.fill("#id_username", "Operator@Example.com")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    assert page.locator("#site-name").inner_text() == "IAM"
    assert page.locator("text=View site").count() == 0

    page.goto(f"{live_server.url}/admin/tenancy/workspace/add/")
    page.fill("#id_name", "Acme Corp")
    page.fill("#id_slug", "acme")
    page.click("input[name=_save]")
    page.wait_for_url(f"{live_server.url}/admin/tenancy/workspace/")
    assert page.locator("#result_list").get_by_text("acme", exact=True).count() == 1
    workspace = Workspace.objects.get(slug="acme")
    owner = Membership.objects.get(workspace=workspace, account=operator)
    assert [role.name for role in owner.roles.all()] == ["owner"]  # rbac.services.workspaces.create_workspace
    screenshot = tmp_path / "workspaces.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.exists() and screenshot.stat().st_size > 0

    page.goto(f"{live_server.url}/admin/rbac/role/add/")
    page.fill("#id_workspace", str(workspace.pk))
    page.fill("#id_name", "auditors")
    page.select_option("#id_permissions_from", label="acme: *")
    page.click("#id_permissions_add")
    page.click("input[name=_save]")
    page.wait_for_url(f"{live_server.url}/admin/rbac/role/")
    page.fill("#searchbar", "auditors")
    page.press("#searchbar", "Enter")
    page.wait_for_load_state()
    assert page.locator("#result_list").get_by_text("auditors", exact=True).count() == 1
    role = Role.objects.get(workspace=workspace, name="auditors")
    assert list(role.permissions.values_list("name", flat=True)) == ["*"]


def test_operator_creates_a_client_and_sees_its_secret_once(browser, live_server, tmp_path):
    AccountFactory(email="operator@example.com", is_superuser=True)
    workspace = WorkspaceFactory(slug="acme")
    page = browser.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/clients/client/add/")
    page.fill("#id_username", "operator@example.com")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/clients/client/add/")

    page.fill("#id_workspace", str(workspace.pk))
    page.fill("#id_name", "billing")
    page.fill("#id_endpoint", "https://hooks.example.com/iam")
    page.click("input[name=_save]")
    secret = page.locator("code.client-secret").inner_text()
    page.screenshot(path=str(tmp_path / "client-secret.png"), full_page=True)

    client = Client.objects.get(workspace=workspace, name="billing")
    assert crypto.digest(secret) == client.secret_digest
    page.click("text=Continue")
    page.wait_for_url(f"{live_server.url}/admin/clients/client/{client.pk}/change/")
    assert secret not in page.content()
    page.reload()
    assert secret not in page.content()


def test_an_operator_with_totp_signs_in_in_two_steps(browser, live_server):
    """The admin asks an operator who enrolled TOTP for a code after the password: a wrong one is
    refused, a right one signs in; a code already used does not sign in a second browser."""
    import pyotp
    from django.utils import timezone

    from authn.models import Totp

    operator = AccountFactory(email="operator@example.com", is_superuser=True)
    secret = pyotp.random_base32()
    Totp.objects.create(
        account=operator, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now()
    )

    def password_step(page) -> None:
        page.set_default_timeout(15_000)
        page.goto(f"{live_server.url}/admin/login/?next=/admin/authn/session/")
        page.fill("#id_username", "operator@example.com")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{live_server.url}/admin/login/code/")

    page = browser.new_page()
    password_step(page)
    page.goto(f"{live_server.url}/admin/")  # not signed in yet
    assert "/admin/login/" in page.url and "/code/" not in page.url
    password_step(page)
    page.fill("#id_code", "000000")
    page.click("input[type=submit]")
    assert page.locator(".errorlist").inner_text() == "Invalid code."
    code = pyotp.TOTP(secret).now()
    page.fill("#id_code", code)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/authn/session/")
    assert page.locator("#site-name").inner_text() == "IAM"

    other = browser.new_context().new_page()
    password_step(other)
    other.fill("#id_code", code)
    other.click("input[type=submit]")
    assert other.locator(".errorlist").inner_text() == "Invalid code."
    other.goto(f"{live_server.url}/admin/")
    assert "/admin/login/" in other.url
