"""The OpenID Provider's pages in a real browser (Chromium through Playwright, against the test server):
the workspace chooser, the consent page, the error page and the sign-out pages have no serious or
critical axe-core violation at 1280 and 320 px and no sideways scroll; a person gets from an application's
authorization request to its redirect URI with a code, through /signin, the chooser and consent, with
JavaScript off."""

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.factories import PASSWORD
from tests.oidc.conftest import request_for
from tests.pages.test_pages_browser import Audit, chromium, person, submit  # noqa: F401 (a fixture)

from .conftest import make_app, member

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def apps(root):
    from tests.factories import WorkspaceFactory

    acme = WorkspaceFactory(name="Acme", slug="acme")
    globex = WorkspaceFactory(name="Globex", slug="globex")
    ada, _ = person("ada@example.com")
    for workspace in (acme, globex):
        member(ada, workspace)
    return {"portal": make_app(root, "Portal"), "crm": make_app(acme, "Acme CRM"), "ada": ada}


def back_in(page, app, button: str) -> dict:
    """Clicks `button` and answers the query the browser brings to the application's redirect URI (not a
    real host: the browser's request is what counts)."""
    with page.expect_request(lambda request: request.url.startswith(app.redirect_uri)) as sent:
        page.get_by_role("button", name=button, exact=True).click()
    page.wait_for_url("chrome-error://**")  # the browser's own page for a host it cannot reach
    return parse_qs(urlsplit(sent.value.url).query)


def sign_in(page, email: str) -> None:
    page.get_by_label("Email").fill(email)
    submit(page, "Continue")
    page.get_by_label("Password").fill(PASSWORD)
    submit(page, "Sign in")


def test_every_page_passes_axe_at_1280_and_320(chromium, live_server, apps):  # noqa: F811
    context = chromium.new_context(bypass_csp=True)  # lets axe's script in; the CSP is tested apart
    page = context.new_page()
    page.set_default_timeout(15_000)
    audit = Audit(page)
    url = live_server.url

    page.goto(f"{url}/oauth2/authorize?{urlencode(request_for(apps['portal']).params)}")
    sign_in(page, "ada@example.com")
    audit.check("workspace chooser")
    assert back_in(page, apps["portal"], "Globex")["code"]

    page.goto(f"{url}/oauth2/authorize?{urlencode(request_for(apps['crm']).params)}")
    audit.check("consent")
    assert back_in(page, apps["crm"], "Allow")["code"]

    page.goto(
        f"{url}/oauth2/authorize?{urlencode(request_for(apps['crm'], redirect_uri='https://x.example/').params)}"
    )
    audit.check("error")
    page.goto(f"{url}/oauth2/logout")
    audit.check("sign out?")
    submit(page, "Sign out")
    audit.check("signed out")
    context.close()
    assert not audit.failures, audit.failures


def test_a_person_reaches_the_application_without_javascript(chromium, live_server, apps):  # noqa: F811
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    asked = request_for(apps["crm"])
    first = page.goto(f"{live_server.url}/oauth2/authorize?{urlencode(asked.params)}")
    assert first.status == 200  # /signin, after the redirect
    sign_in(page, "ada@example.com")
    assert page.locator("h1").inner_text() == "Acme CRM wants to access your account"
    assert page.get_by_text("See your email address").count() == 1
    query = back_in(page, apps["crm"], "Allow")
    assert query["state"] == [asked.params["state"]] and query["code"] and query["iss"]
    context.close()
