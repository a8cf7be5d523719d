"""The admin while the root workspace requires MFA
(docs/security.md#second-factors-and-the-workspace-mfa-policy): an operator signs in with a second factor; one
without a factor sets one up at sign-in (its secret, a first code, its recovery codes shown once) before the
admin lets it in; a browser session signed in with a password alone may not use the admin. Two operators: ada
without a factor, bob with one."""

import re

import pyotp
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from authn import mfa
from authn.models import RecoveryCode, Totp
from iam.models import AuditEntry
from iam.platform import crypto
from tenancy.services import update_workspace
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

T0 = 1_900_000_005.0


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = T0

    stand_in = Clock()
    monkeypatch.setattr(mfa, "_now", lambda: stand_in.now)
    return stand_in


@pytest.fixture
def root_requires_mfa(root):
    return update_workspace(root, mfa_required=True, actor=None)


@pytest.fixture
def ada(root):
    account = AccountFactory(is_superuser=True, email="ada@example.com")
    CredentialFactory(account=account)
    return account


@pytest.fixture
def bob(root):
    account = AccountFactory(is_superuser=True, email="bob@example.com")
    CredentialFactory(account=account)
    secret = pyotp.random_base32()
    Totp.objects.create(account=account, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    account.secret = secret
    return account


def signed_in(web: Client) -> bool:
    return "_auth_user_id" in web.session


def password_step(web: Client, email: str):
    return web.post("/admin/login/?next=/admin/authn/session/", {"username": email, "password": PASSWORD})


def test_an_operator_without_a_factor_sets_one_up_first(root_requires_mfa, ada, bob, clock):
    web = Client()
    first = password_step(web, ada.email)
    assert first.status_code == 302 and first["Location"] == reverse("admin:login_setup")
    assert not signed_in(web) and web.get("/admin/").status_code == 302
    page = web.get(reverse("admin:login_setup"))
    assert page.status_code == 200 and b"one-time-code" in page.content
    secret = re.search(rb'id="totp-secret">([A-Z2-7]+)<', page.content).group(1).decode()
    again = web.get(reverse("admin:login_setup"))  # a reload shows the same secret
    assert secret.encode() in again.content and b"otpauth://totp/" in again.content
    wrong = web.post(reverse("admin:login_setup"), {"code": "000000"})
    assert wrong.status_code == 200 and b"Invalid code." in wrong.content and not signed_in(web)

    done = web.post(reverse("admin:login_setup"), {"code": pyotp.TOTP(secret).at(clock.now)})

    assert done.status_code == 200 and signed_in(web)
    codes = re.findall(rb"<li><code>([a-z0-9]{5}-[a-z0-9]{5})</code></li>", done.content)
    assert len(codes) == 10 and b'href="/admin/authn/session/"' in done.content
    assert web.get("/admin/").status_code == 200
    assert Totp.objects.get(account=ada).confirmed_at is not None
    assert RecoveryCode.objects.filter(account=ada).count() == 10
    assert AuditEntry.objects.filter(action="account.mfa_enabled", resource_id=ada.pk).exists()
    # the codes are the account's own: the API's second step takes them
    token = ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))["mfa_token"]
    ok(ApiClient().call("/auth/mfa/verify", {"mfa_token": token, "recovery_code": codes[0].decode()}))
    # bob's factor is his own, untouched
    assert Totp.objects.get(account=bob).confirmed_at is not None
    assert not RecoveryCode.objects.filter(account=bob).exists()


def test_the_setup_step_needs_a_fresh_password_step(root_requires_mfa, ada):
    assert Client().get(reverse("admin:login_setup"))["Location"] == reverse("admin:login")
    assert not Totp.objects.exists()


def test_an_operator_with_a_factor_signs_in_with_its_code(root_requires_mfa, bob, clock):
    web = Client()
    assert password_step(web, bob.email)["Location"] == reverse("admin:login_code")
    assert web.get(reverse("admin:login_setup"))["Location"] == reverse("admin:login_code")
    response = web.post(reverse("admin:login_code"), {"code": pyotp.TOTP(bob.secret).at(clock.now)})
    assert response.status_code == 302 and signed_in(web)
    assert web.get("/admin/").status_code == 200


def test_a_session_signed_in_with_a_password_alone_is_shut_out_while_it_is_on(root, ada):
    web = Client()
    assert password_step(web, ada.email)["Location"] == "/admin/authn/session/"  # the policy is off
    assert web.get("/admin/").status_code == 200
    update_workspace(root, mfa_required=True, actor=None)
    response = web.get("/admin/")
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))
    assert web.get("/admin/accounts/account/").status_code == 302
    update_workspace(root, mfa_required=False, actor=None)
    assert web.get("/admin/").status_code == 200


def test_the_api_answers_the_same_policy(root_requires_mfa, ada):
    """The operators' API sessions with one factor hold no global right meanwhile (tests/rbac/
    test_root_mfa_policy.py); the admin and the API decide by the same policy."""
    one_factor = ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))
    err(
        ApiClient(one_factor["access_token"]).call("/accounts/list", {}),
        403,
        "mfa required by this workspace",
    )
