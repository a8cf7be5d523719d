"""The bench's login floor (bench/urls.py `login_floor`, docs/performance.md#the-benchmark-make-bench) is
the service's password login done by hand in raw SQL: it must keep doing what `auth/login` does, or the
figure it prints beside the login's means nothing. PostgreSQL only: its SQL is PostgreSQL's, as the
bench's database is."""

import json

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from accounts.models import Account
from authn.models import Credential, RefreshToken, Session
from authn.sessions import authenticate_token
from bench.urls import login_floor
from iam.models import AuditEntry
from tests.conftest import ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the floor's SQL is PostgreSQL's")


def floor(account, password=PASSWORD):
    body = json.dumps({"email": account.email, "password": password})
    request = RequestFactory().post("/bench/login-floor", body, content_type="application/json")
    return login_floor(request)


def written(captured) -> list[str]:
    """Each write's statement and table, in order: `INSERT INTO "authn_session"`."""
    writes = [query["sql"] for query in captured if query["sql"].startswith(("INSERT", "UPDATE"))]
    return [" ".join(sql.replace('"', "").split()[:3]) for sql in writes]


def test_the_floor_signs_in_as_a_login_does(member):
    other = AccountFactory()
    CredentialFactory(account=other)
    response = floor(member)
    assert response.status_code == 200
    tokens = json.loads(response.content)["data"]
    account, claims = authenticate_token(tokens["access_token"])
    assert account == member
    session = Session.objects.get(pk=claims["sid"])
    assert (session.account_id, session.kind, session.amr) == (member.pk, "api", ["pwd"])
    refresh = authenticate_token(tokens["refresh_token"], types=frozenset({"refresh"}))[1]
    assert RefreshToken.objects.filter(jti=refresh["jti"], account=member).exists()
    assert AuditEntry.objects.filter(
        action="account.login", resource_id=member.pk, actor_id=member.pk
    ).exists()
    assert Account.objects.get(pk=member.pk).last_login is not None
    assert Credential.objects.get(account=member).last_used_at is not None
    # The other account: nothing written.
    assert Account.objects.get(pk=other.pk).last_login is None
    assert Credential.objects.get(account=other).last_used_at is None
    assert not Session.objects.filter(account=other).exists()


def test_the_floor_writes_what_a_login_writes(api, member):
    with CaptureQueriesContext(connection) as service:
        ok(api.call("/auth/login", {"email": member.email, "password": PASSWORD}))
    with CaptureQueriesContext(connection) as by_hand:
        assert floor(member).status_code == 200
    assert written(by_hand.captured_queries) == written(service.captured_queries)
    reads = [query for query in by_hand.captured_queries if query["sql"].lstrip().startswith("SELECT")]
    assert len(reads) == 1


def test_the_floor_refuses_a_wrong_password(member):
    assert floor(member, "not-the-password-1").status_code == 401
    assert not Session.objects.filter(account=member).exists()
