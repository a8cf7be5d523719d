"""The client as validation sees it, cached: a warm `clients/validate` costs no query. Every write that
changes a client purges its entry around commit; with the cache down, the database answers."""

from typing import NamedTuple
from uuid import UUID

from django.conf import settings

from iam.platform import cache
from tenancy.models import Workspace
from tenancy.workspace_cache import find_workspace, purge_on_delete

from .models import Client

UNKNOWN_CLIENT_SECONDS = 30


class ClientRecord(NamedTuple):
    workspace_id: str
    secret_digest: str
    secret_version: int


class WorkspaceOf(dict):
    """client id -> workspace id, in process memory: a client never moves to another workspace, so this
    can never be stale (a deleted client is refused by its cached record, which is purged). Bounded."""

    LIMIT = 10_000

    def remember(self, client_id: UUID, workspace_id: str) -> str:
        if client_id not in self:
            if len(self) >= self.LIMIT:
                self.clear()
            self[client_id] = workspace_id
        return workspace_id


workspace_of = WorkspaceOf()


def client_key(client_id: UUID | str) -> str:
    return f"client:{client_id}"


def find_client(client_id: UUID | str, *, prefetched: object = cache.MISSING) -> ClientRecord | None:
    """`prefetched`: the cached entry, when the caller fetched it already with others in one round trip. The
    entry is a plain tuple of a ClientRecord's fields: the secret's digest, never the encrypted secret."""
    values = cache.read_through(
        client_key(client_id),
        lambda: _load(client_id),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=_fits,
        absent_timeout=UNKNOWN_CLIENT_SECONDS,
    )
    return None if values is None else ClientRecord(*values)


def _load(client_id: UUID | str) -> tuple | None:
    row = Client.objects.filter(pk=client_id).values_list(*ClientRecord._fields).first()
    return None if row is None else (str(row[0]), row[1], row[2])


def _fits(values: object) -> bool:
    return type(values) is tuple and len(values) == len(ClientRecord._fields)


def forget_client(client_id: UUID | str) -> None:
    """Call inside the transaction that changes or deletes the client."""
    cache.around_commit(lambda: cache.delete_many([client_key(client_id)]))


@purge_on_delete("clients")
def forget_workspace_clients(workspace: Workspace) -> None:
    """A deleted workspace takes its clients in its cascade: each stops validating, and stops reading
    `clients/events`, when that commits (docs/integration.md#validate-each-token-clientsvalidate), not when
    its cached record expires."""
    keys = [client_key(pk) for pk in Client.objects.filter(workspace=workspace).values_list("pk", flat=True)]
    if keys:
        cache.around_commit(lambda: cache.delete_many(keys))


def root_workspace_id() -> str | None:
    """The root workspace's id, whose clients serve every workspace
    (docs/integration.md#one-backend-for-many-workspaces): cached like any workspace; None before
    `bootstrap` made it (never made here: a fan-out or a validation writes no workspace)."""
    root = find_workspace(settings.IAM_ROOT_WORKSPACE)
    return None if root is None else str(root.pk)
