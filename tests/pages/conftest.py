import pytest
from django.test import Client

from authn import mfa
from tests.factories import AccountFactory, CredentialFactory

from .helpers import T0


def person(email: str):
    account = AccountFactory(email=email)
    CredentialFactory(account=account)
    return account


@pytest.fixture
def ada(db):
    return person("ada@example.com")


@pytest.fixture
def bob(db):
    return person("bob@example.com")


@pytest.fixture
def browser(db) -> Client:
    return Client()


@pytest.fixture
def other_browser(db) -> Client:
    return Client()


@pytest.fixture
def clock(monkeypatch):
    """The server's clock for codes, frozen at `clock.now` (tests move it)."""

    class Clock:
        now = float(T0)

    stand_in = Clock()
    monkeypatch.setattr(mfa, "_now", lambda: stand_in.now)
    return stand_in
