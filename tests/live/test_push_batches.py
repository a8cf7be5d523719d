"""Push deliveries in batches across the real processes: the web process kicks a worker task per
client after commit (a kick already queued in Redis stands for later changes), the worker sends the
client's due deliveries in a batch, and a slow client's batch holds back nobody else's."""

import time

import psycopg

from tests.live.api import add_member, create_client, create_workspace
from tests.live.conftest import Receiver

CHANGES = 8


def created(receiver: Receiver) -> set[str]:
    return {
        event["body"]["data"]["resource"]["id"]
        for event in receiver.unique().values()
        if event["body"]["type"] == "membership.created"
    }


def test_a_burst_reaches_every_client_and_a_slow_one_delays_nobody(live, receiver):
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    slow = Receiver()
    try:
        slow.delay = 1.5  # each request: the slow client's burst keeps a worker busy for CHANGES x 1.5 s
        create_client(live, token, workspace, endpoint=slow.url)
        create_client(live, token, workspace, endpoint=receiver.url)
        accounts = [live.register()["account"]["id"] for _ in range(CHANGES)]
        started = time.monotonic()
        memberships = {add_member(live, token, workspace, account)["id"] for account in accounts}

        live.wait_for(lambda: created(receiver) >= memberships, 60, what="the fast client's events")
        fast_done = time.monotonic() - started
        live.wait_for(lambda: created(slow) >= memberships, 60, what="the slow client's events")
        slow_done = time.monotonic() - started
        # the slow client's deliveries take two of its answers at least: a batch's first alone, then the
        # rest at once
        assert slow_done >= 2 * slow.delay
        assert fast_done < slow_done - 1, (fast_done, slow_done)  # not behind the slow client's batches
    finally:
        slow.close()

    # every attempt recorded, each delivery once, and nothing left owed
    rows = live.manage(
        "shell",
        "-c",
        "from clients.models import Delivery, DeliveryAttempt; "
        f"d = Delivery.objects.filter(workspace_id='{workspace}', event_type='membership.created'); "
        "print(d.count(), d.filter(status='delivered', attempts=1).count(), "
        "DeliveryAttempt.objects.filter(delivery__in=d).count())",
    )
    assert rows.stdout.strip().splitlines()[-1].split() == [str(2 * CHANGES)] * 3, rows.stdout + rows.stderr


def test_the_worker_keeps_its_database_connection_between_tasks(live, receiver):
    """Celery's Django fixup closes the database connection around every task unless told otherwise: a
    PostgreSQL backend started for each push batch, and for each of beat's sweeps. Django's own rule keeps
    it now (iam/celery.py): the sessions PostgreSQL counts for the database stay put while the worker runs
    beat's sweeps (two a second here) and a push."""
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    create_client(live, token, workspace, endpoint=receiver.url)

    def sessions() -> int:
        with psycopg.connect(live.admin_url, autocommit=True) as conn:  # to another database
            query = "SELECT sessions FROM pg_stat_database WHERE datname = %s"
            return conn.execute(query, (live.database,)).fetchone()[0]

    time.sleep(3)  # the sessions opened so far are counted (PostgreSQL reports them within a second or so)
    before = sessions()
    membership = add_member(live, token, workspace, live.register()["account"]["id"])["id"]
    live.wait_for(lambda: membership in created(receiver), 60, what="the event")
    time.sleep(5)  # ten sweeps: ten tasks
    assert sessions() - before <= 2, "a connection per task"  # the web's two, at most
