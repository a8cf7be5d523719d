"""The operators' admin shows an account's sessions (docs/api.md#sessions) and ends one through the service
the API's `sessions/revoke` calls: recorded with the operator as actor, pushed, refused at once."""

from urllib.parse import urlencode

import jwt
from django.urls import reverse

from authn.models import Session
from iam.models import AuditEntry, Event
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

AUTH = "Authentication required or invalid credentials."


def login(account, agent: str) -> dict:
    body = {"email": account.email, "password": PASSWORD}
    return ok(ApiClient().call("/auth/login", body, headers={"User-Agent": agent}))


def sid_of(session: dict) -> str:
    return jwt.decode(session["access_token"], options={"verify_signature": False})["sid"]


def test_the_account_page_lists_its_sessions_and_ends_one(admin_web, operator, root):
    account, stranger = AccountFactory(), AccountFactory()
    for someone in (account, stranger):
        CredentialFactory(account=someone, workspace=root)
    kept, ended = login(account, "kept-agent/1.0"), login(account, "ended-agent/2.0")
    login(stranger, "stranger-agent/3.0")

    page = admin_web.get(reverse("admin:accounts_account_change", args=[account.pk]))
    assert page.status_code == 200
    assert b"kept-agent/1.0" in page.content and b"ended-agent/2.0" in page.content
    assert b"stranger-agent/3.0" not in page.content
    sessions_url = reverse("admin:authn_session_changelist") + "?" + urlencode({"q": account.email})
    assert sessions_url.replace("&", "&amp;").encode() in page.content

    listing = admin_web.get(sessions_url)
    assert listing.status_code == 200
    assert {str(row.pk) for row in listing.context["cl"].result_list} == {sid_of(kept), sid_of(ended)}

    response = admin_web.post(
        reverse("admin:authn_session_changelist"),
        {"action": "end_sessions", "_selected_action": [sid_of(ended)]},
    )
    assert response.status_code == 302
    err(ApiClient(ended["access_token"]).call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    err(ApiClient(ended["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    ok(ApiClient(kept["access_token"]).call("/accounts/describe", {"id": str(account.pk)}))
    assert Session.objects.get(pk=sid_of(ended)).revoked_at is not None
    [entry] = AuditEntry.objects.filter(action="session.revoke", resource_id=sid_of(ended))
    assert (entry.actor_id, entry.actor_kind, entry.workspace_id) == (operator.pk, "operator", None)
    pushed = [
        message.payload for message in Event.objects.all() if message.payload["type"] == "session.revoked"
    ]
    assert [event["data"]["session_id"] for event in pushed] == [sid_of(ended)]


def test_a_session_page_is_view_only(admin_web, root):
    account = AccountFactory()
    CredentialFactory(account=account, workspace=root)
    session = login(account, "agent")
    url = reverse("admin:authn_session_change", args=[sid_of(session)])
    page = admin_web.get(url)
    assert page.status_code == 200 and b"agent" in page.content
    admin_web.post(url, {"ip": "1.2.3.4"})
    assert Session.objects.get(pk=sid_of(session)).ip == "127.0.0.1"
    assert admin_web.get(reverse("admin:authn_session_add")).status_code == 403
