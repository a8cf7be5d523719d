"""Push deliveries in one process, for load-independent figures: `python -m bench.push_path N` commits N
events to 5 clients whose endpoints are the bench's receiver (bench/push.py's `receive_pushes`, in a
process of its own), then calls `push.deliver_due` for each client until none is left, as the worker's
task does, and prints the statements of one batch and the CPU time per delivery: this process's, the
PostgreSQL backend's and the receiver's (utime + stime from /proc; docs/performance.md#latest-figures).
The kick after each batch (`cache.delete` before it, `cache.add` and a task published after) is held,
unless `kick` follows N: then it runs, on a Celery queue of its own that is emptied at the end.
`profile` (after N, or after `kick`) profiles the deliveries and writes the profile to `push.prof`.

Settings as bench/token_path.py's (DJANGO_SETTINGS_MODULE=bench.settings, SECRET_KEY, IAM_JWT_SIGNING_KEY,
DATABASE_URL of a migrated database, REDIS_URL, IAM_PUBLIC_URL); IAM_WEBHOOK_ALLOW_PRIVATE is set here
(the receiver is on loopback). It writes a workspace, 5 clients and their deliveries to DATABASE_URL's
database."""

import cProfile
import multiprocessing
import os
import pstats
import secrets
import sys
import time

os.environ["IAM_WEBHOOK_ALLOW_PRIVATE"] = "true"
os.environ.setdefault("IAM_WEBHOOK_TIMEOUT_SECONDS", "5")

import django

django.setup()
from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from bench.common import free_port, process_cpu  # noqa: E402
from bench.push import receive_pushes  # noqa: E402
from clients import push  # noqa: E402
from clients.models import Delivery  # noqa: E402
from clients.services import create_client  # noqa: E402
from iam.platform import events  # noqa: E402
from tenancy.models import Workspace  # noqa: E402

CLIENTS = 5
META = {"schema_version": "1"}


def commit(workspace: Workspace, n: int) -> None:
    with transaction.atomic():
        events.emit_each(
            "membership.updated",
            [(("membership", secrets.token_hex(8)), [])] * n,
            workspace_id=workspace.pk,
        )


def drain(clients: list) -> int:
    """Every client's due deliveries, a batch at a time, as the task chain sends them."""
    done = 0
    for client in clients:
        while True:
            dealt = push.deliver_due(str(client.pk), 0)
            if not dealt:
                break
            done += dealt
    return done


def main() -> None:
    n = int(sys.argv[1])
    options = sys.argv[2:]
    kick = "kick" in options
    profile = "profile" in options
    if kick:
        from iam.celery import app

        app.conf.task_default_queue = f"iam-bench-push-path-{secrets.token_hex(4)}"
    else:
        push.kick = lambda *args, **kwargs: None  # held: the figure is the batch's own

    port = free_port()
    arrivals, ready = multiprocessing.Queue(), multiprocessing.Event()
    receiver = multiprocessing.Process(target=receive_pushes, args=(port, arrivals, ready), daemon=True)
    receiver.start()
    ready.wait(10)

    tag = secrets.token_hex(4)
    workspace = Workspace.objects.create(name="P" + tag, slug="p" + tag, config=META)
    clients = [
        create_client(
            workspace,
            name=f"push-{index}",
            endpoint=f"http://127.0.0.1:{port}/hook/{index}",
            tags=[],
            meta=META,
            actor=None,
        )[0]
        for index in range(CLIENTS)
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    # Warm-up: connections opened, caches filled; then one batch's statements.
    commit(workspace, push.BATCH + 20)
    drain(clients[1:])
    with CaptureQueriesContext(connection) as queries:
        first = push.deliver_due(str(clients[0].pk), 0)
    print(f"{len(queries.captured_queries)} statements per batch of {first}:")
    for query in queries.captured_queries:
        print("   ", query["sql"][:160])
    drain(clients[:1])

    commit(workspace, n)
    profiler = cProfile.Profile(time.process_time) if profile else None  # CPU, not waits
    before = time.process_time(), process_cpu(backend), process_cpu(receiver.pid)
    started = time.monotonic()
    if profiler:
        profiler.enable()
    done = drain(clients)
    if profiler:
        profiler.disable()
    took = time.monotonic() - started
    after = time.process_time(), process_cpu(backend), process_cpu(receiver.pid)
    worker_us, backend_us, receiver_us = (
        (b - a) / max(done, 1) * 1e6 for a, b in zip(before, after, strict=True)
    )
    delivered = Delivery.objects.filter(workspace=workspace, status=Delivery.Status.DELIVERED).count()
    print(
        f"{done} deliveries ({delivered} of {(n + push.BATCH + 20) * CLIENTS} delivered) in {took:.2f} s; "
        f"CPU per delivery: this process {worker_us:.0f} us, PostgreSQL backend {backend_us:.0f} us, "
        f"receiver {receiver_us:.0f} us (batch {push.BATCH}, {'kick' if kick else 'kick held'}"
        f"{', cProfile on' if profiler else ''})"
    )
    receiver.terminate()
    if kick:
        import redis

        from iam.celery import app

        redis.Redis.from_url(os.environ["REDIS_URL"]).delete(app.conf.task_default_queue)
    if profiler:
        profiler.dump_stats("push.prof")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)


main()
