"""No request runs longer than IAM_REQUEST_SECONDS in all (iam/platform/timeouts.py): past it, it
answers 503 `request took too long` and writes nothing. The clock is the test's: `clock.late()` puts the
request past its deadline at the moment a test chooses. (Against the running service, with a real wait:
tests/live/test_slow_readers_live.py.)"""

import time

import pytest
from django.contrib.admin import AdminSite
from django.db import connection

from iam.http.encoder import Encoder
from iam.models import AuditEntry
from iam.platform import audit, timeouts
from tenancy.api.projects import ProjectCreate
from tenancy.models import Project
from tests.conftest import err, ok
from tests.factories import ProjectFactory

pytestmark = pytest.mark.admin("projects:*")

BODY = {
    "name": "Slow",
    "code": "slow",
    "config": {"schema_version": "1"},
    "tags": [],
    "meta": {"schema_version": "1"},
}


class Clock:
    """`iam.platform.timeouts`' clock: the real one, moved past any deadline by `late()`."""

    def __init__(self):
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def late(self) -> None:
        self.offset = 3600.0


@pytest.fixture
def clock(monkeypatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(timeouts, "time", found)
    return found


def assert_nothing_written(workspace, entries: int) -> None:
    assert not Project.objects.filter(workspace=workspace).exists()
    assert AuditEntry.objects.count() == entries


def test_a_request_past_its_deadline_before_it_starts_is_answered_503(admin, workspace, settings):
    """It waited in line for a thread longer than the whole deadline: nothing of it runs."""
    settings.IAM_REQUEST_SECONDS = 0
    entries = AuditEntry.objects.count()
    err(admin.call("/projects/create", BODY), 503, "request took too long")
    assert_nothing_written(workspace, entries)


def test_a_statement_past_the_deadline_is_not_run_and_the_write_rolls_back(
    admin, workspace, clock, monkeypatch
):
    record = audit.record

    def late_record(*args, **kwargs):
        clock.late()  # the project is written by now; the audit entry's INSERT comes past the deadline
        return record(*args, **kwargs)

    monkeypatch.setattr(audit, "record", late_record)
    entries = AuditEntry.objects.count()
    response = admin.call("/projects/create", BODY)
    err(response, 503, "request took too long")
    assert response["X-Request-ID"]
    assert_nothing_written(workspace, entries)


def test_a_write_that_ends_past_the_deadline_commits_nothing(admin, workspace, clock, monkeypatch):
    """The handler's last statement ran in time and Python work took it past the deadline: the check
    before the commit rolls it back."""
    handle = ProjectCreate.handle

    def late_handle(self, request, data):
        answer = handle(self, request, data)
        clock.late()
        return answer

    monkeypatch.setattr(ProjectCreate, "handle", late_handle)
    entries = AuditEntry.objects.count()
    err(admin.call("/projects/create", BODY), 503, "request took too long")
    assert_nothing_written(workspace, entries)


def test_a_list_that_runs_past_the_deadline_between_two_records_is_answered_503(
    admin, workspace, clock, monkeypatch
):
    ProjectFactory.create_batch(3, workspace=workspace)
    joined = Encoder.joined

    def late_joined(self, record, budget):
        clock.late()  # Python work, no statement: the loop's own check finds it late
        return joined(self, record, budget)

    monkeypatch.setattr(Encoder, "joined", late_joined)
    err(admin.call("/projects/list", {}), 503, "request took too long")


def test_a_plain_django_view_past_the_deadline_is_answered_503(admin_web, monkeypatch):
    """Views outside the API's endpoints (the admin's) let the error out; the middleware answers it."""

    def late_context(self, request):
        raise timeouts.RequestTooLong

    monkeypatch.setattr(AdminSite, "each_context", late_context)
    err(admin_web.get("/admin/"), 503, "request took too long")


def test_within_the_deadline_nothing_changes(admin, workspace):
    ok(admin.call("/projects/create", BODY))
    assert Project.objects.filter(workspace=workspace).count() == 1


def test_outside_a_request_there_is_no_deadline(clock):
    """The worker, beat and the commands."""
    clock.late()
    timeouts.check_deadline()
    assert timeouts.seconds_left() is None


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's statement timeout"
)


@pytest.fixture
def fresh_connection(transactional_db, settings):
    """As in test_statement_timeout.py: the next request opens its own connection (as in a web process)."""
    settings.IAM_STATEMENT_TIMEOUT_MS = 5000
    yield connection.close
    connection.close()


@postgresql_only
def test_no_statement_outlives_the_deadline(fresh_connection, admin, workspace, settings, monkeypatch):
    """A 3-second statement, 0.5 s before the deadline, under a 5-second statement timeout: cancelled when
    the deadline comes, the request answered 503 and nothing written; the connection's own statement
    timeout is back afterwards."""
    settings.IAM_REQUEST_SECONDS = 0.5
    record = audit.record

    def slow_record(*args, **kwargs):
        entry = record(*args, **kwargs)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(3)")
        return entry

    monkeypatch.setattr(audit, "record", slow_record)
    entries = AuditEntry.objects.count()
    fresh_connection()
    started = time.monotonic()
    err(admin.call("/projects/create", BODY), 503, "request took too long")
    assert time.monotonic() - started < 3
    assert_nothing_written(workspace, entries)
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "5s"
