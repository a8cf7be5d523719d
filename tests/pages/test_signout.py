"""`/signout` and the end of a browser session (docs/pages.md): a GET shows the button, the POST ends the
session at once in every process (anything bound to it is refused by `clients/validate`), pushes
`session.revoked`, and leaves every other session, of the account or another, alone."""

from django.conf import settings

from authn import tokens
from authn.models import Session
from iam.models import AuditEntry, Event
from tests.conftest import ApiClient, client_for, ok
from tests.factories import ClientFactory, CredentialFactory, MembershipFactory

from .helpers import browser_session, button, sign_in, text


def token_of(session: Session) -> str:
    """An access token bound to the session (as the sessions an application gets from it will be)."""
    token, _ = tokens.issue(
        session.account_id,
        type=tokens.ACCESS,
        session_version=session.session_version,
        lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME,
        auth_time=session.auth_time,
        extra={"sid": str(session.pk), "amr": session.amr},
    )
    return token


def validate(client, token: str) -> dict:
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token}
    return ok(ApiClient().call("/clients/validate", body))


def test_a_get_shows_the_button_and_changes_nothing(browser, ada):
    sign_in(browser, ada.email)
    page = browser.get("/signout")
    assert page.status_code == 200 and button(text(page), "Sign out") and ada.email in text(page)
    assert browser_session(browser).revoked_at is None
    assert browser.get("/signin/done").status_code == 200


def test_signed_out_the_page_says_so(browser):
    page = browser.get("/signout")
    assert "You are not signed in" in text(page) and not button(text(page), "Sign out")


def test_signing_out_ends_the_session_everywhere_at_once(browser, other_browser, ada, bob):
    ada_membership = MembershipFactory(account=ada)
    tenant = ClientFactory(workspace=ada_membership.workspace)
    bob_tenant = ClientFactory(workspace=MembershipFactory(account=bob).workspace)
    sign_in(browser, ada.email)
    sign_in(other_browser, bob.email)
    record, bob_record = browser_session(browser), browser_session(other_browser)
    ada_token, bob_token = token_of(record), token_of(bob_record)
    api_token = client_for(ada).token  # another session of ada's, through the API
    assert validate(tenant, ada_token)["authorized"] is True  # read once: now cached as live

    response = browser.post("/signout")
    assert response.status_code == 200 and "You are signed out" in text(response)
    assert response.cookies["iam_session"].value == "" and response.cookies["iam_session"]["max-age"] == 0
    record.refresh_from_db()
    assert record.revoked_at is not None
    refused = validate(tenant, ada_token)
    assert (refused["authorized"], refused["reason"]) == (False, "token_revoked")
    assert validate(tenant, api_token)["authorized"] is True  # the account's other sessions live on
    assert validate(bob_tenant, bob_token)["authorized"] is True
    assert other_browser.get("/signin/done").status_code == 200
    assert browser.get("/signin/done").status_code == 302
    revoked = Event.objects.filter(payload__type="session.revoked")
    assert {event.payload["data"]["session_id"] for event in revoked} == {str(record.pk)}  # one per workspace
    assert AuditEntry.objects.filter(action="session.revoke", resource_id=record.pk, actor_id=ada.pk).exists()


def test_the_landing_page_signs_out_through_the_same_post(browser, ada):
    sign_in(browser, ada.email)
    landing = text(browser.get("/signin/done"))
    assert '<form method="post" action="/signout">' in landing
    assert browser.post("/signout").status_code == 200
    assert browser.get("/signin/done").status_code == 302


def test_signing_out_without_a_session_is_harmless(browser):
    response = browser.post("/signout")
    assert response.status_code == 200 and "You are signed out" in text(response)


def test_signing_out_of_the_pages_leaves_the_admin_sign_in_alone(browser, operator):
    CredentialFactory(account=operator)
    browser.force_login(operator)
    assert sign_in(browser, operator.email).status_code == 302
    assert browser.post("/signout").status_code == 200
    assert browser.get("/signin/done").status_code == 302
    assert browser.get("/admin/").status_code == 200
