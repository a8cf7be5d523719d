"""docs/api.md#throttling: e-mail and pushes never run inside a request, in any mode. Without a broker (`make
run`: eager tasks) a thread pool of the web process runs the outbox after commit. The slow e-mail server and
the slow webhook endpoint here block on an event until the test releases them: the request has already
answered while they are held, which no timing can fake."""

import threading
import time

import pytest
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from clients.models import Delivery, DeliveryAttempt
from clients.services import create_client
from iam.platform import egress, events, outbox
from tests.clients.test_push import Receiver
from tests.conftest import client_for, ok
from tests.factories import AccountFactory, CredentialFactory, MembershipFactory, WorkspaceFactory

HOLD_AT_MOST = 5  # seconds a held server waits before giving up, so a regression fails instead of hanging


class Gate:
    def __init__(self):
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []

    def hold(self) -> None:
        self.threads.append(threading.current_thread())
        self.arrived.set()
        if not self.release.wait(HOLD_AT_MOST):
            raise TimeoutError("held past the test")


gate = Gate()


class HeldEmailBackend(EmailBackend):
    """An SMTP server that takes the message only when the test says so."""

    def send_messages(self, messages):
        gate.hold()
        return super().send_messages(messages)


@pytest.fixture
def held_mail(settings):
    global gate
    gate = Gate()
    settings.EMAIL_BACKEND = f"{__name__}.HeldEmailBackend"
    yield gate
    gate.release.set()


def test_reset_password_answers_before_the_mail_is_sent(embedded_outbox, held_mail, api):
    account = AccountFactory(email="known@example.com")
    CredentialFactory(account=account)
    with CaptureQueriesContext(connection) as unknown:
        ok(api.call("/auth/reset-password", {"email": "unknown@example.com"}))
    with CaptureQueriesContext(connection) as known:
        ok(api.call("/auth/reset-password", {"email": account.email}))
    assert held_mail.arrived.wait(10)  # a worker thread is in the SMTP conversation...
    assert mail.outbox == []  # ...and still held there, after the request answered
    assert len(known) == len(unknown)  # the request did the same work for both addresses
    held_mail.release.set()
    assert embedded_outbox.drain()
    assert [message.to for message in mail.outbox] == [[account.email]]
    assert threading.main_thread() not in held_mail.threads


def test_registration_mail_is_sent_in_the_background(embedded_outbox, held_mail, api):
    body = {"email": "new@example.com", "password": "a-long-passphrase"}
    assert ok(api.call("/auth/register", body))["account"]["email"] == "new@example.com"
    assert held_mail.arrived.wait(10)
    assert mail.outbox == []
    held_mail.release.set()
    assert embedded_outbox.drain()
    assert [message.subject for message in mail.outbox] == ["Confirm your e-mail address"]


class HeldReceiver(Receiver):
    """The webhook receiver of test_push, holding each request until the test releases it."""

    def __init__(self):
        super().__init__()
        self.gate = Gate()
        handler = self.server.RequestHandlerClass
        do_post = handler.do_POST

        def held_post(request_handler):
            self.gate.hold()
            do_post(request_handler)

        handler.do_POST = held_post


@pytest.fixture
def held_receiver():
    server = HeldReceiver()
    yield server
    server.gate.release.set()
    server.close()


@pytest.fixture
def calls_to_endpoints(monkeypatch):
    """The thread of every outbound webhook call."""
    threads = []
    post_each = egress.post_each

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return post_each(*args, **kwargs)

    monkeypatch.setattr(egress, "post_each", recording)
    return threads


def test_revoke_does_not_wait_for_a_slow_endpoint(embedded_outbox, held_receiver, calls_to_endpoints):
    workspace = WorkspaceFactory()
    victim = AccountFactory()
    MembershipFactory(account=victim, workspace=workspace)
    create_client(workspace, name="svc", endpoint=held_receiver.url, tags=[], meta={}, actor=None)

    data = ok(client_for(victim).call("/auth/revoke"))
    assert data == {"account_id": str(victim.pk), "revoked": True}
    assert held_receiver.gate.arrived.wait(10)  # the delivery is at the endpoint, held there...
    assert DeliveryAttempt.objects.count() == 0  # ...unfinished, after the request answered
    assert Delivery.objects.get().status == "pending"
    held_receiver.gate.release.set()
    assert embedded_outbox.drain()
    delivery = Delivery.objects.get()
    assert (delivery.event_type, delivery.status, delivery.attempts) == ("session.revoked", "delivered", 1)
    assert len(held_receiver.accepted) == 1
    assert calls_to_endpoints and threading.main_thread() not in calls_to_endpoints


def test_a_failed_delivery_is_retried_by_the_embedded_worker(
    embedded_outbox, monkeypatch, calls_to_endpoints
):
    monkeypatch.setattr(outbox, "FIRST_RETRY_SECONDS", 0.05)
    receiver = Receiver()
    receiver.fail_first = 1
    try:
        workspace = WorkspaceFactory()
        account = AccountFactory()
        MembershipFactory(account=account, workspace=workspace)
        create_client(workspace, name="svc", endpoint=receiver.url, tags=[], meta={}, actor=None)
        ok(client_for(account).call("/auth/revoke"))
        deadline = time.monotonic() + 10
        while Delivery.objects.get().status != "delivered" and time.monotonic() < deadline:
            time.sleep(0.05)  # the retry waits on a timer, not in any request
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts) == ("delivered", 2)
        assert [row.status_code for row in delivery.attempt_rows.order_by("attempted_at")] == [500, 204]
    finally:
        receiver.close()


def test_the_fan_out_in_the_changes_transaction_calls_no_endpoint(
    db, calls_to_endpoints, django_capture_on_commit_callbacks
):
    """The fan-out runs at once, inside the change's transaction: it only records deliveries."""
    workspace = WorkspaceFactory()
    for n in range(3):
        create_client(workspace, name=f"svc{n}", endpoint="http://127.0.0.1:9/", tags=[], meta={}, actor=None)
    account = AccountFactory()
    with django_capture_on_commit_callbacks(execute=False) as after_commit, transaction.atomic():
        membership = MembershipFactory(account=account, workspace=workspace)
        events.emit(
            "membership.created",
            resource=("membership", membership.pk),
            account_ids=[account.pk],
            workspace_ids=[workspace.pk],
        )
        assert Delivery.objects.filter(status="pending").count() == 3
    assert calls_to_endpoints == []
    assert len(after_commit) == 3  # one publish per delivery, for after the commit
