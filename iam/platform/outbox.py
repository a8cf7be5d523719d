"""The durable outbox. A service function calls `enqueue()` inside its transaction: the message commits
with the change or not at all. After commit it is published to Celery; when the broker is down the
publish is skipped (the request still succeeds) and `sweep()`, run by beat, publishes it later. Without
a broker (eager tasks, `make run`) a few threads of the process run it, never the request itself. A worker
runs the topic's handler under a row lock, so a message published twice is still processed once at a
time; failures are retried with exponential backoff until the message's deadline."""

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from datetime import timedelta

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from iam.models import OutboxMessage
from iam.platform import audit
from iam.platform.registry import Registry

logger = logging.getLogger(__name__)

Handler = Callable[[OutboxMessage], None]
_handlers: Registry[Handler] = Registry()
handler = _handlers.register

FIRST_RETRY_SECONDS = 5
MAX_RETRY_SECONDS = 3600
SWEEP_BATCH = 500


class RetryLater(Exception):
    """A temporary failure (timeout, 5xx, SMTP 4xx): try again after a backoff."""


class Undeliverable(Exception):
    """A permanent failure: retrying cannot help."""


def enqueue(topic: str, payload: dict, *, within: timedelta = timedelta(hours=24)) -> OutboxMessage:
    message = insert_unpublished(topic, payload, within=within)
    transaction.on_commit(lambda: publish(message.pk))
    return message


def insert_unpublished(
    topic: str, payload: dict, *, within: timedelta = timedelta(hours=24)
) -> OutboxMessage:
    """The message's row alone, published by nobody: `enqueue` publishes it after commit; a caller that
    only needs the insert's cost rolls it back (authn.emails)."""
    now = timezone.now()
    return OutboxMessage.objects.create(
        topic=topic, payload=payload, next_attempt_at=now, deadline=now + within
    )


def publish(message_id, *, countdown: float | None = None) -> None:
    from iam.tasks import process_outbox_message

    dispatch(process_outbox_message, str(message_id), countdown=countdown, what=f"message {message_id}")


def dispatch(task, *args, countdown: float | None = None, what: str = "") -> bool:
    """Hands a Celery task to the workers, for work whose record is safe in the database (an outbox
    message, a push delivery): False when the broker is down, and a sweeper will hand it over later.

    Where the task runs depends on the settings (iam/settings.py), and only here:
    - REDIS_URL set (production, the live layer): Celery's broker, then a worker process;
    - no REDIS_URL (`make run`): Celery is eager (CELERY_TASK_ALWAYS_EAGER), and the task goes to this
      process's `IAM_OUTBOX_THREADS` threads (`embedded`), never run inside the request that committed it;
    - the unit suite (iam/test_settings.py: `IAM_OUTBOX_THREADS = 0`): eager, run at once in the caller,
      since another thread would not see the rows of a test transaction that never commits."""
    if task.app.conf.task_always_eager and settings.IAM_OUTBOX_THREADS:
        # e-mail and pushes never run inside the request (docs/api.md#throttling)
        embedded.submit(functools.partial(task, *args), countdown=countdown)
        return True
    try:
        task.apply_async(args=list(args), countdown=countdown, retry=False)
    except Exception:
        what = what or f"{task.name}{args!r}"
        logger.warning("outbox: broker unavailable, %s left for the sweeper", what, exc_info=True)
        return False
    return True


class EmbeddedWorker:
    """The worker of the embedded mode: a small thread pool that runs the tasks dispatched after commit,
    so no request waits for SMTP or a webhook endpoint, and timers for delayed retries. Development only:
    a message it had not run when the process stopped stays pending in the database; production runs
    Celery workers and beat's sweeper (REDIS_URL, docs/operations.md#required-settings)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._running: set[Future] = set()
        self._timers: set[threading.Timer] = set()

    def submit(self, work: Callable[[], object], *, countdown: float | None = None) -> None:
        with self._lock:
            if countdown:
                timer = threading.Timer(countdown, self._fire, args=(work,))
                timer.daemon = True
                self._timers.add(timer)
                timer.start()
                return
            if self._pool is None or self._pid != os.getpid():  # a forked child gets threads of its own
                self._pool = ThreadPoolExecutor(settings.IAM_OUTBOX_THREADS, thread_name_prefix="outbox")
                self._pid, self._running, self._timers = os.getpid(), set(), set()
            future = self._pool.submit(self._run, work)
            self._running.add(future)
        future.add_done_callback(self._done)

    def _fire(self, work: Callable[[], object]) -> None:
        with self._lock:
            self._timers.discard(threading.current_thread())
        self.submit(work)

    def _done(self, future: Future) -> None:
        with self._lock:
            self._running.discard(future)

    @staticmethod
    def _run(work: Callable[[], object]) -> None:
        try:
            work()
        except Exception:
            logger.exception("outbox: %r failed in the embedded worker", work)
        finally:
            connections.close_all()  # this thread's connections: an idle thread holds none

    def drain(self, timeout: float = 30) -> bool:
        """Waits until every message handed over so far, and those they hand over, has run; cancels the
        delayed retries (their messages stay pending). For tests. False when `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                running = list(self._running)
                for timer in self._timers:
                    timer.cancel()
                self._timers.clear()
            if not running:
                return True
            _, pending = futures_wait(running, timeout=max(0, deadline - time.monotonic()))
            if pending:
                return False


embedded = EmbeddedWorker()
drain = embedded.drain


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(FIRST_RETRY_SECONDS * 2 ** (attempts - 1), MAX_RETRY_SECONDS))


def process(message_id) -> str:
    """Runs one message if it is pending and due. Returns what happened, for logs and tests."""
    with transaction.atomic():
        message = (
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(pk=message_id, status=OutboxMessage.Status.PENDING)
            .first()
        )
        if message is None:
            return "skipped"
        now = timezone.now()
        if message.next_attempt_at > now:
            return "not-due"
        func = _handlers.get(message.topic)
        message.attempts += 1
        try:
            if func is None:
                raise Undeliverable(f"no handler for topic {message.topic}")
            _run(func, message)
        except Undeliverable as exc:
            return _finish(message, OutboxMessage.Status.FAILED, str(exc))
        except Exception as exc:
            if not isinstance(exc, RetryLater):
                logger.exception("outbox: %s %s failed", message.topic, message.pk)
            retry_at = now + backoff(message.attempts)
            if retry_at > message.deadline:
                return _finish(message, OutboxMessage.Status.FAILED, f"gave up: {exc}")
            message.next_attempt_at = retry_at
            message.last_error = str(exc)[:2000]
            message.save(update_fields=["attempts", "next_attempt_at", "last_error"])
            delay = (retry_at - now).total_seconds()
            transaction.on_commit(lambda: publish(message.pk, countdown=delay))
            return "retry"
        return _finish(message, OutboxMessage.Status.DONE, "")


def _run(func: Handler, message: OutboxMessage) -> None:
    """Runs the handler in a savepoint. An unexpected error, a database error included, undoes the
    handler's writes and leaves this transaction usable, so the failure is recorded as an attempt with
    backoff (without the savepoint, PostgreSQL aborts the whole transaction and the message stays pending
    with nothing counted). `RetryLater` and `Undeliverable` are the handler's own verdicts: what it wrote
    about the attempt (a `DeliveryAttempt` row) stays."""
    verdict = None
    with transaction.atomic():
        try:
            func(message)
        except (RetryLater, Undeliverable) as exc:
            verdict = exc
    if verdict is not None:
        raise verdict


def _finish(message: OutboxMessage, status: str, error: str) -> str:
    message.status = status
    message.last_error = error[:2000]
    message.processed_at = timezone.now()
    message.save(update_fields=["attempts", "status", "last_error", "processed_at"])
    if status == OutboxMessage.Status.FAILED:
        audit.record(
            "outbox.fail",
            resource=("outbox_message", message.pk),
            changes=_status_change(message, OutboxMessage.Status.PENDING, status),
        )
    return status


def _status_change(message: OutboxMessage, before: str, after: str) -> dict:
    return {"topic": message.topic, "status": {"before": before, "after": after}}


def retry(message: OutboxMessage) -> None:
    """Puts a failed message back in the queue (the admin's 'retry' action)."""
    now = timezone.now()
    audit.record(
        "outbox.retry",
        resource=("outbox_message", message.pk),
        changes=_status_change(message, message.status, OutboxMessage.Status.PENDING),
    )
    OutboxMessage.objects.filter(pk=message.pk).update(
        status=OutboxMessage.Status.PENDING,
        next_attempt_at=now,
        deadline=max(message.deadline, now + timedelta(hours=24)),
    )
    transaction.on_commit(lambda: publish(message.pk))


def sweep() -> int:
    """Publishes messages that are due and were not processed: a publish lost to a broker outage, a worker
    that died, a retry whose delayed publish failed."""
    cutoff = timezone.now() - timedelta(seconds=settings.IAM_OUTBOX_SWEEP_GRACE_SECONDS)
    due = list(
        OutboxMessage.objects.filter(status=OutboxMessage.Status.PENDING, next_attempt_at__lte=cutoff)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    for message_id in due:
        publish(message_id)
    return len(due)
