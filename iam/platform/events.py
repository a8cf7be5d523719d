"""Authorization-change events (docs/integration.md#push-events), written in the caller's transaction.

`emit()` writes each event once per affected workspace to the event log (`iam.models.Event`, read by
`POST /clients/events`) and sends it to the `emitted` signal's receiver, `clients.push.fan_out`, which
writes one push delivery per client endpoint of the workspace (each delivered after commit by a worker,
with its own retries and recorded attempts). The fan-out runs at once, in the change's transaction: it
must find the clients as they were, since a workspace's delete takes its clients with it. The signal lets
apps below `clients` emit without importing it."""

import uuid
from collections.abc import Callable, Iterable
from uuid import UUID

from django.db import connection
from django.db.models.expressions import RawSQL
from django.dispatch import Signal
from django.utils import timezone

from iam.models import Event

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
        "service_account.updated",
        "service_account.deleted",
    }
)
# Pushed to the one client it names and never stored in the event log every client of the workspace reads
# (`clients/events`), so never `emit`ted: the admin's test event (`clients.services.send_test_event`).
PUSHED_ONLY = frozenset({"client.test"})

# Sent with `event=` (the event's body) for each event written; its receiver is `clients.push.fan_out`,
# connected by `ClientsConfig.ready` (clients/apps.py). A receiver's error fails the change.
emitted = Signal()

AccountWorkspaces = Callable[[list[str]], set[UUID]]
_account_workspaces: list[AccountWorkspaces] = []


def register_account_workspaces(func: AccountWorkspaces) -> AccountWorkspaces:
    """Registers, at its definition, the function `account_workspaces` asks for the workspaces an event
    about the given accounts goes to (`rbac.policy.workspaces_of`): account events go to the clients of
    all of them (docs/integration.md#push-events), and `iam` and the apps below rbac (`accounts.services`
    emits account events) must not import rbac to find them."""
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
        store(event)
        emitted.send(sender=None, event=event)


# Sent with `events=` (the bodies, of one workspace) for what `emit_each` wrote: `clients.push.fan_out_each`,
# connected by `ClientsConfig.ready` too, writes their deliveries in a few statements.
emitted_each = Signal()


def emit_each(
    kind: str, items: Iterable[tuple[tuple[str, UUID], Iterable[UUID]]], *, workspace_id: UUID
) -> None:
    """`emit` of one kind for many resources of one workspace, each `(resource, account_ids)` its own
    event, written in a few statements (a directory's Group change of thousands of memberships)."""
    assert kind in KINDS, kind
    occurred_at = timezone.now().isoformat().replace("+00:00", "Z")
    bodies = [
        {
            "id": str(uuid.uuid4()),
            "type": kind,
            "workspace_id": str(workspace_id),
            "occurred_at": occurred_at,
            "data": {
                "account_ids": sorted({str(account_id) for account_id in account_ids}),
                "resource": {"type": resource[0], "id": str(resource[1])},
            },
        }
        for resource, account_ids in items
    ]
    if not bodies:
        return
    xid = 0
    if connection.vendor == "postgresql":  # the writing transaction's: one for every row it writes
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()::text::bigint")
            xid = cursor.fetchone()[0]
    rows = [Event(event_id=body["id"], workspace_id=workspace_id, payload=body, xid=xid) for body in bodies]
    Event.objects.bulk_create(rows, batch_size=1000)
    emitted_each.send(sender=None, events=bodies)


def store(event: dict) -> None:
    """Writes the event to the log that `POST /clients/events` reads, with the writing transaction's id
    on PostgreSQL (the commit-order guard, see `iam.models.Event`)."""
    xid = RawSQL("pg_current_xact_id()::text::bigint", ()) if connection.vendor == "postgresql" else 0
    Event.objects.create(event_id=event["id"], workspace_id=event["workspace_id"], payload=event, xid=xid)
