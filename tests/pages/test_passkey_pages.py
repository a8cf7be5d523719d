"""Passkeys on the hosted pages (docs/pages.md#passkeys), through Django's test client with the software
authenticator doing the script's part: `Sign in with a passkey` on `/signin`, and a passkey as the
second factor on `/signin/code`. Two browsers, two accounts: a challenge one browser asked for signs
nobody in in another."""

import json
import re

import pytest
from django.contrib.staticfiles import finders

from accounts.account_cache import forget_account
from accounts.models import Account
from authn import passkeys, throttling
from tests.authn.soft_authenticator import SoftAuthenticator

from .helpers import browser_session, button, enter_password, text, with_totp

NOT_ACCEPTED = "That passkey was not accepted. Try again, or sign in with your email."


def with_passkey(account) -> SoftAuthenticator:
    key = SoftAuthenticator()
    options = passkeys.registration_options(account, session_id=None)
    passkeys.register(account, key.create(options), name="Laptop", session_id=None)
    return key


@pytest.fixture
def ada_key(ada) -> SoftAuthenticator:
    return with_passkey(ada)


def page_options(client, purpose: str = "signin") -> dict:
    response = client.post("/signin/passkey/options", {"for": purpose})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def post_credential(client, path: str, credential):
    return client.post(path, {"credential": json.dumps(credential)})


def passkey_form(html: str, purpose: str) -> str:
    found = re.search(rf'<form [^>]*data-passkey="{purpose}".*?</form>', html, re.S)
    assert found, f"no {purpose} passkey form"
    return found.group(0)


def test_signin_offers_a_passkey_without_an_address(browser):
    html = text(browser.get("/signin?next=/oauth2/authorize%3Fx%3D1"))
    form = passkey_form(html, "signin")
    assert button(form, "Sign in with a passkey")
    assert 'action="/signin/passkey?next=%2Foauth2%2Fauthorize%3Fx%3D1"' in form
    assert 'data-options="/signin/passkey/options"' in form
    assert " hidden>" in form  # shown by the script only when the browser has WebAuthn
    assert 'name="csrfmiddlewaretoken"' in form
    assert '<script src="/static/pages/passkeys.js" defer></script>' in html
    # the address's form works as before, without the script
    assert button(html, "Continue")


def test_the_script_is_a_static_file_of_the_service():
    path = finders.find("pages/passkeys.js")  # served like pages.css (tests/live/test_passkeys_live.py)
    assert path is not None
    with open(path, encoding="utf-8") as script:
        assert "navigator.credentials.get" in script.read()


def test_sign_in_with_a_passkey(browser, ada, ada_key):
    credential = ada_key.get(page_options(browser))
    response = post_credential(browser, "/signin/passkey?next=/signin/done%3Fx%3D1", credential)
    assert response.status_code == 302 and response["Location"] == "/signin/done?x=1"
    session = browser_session(browser)
    assert session.account_id == ada.pk and session.amr == ["hwk", "user", "mfa"]


def test_a_challenge_another_browser_asked_for_signs_nobody_in(browser, other_browser, ada_key):
    credential = ada_key.get(page_options(other_browser))
    response = post_credential(browser, "/signin/passkey", credential)
    assert response.status_code == 400 and NOT_ACCEPTED in text(response)
    assert browser_session(browser) is None


def test_an_api_challenge_signs_nobody_in_on_the_page(browser, api, ada_key):
    options = api.call("/auth/passkeys/login/options").json()["data"]
    page_options(browser)
    response = post_credential(browser, "/signin/passkey", ada_key.get(options))
    assert response.status_code == 400 and browser_session(browser) is None


@pytest.mark.parametrize(
    "spoil", [{"uv": False}, {"origin": "https://evil.example"}, {"bad_signature": True}]
)
def test_a_refused_passkey_says_so_on_the_sign_in_page(browser, ada_key, spoil):
    response = post_credential(browser, "/signin/passkey", ada_key.get(page_options(browser), **spoil))
    html = text(response)
    assert response.status_code == 400 and NOT_ACCEPTED in html and 'role="alert"' in html
    assert button(html, "Continue") and browser_session(browser) is None


def test_a_garbled_credential_is_refused(browser, ada_key):
    page_options(browser)
    for raw in ("", "{", "[]", "x" * 20000):
        response = browser.post("/signin/passkey", {"credential": raw})
        assert response.status_code == 400 and NOT_ACCEPTED in text(response)


def test_a_disabled_account_gets_its_page(browser, ada, ada_key):
    Account.objects.filter(pk=ada.pk).update(enabled=False)
    forget_account(ada.pk)
    response = post_credential(browser, "/signin/passkey", ada_key.get(page_options(browser)))
    assert response.status_code == 403 and "This account is disabled" in text(response)


def test_the_address_throttle_holds_on_the_page(browser, ada_key, monkeypatch):
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 1)
    post_credential(browser, "/signin/passkey", SoftAuthenticator().get(page_options(browser)))
    response = post_credential(browser, "/signin/passkey", ada_key.get(page_options(browser)))
    assert response.status_code == 429 and int(response["Retry-After"]) > 0


def test_options_need_the_csrf_token(db):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.get("/signin")
    assert client.post("/signin/passkey/options", {"for": "signin"}).status_code == 403
    assert client.post("/signin/passkey", {"credential": "{}"}).status_code == 403


# The second factor


def test_a_password_sign_in_asks_for_the_passkey(browser, ada, ada_key):
    response = enter_password(browser, ada.email)
    assert response.status_code == 302 and response["Location"].startswith("/signin/code")
    page = browser.get(response["Location"])
    html = text(page)
    form = passkey_form(html, "mfa")
    assert button(form, "Use a passkey")
    assert 'name="code"' not in html  # no authenticator app to ask a code of
    assert '<script src="/static/pages/passkeys.js" defer></script>' in html
    options = page_options(browser, "mfa")
    assert [item["id"] for item in options["allowCredentials"]] == [ada_key.id]
    done = post_credential(browser, response["Location"], ada_key.get(options))
    assert done.status_code == 302
    session = browser_session(browser)
    assert session.account_id == ada.pk and session.amr == ["pwd", "hwk", "mfa"]


def test_an_account_with_both_factors_gets_both(browser, ada, ada_key, clock):
    with_totp(ada, clock)
    location = enter_password(browser, ada.email)["Location"]
    html = text(browser.get(location))
    assert 'name="code"' in html and button(passkey_form(html, "mfa"), "Use a passkey")


def test_a_refused_second_factor_passkey_keeps_the_sign_in_waiting(browser, ada, bob, ada_key):
    bob_key = with_passkey(bob)
    location = enter_password(browser, ada.email)["Location"]
    refused = post_credential(browser, location, bob_key.get(page_options(browser, "mfa")))
    assert refused.status_code == 400 and NOT_ACCEPTED in text(refused)
    assert browser_session(browser) is None
    ok = post_credential(browser, location, ada_key.get(page_options(browser, "mfa")))
    assert ok.status_code == 302 and browser_session(browser).account_id == ada.pk


def test_second_factor_options_without_a_pending_sign_in(browser):
    response = browser.post("/signin/passkey/options", {"for": "mfa"})
    assert response.status_code == 400


# The step-up: a browser session of one factor, sent to /signin/mfa by a workspace that requires two


def one_factor_session(browser, account):
    """A browser signed in with the password alone (before the account held a passkey)."""
    response = enter_password(browser, account.email)
    assert response.status_code == 302 and browser_session(browser).amr == ["pwd"]


def test_a_one_factor_session_steps_up_with_a_passkey(browser, other_browser, ada, bob):
    one_factor_session(browser, ada)
    one_factor_session(other_browser, ada)
    ada_key = with_passkey(ada)
    bob_key = with_passkey(bob)
    page = browser.get("/signin/mfa?next=/signin/done")
    html = text(page)
    assert page.status_code == 200 and button(passkey_form(html, "step-up"), "Use a passkey")
    assert "Set up authenticator app" not in html
    options = page_options(browser, "step-up")
    assert [item["id"] for item in options["allowCredentials"]] == [ada_key.id]
    # bob's passkey, and ada's over a challenge another session of hers asked for, are refused
    refused = post_credential(browser, "/signin/mfa?next=/signin/done", bob_key.get(options))
    assert refused.status_code == 400 and NOT_ACCEPTED in text(refused)
    elsewhere = page_options(other_browser, "step-up")
    refused = post_credential(browser, "/signin/mfa?next=/signin/done", ada_key.get(elsewhere))
    assert refused.status_code == 400 and browser_session(browser).amr == ["pwd"]
    done = post_credential(
        browser, "/signin/mfa?next=/signin/done", ada_key.get(page_options(browser, "step-up"))
    )
    assert done.status_code == 302 and done["Location"] == "/signin/done"
    assert browser_session(browser).amr == ["pwd", "hwk", "mfa"]


def test_step_up_options_need_a_signed_in_browser(browser):
    assert (
        browser.post("/signin/passkey/options", {"for": "step-up"}).json()["redirect"].startswith("/signin")
    )
