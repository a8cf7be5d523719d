"""Who and where a change comes from: a request (set by `RequestContextMiddleware`), a management
command (`as_command`) or the worker (the default, `system`). Kept in a context variable so that the
services record it in the audit log without taking it as an argument, and the log filter adds the request
id to every log line."""

import contextlib
import functools
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

ACCOUNT = "account"
OPERATOR = "operator"  # the Django admin
COMMAND = "command"
SYSTEM = "system"
SCIM = "scim"  # a workspace's directory, through a SCIM token (the token's id is the actor id)
# A workspace's service account, through an API key or an application's token (its id is the actor id, and
# `via` names the key or the application: docs/api.md#service-accounts)
SERVICE_ACCOUNT = "service_account"

# Accepted from a trusted proxy: an opaque id, no spaces or control characters, so it cannot forge log lines.
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True)
class Context:
    actor_kind: str
    request: HttpRequest | None = None
    request_id: str | None = None
    actor_id: Any = None  # who acts when no account does: a SCIM request's token
    via: dict | None = None  # how a service account authenticated: {"kind": "api_key" | "application", "id"}


_current: ContextVar[Context | None] = ContextVar("iam_context", default=None)
_WORKER = Context(SYSTEM)  # outside a request or a command: the Celery worker, beat


def current() -> Context:
    return _current.get() or _WORKER


def new_request_id() -> str:
    return uuid.uuid4().hex


@contextlib.contextmanager
def acting(context: Context) -> Iterator[Context]:
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def act_as_service_account(service_account_id: Any, via: dict) -> None:
    """Within a request, from its authentication on: what it changes is recorded as the service account's
    act. The request's own `acting` block restores the context when the request ends."""
    ctx = current()
    acting_now = Context(
        SERVICE_ACCOUNT, request=ctx.request, request_id=ctx.request_id, actor_id=service_account_id, via=via
    )
    _current.set(acting_now)


def as_command(handle: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates a management command's `handle`: what it changes is recorded with actor kind `command`."""

    @functools.wraps(handle)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with acting(Context(COMMAND, request_id=new_request_id())):
            return handle(*args, **kwargs)

    return wrapper


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (or `-`) to every record, for the formatter's `%(request_id)s`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current().request_id or "-"
        return True
