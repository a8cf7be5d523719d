"""Authorization-change events (CONTRACT 8), recorded through the outbox in the caller's transaction.

`emit()` writes each event once per affected workspace to the event log (`iam.models.Event`, read by
`POST /clients/events`) and one `push.event` outbox message; the clients app handles that
topic by fanning the event out to each client endpoint of the workspace (one delivery per client, each
with its own retries and recorded attempts). The fan-out runs at once, in the change's transaction: it
must find the clients as they were, since a workspace's delete takes its clients with it. Apps below
`clients` can emit without importing it."""

import uuid
from collections.abc import Callable, Iterable
from uuid import UUID

from django.db import connection, models
from django.db.models.expressions import RawSQL
from django.utils import timezone

from iam import outbox
from iam.models import Event, workspace_of

KINDS = frozenset(
    {
        "membership.created",
        "membership.updated",
        "membership.deleted",
        "role.updated",
        "role.deleted",
        "permission.updated",
        "permission.deleted",
        "account.updated",
        "account.deleted",
        "session.revoked",
        "project.deleted",
        "workspace.updated",
        "workspace.deleted",
        "client.secret_rotated",
    }
)

AccountWorkspaces = Callable[[list[str]], set[UUID]]
_account_workspaces: list[AccountWorkspaces] = []


def account_workspaces_source(func: AccountWorkspaces) -> AccountWorkspaces:
    """Registers, at its definition, a function naming the workspaces an event about the given accounts
    goes to (`rbac.policy.workspaces_of`): account events go to the clients of all of them (CONTRACT 8),
    and apps below rbac must not import it to find them."""
    _account_workspaces.append(func)
    return func


def account_workspaces(account_ids: list[str]) -> set[UUID]:
    found: set[UUID] = set()
    for source in _account_workspaces:
        found |= source(account_ids)
    return found


def emit(
    kind: str,
    *,
    resource: tuple[str, UUID],
    account_ids: Iterable[UUID],
    workspace_ids: Iterable[UUID] | None = None,
    data: dict | None = None,
) -> None:
    """Records the event for each workspace (`None`: every workspace of the accounts). `data`: what the
    kind adds to `account_ids` and `resource` (a `session.revoked` of one session: its `session_id`)."""
    assert kind in KINDS, kind
    accounts = sorted({str(account_id) for account_id in account_ids})
    targets = set(workspace_ids) if workspace_ids is not None else account_workspaces(accounts)
    occurred_at = timezone.now().isoformat().replace("+00:00", "Z")
    for workspace_id in sorted(targets, key=str):
        event = {
            "id": str(uuid.uuid4()),
            "type": kind,
            "workspace_id": str(workspace_id),
            "occurred_at": occurred_at,
            "data": {
                "account_ids": accounts,
                "resource": {"type": resource[0], "id": str(resource[1])},
                **(data or {}),
            },
        }
        record(event)
        outbox.enqueue("push.event", event, run_now=True)


def emit_for(instance: models.Model, verb: str, *, account_ids: Iterable[UUID]) -> None:
    """`emit()` of `<model>.<verb>` about `instance`, for the workspace it belongs to;
    for one in none (an account), for every workspace of `account_ids`."""
    kind, workspace_id = instance._meta.model_name, workspace_of(instance)
    workspace_ids = [workspace_id] if workspace_id is not None else None
    emit(f"{kind}.{verb}", resource=(kind, instance.pk), account_ids=account_ids, workspace_ids=workspace_ids)


def record(event: dict) -> None:
    """Writes the event to the log that `POST /clients/events` reads, with the writing transaction's id
    on PostgreSQL (the commit-order guard, see `iam.models.Event`)."""
    xid = RawSQL("pg_current_xact_id()::text::bigint", ()) if connection.vendor == "postgresql" else 0
    Event.objects.create(event_id=event["id"], workspace_id=event["workspace_id"], payload=event, xid=xid)
