"""docs/api.md#quotas-and-budgets: a request's statements run under IAM_STATEMENT_TIMEOUT_MS on PostgreSQL;
past it the request answers 503 `request took too long` and writes nothing. Connections opened outside a
request (the worker, commands) have no limit; SQLite has none at all."""

import pytest
from django.db import connection

from iam.models import AuditEntry
from iam.platform import audit, counts
from tenancy.models import Project
from tests.conftest import err, ok
from tests.factories import ProjectFactory

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's statement timeout"
)

BODY = {
    "name": "Slow",
    "code": "slow",
    "config": {"schema_version": "1"},
    "tags": [],
    "meta": {"schema_version": "1"},
}


def sleep(seconds: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s)", [seconds])


@pytest.fixture
def fresh_connection(transactional_db, settings):
    """`fresh_connection()` closes the test's connection, so that the next request opens its own (as in a
    web process); closed again at the end, so no later test inherits its limit."""
    settings.IAM_STATEMENT_TIMEOUT_MS = 200
    yield connection.close
    connection.close()


@postgresql_only
@pytest.mark.admin("projects:*")
def test_a_write_past_the_timeout_answers_503_and_writes_nothing(
    fresh_connection, admin, workspace, monkeypatch
):
    record = audit.record

    def slow_record(*args, **kwargs):
        entry = record(*args, **kwargs)  # the project and its audit entry are written by now
        sleep(1)
        return entry

    monkeypatch.setattr(audit, "record", slow_record)
    entries = AuditEntry.objects.count()
    fresh_connection()
    err(admin.call("/projects/create", BODY), 503, "request took too long")
    assert not Project.objects.filter(workspace=workspace).exists()
    assert AuditEntry.objects.count() == entries
    monkeypatch.setattr(audit, "record", record)
    ok(admin.call("/projects/create", BODY))  # the connection is fine afterwards


@postgresql_only
@pytest.mark.admin("projects:*")
def test_a_read_outside_a_transaction_is_limited_too(fresh_connection, admin, workspace, monkeypatch):
    ProjectFactory(workspace=workspace)
    total = counts.total

    def slow_total(*args, **kwargs):
        sleep(1)
        return total(*args, **kwargs)

    monkeypatch.setattr(counts, "total", slow_total)
    fresh_connection()
    err(admin.call("/projects/list", {}), 503, "request took too long")
    monkeypatch.setattr(counts, "total", total)
    assert ok(admin.call("/projects/list", {}))["metadata"]["count"] == 1


@postgresql_only
@pytest.mark.admin("projects:*")
def test_within_the_timeout_nothing_changes(fresh_connection, admin, workspace, monkeypatch):
    record = audit.record

    def slow_record(*args, **kwargs):
        sleep(0.05)
        return record(*args, **kwargs)

    monkeypatch.setattr(audit, "record", slow_record)
    fresh_connection()
    ok(admin.call("/projects/create", BODY))


@postgresql_only
def test_connections_opened_outside_a_request_have_no_limit(fresh_connection):
    """The worker's and the commands' connections: `cleanup` and the sweeps may run long."""
    fresh_connection()
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@postgresql_only
@pytest.mark.admin("projects:*")
def test_a_request_connection_carries_the_setting(fresh_connection, admin, settings):
    settings.IAM_STATEMENT_TIMEOUT_MS = 5000
    fresh_connection()
    ok(admin.call("/projects/list", {}))
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "5s"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite has no statement timeout")
@pytest.mark.admin("projects:*")
def test_sqlite_runs_without_one(admin, settings):
    settings.IAM_STATEMENT_TIMEOUT_MS = 1
    ok(admin.call("/projects/create", BODY))
