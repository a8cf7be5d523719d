"""A SAML connection through the hosted sign-in page's home-realm discovery (docs/pages.md, docs/saml.md):
`/signin` sends the browser to the IdP with an AuthnRequest; the IdP's page posts to the ACS, which hands
the response on to the SSO callback (a top-level GET, where the browser's cookie comes), where the page's
flow checks it is the browser that started the login and signs it in to the browser session. The pages
hold no SAML code of their own."""

import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pyotp
from django.core.cache import cache
from django.test import Client

from accounts.models import Account
from authn import mfa
from authn.models import OAuthState, Session
from iam.models import AuditEntry
from tests.factories import AccountFactory, CredentialFactory
from tests.pages.helpers import browser_session, text

from .saml_flow import _public_urls, connect_saml  # noqa: F401 (the autouse fixture)
from .saml_idp import read_redirect


def to_idp(browser: Client, email: str, next_url: str = "/there"):
    response = browser.post(f"/signin?next={next_url}", {"email": email})
    assert response.status_code == 302, text(response)
    return read_redirect(response["Location"])


def post_to_acs(browser: Client, connection: dict, saml_response: str, relay_state: str) -> str:
    """The IdP's page posting to the ACS: where the ACS sends the browser on."""
    form = urlencode({"SAMLResponse": saml_response, "RelayState": relay_state})
    response = browser.post(
        f"/saml/{connection['id']}/acs", form, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 303
    return response["Location"]


def handed(browser: Client, idp, connection: dict, email: str = "alice@acme.test", **changes) -> str:
    sent = to_idp(browser, email)
    response = idp.response(idp.spec(connection, sent.request_id, name_id=email, **changes))
    location = post_to_acs(browser, connection, response, sent.relay_state)
    parts = urlsplit(location)
    assert parts.path == "/auth/sso/callback"
    assert set(dict(parse_qsl(parts.query))) == {"state", "code"}
    assert dict(parse_qsl(parts.query))["state"] == sent.relay_state
    return location


def test_a_saml_address_signs_in_through_its_idp_into_the_browser_session(admin, saml_idp, workspace):
    connection = connect_saml(admin, saml_idp)
    browser = Client()
    sent = to_idp(browser, "Alice@acme.test")
    assert sent.url.startswith(f"{saml_idp.sso_url}?SAMLRequest=")
    assert OAuthState.objects.get().signin_next == "/there"
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    location = post_to_acs(browser, connection, response, sent.relay_state)
    assert "SAMLResponse" not in location and "access_token" not in location
    landed = browser.get(location)
    assert landed.status_code == 302 and landed["Location"] == "/there"  # no token in any URL
    record = browser_session(browser)
    alice = Account.objects.get(email="alice@acme.test")
    assert (record.account_id, record.kind, record.amr) == (alice.pk, Session.Kind.BROWSER, ["fed"])
    assert record.sso_workspace_id == workspace.pk
    assert not AuditEntry.objects.filter(action="sso.login_failed").exists()


def test_only_the_browser_that_started_the_login_finishes_it(admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    victim, attacker = Client(), Client()
    location = handed(attacker, saml_idp, connection)
    refused = victim.get(location)  # a login CSRF: the attacker's hand-over opened by the victim
    assert refused.status_code == 400 and "Single sign-on did not complete." in text(refused)
    assert "iam_session" not in victim.cookies
    assert attacker.get(location).status_code == 302  # neither the state nor the response was spent
    assert attacker.get(location).status_code == 400  # now both are


def test_a_refused_response_shows_the_page_and_names_the_reason_in_the_audit_log(admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    browser = Client()
    failed = browser.get(handed(browser, saml_idp, connection, audience="https://someone-else.test"))
    assert failed.status_code == 400 and "Single sign-on did not complete." in text(failed)
    assert "audience" not in text(failed).lower()
    assert "iam_session" not in browser.cookies
    (entry,) = AuditEntry.objects.filter(action="sso.login_failed")
    assert str(entry.resource_id) == connection["id"] and "audience" in entry.changes["reason"]


def test_a_response_handed_over_expires(admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    browser = Client()
    location = handed(browser, saml_idp, connection)
    cache.clear()  # two minutes passed: the handed response is gone
    failed = browser.get(location)
    assert failed.status_code == 400 and "iam_session" not in browser.cookies


def test_an_account_with_totp_gives_its_code_on_the_page(admin, saml_idp, workspace):
    connection = connect_saml(admin, saml_idp)
    alice = AccountFactory(email="alice@acme.test")
    CredentialFactory(account=alice)
    secret = mfa.enroll(alice)["secret"]
    mfa.confirm(alice, pyotp.TOTP(secret).now())
    browser = Client()
    landed = browser.get(handed(browser, saml_idp, connection))
    assert landed.status_code == 302 and landed["Location"] == "/signin/code?next=%2Fthere"
    assert "iam_session" not in browser.cookies
    done = browser.post("/signin/code?next=%2Fthere", {"code": pyotp.TOTP(secret).at(int(time.time()) + 30)})
    assert done.status_code == 302 and done["Location"] == "/there"
    record = browser_session(browser)
    assert record.amr == ["fed", "otp", "mfa"] and record.sso_workspace_id == workspace.pk
