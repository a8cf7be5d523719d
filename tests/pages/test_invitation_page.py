"""`/accept-invitation?token=` (docs/pages.md#self-service-pages): the invitation's workspace, who invited
and the roles; `Accept` and `Decline` only for the invited address; signed out, `Sign in` and `Create
account` for that address first, coming back here; signed in as another address, whom it is for and
`Sign out`. The API's rules hold as through `invitations/accept`: only the invited address accepts, a
used link names nothing, the pre-registration hijack defence.

Workspace A (Acme) invites; workspace B is someone else's: its member never accepts A's invitation."""

import re
from urllib.parse import urlencode

import pytest
from django.test import Client

from accounts.models import Account
from authn.models import Credential
from rbac.models import Invitation, Membership
from tests.conftest import ApiClient, err, ok
from tests.factories import (
    PASSWORD,
    AccountFactory,
    CredentialFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

from .helpers import CSP, browser_session, csrf_of, label_for, sign_in, text, unescaped
from .test_email_link_pages import link_of, mails_to, send_outbox

META = {"schema_version": "1"}
INVITEE = "invitee@example.com"
NEW_PASSWORD = "a brand new passphrase"
AUTH = "Authentication required or invalid credentials."


def action_button(html: str, value: str, words: str) -> bool:
    return (
        re.search(rf'<button [^>]*name="action" value="{value}">{re.escape(words)}</button>', html)
        is not None
    )


@pytest.fixture
def tenant(member_of, root):
    """Workspace A, whose owner (Olivia) invites with a role; workspace B and its own member."""
    a = WorkspaceFactory(slug="tenant-a", name="Acme")
    b = WorkspaceFactory(slug="tenant-b", name="Globex")
    owner = AccountFactory(name="Olivia Owner", email="olivia@example.com")
    _, owner_api = member_of(a, "*", account=owner)
    outsider, _ = member_of(b, "*", account=AccountFactory(email="outsider@example.com"))
    CredentialFactory(account=outsider)
    role = RoleFactory(workspace=a, name="Editor", permissions=["projects:list"])
    return a, b, owner_api, outsider, role


def invite(owner_api, role, email: str = INVITEE) -> str:
    """Invites `email` through the API; the path the e-mail's link opens."""
    body = {"email": email, "scope": "workspace", "role_ids": [str(role.pk)]}
    ok(owner_api.call("/invitations/create", body))
    send_outbox()
    (message,) = [m for m in mails_to(email) if "invited" in m.subject]
    path = link_of(message)
    assert path.startswith("/accept-invitation?token=")
    return path


def person(email: str, **fields) -> Account:
    account = AccountFactory(email=email, **fields)
    CredentialFactory(account=account)
    return account


def press(client: Client, path: str, action: str, **fields):
    page = client.get(path)
    token = re.search(r'name="token" value="([^"]+)"', text(page)).group(1)
    return client.post(
        "/accept-invitation",
        {"token": token, "action": action, "csrfmiddlewaretoken": csrf_of(page), **fields},
    )


def test_signed_out_it_shows_the_invitation_and_the_ways_in_first(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    path = invite(owner_api, role)
    page = browser.get(path)
    html = unescaped(page)
    assert page.status_code == 200 and page["Content-Security-Policy"] == CSP
    assert "Acme" in html and "Olivia Owner" in html and "Editor" in html and INVITEE in html
    assert '<span class="brand-name">Acme</span>' in html  # the workspace's page
    signin = "/signin?" + urlencode({"next": path, "login_hint": INVITEE})
    assert f'href="{signin}">Sign in</a>' in html
    assert f'href="{path}&step=create">Create account</a>' in html
    assert not action_button(html, "accept", "Accept")
    assert Invitation.objects.get().status == "pending"  # opening it did nothing


def test_the_invited_address_signs_in_comes_back_and_accepts(browser, tenant):
    a, b, owner_api, _, role = tenant
    invitee = person(INVITEE)
    path = invite(owner_api, role)
    signed_in = sign_in(browser, INVITEE, next_url=path)
    assert signed_in.status_code == 302 and signed_in["Location"] == path  # back here
    html = text(browser.get(path))
    assert action_button(html, "accept", "Accept") and action_button(html, "decline", "Decline")
    done = press(browser, path, "accept")
    assert done.status_code == 200 and "Invitation accepted" in text(done)
    membership = Membership.objects.get(account=invitee)
    assert (membership.workspace_id, membership.status) == (a.pk, "active")
    assert [role.name for role in membership.roles.all()] == ["Editor"]
    assert Invitation.objects.get().status == "accepted"
    assert not Membership.objects.filter(account=invitee, workspace=b).exists()
    again = browser.get(path)  # single use
    assert again.status_code == 400 and "This link is no longer valid" in text(again)


def test_the_invited_address_declines(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    invitee = person(INVITEE)
    path = invite(owner_api, role)
    sign_in(browser, INVITEE)
    done = press(browser, path, "decline")
    assert done.status_code == 200 and "Invitation declined" in text(done)
    assert Invitation.objects.get().status == "declined"
    assert not Membership.objects.filter(account=invitee).exists()


def test_another_address_signed_in_is_told_and_can_only_sign_out(browser, tenant):
    """Bob of workspace B holds Ada's link (a forwarded e-mail): he sees whom it is for, and his
    accept is refused as `invitations/accept` with his Bearer would be."""
    _a, _b, owner_api, outsider, role = tenant
    person(INVITEE)
    path = invite(owner_api, role)
    sign_in(browser, outsider.email)
    page = browser.get(path)
    html = unescaped(page)
    assert f"This invitation is for {INVITEE}" in html
    assert action_button(html, "signout", "Sign out")
    assert not action_button(html, "accept", "Accept")
    refused = press(browser, path, "accept")
    assert refused.status_code == 403
    refused = press(browser, path, "decline")
    assert refused.status_code == 403
    assert Invitation.objects.get().status == "pending"
    assert not Membership.objects.filter(account=outsider, workspace__slug="tenant-a").exists()
    signed_in = browser_session(browser)
    out = press(browser, path, "signout")
    assert out.status_code == 302 and out["Location"] == path
    signed_in.refresh_from_db()
    assert signed_in.revoked_at is not None and browser_session(browser) is None
    assert "Create account" in text(browser.get(path))


def test_an_unconfirmed_account_of_the_address_cannot_accept_signed_in(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    squatter = person(INVITEE, verified=False)
    path = invite(owner_api, role)
    sign_in(browser, INVITEE)
    html = unescaped(browser.get(path))
    assert f"This invitation is for {INVITEE}" in html and "Confirm your email address first" in html
    assert press(browser, path, "accept").status_code == 403
    assert not Membership.objects.filter(account=squatter).exists()


def test_create_account_for_the_invited_address_signs_in_and_comes_back(browser, tenant):
    a, _b, owner_api, _, role = tenant
    path = invite(owner_api, role)
    form = browser.get(f"{path}&step=create")
    html = text(form)
    assert label_for(html, "Name") == "id_name" and label_for(html, "Password") == "id_password"
    assert INVITEE in html
    created = press(browser, f"{path}&step=create", "create", name="Ivy", password=NEW_PASSWORD)
    assert created.status_code == 302 and created["Location"] == path
    account = Account.objects.get(email=INVITEE)
    assert account.verified and account.name == "Ivy"  # the link proved the mailbox
    assert Credential.objects.get(account=account).status == "active"
    assert browser_session(browser).account_id == account.pk
    assert Invitation.objects.get().status == "pending"  # nothing accepted yet
    press(browser, path, "accept")
    assert Membership.objects.get(account=account).workspace_id == a.pk


def test_create_account_for_an_address_with_an_account_says_sign_in(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    invitee = person(INVITEE)
    path = invite(owner_api, role)
    answer = press(browser, f"{path}&step=create", "create", name="Mallory", password=NEW_PASSWORD)
    assert answer.status_code == 400 and "You already have an account" in unescaped(answer)
    assert browser_session(browser) is None  # holding the link signs nobody in to an existing account
    invitee.refresh_from_db()
    assert invitee.check_password(PASSWORD) and invitee.name != "Mallory"


def test_the_pre_registration_hijack_defence_holds(browser, api, tenant):
    """Mallory registered the address without its mailbox; the mailbox's owner takes it back through
    the invitation: Mallory's password and sessions end
    (docs/security.md#consent-nobody-is-put-into-a-workspace)."""
    a, _b, owner_api, _, role = tenant
    mallory = ok(api.call("/auth/register", {"email": INVITEE, "password": PASSWORD, "name": "Mallory"}))
    path = invite(owner_api, role)
    created = press(browser, f"{path}&step=create", "create", name="Ivy", password=NEW_PASSWORD)
    assert created.status_code == 302
    account = Account.objects.get(email=INVITEE)
    assert account.verified and account.check_password(NEW_PASSWORD)
    err(ApiClient(mallory["access_token"]).call("/sessions/list", {}), 401, AUTH)
    err(api.call("/auth/login", {"email": INVITEE, "password": PASSWORD}), 401, "invalid credentials")
    press(browser, path, "accept")
    assert Membership.objects.get(account=account).workspace_id == a.pk


def test_a_weak_password_is_told_at_its_field(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    path = invite(owner_api, role)
    answer = press(browser, f"{path}&step=create", "create", name="Ivy", password="short")
    assert answer.status_code == 400 and "Use at least 8 characters." in text(answer)
    assert not Account.objects.filter(email=INVITEE).exists()


@pytest.mark.parametrize("token", ["", "nonsense", "a" * 5000])
def test_a_bad_link_says_so(browser, token):
    page = browser.get(f"/accept-invitation?token={token}")
    assert page.status_code == 400 and "This link is no longer valid" in text(page)


def test_a_revoked_invitation_opens_nothing(browser, tenant):
    _a, _b, owner_api, _, role = tenant
    person(INVITEE)
    path = invite(owner_api, role)
    ok(owner_api.call("/invitations/revoke", {"id": str(Invitation.objects.get().pk)}))
    assert browser.get(path).status_code == 400
    sign_in(browser, INVITEE)
    assert press_without_page(browser, path, "accept").status_code == 400
    assert not Membership.objects.filter(account__email=INVITEE).exists()


def press_without_page(client: Client, path: str, action: str):
    token = path.split("token=", 1)[1]
    return client.post("/accept-invitation", {"token": token, "action": action})


def test_a_membership_invitation_of_an_existing_account(browser, tenant):
    """`memberships/create` for an existing account mails the same path; its own account accepts."""
    a, _b, owner_api, outsider, role = tenant
    invitee = person(INVITEE)
    body = {
        "account_id": str(invitee.pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(role.pk)],
        "tags": [],
        "meta": META,
    }
    membership = ok(owner_api.call("/memberships/create", body))
    send_outbox()
    (message,) = [m for m in mails_to(INVITEE) if "invited" in m.subject]
    path = link_of(message)
    sign_in(browser, outsider.email)
    assert press(browser, path, "accept").status_code == 403
    press(browser, path, "signout")
    sign_in(browser, INVITEE)
    html = text(browser.get(path))
    assert "Acme" in html and "Editor" in html
    done = press(browser, path, "accept")
    assert done.status_code == 200
    assert Membership.objects.get(pk=membership["id"]).status == "active"
    assert Membership.objects.get(pk=membership["id"]).workspace_id == a.pk


def test_the_buttons_need_the_pages_csrf_token(tenant):
    _a, _b, owner_api, _, role = tenant
    person(INVITEE)
    path = invite(owner_api, role)
    strict = Client(enforce_csrf_checks=True)
    sign_in_page = strict.get("/signin")
    strict.post("/signin", {"email": INVITEE, "csrfmiddlewaretoken": csrf_of(sign_in_page)})
    refused = strict.post("/accept-invitation", {"token": path.split("token=", 1)[1], "action": "accept"})
    assert refused.status_code == 403 and "This page has expired" in text(refused)
    assert Invitation.objects.get().status == "pending"


def test_a_project_invitation_names_its_project(browser, tenant):
    a, _b, owner_api, _, role = tenant
    project = ProjectFactory(workspace=a, name="Billing")
    body = {"email": INVITEE, "scope": "project", "project_id": str(project.pk), "role_ids": [str(role.pk)]}
    ok(owner_api.call("/invitations/create", body))
    send_outbox()
    (message,) = [m for m in mails_to(INVITEE) if "invited" in m.subject]
    html = unescaped(browser.get(link_of(message)))
    assert "In the project <strong>Billing</strong>." in html
