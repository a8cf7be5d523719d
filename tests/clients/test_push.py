"""Push events to clients (docs/security.md#the-edges), delivered over real HTTP to a receiver on loopback:
signature, fan-out, retries with every attempt recorded, broker outage, SSRF refusal at delivery time."""

import base64
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import standardwebhooks
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from clients import push
from clients.client_cache import forget_client
from clients.models import Client, Delivery, DeliveryAttempt
from clients.push import fan_out, retry_delivery
from clients.tasks import deliver_push
from iam.models import AuditEntry, Event, OutboxMessage
from iam.platform import crypto, egress, events
from tests.conftest import ok
from tests.factories import AccountFactory, MembershipFactory, WorkspaceFactory


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers `fail_first` requests with 500 (or `failure_status`),
    then 204; it keeps every request and the ids it accepted."""

    def __init__(self, *, keep_alive: bool = False):
        self.requests: list[tuple[dict, bytes]] = []
        self.accepted: list[str] = []
        self.peers: list[tuple] = []  # the connection each request came on
        self.fail_first = 0
        self.failure_status = 500
        self.delay = 0.0
        self.drip = False
        self.hang_up = False  # closes each connection after its answer without saying so
        self.together: threading.Barrier | None = None  # from the second request on, answers in parties
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                receiver.peers.append(self.client_address)
                self.close_connection = receiver.hang_up
                if receiver.together is not None and len(receiver.requests) > 1:
                    receiver.together.wait()  # broken (no answer) unless a party is at the receiver at once
                if receiver.delay:
                    time.sleep(receiver.delay)
                if receiver.drip:  # each write comes well within the socket timeout, the whole does not
                    self.wfile.write(b"HTTP/1.1 204 No Content\r\n")
                    for _ in range(10):
                        self.wfile.write(b"X-Slow: 1\r\n")
                        self.wfile.flush()
                        time.sleep(0.1)
                    self.wfile.write(b"\r\n")
                    return
                if len(receiver.requests) <= receiver.fail_first:
                    self.send_response(receiver.failure_status)
                    self.send_header("Location", f"{receiver.url}elsewhere")
                else:
                    receiver.accepted.append(self.headers["webhook-id"])
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _no_idle_connections():
    yield
    egress._adapter.poolmanager.clear()  # closes the connections kept alive


def kept_connections() -> list:
    """The connections egress keeps open for the next request, over all its pools."""
    pools = egress._adapter.poolmanager.pools
    return [kept for key in pools.keys() for kept in pools[key].pool.queue if kept and kept.sock]  # noqa: SIM118


@pytest.fixture
def workspace(db):
    return WorkspaceFactory()


@pytest.fixture
def admin(workspace, member_of):
    return member_of(workspace, "clients:*", "memberships:*")[1]


@pytest.fixture
def client(admin, receiver):
    return ok(
        admin.call(
            "/clients/create",
            {"name": "svc", "endpoint": receiver.url, "tags": [], "meta": {"schema_version": "1"}},
        )
    )


def verify(secret: str, headers: dict, body: bytes) -> bool:
    """What a receiver does: the official Standard Webhooks library, given the client secret exactly as
    `clients/create` (or `regenerate-secret`) answered it."""
    try:
        standardwebhooks.Webhook(secret).verify(body, headers)
    except standardwebhooks.WebhookVerificationError:
        return False
    return True


def verify_legacy(secret: str, headers: dict, body: bytes) -> bool:
    """A secret issued before the `whsec_` form signs with its UTF-8 bytes."""
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(secret.encode(), signed, hashlib.sha256).digest()).decode()
    scheme, _, signature = headers["webhook-signature"].partition(",")
    return scheme == "v1" and hmac.compare_digest(signature, expected)


def emit_membership_created(workspace, capture):
    account = AccountFactory()
    with capture(execute=True), transaction.atomic():
        membership = MembershipFactory(account=account, workspace=workspace)
        events.emit(
            "membership.created",
            resource=("membership", membership.pk),
            account_ids=[account.pk],
            workspace_ids=[workspace.pk],
        )
    return account, membership


def run_due_retry(delivery: Delivery, capture) -> int:
    """Eager tasks do not wait for countdowns: make the retry due and run it as the worker would. Returns
    how many deliveries the worker's batch took."""
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    client_id = str(delivery.client_id) if delivery.client_id else None
    with capture(execute=True):
        return push.deliver_due(client_id, delivery.pk)


def test_event_is_delivered_signed(client, workspace, receiver, django_capture_on_commit_callbacks):
    before = int(time.time())
    account, membership = emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1
    headers, body = receiver.requests[0]
    event = json.loads(body)
    assert set(event) == {"id", "type", "workspace_id", "occurred_at", "data"}
    assert (event["type"], event["workspace_id"]) == ("membership.created", str(workspace.pk))
    assert event["data"] == {
        "account_ids": [str(account.pk)],
        "resource": {"type": "membership", "id": str(membership.pk)},
    }
    assert headers["webhook-id"] == event["id"]
    assert before <= int(headers["webhook-timestamp"]) <= int(time.time())
    assert headers["content-type"] == "application/json"
    assert verify(client["secret"], headers, body)
    assert not verify(crypto.new_client_secret(), headers, body)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, str(delivery.event_id)) == ("delivered", 1, event["id"])
    attempt = DeliveryAttempt.objects.get(delivery=delivery)
    assert (attempt.status_code, attempt.error) == (204, "")


def test_membership_delete_over_http_reaches_the_client(
    client, admin, workspace, receiver, django_capture_on_commit_callbacks
):
    membership = MembershipFactory(workspace=workspace)
    with django_capture_on_commit_callbacks(execute=True):
        ok(admin.call("/memberships/delete", {"id": str(membership.pk)}))
    (headers, body), *_ = receiver.requests
    event = json.loads(body)
    assert event["type"] == "membership.deleted"
    assert event["data"]["account_ids"] == [str(membership.account_id)]
    assert verify(client["secret"], headers, body)


def test_fan_out_reaches_only_clients_of_the_workspace_with_an_endpoint(
    client, admin, workspace, member_of, receiver, django_capture_on_commit_callbacks
):
    ok(admin.call("/clients/create", {"name": "quiet", "tags": [], "meta": {"schema_version": "1"}}))
    second = Receiver()
    try:
        ok(
            admin.call(
                "/clients/create",
                {"name": "second", "endpoint": second.url, "tags": [], "meta": {"schema_version": "1"}},
            )
        )
        _, elsewhere = member_of(None, "clients:*")
        third = Receiver()
        try:
            ok(
                elsewhere.call(
                    "/clients/create",
                    {"name": "svc", "endpoint": third.url, "tags": [], "meta": {"schema_version": "1"}},
                )
            )
            emit_membership_created(workspace, django_capture_on_commit_callbacks)
            assert third.requests == []
        finally:
            third.close()
        assert len(second.requests) == 1
    finally:
        second.close()
    assert len(receiver.requests) == 1
    assert Delivery.objects.count() == 2


def test_failures_are_retried_until_delivered_once(
    client, workspace, receiver, django_capture_on_commit_callbacks
):
    receiver.fail_first = 2
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    # the first retry is due within 10 s (docs/integration.md#push-events), and the delivery itself says so
    assert timezone.now() < delivery.next_attempt_at <= timezone.now() + timedelta(seconds=10)
    assert delivery.last_error == "status 500"
    assert not OutboxMessage.objects.filter(topic="push.delivery").exists()

    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    assert Delivery.objects.get().attempts == 2
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 0  # delivered: nothing more

    ids = {headers["webhook-id"] for headers, _ in receiver.requests}
    assert len(receiver.requests) == 3 and len(ids) == 1
    assert receiver.accepted == [str(delivery.event_id)]  # exactly once
    assert all(verify(client["secret"], headers, body) for headers, body in receiver.requests)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [500, 500, 204]


def test_redirects_are_not_followed(client, workspace, receiver, django_capture_on_commit_callbacks):
    receiver.fail_first, receiver.failure_status = 1, 302
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1
    delivery = Delivery.objects.get()
    assert delivery.status == "pending"
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [302]


@override_settings(IAM_WEBHOOK_TIMEOUT_SECONDS=0.2)
def test_a_timeout_is_retried_and_recorded(client, workspace, receiver, django_capture_on_commit_callbacks):
    receiver.delay = 0.5
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    attempt = delivery.attempt_rows.get()
    assert attempt.status_code is None and "timed out" in attempt.error
    assert delivery.status == "pending"
    receiver.delay = 0
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    assert Delivery.objects.get().status == "delivered"


@override_settings(IAM_WEBHOOK_TIMEOUT_SECONDS=0.3)
def test_the_timeout_bounds_the_whole_attempt(
    client, workspace, receiver, django_capture_on_commit_callbacks
):
    receiver.drip = True
    started = time.monotonic()
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert time.monotonic() - started < 0.9
    delivery = Delivery.objects.get()
    attempt = delivery.attempt_rows.get()
    assert attempt.status_code is None and attempt.error
    assert delivery.status == "pending"


def test_delivery_gives_up_at_the_deadline(client, workspace, receiver, django_capture_on_commit_callbacks):
    receiver.fail_first = 10
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(deadline=timezone.now() + timedelta(seconds=1))
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    assert delivery.last_error == "gave up: status 500"
    [gave_up] = AuditEntry.objects.filter(action="delivery.fail")
    assert gave_up.changes["status"] == {"before": "pending", "after": "failed"}
    # the admin's retry sends it again
    receiver.fail_first = 0
    with django_capture_on_commit_callbacks(execute=True):
        retry_delivery(delivery)
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert receiver.accepted == [str(delivery.event_id)]
    assert AuditEntry.objects.filter(action="delivery.retry").count() == 1


def test_broker_down_at_the_time_of_the_change(
    client, workspace, receiver, monkeypatch, django_capture_on_commit_callbacks
):
    def down(*args, **kwargs):
        raise ConnectionError("broker down")

    with monkeypatch.context() as patched:
        patched.setattr(deliver_push, "apply_async", down)
        emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert receiver.requests == []
    delivery = Delivery.objects.get()
    assert delivery.status == "pending"
    assert push.sweep() == 0  # not yet: its own task may still be on its way
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert push.sweep() == 1
    assert len(receiver.requests) == 1
    assert verify(client["secret"], *receiver.requests[0])
    assert Delivery.objects.get().status == "delivered"


def test_a_private_address_is_refused_at_delivery(
    client, workspace, receiver, django_capture_on_commit_callbacks
):
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert receiver.requests == []
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.attempt_rows.get().error.startswith("endpoint not allowed")
    assert delivery.last_error.startswith("permanent: endpoint not allowed")  # not retried


def test_an_endpoint_stored_before_the_one_reading_rule_is_refused_at_delivery(
    client, workspace, receiver, monkeypatch, django_capture_on_commit_callbacks
):
    """urllib would connect to 203.0.113.5 (nothing connects here: the connection is stubbed)."""
    connections = []
    monkeypatch.setattr(egress, "_connect", lambda *args: connections.append(args) or 1 / 0)
    Client.objects.filter(pk=client["id"]).update(endpoint=f"{receiver.url}\\@203.0.113.5/")
    forget_client(client["id"])
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, connections) == ("failed", 1, [])
    assert "must not contain a backslash" in delivery.attempt_rows.get().error
    assert delivery.last_error.startswith("permanent: ")  # not retried


def test_secret_rotation_is_pushed_signed_with_the_new_secret(
    client, admin, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        rotated = ok(admin.call("/clients/regenerate-secret", {"id": client["id"]}))
    (headers, body), *_ = receiver.requests
    event = json.loads(body)
    assert event["type"] == "client.secret_rotated"
    assert event["data"] == {"account_ids": [], "resource": {"type": "client", "id": client["id"]}}
    assert verify(rotated["secret"], headers, body)


def test_a_deleted_client_gets_nothing_more(
    client, admin, workspace, receiver, django_capture_on_commit_callbacks
):
    receiver.fail_first = 5
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    ok(admin.call("/clients/delete", {"id": client["id"]}))
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 0
    assert len(receiver.requests) == 1


def test_a_workspace_delete_reaches_the_clients_it_takes_with_it(
    client, workspace, receiver, member_of, django_capture_on_commit_callbacks
):
    member, _ = member_of(workspace, "projects:list")
    _, owner = member_of(workspace, "workspaces:delete")
    with django_capture_on_commit_callbacks(execute=True):
        ok(owner.call("/workspace/delete", {"id": str(workspace.pk)}))
    (headers, body), *_ = receiver.requests
    event = json.loads(body)
    assert event["type"] == "workspace.deleted" and event["workspace_id"] == str(workspace.pk)
    assert str(member.pk) in event["data"]["account_ids"]
    assert verify(client["secret"], headers, body)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.client_id, delivery.workspace_id) == ("delivered", None, None)


@pytest.mark.django_db(transaction=True)
def test_attempts_survive_the_retry_in_committed_transactions(receiver, member_of):
    """Outside the test transaction: the worker's `RetryLater` must not roll back the attempt row."""
    workspace = WorkspaceFactory()
    _, admin = member_of(workspace, "clients:*")
    client = ok(
        admin.call(
            "/clients/create",
            {"name": "svc", "endpoint": receiver.url, "tags": [], "meta": {"schema_version": "1"}},
        )
    )
    receiver.fail_first = 1
    account = AccountFactory()
    with transaction.atomic():  # commits: the publish runs the eager worker after it
        membership = MembershipFactory(account=account, workspace=workspace)
        events.emit(
            "membership.created",
            resource=("membership", membership.pk),
            account_ids=[account.pk],
            workspace_ids=[workspace.pk],
        )
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [500]
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert push.deliver_due(str(delivery.client_id), delivery.pk) == 1
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [500, 204]
    assert receiver.accepted == [str(delivery.event_id)]
    assert verify(client["secret"], *receiver.requests[-1])


# Throughput: kept-alive connections and a one-statement fan-out, with docs/integration.md#push-events whole.


@pytest.fixture
def keep_alive_receiver():
    server = Receiver(keep_alive=True)
    yield server
    server.close()


def make_client(admin, url: str, name: str = "svc") -> dict:
    return ok(
        admin.call(
            "/clients/create", {"name": name, "endpoint": url, "tags": [], "meta": {"schema_version": "1"}}
        )
    )


def test_deliveries_to_one_endpoint_share_a_kept_alive_connection(
    admin, workspace, keep_alive_receiver, django_capture_on_commit_callbacks
):
    client = make_client(admin, keep_alive_receiver.url)
    for _ in range(3):
        emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(keep_alive_receiver.requests) == 3 and len(set(keep_alive_receiver.peers)) == 1
    assert all(verify(client["secret"], *request) for request in keep_alive_receiver.requests)
    assert Delivery.objects.filter(status="delivered", attempts=1).count() == 3
    assert DeliveryAttempt.objects.filter(status_code=204).count() == 3


def test_failures_on_a_kept_alive_connection_are_recorded_and_retried(
    admin, workspace, keep_alive_receiver, django_capture_on_commit_callbacks
):
    make_client(admin, keep_alive_receiver.url)
    keep_alive_receiver.fail_first = 2
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1
    assert len(set(keep_alive_receiver.peers)) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [500, 500, 204]


def test_a_connection_the_receiver_dropped_is_replaced_without_losing_the_event(
    admin, workspace, keep_alive_receiver, django_capture_on_commit_callbacks
):
    make_client(admin, keep_alive_receiver.url)
    keep_alive_receiver.hang_up = True
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(keep_alive_receiver.accepted) == 2 and len(set(keep_alive_receiver.peers)) == 2
    assert Delivery.objects.filter(status="delivered", attempts=1).count() == 2
    assert [attempt.status_code for attempt in DeliveryAttempt.objects.all()] == [204, 204]


def test_a_kept_connection_does_not_skip_the_address_check_at_delivery(
    admin, workspace, keep_alive_receiver, django_capture_on_commit_callbacks
):
    make_client(admin, keep_alive_receiver.url)
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(kept_connections()) == 1
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert len(keep_alive_receiver.requests) == 1
    refused = Delivery.objects.get(status="failed")
    assert refused.attempt_rows.get().error.startswith("endpoint not allowed")


def test_fan_out_run_again_makes_no_second_delivery(
    client, admin, workspace, receiver, django_capture_on_commit_callbacks
):
    make_client(admin, receiver.url, "second")
    event = {
        "id": "6f1c1d0e-8a53-4c5e-9d0a-0c2f6a1b7e11",
        "type": "membership.created",
        "workspace_id": str(workspace.pk),
        "occurred_at": "2026-01-01T00:00:00Z",
        "data": {"account_ids": [], "resource": {"type": "membership", "id": str(workspace.pk)}},
    }
    with django_capture_on_commit_callbacks() as published:
        fan_out(None, event=event)
        fan_out(None, event=event)
    deliveries = list(Delivery.objects.all())
    assert len(deliveries) == 2 and len(published) == 2  # one per client, each handed to a worker
    assert all(d.status == "pending" and d.next_attempt_at <= timezone.now() for d in deliveries)
    assert not OutboxMessage.objects.filter(topic="push.delivery").exists()


def test_client_secrets_have_the_standard_webhooks_form(client, admin):
    """`whsec_` and the base64 of 32 random bytes, from create and from regenerate-secret."""
    rotated = ok(admin.call("/clients/regenerate-secret", {"id": client["id"]}))["secret"]
    for secret in (client["secret"], rotated):
        prefix, _, key = secret.partition("_")
        assert prefix == "whsec"
        assert len(base64.b64decode(key, validate=True)) == 32
    assert rotated != client["secret"]


def test_a_secret_issued_before_the_whsec_form_keeps_signing_as_before(
    client, admin, workspace, receiver, django_capture_on_commit_callbacks
):
    """Clients created before secrets took the `whsec_` form keep their secret, and their receivers'
    verification, until the secret is regenerated: the key is the secret's UTF-8 bytes."""
    legacy = "an-unprefixed-secret-of-an-older-release-0123456789"
    Client.objects.filter(pk=client["id"]).update(
        secret_encrypted=crypto.encrypt(legacy), secret_digest=crypto.digest(legacy)
    )
    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    headers, body = receiver.requests[-1]
    assert verify_legacy(legacy, headers, body)
    assert not verify_legacy(client["secret"], headers, body)


def documented_kinds() -> set[str]:
    """The `type`s docs/integration.md#push-events lists (`role.updated|deleted` is two)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integration.md").read_text()
    section = text.split("## Push events", 1)[1].split("\n## ", 1)[0]
    types = section.split("- `type`:", 1)[1].split("\n- ", 1)[0]
    found = set()
    for name in re.findall(r"`([a-z_]+\.[a-z_|]+)`", types):
        resource, _, actions = name.partition(".")
        found |= {f"{resource}.{action}" for action in actions.split("|")}
    return found


def test_every_kind_a_client_may_receive_is_documented():
    assert documented_kinds() == events.KINDS | events.PUSHED_ONLY
    assert "client.test" in events.PUSHED_ONLY


def test_a_test_event_is_never_written_to_the_event_log(workspace):
    """`client.test` goes to one client (clients.services.send_test_event), never through `emit`, whose
    rows every client of the workspace reads with `clients/events`."""
    with pytest.raises(AssertionError):
        events.emit(
            "client.test", resource=("client", uuid.uuid4()), account_ids=[], workspace_ids=[workspace.pk]
        )
    assert not Event.objects.exists()
