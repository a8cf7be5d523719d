"""`outbox.process` runs each handler in a savepoint: a database error in a handler is a
failed attempt with backoff, not a broken transaction that leaves the message pending forever."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection
from django.utils import timezone

from iam.models import OutboxMessage
from iam.platform import outbox
from tenancy.models import Workspace
from tests.factories import WorkspaceFactory

TOPIC = "test.handler"


@pytest.fixture
def handle(monkeypatch):
    """`handle(func)`: `func` becomes the handler of TOPIC for this test."""
    return lambda func: monkeypatch.setitem(outbox._handlers, TOPIC, func)


def enqueue() -> OutboxMessage:
    return OutboxMessage.objects.create(
        topic=TOPIC,
        payload={},
        next_attempt_at=timezone.now(),
        deadline=timezone.now() + timedelta(hours=1),
    )


def writes_then_breaks_a_constraint(message: OutboxMessage) -> None:
    WorkspaceFactory(slug="written-by-the-handler")
    WorkspaceFactory(slug="taken")
    Workspace.objects.create(name="again", slug="taken", config={}, meta={})  # IntegrityError


@pytest.mark.django_db(transaction=True)
def test_a_database_error_in_a_handler_is_a_failed_attempt_with_backoff(handle):
    """Outside a test transaction, as in the worker. On PostgreSQL the IntegrityError aborted the
    transaction: recording the attempt failed too, and the message stayed pending with nothing counted."""
    handle(writes_then_breaks_a_constraint)
    message = enqueue()
    before = timezone.now()

    assert outbox.process(message.pk) == "retry"

    message.refresh_from_db()
    assert message.status == OutboxMessage.Status.PENDING
    assert message.attempts == 1
    assert "UNIQUE" in message.last_error.upper()
    assert message.next_attempt_at >= before + timedelta(seconds=outbox.FIRST_RETRY_SECONDS)
    # the handler's writes went with the savepoint
    assert not Workspace.objects.filter(slug__in=["written-by-the-handler", "taken"]).exists()
    # and the next attempt, once due, runs again and counts
    OutboxMessage.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now())
    handle(lambda message: None)
    assert outbox.process(message.pk) == OutboxMessage.Status.DONE
    message.refresh_from_db()
    assert (message.attempts, message.last_error) == (2, "")


def test_a_raw_database_error_is_counted_too(db, handle):
    def broken_sql(message):
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    handle(broken_sql)
    message = enqueue()
    assert outbox.process(message.pk) == "retry"
    message.refresh_from_db()
    assert message.attempts == 1 and "no_such_table" in message.last_error


def test_what_a_handler_records_before_asking_for_a_retry_stays(db, handle):
    """`RetryLater` and `Undeliverable` are the handler's verdicts, not errors: what it wrote about the
    attempt (a `DeliveryAttempt` row, in the push handler) is kept."""

    def records_then_retries(message):
        WorkspaceFactory(slug=f"attempt-{message.attempts}")
        raise outbox.RetryLater("receiver answered 503")

    handle(records_then_retries)
    message = enqueue()
    assert outbox.process(message.pk) == "retry"
    assert Workspace.objects.filter(slug="attempt-1").exists()

    def records_then_gives_up(message):
        WorkspaceFactory(slug="given-up")
        raise outbox.Undeliverable("receiver refused")

    handle(records_then_gives_up)
    OutboxMessage.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now())
    assert outbox.process(message.pk) == OutboxMessage.Status.FAILED
    assert Workspace.objects.filter(slug="given-up").exists()


def test_integrity_error_is_what_the_handler_raised(db, handle):
    def raises(message):
        raise IntegrityError("duplicate key value violates unique constraint")

    handle(raises)
    message = enqueue()
    assert outbox.process(message.pk) == "retry"
    message.refresh_from_db()
    assert message.last_error == "duplicate key value violates unique constraint"
