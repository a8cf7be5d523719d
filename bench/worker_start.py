"""A Celery worker's start, exec to `ready`, beside two floors: `python -m bench.worker_start [N]` starts
each of three workers N times (5), in turn, with the Procfile's options and 2 pool processes, and prints
the seconds from exec to the worker's `ready` line, their median first, with the median CPU time its
processes had used by then (which the machine's other load distorts less):

- `celery`: a Celery app of one task and nothing else (Celery's own start, with its Redis transport);
- `django`: the same with Django set up first, `contenttypes` and `auth`, and its PostgreSQL backend
  loaded (Django's own start);
- `iam`: the Procfile's worker (`python -m iam.worker`), this project's apps, tasks and the imports its
  tasks need.

The push recovery figure of `make bench` pays one start a kill (its silences); this says how much of a
start is Celery's, Django's and this project's (docs/performance.md#latest-figures). All three start
through Celery's `worker` command as iam/worker.py does (no umbrella `celery` command, the collector off
until `worker_init`), with DEBUG off as deployed (throw-away keys unless SECRET_KEY and
IAM_JWT_SIGNING_KEY are set). Needs REDIS_URL (the broker: nothing is sent) and DATABASE_URL (PostgreSQL,
for the `django` floor's backend; no query is made)."""

import gc
import os
import secrets
import signal
import subprocess
import sys
import time

import dj_database_url

from bench.common import process_cpu

OPTIONS = ["--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat", "-c", "2"]


def serve(kind: str) -> None:
    """The worker of `kind` (the child's side of `measure`)."""
    gc.disable()  # until `worker_init`, as iam/worker.py has it
    from celery import Celery, signals
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    @signals.worker_init.connect
    def _freeze(**kwargs: object) -> None:
        gc.freeze()
        gc.enable()

    if kind == "django":
        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
            DATABASES={"default": dj_database_url.parse(os.environ["DATABASE_URL"])},
            USE_TZ=True,
        )
        django.setup()  # what Celery's Django fixup calls for the project's worker
        from django.db import connections

        connections["default"]  # its backend loaded (psycopg), as the project's is before a task needs it
    app = Celery(f"floor-{kind}", broker=os.environ["REDIS_URL"])

    @app.task(name="floor.noop")
    def noop() -> None:
        pass

    worker.main(
        args=OPTIONS, prog_name=kind, obj=CLIContext(app=app, no_color=None, workdir=None, quiet=False)
    )


def measure(command: list[str], env: dict) -> tuple[float, float]:
    """Seconds from starting `command` to its worker's `ready` line, and the CPU seconds its processes
    (the main one and its pool) had used by then; the worker is then killed with its pool, as a group: a
    pool process killed before it asked for its parent's death signal would outlive the main one."""
    started = time.perf_counter()
    worker = subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        for line in worker.stderr:
            if line.rstrip().endswith(" ready."):
                return time.perf_counter() - started, process_cpu(worker.pid)
        raise RuntimeError(f"{command} ended before it was ready")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def main() -> None:
    n = int(sys.argv[1]) if sys.argv[1:] else 5
    python = sys.executable
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": os.environ.get("SECRET_KEY", secrets.token_urlsafe(50)),
        "IAM_JWT_SIGNING_KEY": os.environ.get("IAM_JWT_SIGNING_KEY", secrets.token_urlsafe(50)),
    }
    commands = {
        "celery": [python, "-m", "bench.worker_start", "serve", "celery"],
        "django": [python, "-m", "bench.worker_start", "serve", "django"],
        "iam": [python, "-m", "iam.worker", *OPTIONS],
    }
    seconds = {kind: [] for kind in commands}
    for _ in range(n):  # the three in turn, so that the machine's drift weighs on each alike
        for kind, command in commands.items():
            seconds[kind].append(measure(command, env))
    for kind, taken in seconds.items():
        wall, cpu = sorted(at for at, _ in taken), sorted(used for _, used in taken)
        print(
            f"{kind:6} exec to ready, median {wall[n // 2]:.3f} s (CPU {cpu[n // 2]:.2f} s): "
            + ", ".join(f"{at:.3f}" for at in wall)
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    else:
        main()
