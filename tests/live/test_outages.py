"""Outages (docs/integration.md#push-events "at least once", docs/operations.md#e-mail): what the service
acknowledged before or during a Redis outage or a worker's death is delivered once things are back, by the
worker and beat as they run (the test restarts nothing but what it killed)."""

import time

from tests.live.api import add_member, create_client, create_workspace

CONFIRM_SUBJECT = "Confirm your e-mail address"
# seconds: docs/operations.md#processes, "every owed e-mail and push event arrives within 60 s of recovery"
RECOVERY = 60


def confirmations(live, address: str) -> list:
    return [message for message in live.emails_to(address) if message["Subject"] == CONFIRM_SUBJECT]


def pushed(receiver, kind: str, resource_id: str) -> list[dict]:
    return [
        event
        for event in receiver.unique().values()
        if event["body"]["type"] == kind and event["body"]["data"]["resource"]["id"] == resource_id
    ]


def alive_and(predicate, *processes):
    """`predicate`, failing at once with the process's log when one of `processes` died."""

    def check():
        for process in processes:
            assert process.alive(), f"{process.name} died:\n{process.tail()}"
        return predicate()

    return check


def test_owed_mail_and_pushes_arrive_after_each_of_two_redis_outages(live, receiver):
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    create_client(live, token, workspace, endpoint=receiver.url)
    worker, beat = live.worker, live.beat

    for outage in (1, 2):
        # Redis goes down while the worker is in the middle of a delivery (a message it has not
        # acknowledged yet: kombu must put it back while the broker is gone).
        receiver.delay = 2
        arrived = receiver.arrivals
        in_flight = add_member(live, token, workspace, live.register()["account"]["id"])
        live.wait_for(lambda: receiver.arrivals > arrived, 30, what="a delivery in flight")  # noqa: B023
        live.redis_stop()
        receiver.delay = 0
        newcomer = live.register()["account"]  # owes a confirmation e-mail
        membership = add_member(live, token, workspace, newcomer["id"])  # owes a membership.created push
        live.redis_start()
        recovered = time.monotonic()

        def left() -> float:
            return RECOVERY - (time.monotonic() - recovered)  # noqa: B023

        what = f"after outage {outage}"
        live.wait_for(
            alive_and(lambda: confirmations(live, newcomer["email"]), worker, beat),  # noqa: B023
            left(),
            what=f"the e-mail owed {what}",
        )
        for owed in (membership, in_flight):
            live.wait_for(
                alive_and(lambda: pushed(receiver, "membership.created", owed["id"]), worker, beat),  # noqa: B023
                left(),
                what=f"the push owed {what}",
            )
    assert (live.worker, live.beat) == (worker, beat), "nothing was restarted"


def test_kill_9_of_the_worker_during_a_burst_loses_nothing_acknowledged(live, receiver):
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    create_client(live, token, workspace, endpoint=receiver.url)
    accounts = [live.register()["account"]["id"] for _ in range(10)]
    receiver.delay = 0.3  # deliveries are in flight in the worker's pool when it is killed
    owed_mail, owed_pushes = [], []

    def burst(members: list[str]) -> None:
        for account_id in members:
            owed_mail.append(live.register()["account"]["email"])
            owed_pushes.append(add_member(live, token, workspace, account_id)["id"])

    burst(accounts[:5])
    live.wait_for(lambda: receiver.events, 30, what="the worker to start delivering")
    live.kill_worker()
    burst(accounts[5:])  # acknowledged while no worker runs
    live.start_worker()

    def all_pushed() -> bool:
        return all(pushed(receiver, "membership.created", membership) for membership in owed_pushes)

    live.wait_for(all_pushed, RECOVERY, what="every push owed")
    live.wait_for(
        lambda: all(confirmations(live, address) for address in owed_mail), RECOVERY, what="every e-mail owed"
    )
