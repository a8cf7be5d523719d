"""How long a request may run (docs/operations.md#quotas): its database statements, and the request in all.

**The statement timeout.** On PostgreSQL every statement a request runs is cancelled past
`IAM_STATEMENT_TIMEOUT_MS`, and the request answers 503 `request took too long`; a write endpoint's
transaction rolls back with it, so the request writes nothing. The limit is set on each database
connection opened to serve a request, for the connection's life (`SET statement_timeout`, once, as it
opens): Django's connections belong to one thread, and a web thread serves only requests, so every later
request on that connection runs under it too, the read-only endpoints (autocommit, no transaction of their
own) as much as the writes, at no cost per request. A connection opened outside a request (the Celery
worker and beat, management commands, migrations, the embedded outbox threads) gets no limit: the worker's
sweeps and `manage.py cleanup` may run long by design. SQLite has no statement timeout: nothing is set
there.

**The request deadline.** No request runs longer than `IAM_REQUEST_SECONDS` in all, counted from when the
web worker had it whole (`iam.received` in its environ; from when Django starts on it elsewhere), its wait
for a thread included: past it, it answers 503 `request took too long` and writes nothing. What holds it:

- `RequestDeadlineMiddleware` (iam/http/middleware.py) sets the deadline for the request's run in Django, and
  answers 503 at once for a request that is already past it.
- Every statement checks it before it runs (`bound_statement`, an execute wrapper on every connection),
  and in the last `IAM_STATEMENT_TIMEOUT_MS` before the deadline the statement timeout is lowered to the
  time left: no statement outlives the deadline.
- Python loops that may run long without a statement call `check_deadline()` (a list page's records, a
  SCIM PATCH's operations), and `Endpoint.post` calls it once more before its transaction commits.
- A network call waits a bounded time of its own (each outbound call's timeout).

Past the deadline `RequestTooLong` is raised: it unwinds the transaction (rolled back: nothing written)
and is answered 503 like a cancelled statement (`timed_out`). What the answer streams after Django has
returned it (the rows of a large answer read as it is sent) runs under the statement timeout alone, at the
pace the client reads (docs/operations.md#slow-clients). gunicorn's `timeout` (the worker is killed past
it) must stay above the deadline: the web worker refuses to start otherwise."""

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from iam.platform import context

QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled by statement_timeout
TOO_LONG = "request took too long"

_deadline: ContextVar[float | None] = ContextVar("iam_request_deadline", default=None)


class RequestTooLong(Exception):
    """The request is past its deadline."""

    def __init__(self) -> None:
        super().__init__(TOO_LONG)


def limit_request_connection(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """`connection_created` receiver: every connection checks the request deadline before each statement;
    a connection opened by a request gets the statement timeout."""
    if bound_statement not in connection.execute_wrappers:
        connection.execute_wrappers.append(bound_statement)
    timeout = settings.IAM_STATEMENT_TIMEOUT_MS
    if connection.vendor != "postgresql" or timeout <= 0 or context.current().request is None:
        return
    with connection.cursor() as cursor:  # in autocommit: a session setting no rollback undoes
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(timeout)}ms"])


def timed_out(exc: BaseException) -> bool:
    """Whether `exc` ended a request for its time: a statement the timeout cancelled, or the deadline."""
    if isinstance(exc, RequestTooLong):
        return True
    return isinstance(exc, OperationalError) and getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED


@contextlib.contextmanager
def request_deadline(started: float) -> Iterator[None]:
    """The deadline of the request that started at `started` (time.monotonic()), while it runs."""
    token = _deadline.set(started + settings.IAM_REQUEST_SECONDS)
    try:
        yield
    finally:
        _deadline.reset(token)
        restore_statement_timeouts()


def seconds_left() -> float | None:
    """Seconds before the current request's deadline (negative past it); None outside a request."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def check_deadline() -> None:
    """Raises `RequestTooLong` when the current request is past its deadline: call it in a loop that may
    run long without a database statement."""
    left = seconds_left()
    if left is not None and left <= 0:
        raise RequestTooLong


TRANSACTION_CONTROL = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")  # Django's, through its cursors


def bound_statement(execute, sql, params, many, context_: dict):
    """Execute wrapper: no statement of a request starts past its deadline or runs beyond it. The
    statements that end a transaction's savepoints always run: a rollback must not be refused."""
    left = seconds_left()
    if left is not None and not (isinstance(sql, str) and sql.startswith(TRANSACTION_CONTROL)):
        if left <= 0:
            raise RequestTooLong
        connection = context_["connection"]
        default = settings.IAM_STATEMENT_TIMEOUT_MS
        if connection.vendor == "postgresql" and (default <= 0 or left * 1000 < default):
            # On the driver's connection, past Django's cursors and their wrappers. Inside a transaction
            # the setting holds until it ends (a rollback undoes it); `restore_statement_timeouts` after.
            with contextlib.suppress(psycopg.Error):  # an aborted transaction: the statement fails anyway
                _set_statement_timeout(connection, max(1, int(left * 1000)))
            connection.iam_timeout_lowered = True
    return execute(sql, params, many, context_)


def _set_statement_timeout(connection: BaseDatabaseWrapper, milliseconds: int) -> None:
    connection.connection.execute("SELECT set_config('statement_timeout', %s, false)", [f"{milliseconds}ms"])


def restore_statement_timeouts() -> None:
    """Gives the connections whose statement timeout a deadline lowered their own back."""
    default = settings.IAM_STATEMENT_TIMEOUT_MS
    for connection in connections.all(initialized_only=True):
        if getattr(connection, "iam_timeout_lowered", False) and connection.connection is not None:
            connection.iam_timeout_lowered = False
            try:
                _set_statement_timeout(connection, max(0, default))
            except psycopg.Error:
                if not connection.in_atomic_block:
                    connection.close()  # the next request opens a fresh one, with its own setting
