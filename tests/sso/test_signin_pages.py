"""Home-realm discovery on the hosted sign-in page (docs/pages.md): an address of a domain an enabled
connection verified goes to the workspace's provider, and the callback lands back in the browser session
and goes on to `next`, with no token in any URL; only the browser that started the login finishes it;
an account with TOTP gives its code on the page; the API's SSO flow is untouched."""

import time
from urllib.parse import urlsplit

import pyotp
import pytest
import requests
from django.test import Client

from accounts.models import Account
from authn import mfa, throttling
from authn.models import OAuthState, Session
from rbac.models import Membership
from tests.conftest import ok
from tests.factories import AccountFactory, CredentialFactory
from tests.pages.helpers import browser_session, label_for, text

from .test_login import connect


@pytest.fixture(autouse=True)
def _public_urls(settings):
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example.com"]
    settings.IAM_PUBLIC_URL = "http://testserver"


def start(browser: Client, email: str, next_url: str = "/there") -> str:
    """The e-mail step, then the provider's /authorize: the callback URL it sends the browser to."""
    response = browser.post(f"/signin?next={next_url}", {"email": email})
    assert response.status_code == 302, text(response)
    answer = requests.get(response["Location"], allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    return answer.headers["Location"]


def back(browser: Client, callback_url: str):
    parts = urlsplit(callback_url)
    assert parts.path == "/auth/sso/callback"
    return browser.get(f"{parts.path}?{parts.query}")


def test_an_sso_address_signs_in_through_its_provider_into_the_browser_session(admin, idp, workspace):
    connect(admin, idp)
    browser = Client()
    response = browser.post("/signin?next=/there", {"email": "Alice@acme.test"})
    assert response.status_code == 302 and response["Location"].startswith(f"{idp.issuer}/authorize?")
    assert OAuthState.objects.get().signin_next == "/there"
    landed = back(
        browser, requests.get(response["Location"], allow_redirects=False, timeout=5).headers["Location"]
    )
    assert landed.status_code == 302 and landed["Location"] == "/there"  # no token, no code: a path here
    record = browser_session(browser)
    alice = Account.objects.get(email="alice@acme.test")
    assert (record.account_id, record.kind, record.amr) == (alice.pk, Session.Kind.BROWSER, ["fed"])
    assert record.sso_workspace_id == workspace.pk  # meets the workspace's MFA policy, as through the API
    assert Membership.objects.filter(account=alice, workspace=workspace, status="active").exists()
    assert alice.email in text(browser.get("/signin/done"))


def test_only_the_browser_that_started_the_login_finishes_it(admin, idp):
    connect(admin, idp)
    victim, attacker = Client(), Client()
    callback = start(attacker, "alice@acme.test")
    refused = back(victim, callback)  # a login CSRF: the attacker's callback URL opened by the victim
    assert refused.status_code == 400
    assert "Single sign-on did not complete." in text(refused)
    assert "iam_session" not in victim.cookies
    assert back(attacker, callback).status_code == 302  # the state was not spent by the refusal


def test_a_state_works_once(admin, idp):
    connect(admin, idp)
    browser = Client()
    callback = start(browser, "alice@acme.test")
    assert back(browser, callback).status_code == 302
    again = Client()
    again.cookies = browser.cookies
    assert back(again, callback).status_code == 400


def test_a_provider_failure_shows_the_sign_in_page_with_the_error(admin, idp):
    connect(admin, idp)
    idp.id_token_overrides = {"nonce": "not-the-one-sent"}
    browser = Client()
    failed = back(browser, start(browser, "alice@acme.test"))
    assert failed.status_code == 400
    assert "Single sign-on did not complete." in text(failed) and label_for(text(failed), "Email")
    assert "iam_session" not in browser.cookies


def test_an_account_with_totp_gives_its_code_on_the_page(admin, idp, workspace):
    connect(admin, idp)
    alice = AccountFactory(email="alice@acme.test")
    CredentialFactory(account=alice)
    secret = mfa.enroll(alice)["secret"]
    mfa.confirm(alice, pyotp.TOTP(secret).now())
    browser = Client()
    landed = back(browser, start(browser, "alice@acme.test"))
    assert landed.status_code == 302 and landed["Location"] == "/signin/code?next=%2Fthere"
    assert "iam_session" not in browser.cookies
    next_step = pyotp.TOTP(secret).at(int(time.time()) + 30)  # the code that turned it on is spent
    done = browser.post("/signin/code?next=%2Fthere", {"code": next_step})
    assert done.status_code == 302 and done["Location"] == "/there"
    record = browser_session(browser)
    assert record.amr == ["fed", "otp", "mfa"] and record.sso_workspace_id == workspace.pk


def test_an_unverified_or_disabled_connection_gets_the_password_step(admin, idp):
    connection = connect(admin, idp, verified=(), unverified=("acme.test",))
    browser = Client()
    step = browser.post("/signin", {"email": "alice@acme.test"})
    assert step.status_code == 200 and label_for(text(step), "Password")
    ok(admin.call("/sso/update", {"id": str(connection.pk), "enabled": False}))
    assert browser.post("/signin", {"email": "alice@acme.test"}).status_code == 200


def test_sso_starts_from_the_page_are_throttled_per_address(admin, idp, monkeypatch):
    connect(admin, idp)
    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 1)
    browser = Client()
    assert browser.post("/signin", {"email": "alice@acme.test"}).status_code == 302
    waiting = browser.post("/signin", {"email": "alice@acme.test"})
    assert waiting.status_code == 429 and "Retry-After" in waiting
    assert OAuthState.objects.count() == 1


def test_the_api_flow_still_redirects_to_the_app(api, admin, idp):
    connect(admin, idp)
    url = ok(
        api.call(
            "/auth/sso/initiate", {"email": "alice@acme.test", "redirect_url": "https://app.example.com/x"}
        )
    )
    callback = requests.get(url["authorization_url"], allow_redirects=False, timeout=5).headers["Location"]
    response = back(Client(), callback)
    assert response.status_code == 302 and response["Location"].startswith("https://app.example.com/x?")
    assert "access_token=" in response["Location"]
