"""The admin and second factors (docs/api.md#second-factor-totp): an operator with TOTP signs in to the admin
in two steps (a wrong code refused, each code once, wrong codes throttled with the API's), and an operator
resets an account's second factor from its page (recorded, its sessions ended, the account e-mailed)."""

import pyotp
import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from authn import mfa
from authn.models import RecoveryCode, Totp
from iam.models import AuditEntry
from iam.platform import crypto
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

T0 = 1_900_000_005.0
AUTH = "Authentication required or invalid credentials."


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = T0

    stand_in = Clock()
    monkeypatch.setattr(mfa, "_now", lambda: stand_in.now)
    return stand_in


def with_totp(account) -> str:
    secret = pyotp.random_base32()
    Totp.objects.create(account=account, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    return secret


def recovery_codes(account) -> list[str]:
    return mfa._new_recovery_codes(account)


def signed_in(web: Client) -> bool:
    return "_auth_user_id" in web.session


def password_step(web: Client, email: str, next_url: str = "/admin/authn/session/"):
    return web.post(f"/admin/login/?next={next_url}", {"username": email, "password": PASSWORD})


@pytest.fixture
def operator_with_totp(operator, root):
    CredentialFactory(account=operator)
    return operator, with_totp(operator)


def test_an_operator_without_totp_signs_in_with_the_password(operator, root):
    CredentialFactory(account=operator)
    web = Client()
    response = password_step(web, operator.email)
    assert response.status_code == 302 and response["Location"] == "/admin/authn/session/"
    assert signed_in(web)


def test_an_operator_with_totp_is_asked_for_a_code(operator_with_totp, clock):
    operator, secret = operator_with_totp
    web = Client()
    first = password_step(web, operator.email)
    assert first.status_code == 302 and first["Location"] == reverse("admin:login_code")
    assert not signed_in(web)
    assert web.get("/admin/").status_code == 302  # not in yet
    page = web.get(reverse("admin:login_code"))
    assert page.status_code == 200 and b"one-time-code" in page.content
    wrong = web.post(reverse("admin:login_code"), {"code": "000000"})
    assert wrong.status_code == 200 and b"Invalid code." in wrong.content and not signed_in(web)
    right = web.post(reverse("admin:login_code"), {"code": pyotp.TOTP(secret).at(clock.now)})
    assert right.status_code == 302 and right["Location"] == "/admin/authn/session/"
    assert signed_in(web)
    assert web.get("/admin/").status_code == 200


def test_a_code_works_once(operator_with_totp, clock):
    operator, secret = operator_with_totp
    code = pyotp.TOTP(secret).at(clock.now)
    first = Client()
    password_step(first, operator.email)
    assert first.post(reverse("admin:login_code"), {"code": code}).status_code == 302
    second = Client()
    password_step(second, operator.email)
    again = second.post(reverse("admin:login_code"), {"code": code})
    assert again.status_code == 200 and b"Invalid code." in again.content and not signed_in(second)
    # nor over the API
    challenge = ok(ApiClient().call("/auth/login", {"email": operator.email, "password": PASSWORD}))
    err(ApiClient().call("/auth/mfa/verify", {"mfa_token": challenge["mfa_token"], "code": code}), 400)


def test_a_recovery_code_works_once_and_is_mailed(operator_with_totp, django_capture_on_commit_callbacks):
    operator, _ = operator_with_totp
    spare = recovery_codes(operator)[0]
    web = Client()
    password_step(web, operator.email)
    with django_capture_on_commit_callbacks(execute=True):
        assert web.post(reverse("admin:login_code"), {"code": spare.upper()}).status_code == 302
    assert signed_in(web)
    assert AuditEntry.objects.filter(
        action="account.mfa_recovery_code_used", resource_id=operator.pk
    ).exists()
    assert [message.subject for message in mail.outbox] == ["A recovery code was used"]
    other = Client()
    password_step(other, operator.email)
    assert other.post(reverse("admin:login_code"), {"code": spare}).status_code == 200
    assert not signed_in(other)


def test_wrong_codes_are_throttled_with_the_api(operator_with_totp, clock):
    operator, secret = operator_with_totp
    for _ in range(3):
        challenge = ok(ApiClient().call("/auth/login", {"email": operator.email, "password": PASSWORD}))
        err(
            ApiClient().call("/auth/mfa/verify", {"mfa_token": challenge["mfa_token"], "code": "000000"}), 400
        )
    web = Client()
    password_step(web, operator.email)
    for _ in range(2):
        assert web.post(reverse("admin:login_code"), {"code": "111111"}).status_code == 200
    refused = web.post(reverse("admin:login_code"), {"code": pyotp.TOTP(secret).at(clock.now)})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert b"Too many wrong codes" in refused.content and not signed_in(web)


def test_the_code_step_needs_a_fresh_password_step(operator_with_totp, clock, settings):
    operator, secret = operator_with_totp
    assert Client().get(reverse("admin:login_code"))["Location"] == reverse("admin:login")
    web = Client()
    password_step(web, operator.email)
    clock_code = pyotp.TOTP(secret).at(clock.now)
    session = web.session
    session["iam_admin_second_step"] = {
        **session["iam_admin_second_step"],
        "until": 0,
    }  # the password step has gone stale
    session.save()
    response = web.post(reverse("admin:login_code"), {"code": clock_code})
    assert response["Location"] == reverse("admin:login") and not signed_in(web)


def test_the_code_step_ignores_a_next_to_another_site(operator_with_totp, clock):
    operator, secret = operator_with_totp
    web = Client()
    password_step(web, operator.email, next_url="https://evil.example/")
    response = web.post(reverse("admin:login_code"), {"code": pyotp.TOTP(secret).at(clock.now)})
    assert response["Location"] == reverse("admin:index")


# Reset of an account's second factor


def test_reset_second_factor_from_the_account_page(
    admin_web, operator, root, clock, django_capture_on_commit_callbacks
):
    ada, bob = AccountFactory(), AccountFactory()
    for someone in (ada, bob):
        CredentialFactory(account=someone)
    ada_secret = with_totp(ada)
    with_totp(bob)
    recovery_codes(ada)
    recovery_codes(bob)
    session = ok(
        ApiClient().call(
            "/auth/mfa/verify",
            {
                "mfa_token": ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))[
                    "mfa_token"
                ],
                "code": pyotp.TOTP(ada_secret).at(clock.now),
            },
        )
    )
    page = admin_web.get(reverse("admin:accounts_account_change", args=[ada.pk]))
    url = reverse("admin:accounts_account_reset_second_factor", args=[ada.pk])
    assert b"TOTP, 10 unused recovery code(s)" in page.content and url.encode() in page.content
    confirm = admin_web.get(url)
    assert confirm.status_code == 200 and b"Reset second factor" in confirm.content
    assert Totp.objects.filter(account=ada).exists()  # a GET changes nothing
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(url)
    assert response.status_code == 302
    assert (
        not Totp.objects.filter(account=ada).exists()
        and not RecoveryCode.objects.filter(account=ada).exists()
    )
    assert (
        Totp.objects.filter(account=bob).exists() and RecoveryCode.objects.filter(account=bob).count() == 10
    )
    err(ApiClient(session["access_token"]).call("/sessions/list"), 401, AUTH)
    [entry] = AuditEntry.objects.filter(action="account.mfa_reset", resource_id=ada.pk)
    assert (entry.actor_id, entry.actor_kind) == (operator.pk, "operator")
    assert AuditEntry.objects.filter(action="session.revoke", resource_id=ada.pk).exists()
    assert [(message.to, message.subject) for message in mail.outbox] == [
        ([ada.email], "An administrator removed the second factor of your account")
    ]
    # The next login asks for the password only.
    assert "access_token" in ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))
    assert "mfa_token" in ok(ApiClient().call("/auth/login", {"email": bob.email, "password": PASSWORD}))
    page = admin_web.get(reverse("admin:accounts_account_change", args=[ada.pk]))
    assert b"second factor" in page.content.lower() and url.encode() not in page.content
    again = admin_web.post(url, follow=True)
    assert b"The account has no second factor." in again.content
    assert AuditEntry.objects.filter(action="account.mfa_reset").count() == 1


def test_the_sessions_show_when_they_were_ended(admin_web, root):
    ada = AccountFactory()
    CredentialFactory(account=ada)
    session = ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))
    ok(ApiClient(session["access_token"]).call("/auth/revoke"))
    page = admin_web.get(reverse("admin:accounts_account_change", args=[ada.pk]))
    assert b"revoked at" in page.content.lower()


def test_an_operator_turns_a_workspaces_policy_on_in_the_admin(
    admin_web, operator, django_capture_on_commit_callbacks
):
    """The workspace's change form carries `mfa_required`, saved through the service: recorded, pushed,
    and held at once by the API, in that workspace only."""
    from authn.sessions import issue_session
    from iam.models import Event
    from tenancy.models import Workspace
    from tests.admin.conftest import form_data
    from tests.factories import MembershipFactory, RoleFactory, WorkspaceFactory

    acme, beta = WorkspaceFactory(slug="acme"), WorkspaceFactory(slug="beta")
    ada = AccountFactory()
    for workspace in (acme, beta):
        owner = RoleFactory(workspace=workspace, permissions=["*"])
        MembershipFactory(account=ada, workspace=workspace, roles=[owner])
    token = issue_session(ada, amr=["pwd"])["access_token"]
    ok(ApiClient(token, str(acme.pk)).call("/projects/list", {}))  # cached now
    url = reverse("admin:tenancy_workspace_change", args=[acme.pk])
    data = form_data(admin_web.get(url))
    assert "mfa_required" not in data  # an unchecked box
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(url, {**data, "mfa_required": "on"})
    assert response.status_code == 302
    assert (
        Workspace.objects.get(pk=acme.pk).mfa_required and not Workspace.objects.get(pk=beta.pk).mfa_required
    )
    err(ApiClient(token, str(acme.pk)).call("/projects/list", {}), 403, "mfa required by this workspace")
    ok(ApiClient(token, str(beta.pk)).call("/projects/list", {}))
    entry = AuditEntry.objects.get(action="workspace.update", resource_id=acme.pk)
    assert entry.changes["mfa_required"] == {"before": False, "after": True} and entry.actor_id == operator.pk
    assert [event.payload["type"] for event in Event.objects.filter(workspace_id=acme.pk)] == [
        "workspace.updated"
    ]
