"""`POST /clients/events` over HTTP: a client reads what push sent (or would have sent) after a cursor, in
commit order, only for its own workspace; expired cursors answer 410; an event that commits late is never
skipped. These tests commit for real (`transaction=True`): on PostgreSQL an event is served only once the
transaction that wrote it, and every older one, has finished."""

import threading
import time
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from clients.client_cache import workspace_of
from clients.models import Delivery
from iam.models import Event
from iam.platform import events
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db(transaction=True)
META = {"schema_version": "1"}


@pytest.fixture
def side(member_of):
    """One workspace with its admin (second account) and a client without an endpoint (pull mode)."""

    def make():
        workspace = WorkspaceFactory()
        _, admin = member_of(workspace, "*")
        client = ok(admin.call("/clients/create", {"name": "svc", "tags": [], "meta": META}))
        return workspace, admin, client

    return make


def add_member(admin) -> str:
    body = {
        "account_id": str(AccountFactory().pk),
        "scope": "workspace",
        "status": "invited",
        "role_ids": [],
        "tags": [],
        "meta": META,
    }
    return ok(admin.call("/memberships/create", body))["id"]


def pull(client, after=None, limit=None, secret=None):
    body = {"client_id": client["id"], "client_secret": secret or client["secret"], "after": after}
    if limit is not None:
        body["limit"] = limit
    return ApiClient().call("/clients/events", body)


def pull_until(client, count, after=None, **kwargs):
    """On PostgreSQL an event waits for every older transaction of the server (other test databases'
    too): poll a little instead of asserting on the first read."""
    deadline = time.monotonic() + 20
    while True:
        data = ok(pull(client, after, **kwargs))
        if len(data["events"]) >= count or time.monotonic() > deadline:
            return data
        time.sleep(0.1)


def resources(data):
    return [event["data"]["resource"]["id"] for event in data["events"]]


def test_a_client_reads_its_workspace_events_in_order_and_only_those(side):
    workspace_a, admin_a, client_a = side()
    _, admin_b, client_b = side()
    created_a = [add_member(admin_a), add_member(admin_a)]
    created_b = [add_member(admin_b)]
    ok(admin_a.call("/memberships/delete", {"id": created_a[0]}))

    data = pull_until(client_a, 3)
    assert resources(data) == [*created_a, created_a[0]]
    assert [event["type"] for event in data["events"]] == [
        "membership.created",
        "membership.created",
        "membership.deleted",
    ]
    assert {event["workspace_id"] for event in data["events"]} == {str(workspace_a.pk)}
    assert data["has_more"] is False
    assert resources(pull_until(client_b, 1)) == created_b

    # Nothing new: the same position, and the cursor keeps working.
    again = ok(pull(client_a, data["next_cursor"]))
    assert again["events"] == [] and again["has_more"] is False
    assert again["next_cursor"].split(".")[:2] == data["next_cursor"].split(".")[:2]
    add_member(admin_b)  # another workspace's change is not served to A
    assert ok(pull(client_a, again["next_cursor"]))["events"] == []


def test_the_events_are_the_objects_push_sends(side):
    workspace, admin, client = side()
    ok(
        admin.call(
            "/clients/create",
            {"name": "pushed", "endpoint": "http://127.0.0.1:9/hook", "tags": [], "meta": META},
        )
    )
    add_member(admin)
    data = pull_until(client, 1)
    pushed = list(Delivery.objects.filter(workspace=workspace).values_list("payload", flat=True))
    assert data["events"] == pushed and len(pushed) == 1
    assert set(pushed[0]) == {"id", "type", "workspace_id", "occurred_at", "data"}


def test_pages_follow_the_cursor(side):
    _, admin, client = side()
    created = [add_member(admin) for _ in range(5)]
    pull_until(client, 5)
    seen, after = [], None
    for expected_more in (True, True, False):
        page = ok(pull(client, after, limit=2))
        assert page["has_more"] is expected_more
        seen += resources(page)
        after = page["next_cursor"]
    assert seen == created


def test_client_authentication_is_validate_s(side):
    _, admin, client = side()
    _, _, other = side()
    add_member(admin)
    err(pull(client, secret="wrong"), 401, "invalid client")
    err(pull(client, secret=other["secret"]), 401, "invalid client")
    err(pull({**client, "id": str(uuid.uuid4())}), 401, "invalid client")
    new_secret = ok(admin.call("/clients/regenerate-secret", {"id": client["id"]}))["secret"]
    err(pull(client), 401, "invalid client")  # the old secret, at once
    # regenerate-secret is itself an event (client.secret_rotated)
    assert [event["type"] for event in pull_until(client, 2, secret=new_secret)["events"]][-1] == (
        "client.secret_rotated"
    )
    ok(admin.call("/clients/delete", {"id": client["id"]}))
    err(pull(client, secret=new_secret), 401, "invalid client")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"limit": 0}, "limit must be at least 1"),
        ({"limit": 1001}, "limit must be at most 1000"),
        ({"limit": "5"}, "limit must be an integer"),
        ({"after": "abc"}, "invalid after"),
        ({"after": "1.2"}, "invalid after"),
        ({"after": 5}, "after must be a string"),
        ({"client_id": "nope"}, "invalid client_id"),
        ({"client_secret": None}, "client_secret required"),
    ],
)
@pytest.mark.django_db  # nothing to commit: the cheaper test transaction
def test_validation(side, change, message):
    _, _, client = side()
    body = {"client_id": client["id"], "client_secret": client["secret"], **change}
    err(ApiClient().call("/clients/events", body), 400, message)


def test_expired_cursor_answers_410_and_cleanup_drops_old_events(side, settings):
    _, admin, client = side()
    add_member(admin)
    cursor = pull_until(client, 1)["next_cursor"]
    xid, last_id, _ = cursor.split(".")
    week_ago = int((timezone.now() - timedelta(days=7, seconds=5)).timestamp())
    err(pull(client, f"{xid}.{last_id}.{week_ago}"), 410, "cursor expired")
    settings.IAM_EVENT_RETENTION_DAYS = 8
    ok(pull(client, f"{xid}.{last_id}.{week_ago}"))
    settings.IAM_EVENT_RETENTION_DAYS = 7

    Event.objects.update(created_at=timezone.now() - timedelta(days=7, minutes=30))
    out = StringIO()
    call_command("cleanup", stdout=out)
    assert "deleted 0 events" in out.getvalue()  # kept an hour past the retention
    Event.objects.update(created_at=timezone.now() - timedelta(days=7, hours=1, seconds=1))
    call_command("cleanup", stdout=out)
    assert "deleted 1 events" in out.getvalue()


def test_the_cursor_survives_a_restart_and_an_outage_of_the_worker(side, monkeypatch, cache_down):
    """Events are written in the change's transaction, not by the worker: with the broker gone (nothing is
    published) and every cache and process memory lost, the cursor carries on where it was."""
    from iam.platform import outbox

    monkeypatch.setattr(outbox, "publish", lambda *args, **kwargs: None)
    _, admin, client = side()
    first = add_member(admin)
    cursor = pull_until(client, 1)["next_cursor"]
    later = [add_member(admin), add_member(admin)]
    workspace_of.clear()  # a restarted process
    data = pull_until(client, 2, cursor)
    assert resources(data) == later and first not in resources(data)


def _emit(workspace, resource_id):
    events.emit(
        "membership.updated",
        resource=("membership", resource_id),
        account_ids=[uuid.uuid4()],
        workspace_ids=[workspace.pk],
    )


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite has one writer at a time")
def test_an_event_that_commits_late_is_never_skipped(side):
    """T1 writes first (lower id and transaction id) and commits last; T2 writes and commits in between.
    A reader in between must not be handed T2's event with a cursor past T1's."""
    workspace, _, client = side()
    early, late = uuid.uuid4(), uuid.uuid4()
    written, release, failures = threading.Event(), threading.Event(), []

    def slow_writer():
        try:
            with transaction.atomic():
                _emit(workspace, early)
                written.set()
                assert release.wait(30)
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(exc)
            written.set()
        finally:
            connection.close()

    def fast_writer():
        try:
            with transaction.atomic():
                _emit(workspace, late)
        finally:
            connection.close()

    t1 = threading.Thread(target=slow_writer)
    t1.start()
    assert written.wait(30)
    t2 = threading.Thread(target=fast_writer)
    t2.start()
    t2.join(30)
    assert Event.objects.filter(workspace_id=workspace.pk).count() == 1  # T2's row is committed
    held = ok(pull(client))
    assert held["events"] == []  # withheld while T1, which may still add an earlier event, runs
    release.set()
    t1.join(30)
    assert not failures
    data = pull_until(client, 2, held["next_cursor"])
    assert resources(data) == [str(early), str(late)]
    assert Event.objects.filter(workspace_id=workspace.pk).count() == 2


def test_extreme_cursors_answer_without_error(side):
    _, admin, client = side()
    add_member(admin)
    pull_until(client, 1)
    assert ok(pull(client, "9999999999999999999.9999999999999999999.999999999999"))["events"] == []
    assert len(ok(pull(client, "0.0.999999999999"))["events"]) == 1


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's transaction horizon")
def test_a_long_transaction_in_another_database_holds_nothing_back(side):
    """Only this database's transactions write the log: one running elsewhere on the server (here in the
    `postgres` database, holding a transaction id) does not delay the events."""
    import psycopg

    _, admin, client = side()
    params = connection.get_connection_params()
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=False) as elsewhere:
        elsewhere.execute("SELECT pg_current_xact_id()")  # a transaction id, held until the end
        created = add_member(admin)
        assert resources(ok(pull(client))) == [created]
