"""Push throughput with `Delivery` the only retry state: a worker takes a client's due deliveries in one
batch, sends them several at once over kept-alive connections, records each attempt, and writes the batch
in a few statements; kicks for a client coalesce while one is queued; beat's sweep hands over what no task
took; an endpoint that does not answer holds back only its own client's batch."""

import socket
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clients import push
from clients.models import Delivery, DeliveryAttempt
from iam.platform import egress, outbox
from tests.clients.test_push import (  # noqa: F401 (fixtures)
    Receiver,
    admin,
    emit_membership_created,
    keep_alive_receiver,
    kept_connections,
    make_client,
    verify,
    workspace,
)


@pytest.fixture(autouse=True)
def _fresh_egress():
    yield
    egress._adapter.poolmanager.clear()  # closes the connections kept alive
    egress._resolved.answers.clear()


@pytest.fixture
def held_kicks(monkeypatch):
    """Changes are recorded, but no task is handed over: the test runs the worker's batch itself."""
    kicks = []
    monkeypatch.setattr(push, "kick", lambda *args, **kwargs: kicks.append((args, kwargs)))
    return kicks


def emit(workspace, capture, count: int) -> None:  # noqa: F811
    for _ in range(count):
        emit_membership_created(workspace, capture)


def test_a_clients_due_deliveries_go_in_one_batch_over_kept_alive_connections(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    django_capture_on_commit_callbacks,
):
    client = make_client(admin, keep_alive_receiver.url)
    emit(workspace, django_capture_on_commit_callbacks, 5)
    assert len(held_kicks) == 5 and keep_alive_receiver.requests == []

    with CaptureQueriesContext(connection) as queries:
        assert push.deliver_due(client["id"], 0) == 5

    assert len(keep_alive_receiver.requests) == 5 and len(set(keep_alive_receiver.peers)) <= push.IN_FLIGHT
    assert all(verify(client["secret"], *request) for request in keep_alive_receiver.requests)
    assert Delivery.objects.filter(status="delivered", attempts=1).count() == 5
    assert DeliveryAttempt.objects.filter(status_code=204).count() == 5  # every attempt recorded
    # oldest first (the order the changes were made in), then several at once: they may arrive in any order
    sent = [headers["webhook-id"] for headers, _ in keep_alive_receiver.requests]
    owed = [str(event_id) for event_id in Delivery.objects.order_by("id").values_list("event_id", flat=True)]
    assert sent[0] == owed[0] and sorted(sent) == sorted(owed)
    # the lock and select, one INSERT of the attempts, one UPDATE of the delivered, and the savepoint:
    # not a statement per delivery
    writes = [
        query["sql"]
        for query in queries.captured_queries
        if not query["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    assert len(writes) == 3, writes


def test_a_batch_records_each_attempt_in_one_insert(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """One row per attempt, written at once; the attempts of a group, sent at once, began at one time."""
    monkeypatch.setattr(push, "IN_FLIGHT", 3)
    client = make_client(admin, keep_alive_receiver.url)
    emit(workspace, django_capture_on_commit_callbacks, 4)
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        assert push.deliver_due(client["id"], 0) == 4
    inserts = [query["sql"] for query in queries.captured_queries if query["sql"].startswith("INSERT")]
    assert len(inserts) == 1 and "deliveryattempt" in inserts[0]
    attempts = list(DeliveryAttempt.objects.order_by("delivery_id").values())
    assert [attempt["delivery_id"] for attempt in attempts] == list(
        Delivery.objects.order_by("id").values_list("id", flat=True)
    )
    assert {(attempt["status_code"], attempt["error"]) for attempt in attempts} == {(204, "")}
    assert all(before <= attempt["attempted_at"] <= timezone.now() for attempt in attempts)
    assert all(attempt["duration_ms"] >= 0 for attempt in attempts)
    # the first alone, then the other three together
    assert len({attempt["attempted_at"] for attempt in attempts[1:]}) == 1


def test_a_batch_has_several_deliveries_at_the_receiver_at_once(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """After its first delivery, sent alone (an endpoint that is down costs the batch one attempt), a batch
    sends `IN_FLIGHT` at once, each on a connection of its own, and reads their answers after: none waits
    on the answer before it. The next batch takes the same connections again."""
    monkeypatch.setattr(push, "IN_FLIGHT", 3)
    client = make_client(admin, keep_alive_receiver.url)
    for _ in range(2):
        emit(workspace, django_capture_on_commit_callbacks, 4)
        keep_alive_receiver.requests.clear()
        keep_alive_receiver.together = threading.Barrier(3, timeout=5)  # 3 at the receiver, or no answer
        assert push.deliver_due(client["id"], 0) == 4
        assert Delivery.objects.filter(status="pending").count() == 0
        assert DeliveryAttempt.objects.filter(status_code=204).count() == Delivery.objects.count()
    assert len(set(keep_alive_receiver.peers)) == 3  # kept alive from the first batch to the second


def test_a_full_batch_hands_the_rest_on(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    client = make_client(admin, keep_alive_receiver.url)
    kicks = []
    with monkeypatch.context() as patched:
        patched.setattr(push, "kick", lambda *args, **kwargs: kicks.append(args))
        emit(workspace, django_capture_on_commit_callbacks, 3)
    monkeypatch.setattr(push, "BATCH", 2)
    with django_capture_on_commit_callbacks(execute=True):
        assert push.deliver_due(client["id"], 0) == 2  # its kick after commit takes the third
    assert Delivery.objects.filter(status="delivered").count() == 3
    assert len(keep_alive_receiver.accepted) == 3


def test_a_slow_batch_yields_the_worker_and_hands_the_rest_on(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    client = make_client(admin, keep_alive_receiver.url)
    emit(workspace, django_capture_on_commit_callbacks, 3)
    monkeypatch.setattr(push, "BATCH_SECONDS", 0)  # every delivery takes longer than that
    held_kicks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert push.deliver_due(client["id"], 7) == 1
    assert held_kicks == [((client["id"], 7), {})]  # behind the other clients' tasks, at once
    assert sorted(Delivery.objects.values_list("attempts", flat=True)) == [0, 0, 1]
    assert Delivery.objects.filter(status="pending", next_attempt_at__lte=timezone.now()).count() == 2


def test_an_endpoint_that_does_not_answer_holds_back_only_its_own_batch(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    django_capture_on_commit_callbacks,
):
    down = make_client(admin, "http://127.0.0.1:9/", "down")  # the discard port: connection refused
    up = make_client(admin, keep_alive_receiver.url, "up")
    emit(workspace, django_capture_on_commit_callbacks, 3)

    before = timezone.now()
    assert push.deliver_due(down["id"], 0) == 3
    waiting = list(Delivery.objects.filter(client_id=down["id"]).order_by("id"))
    assert [delivery.attempts for delivery in waiting] == [1, 0, 0]  # one tried, the rest wait with it
    assert DeliveryAttempt.objects.filter(delivery__client_id=down["id"]).count() == 1
    assert {delivery.status for delivery in waiting} == {"pending"}
    retry_at = {delivery.next_attempt_at for delivery in waiting}
    assert len(retry_at) == 1 and before < retry_at.pop() <= timezone.now() + timedelta(seconds=10)
    assert push.deliver_due(down["id"], 0) == 0  # none due before the retry time

    assert push.deliver_due(up["id"], 0) == 3  # the other client is not held back
    assert len(keep_alive_receiver.accepted) == 3


def test_deliveries_waiting_on_a_down_endpoint_give_up_at_their_own_deadline(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    held_kicks,
    django_capture_on_commit_callbacks,
):
    down = make_client(admin, "http://127.0.0.1:9/", "down")
    emit(workspace, django_capture_on_commit_callbacks, 2)
    first, second = Delivery.objects.order_by("id")
    Delivery.objects.filter(pk=second.pk).update(deadline=timezone.now() + timedelta(seconds=1))
    assert push.deliver_due(down["id"], 0) == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.attempts) == ("pending", 1)
    assert (second.status, second.attempts) == ("failed", 0)
    assert second.last_error.startswith("gave up")


def test_kicks_for_a_client_coalesce_while_one_is_queued(db, monkeypatch):
    handed = []
    monkeypatch.setattr(
        outbox, "dispatch", lambda task, *args, **kwargs: handed.append((args, kwargs)) or True
    )
    client_id = "3f3a3c52-36f3-4a36-9a4c-7c1c9e0c5d10"
    push.kick(client_id, 1)
    push.kick(client_id, 2)  # the queued task will take this one too
    assert handed == [((client_id, 1), {"countdown": None})]
    push.kick(None, 3)  # a client-less delivery has a task of its own
    push.kick(client_id, 4, countdown=5.0)  # a retry's delayed task is never merged into an earlier one
    assert [args for args, _ in handed] == [(client_id, 1), (None, 3), (client_id, 4)]
    push.deliver_due(client_id, 1)  # the queued task starts: the next change needs a task of its own
    push.kick(client_id, 5)
    assert handed[-1] == ((client_id, 5), {"countdown": None})


def test_a_lost_kick_does_not_silence_the_client(db, monkeypatch):
    monkeypatch.setattr(outbox, "dispatch", lambda *args, **kwargs: False)  # the broker is down
    push.kick("3f3a3c52-36f3-4a36-9a4c-7c1c9e0c5d10", 1)
    handed = []
    monkeypatch.setattr(outbox, "dispatch", lambda task, *args, **kwargs: handed.append(args) or True)
    push.kick("3f3a3c52-36f3-4a36-9a4c-7c1c9e0c5d10", 2)
    assert handed == [("3f3a3c52-36f3-4a36-9a4c-7c1c9e0c5d10", 2)]


def test_the_sweep_hands_over_one_task_per_client_with_overdue_deliveries(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    first = make_client(admin, keep_alive_receiver.url, "first")
    second = make_client(admin, keep_alive_receiver.url, "second")
    emit(workspace, django_capture_on_commit_callbacks, 3)
    assert push.sweep() == 0  # their own tasks may still be on the way
    Delivery.objects.update(next_attempt_at=timezone.now() - timedelta(minutes=5))
    orphan = Delivery.objects.filter(client_id=second["id"]).first()
    Delivery.objects.filter(pk=orphan.pk).update(client=None)  # its client went with its workspace
    Delivery.objects.filter(client_id=second["id"]).update(status="delivered")
    handed = []
    monkeypatch.setattr(outbox, "dispatch", lambda task, *args, **kwargs: handed.append(args) or True)
    assert push.sweep() == 2
    assert sorted(handed, key=str) == sorted([(first["id"], handed[0][1]), (None, orphan.pk)], key=str)


def test_delivery_dns_answers_are_reused_briefly_and_still_vetted(db, monkeypatch):
    answers = {"hooks.example.com": "93.184.216.34"}
    calls = []

    def resolve(host, port, *args, **kwargs):
        calls.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    url = "https://hooks.example.com/push"
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        assert egress.vet(url, cached=True)[-1] == "93.184.216.34"
        assert egress.vet(url, cached=True)[-1] == "93.184.216.34"
        assert calls == ["hooks.example.com"]  # one resolution for both deliveries
        assert egress.is_allowed(url) and len(calls) == 2  # create and update always resolve anew

        answers["hooks.example.com"] = "10.0.0.1"
        egress._resolved.answers.clear()  # the few seconds are over
        for _ in range(2):  # the cached private answer is refused on every use, not once
            with pytest.raises(egress.EndpointRefused):
                egress.vet(url, cached=True)
        assert len(calls) == 3


def test_kept_alive_connections_send_without_waiting_for_delayed_acks(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    """With Nagle's algorithm on, each request on a kept-alive connection waits ~40 ms for the receiver's
    delayed ACK: urllib3 turns it off in its own `_new_conn`, which the pinned connections replace."""
    make_client(admin, keep_alive_receiver.url)
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    [kept] = kept_connections()
    assert kept.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_a_batch_that_did_work_is_always_followed_by_a_task(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    django_capture_on_commit_callbacks,
):
    """Rows another task of the client held locked, or a change committed during the batch, are taken by
    the task that follows it, not left to the sweep; a task that found nothing ends the chain."""
    client = make_client(admin, keep_alive_receiver.url)
    emit(workspace, django_capture_on_commit_callbacks, 2)
    held_kicks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert push.deliver_due(client["id"], 0) == 2  # not a full batch
    assert held_kicks == [((client["id"], 0), {})]
    with django_capture_on_commit_callbacks(execute=True):
        assert push.deliver_due(client["id"], 0) == 0
    assert len(held_kicks) == 1


def test_a_worker_that_starts_hands_over_due_deliveries_without_the_grace(
    admin,  # noqa: F811
    workspace,  # noqa: F811
    keep_alive_receiver,  # noqa: F811
    held_kicks,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """A worker that starts may replace one killed with the tasks it ran and had taken from the queue:
    it hands over every due delivery at once, where beat's sweep waits its grace (their own tasks may
    still be on their way)."""
    from celery.signals import worker_ready

    from clients import tasks

    client = make_client(admin, keep_alive_receiver.url, "first")
    emit(workspace, django_capture_on_commit_callbacks, 3)
    handed = []
    monkeypatch.setattr(outbox, "dispatch", lambda task, *args, **kwargs: handed.append((task, args)) or True)
    assert push.sweep() == 0  # beat's: within the grace
    worker_ready.send(sender=None)
    assert handed == [(tasks.sweep_push, (0.0,))]
    handed.clear()
    assert tasks.sweep_push(0.0) == 1
    assert handed == [(tasks.deliver_push, (client["id"], handed[0][1][1]))]
