"""The client as validation sees it, cached: a warm `clients/validate` costs no query. Every write that
changes a client purges its entry around commit; with the cache down, the database answers."""

from typing import NamedTuple
from uuid import UUID

from django.conf import settings

from iam import cache

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


def find_client(client_id: UUID | str, *, read: object = cache.MISSING) -> ClientRecord | None:
    """`read`: the cached entry, when the caller fetched it already with others in one round trip."""
    key = client_key(client_id)
    record = cache.get(key) if read is cache.MISSING else read
    if record is cache.MISSING:
        row = (
            Client.objects.filter(pk=client_id)
            .values_list("workspace_id", "secret_digest", "secret_version")
            .first()
        )
        record = ClientRecord(str(row[0]), row[1], row[2]) if row else None
        cache.set(key, record, settings.IAM_AUTH_CACHE_SECONDS if row else UNKNOWN_CLIENT_SECONDS)
    return record


def forget_client(client_id: UUID | str) -> None:
    """Call inside the transaction that changes or deletes the client."""
    cache.around_commit(lambda: cache.delete_many([client_key(client_id)]))
