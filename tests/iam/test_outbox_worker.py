"""The outbox end to end with the real services (docs/integration.md#push-events "at least once",
docs/operations.md#e-mail): a confirmation e-mail whose publish is lost to a broker outage is still delivered
by a real `celery worker` process once the broker is back and the sweeper has run.

The worker is a separate process, so it must see this test's rows: the test needs a real shared database
(DATABASE_URL, PostgreSQL) and commits its writes (`transactional_db`)."""

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from kombu import pools

from iam.celery import app
from iam.models import OutboxMessage
from iam.platform import outbox
from tests.conftest import ApiClient, ok

pytestmark = pytest.mark.services

UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connections are refused
EMAIL = "worker@example.com"


@pytest.fixture
def real_services(transactional_db):
    if not os.environ.get("REDIS_URL"):
        pytest.skip("needs REDIS_URL: a real Redis broker")
    if connection.vendor == "sqlite":
        reason = "needs DATABASE_URL (PostgreSQL): the worker process cannot share a SQLite test database"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def use_broker(url: str) -> None:
    """Points this process's Celery at another broker, dropping the pools bound to the previous one."""
    app.conf.broker_url = url
    pools.reset()  # kombu keeps its connection and producer pools per broker, process-wide
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def published_for_real(real_services):
    """The tests run tasks eagerly; here they are really published, to the broker the test chooses."""
    real_broker = settings.CELERY_BROKER_URL
    app.conf.task_always_eager = False
    yield real_broker
    app.conf.task_always_eager = True
    use_broker(real_broker)


@pytest.fixture
def worker_env(tmp_path: Path, published_for_real: str) -> dict:
    database = connection.settings_dict
    url = (
        f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST'] or '127.0.0.1'}"
        f":{database['PORT'] or 5432}/{database['NAME']}"  # the test database pytest-django made
    )
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "iam.settings",
        "IAM_TESTING": "1",
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": published_for_real,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "REDIS_URL": os.environ["REDIS_URL"],
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
    }


def start_worker(env: dict, log: Path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "iam",
        "worker",
        "--pool",
        "solo",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        "INFO",
    ]
    return subprocess.Popen(
        command, env=env, cwd=settings.BASE_DIR, stdout=log.open("w"), stderr=subprocess.STDOUT
    )


def wait_for(predicate, timeout: float, what: str, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def queued(broker: str) -> int:
    return redis.Redis.from_url(broker).llen("celery")  # kombu's list for the default queue


def test_a_mail_lost_to_a_broker_outage_is_delivered_after_the_sweep(worker_env, tmp_path, caplog):
    mail_dir = Path(worker_env["EMAIL_FILE_PATH"])
    log = tmp_path / "worker.log"
    broker = worker_env["CELERY_BROKER_URL"]
    redis.Redis.from_url(broker).delete("celery")  # leftovers of an earlier run

    # The broker is down while the user registers: the request still succeeds and the mail waits.
    use_broker(UNREACHABLE_BROKER)
    started = time.monotonic()
    data = ok(ApiClient().call("/auth/register", {"email": EMAIL, "password": "a-long-passphrase"}))
    assert time.monotonic() - started < 5, "a broker outage must not hang the request"
    message = OutboxMessage.objects.get(topic="email")
    assert (message.status, message.attempts) == (OutboxMessage.Status.PENDING, 0)
    assert message.payload == {"kind": "confirm", "account_id": data["account"]["id"]}
    assert f"message {message.pk} left for the sweeper" in caplog.text
    assert queued(broker) == 0

    # The broker is back; the sweeper re-publishes what is older than its grace period.
    use_broker(broker)
    assert outbox.sweep() == 0  # still within the grace period
    OutboxMessage.objects.filter(pk=message.pk).update(
        next_attempt_at=message.next_attempt_at
        - timedelta(seconds=settings.IAM_OUTBOX_SWEEP_GRACE_SECONDS + 1)
    )
    assert outbox.sweep() == 1
    assert queued(broker) == 1

    worker = start_worker(worker_env, log)
    try:
        files = wait_for(lambda: list(mail_dir.glob("*.log")), 60, "the e-mail file", log)
        wait_for(
            lambda: OutboxMessage.objects.get(pk=message.pk).status == OutboxMessage.Status.DONE,
            30,
            "the outbox row to be done",
            log,
        )
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        connection.close()  # the flush after the test must not wait on anything of ours

    sent = files[0].read_text()
    assert f"To: {EMAIL}" in sent
    assert f"{settings.IAM_FRONTEND_URL}/confirm-email?token=" in sent
    assert OutboxMessage.objects.get(pk=message.pk).attempts == 1
