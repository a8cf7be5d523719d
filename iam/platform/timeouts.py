"""The statement timeout of requests (docs/api.md#quotas-and-budgets): on PostgreSQL every statement a request
runs is cancelled past `IAM_STATEMENT_TIMEOUT_MS`, and the request answers 503 `request took too long`; a
write endpoint's transaction rolls back with it, so the request writes nothing.

The limit is set on each database connection opened to serve a request, for the connection's life
(`SET statement_timeout`, once, as it opens): Django's connections belong to one thread, and a web thread
serves only requests, so every later request on that connection runs under it too, the read-only
endpoints (autocommit, no transaction of their own) as much as the writes, at no cost per request. A
connection opened outside a request (the Celery worker and beat, management commands, migrations, the
embedded outbox threads) gets no limit: the worker's sweeps and `manage.py cleanup` may run long by
design. SQLite has no statement timeout: nothing is set there."""

from typing import Any

from django.conf import settings
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper

from iam.platform import context

QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled by statement_timeout
TOO_LONG = "request took too long"


def limit_request_connection(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """`connection_created` receiver: a connection opened by a request gets the statement timeout."""
    timeout = settings.IAM_STATEMENT_TIMEOUT_MS
    if connection.vendor != "postgresql" or timeout <= 0 or context.current().request is None:
        return
    with connection.cursor() as cursor:  # in autocommit: a session setting no rollback undoes
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(timeout)}ms"])


def timed_out(exc: BaseException) -> bool:
    """Whether `exc` is a statement the timeout cancelled."""
    return isinstance(exc, OperationalError) and getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED
