"""Quotas (docs/api.md#quotas-and-budgets): what one tenant may hold, so that no tenant can make the service
slow for another.

`check_quota` is the one check: every service that adds what a quota counts calls it where it adds,
naming the quota (`"projects"`) and its setting there. A quota on records (projects, roles, permissions,
clients, pending invitations of a workspace; workspaces an account created) counts them under a lock on
the row they belong to (the workspace, the account), taken in the request's transaction before counting:
two concurrent creates at the edge queue on that lock, and the second counts the first's row once it
has committed (READ COMMITTED: each statement sees the latest commits), so exactly the limit gets in.
The lock is `FOR NO KEY UPDATE`, which the inserts of the workspace's records do not wait for (their
foreign keys take `FOR KEY SHARE`): only the creates a quota counts queue on it. The count reads at most
`limit` rows (an index range of the workspace), so it costs what the quota allows and no more; the
database's trigger counts (iam/platform/counts.py) would add a write to every insert of these tables for a
read the lock already makes exact. A quota on a request's list (a role's permissions, a membership's roles)
weighs the list the request sends, which replaces the relation whole."""

from django.db.models import Model, QuerySet

from accounts.models import Account
from iam.http.errors import ApiError
from iam.platform import context


def exempt(actor: Account | None) -> bool:
    """Operators pass every quota, and so do the services' callers that act for one (management commands,
    the worker: `actor` None); a tenant's request always has its account as the actor, except a
    workspace's directory (SCIM), which acts as no account and is held to its workspace's quotas."""
    if actor is None:
        return context.current().actor_kind not in (context.SCIM, context.SERVICE_ACCOUNT)
    return actor.is_superuser


def check_quota(
    what: str,
    limit: int,
    *,
    actor: Account | None,
    records: QuerySet | None = None,
    owner: Model | None = None,
    size: int | None = None,
    field: str | None = None,
) -> None:
    """403 `quota reached: <what> (<limit>)` (with `field` when a request field caused it) when the change
    would take the quota past `limit`:

    - `records` and `owner`: one more record joins `records` (the ones the quota counts, all belonging to
      `owner`, a workspace or an account), whose row is locked first until the transaction ends;
    - `size`: a relation is set to `size` records (the length of a request's list)."""
    if exempt(actor):
        return
    if records is not None:
        assert owner is not None, "a quota on records locks the row they belong to"
        lock(owner)
        full = records[:limit].count() >= limit  # at most `limit` rows read
    else:
        assert size is not None
        full = size > limit
    if full:
        raise ApiError(403, f"quota reached: {what} ({limit})", field)


def lock(owner: Model) -> None:
    """Locks `owner`'s row until the transaction ends (no-op on SQLite, whose writers take one lock)."""
    rows = type(owner)._base_manager.select_for_update(no_key=True).filter(pk=owner.pk)
    list(rows.values_list("pk", flat=True))
