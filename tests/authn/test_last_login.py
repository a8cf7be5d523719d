"""An account's `last_login` is the time of its last sign-in through the API (a password login or a
registration, which starts a session), as the admin's own sign-in sets it; a refused login and a refresh
leave it. The OAuth callback's case is in test_oauth.py."""

import pytest
from django.urls import reverse
from django.utils import formats, timezone

from accounts.models import Account
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory


def login(api, account, password=PASSWORD):
    return api.call("/auth/login", {"email": account.email, "password": password})


def last_login(account) -> object:
    return Account.objects.values_list("last_login", flat=True).get(pk=account.pk)


def test_a_password_login_sets_last_login(api, member):
    assert last_login(member) is None
    before = timezone.now()
    ok(login(api, member))
    assert before <= last_login(member) <= timezone.now()


def test_each_login_moves_it_on(api, member):
    ok(login(api, member))
    first = last_login(member)
    ok(login(api, member))
    assert last_login(member) > first


def test_a_refused_login_leaves_it(api, member):
    err(login(api, member, "wrong password"), 401, "invalid credentials")
    assert last_login(member) is None
    member.enabled = False
    member.save(update_fields=["enabled"])
    err(login(api, member), 403, "account disabled")
    assert last_login(member) is None


def test_a_refresh_continues_the_session_and_leaves_it(api, member):
    session = ok(login(api, member))
    first = last_login(member)
    ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))
    assert last_login(member) == first


def test_only_the_account_that_signed_in_is_touched(api, member):
    other = AccountFactory()
    CredentialFactory(account=other)
    ok(login(api, member))
    assert last_login(other) is None


def test_registration_starts_a_session_and_sets_it(api, root):
    before = timezone.now()
    data = ok(api.call("/auth/register", {"email": "new@example.com", "password": "a-long-passphrase"}))
    assert data["access_token"]
    assert before <= Account.objects.get(email="new@example.com").last_login <= timezone.now()


@pytest.mark.parametrize("with_login", [True, False])
def test_the_account_admin_shows_it(admin_web, api, member, with_login):
    if with_login:
        ok(login(api, member))
    shown = formats.localize(timezone.template_localtime(last_login(member))) if with_login else None
    changelist = admin_web.get(reverse("admin:accounts_account_changelist"), {"q": member.email})
    page = admin_web.get(reverse("admin:accounts_account_change", args=[member.pk]))
    assert changelist.status_code == page.status_code == 200
    assert "Last login" in changelist.content.decode() and "Last login" in page.content.decode()
    if with_login:
        assert shown in changelist.content.decode() and shown in page.content.decode()
