"""One transaction boundary (docs/architecture.md, docs/architecture.md#the-machinery-in-iam): the base
endpoint runs every write handler inside one `transaction.atomic()`, so row locks never run outside a
transaction, an error rolls the whole request back, and `on_commit` work waits for the commit.

These tests run outside the test transaction (`transaction=True`), as the deployed service does: inside
it every query is already in a transaction and a forgotten boundary cannot show."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError
from django.test import override_settings
from django.urls import path

from authn.models import Credential
from iam.http.endpoint import Endpoint
from iam.http.errors import ApiError
from tenancy.models import Workspace
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import AccountFactory, CredentialFactory, WorkspaceFactory
from tests.iam.test_machinery import ENDPOINTS, PATHS

READ_ACTIONS = {"describe", "list", "validate", "check", "events", "mine"}


def test_every_write_endpoint_runs_in_the_transaction_and_only_reads_skip_it():
    for route in PATHS:
        action = route.rsplit("/", 1)[1]
        assert ENDPOINTS[route].read_only == (action in READ_ACTIONS), route


@pytest.fixture
def strict_locks(monkeypatch):
    """Every backend refuses a row lock outside a transaction, as PostgreSQL does: SQLite has no row locks
    and would let a forgotten transaction through."""
    real = SQLCompiler.as_sql

    def as_sql(self, *args, **kwargs):
        if self.query.select_for_update and self.connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", as_sql)


@pytest.mark.django_db(transaction=True)
def test_credentials_update_and_delete_lock_inside_the_request_transaction(strict_locks):
    """Both answered 500 on PostgreSQL (`select_for_update` outside a transaction)."""
    operator = AccountFactory(is_superuser=True)
    workspace = WorkspaceFactory()
    credential = CredentialFactory(workspace=workspace)
    admin = client_for(operator, workspace)
    ref = {"id": str(credential.pk), "account_id": str(credential.account_id)}

    assert ok(admin.call("/credentials/update", {**ref, "tags": ["locked"]}))["tags"] == ["locked"]
    assert Credential.objects.get(pk=credential.pk).tags == ["locked"]
    assert ok(admin.call("/credentials/delete", ref)) == {"id": str(credential.pk)}
    assert not Credential.objects.filter(pk=credential.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_the_other_locking_endpoints_lock_inside_a_transaction(strict_locks):
    """`auth/refresh` (the refresh token row), `auth/confirm` and `auth/update-password` (the account row)."""
    from authn import tokens
    from tests.factories import PASSWORD

    account = AccountFactory(verified=False)
    CredentialFactory(account=account, status=Credential.Status.PENDING)
    session = ok(ApiClient().call("/auth/login", {"email": account.email, "password": PASSWORD}))
    assert ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))["access_token"]

    def special(type_):
        account.refresh_from_db()
        return tokens.issue(
            account.pk, type=type_, session_version=account.session_version, lifetime=timedelta(hours=1)
        )[0]

    assert ok(ApiClient().call("/auth/confirm", {"token": special(tokens.ACCOUNT_CONFIRM)}))["verified"]
    body = {"token": special(tokens.PASSWORD_RESET), "password": "another long passphrase"}
    assert ok(ApiClient().call("/auth/update-password", body))["account_id"] == str(account.pk)


# The boundary itself, on endpoints made for the test.

after_commit: list[str] = []


class WritesThenAnswers(Endpoint):
    public = True

    def handle(self, request, data):
        Workspace.objects.create(name="w", slug=data["slug"], config={}, meta={})
        transaction.on_commit(lambda: after_commit.append(data["slug"]))
        if "refuse" in data:
            raise ApiError(409, "refused", commit=data["refuse"] == "commit")
        if "crash" in data:
            raise RuntimeError("unexpected")
        return {"slug": data["slug"]}


urlpatterns = [path("writes", WritesThenAnswers.as_view())]


@pytest.fixture
def boundary():
    after_commit.clear()
    with override_settings(ROOT_URLCONF=__name__, DEBUG=False):
        yield ApiClient(raise_request_exception=False)


def slugs() -> set[str]:
    return set(Workspace.objects.values_list("slug", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_request_commits_its_writes_then_runs_the_on_commit_work(boundary):
    assert ok(boundary.call("/writes", {"slug": "kept"})) == {"slug": "kept"}
    assert "kept" in slugs()
    assert after_commit == ["kept"]


@pytest.mark.django_db(transaction=True)
def test_an_error_rolls_the_whole_request_back(boundary):
    err(boundary.call("/writes", {"slug": "refused", "refuse": "rollback"}), 409, "refused")
    err(boundary.call("/writes", {"slug": "crashed", "crash": True}), 500, "internal server error")
    assert not slugs() & {"refused", "crashed"}
    assert after_commit == []  # the work for after the commit went with it


@pytest.mark.django_db(transaction=True)
def test_a_refusal_that_must_stand_commits_first(boundary):
    """`ApiError(commit=True)`: what a reused refresh token does (its revocation stands, then 401)."""
    err(boundary.call("/writes", {"slug": "stands", "refuse": "commit"}), 409, "refused")
    assert "stands" in slugs()
    assert after_commit == ["stands"]


def test_inside_a_test_transaction_the_rollback_holds_too(db, django_capture_on_commit_callbacks):
    with override_settings(ROOT_URLCONF=__name__), django_capture_on_commit_callbacks() as callbacks:
        err(ApiClient().call("/writes", {"slug": "refused", "refuse": "rollback"}), 409, "refused")
    assert "refused" not in slugs() and callbacks == []
