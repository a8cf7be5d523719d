"""`manage.py issue_token --email E`."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.services import end_sessions
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory


def issue(email: str) -> str:
    out = StringIO()
    call_command("issue_token", "--email", email, stdout=out)
    return out.getvalue().strip()


def test_prints_an_access_token_that_the_api_accepts(db):
    account = AccountFactory(email="someone@example.com")
    token = issue("SomeOne@Example.com")
    api = ApiClient(token)
    assert ok(api.call("/accounts/describe", {"id": str(account.pk)}))["email"] == "someone@example.com"
    end_sessions(account)  # an issued token ends with the account's sessions
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401)


def test_unknown_account(db):
    with pytest.raises(CommandError, match=r"no account with e-mail nobody@example\.com"):
        issue("nobody@example.com")


def test_disabled_account(db):
    AccountFactory(email="off@example.com", enabled=False)
    with pytest.raises(CommandError, match=r"account off@example\.com is disabled"):
        issue("off@example.com")


def test_email_is_required(db):
    with pytest.raises(CommandError, match="--email"):
        call_command("issue_token")
