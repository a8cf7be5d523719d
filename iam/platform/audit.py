"""The audit log: `record()` writes one `AuditEntry` in the caller's transaction, so an entry
exists exactly when its change committed. Who and where come from `iam.platform.context`; `changes` holds the
before and after of each changed field, and never a secret: any key naming one is redacted here, whatever
the caller passed."""

import contextlib
import datetime as dt
import decimal
import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from django.db import models
from rest_framework.throttling import BaseThrottle

from iam.models import AuditEntry
from iam.platform import context

REDACTED = "[redacted]"
# A key containing any of these never carries its value into an entry (client_secret, secret_digest,
# secret_encrypted, password, access_token, code_verifier, ...).
DENIED = ("password", "secret", "token", "hash", "digest", "encrypted", "verifier", "api_key", "private_key")


def _denied(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in DENIED)


def _plain(value: Any) -> Any:
    """JSON-ready: model instances as their ids, UUIDs and times as strings, secrets redacted."""
    if isinstance(value, Mapping):
        return {str(k): REDACTED if _denied(str(k)) else _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(item) for item in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if isinstance(value, models.Model):
        return str(value.pk)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def diff(instance: models.Model, changes: Mapping[str, Any], fields: Iterable[str] | None = None) -> dict:
    """Before (from `instance`, not yet changed) and after (from `changes`) of each field in `fields` (by
    default every one in `changes`) that `changes` really changes. Call it before applying the changes."""
    out = {}
    for name in changes if fields is None else fields:
        if name not in changes:
            continue
        before, after = _plain(getattr(instance, name, None)), _plain(changes[name])
        if before != after:
            out[name] = {"before": before, "after": after}
    return out


def created(instance: models.Model, fields: Iterable[str]) -> dict:
    """The `changes` of a new record: each field from nothing."""
    return {name: {"before": None, "after": _plain(getattr(instance, name, None))} for name in fields}


def removed(instance: models.Model, fields: Iterable[str]) -> dict:
    """The `changes` of a deleted record: each field to nothing."""
    return {name: {"before": _plain(getattr(instance, name, None)), "after": None} for name in fields}


def _request_details(request) -> dict:
    if request is None:
        return {}
    # The docs/operations.md#behind-a-reverse-proxy client address, as authn.throttling uses it
    ip = BaseThrottle().get_ident(request)
    try:
        ip = ipaddress.ip_address((ip or "").strip()).compressed
    except ValueError:
        ip = None
    agent = request.META.get("HTTP_USER_AGENT", "").replace("\x00", "")[:512]  # PostgreSQL refuses NUL
    return {"ip": ip, "user_agent": agent}


_withheld: ContextVar[frozenset[str]] = ContextVar("audit_withheld", default=frozenset())


@contextlib.contextmanager
def withholding_client(workspace_id: UUID | str) -> Iterator[None]:
    """Entries of this workspace written inside the block carry no client address and no user agent: an
    invitee's accept or decline names the account and the invitation only in the inviting workspace's log
    (docs/api.md#invitations). Entries elsewhere (the account's own) keep them."""
    token = _withheld.set(_withheld.get() | {str(workspace_id)})
    try:
        yield
    finally:
        _withheld.reset(token)


def _request_actor(request) -> Any:
    user = getattr(request, "user", None) if request is not None else None
    return user if getattr(user, "is_authenticated", False) else None


def record(
    action: str,
    *,
    resource: tuple[str, Any],
    workspace_id: UUID | str | None = None,
    changes: Mapping[str, Any] | None = None,
    actor: Any = None,
) -> AuditEntry:
    """`resource` is `(type, id)`; `actor` an account (or its id), else the context's actor (a SCIM
    request's token), else the request's signed-in account. Runs in the caller's transaction."""
    entry = _entries(action, [(resource, changes)], workspace_id=workspace_id, actor=actor)[0]
    entry.save(force_insert=True)
    return entry


def record_each(
    action: str,
    entries: Iterable[tuple[tuple[str, Any], Mapping[str, Any] | None]],
    *,
    workspace_id: UUID | str | None = None,
    actor: Any = None,
) -> None:
    """`record` of one action on many resources of one workspace, each `(resource, changes)`, in a few
    statements (a directory's Group change of thousands of memberships)."""
    AuditEntry.objects.bulk_create(
        _entries(action, entries, workspace_id=workspace_id, actor=actor), batch_size=1000
    )


def _entries(
    action: str, entries: Iterable[tuple[tuple[str, Any], Mapping[str, Any] | None]], *, workspace_id, actor
) -> list[AuditEntry]:
    ctx = context.current()
    if actor is None:
        actor = ctx.actor_id if ctx.actor_id is not None else _request_actor(ctx.request)
    details = {} if str(workspace_id) in _withheld.get() else _request_details(ctx.request)
    return [
        AuditEntry(
            actor_id=getattr(actor, "pk", actor),
            actor_kind=ctx.actor_kind,
            via=ctx.via,
            action=action,
            workspace_id=workspace_id,
            resource_type=resource_type,
            resource_id=getattr(resource_id, "pk", resource_id),
            changes=_plain(dict(changes or {})),
            request_id=ctx.request_id or "",
            **details,
        )
        for (resource_type, resource_id), changes in entries
    ]
