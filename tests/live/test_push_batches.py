"""Push deliveries in batches across the real processes: the web process kicks a worker task per
client after commit (a kick already queued in Redis stands for later changes), the worker sends the
client's due deliveries in a batch, and a slow client's batch holds back nobody else's."""

import time

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
        assert slow_done >= CHANGES * slow.delay / 2  # two workers may share a client's backlog, no more
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
