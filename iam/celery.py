import gc
import os

from celery import Celery, signals
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iam.settings")
# Celery's Django fixup runs Django's system checks in every worker that starts: as long as Django's own
# start, so half of what a worker replaced after a crash waits before it delivers again
# (docs/performance.md#what-keeps-the-hot-paths-fast). The release step's `migrate` runs them once per
# deploy (docs/operations.md#deploying-migrations-and-static-files), before any worker starts on the new code.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("iam")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_init.connect(dispatch_uid="iam.celery.freeze")
def _freeze(**kwargs: object) -> None:
    """Everything a worker imported, Django's setup and the tasks, is kept out of the garbage collector's
    scans (https://docs.python.org/3/library/gc.html#gc.freeze): Celery collects before it forks each pool
    process, which scanned those 100,000 objects in 70 ms a process, in the time a worker replaced after a
    crash waits before it delivers again; the pool processes also share their pages with it longer. The
    collector is then turned on again: the Procfile's entry point (iam/worker.py) turns it off for the
    start."""
    gc.freeze()
    gc.enable()


@signals.task_prerun.connect(dispatch_uid="iam.celery.close_old_connections")
@signals.task_postrun.connect(dispatch_uid="iam.celery.close_old_connections_after")
def _close_old_connections(task, **kwargs: object) -> None:
    """A task's database connection is kept by Django's rule for a request's (`CONN_MAX_AGE`, and closed
    when an error left it unusable), not closed around every task as Celery's Django fixup does unless
    `CELERY_DB_REUSE_MAX` (iam/settings.py): a connection per task is a PostgreSQL backend started per
    push batch (docs/performance.md#what-keeps-the-hot-paths-fast). An eager task runs in its caller's
    connection, and leaves it."""
    if not task.request.is_eager:
        close_old_connections()
