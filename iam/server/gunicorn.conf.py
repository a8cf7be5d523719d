"""Gunicorn settings for the web process (the Procfile's `web`: `gunicorn iam.wsgi:application -c
iam/server/gunicorn.conf.py -k iam.server.worker.Worker --threads N`). The worker class (iam/server/) reads
each request whole on an event loop before one of the worker's N threads runs the application on it;
gunicorn's master keeps what it did for sync workers: forking, restarts (HUP), the heartbeat `timeout` (which
must stay above IAM_REQUEST_SECONDS), these hooks, and the `limit_request_*` bounds on a request's head.

prometheus-client's multiprocess mode: every worker writes its metrics to files in PROMETHEUS_MULTIPROC_DIR
and `GET /metrics` adds them up. The variable is set here, before any worker imports the library, to a
fresh directory when the environment does not name one."""

import contextlib
import gc
import os
import tempfile
from pathlib import Path

if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="iam-metrics-")
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

# No control socket: gunicorn's default one (since 25.1) is $XDG_RUNTIME_DIR/gunicorn.ctl or
# ~/.gunicorn/gunicorn.ctl, one path for every gunicorn of the user on the host, so another service's
# gunicorn would take it over, or `gunicornc` would reach ours. The master is driven by signals (HUP,
# TTIN, TTOU, TERM), as before.
control_socket_disable = True

# The request id beside each access-log line, as in the application's log lines. The request line holds
# no secret: the worker writes codes, states and tokens of the query string as `[redacted]`
# (iam/server/access.py).
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %({x-request-id}o)s'


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def on_starting(server) -> None:
    """Drops the files of processes of an earlier run (the library requires a clean directory at start);
    those of live processes sharing the directory (a Celery worker) stay."""
    for path in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def post_worker_init(worker) -> None:
    """The worker has loaded the application, every endpoint with it (iam/wsgi.py): its 190,000 objects
    live as long as the process, so they leave the garbage collector's scans (`gc.freeze`, after one
    collection of what loading left). Each full collection scanned them all while it held the GIL, 110 to
    160 ms during which neither of the worker's threads answered, a few times a minute under load: the
    tail of every latency (docs/performance.md#what-keeps-the-hot-paths-fast).

    Its password hashes run at most as many at once as it has cores (its share of the machine's: one when
    there are as many workers as cores, as the Procfile's default is on 2), not one per thread
    (accounts/hashers.py)."""
    from accounts import hashers

    hashers.hash_at_most(max(1, len(os.sched_getaffinity(0)) // worker.cfg.workers))
    gc.collect()
    gc.freeze()


def pre_fork(server, worker) -> None:
    """The worker's slot in the table of open connections by which the workers take turns at the
    listening socket (iam/server/turns.py)."""
    from iam.server import turns

    turns.give_slot(worker, server.WORKERS.values())


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess

    from iam.server import turns

    multiprocess.mark_process_dead(worker.pid)
    turns.free_slot(worker)
