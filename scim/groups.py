"""A workspace's Groups as its directory sees and changes them: a Group is a role of the workspace, its
members the Users (`services.user_memberships`) holding that role on their workspace membership. Changes
go through the API's services (`rbac.services`, `rbac.holders`), so the same audit entries, push events,
cache invalidation and quotas follow."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from uuid import UUID

from django.db import transaction
from django.db.models import Count, QuerySet

from rbac.holders import change_holders, chunks
from rbac.models import Membership, Role
from rbac.services.roles import create_role, delete_role, update_role
from tenancy.models import Workspace

from .models import ScimGroup
from .services import ScimError, user_memberships


def find_group(workspace: Workspace, role_id: str) -> Role:
    try:
        UUID(str(role_id))
    except ValueError:
        raise ScimError(404, "group not found") from None
    role = Role.objects.in_workspace(workspace).filter(pk=role_id).first()
    if role is None:
        raise ScimError(404, "group not found")
    return role


def members(role: Role) -> QuerySet:
    """The Group's members: the workspace's Users holding the role on their workspace membership (an
    account SCIM does not see is no member of any Group, and is neither shown nor changed)."""
    return user_memberships(role.workspace_id).filter(roles=role)


def member_ids(role: Role, *, limit: int | None = None) -> list[str]:
    """The Group's members' account ids (the first `limit` of them)."""
    holders = members(role).order_by("created_at", "pk").values_list("account_id", flat=True)
    return [str(pk) for pk in (holders if limit is None else holders[:limit])]


MEMBERS_READ_AT_ONCE = 10_000  # member ids read in one query for a page of Groups


def members_of(workspace: Workspace, roles: list[Role], *, limit: int) -> Iterator[tuple[Role, list[str]]]:
    """Each role with its first `limit` members' ids, in order, read as they are asked for: roles whose
    members are few together in one query, one with more than `limit` alone, so a page of a thousand
    small Groups costs a few queries and a page that ends early (its byte budget) reads no further."""
    holding = Membership.roles.through.objects.filter(
        membership_id__in=user_memberships(workspace).values("pk")
    )
    counts = dict(
        holding.filter(role_id__in=[role.pk for role in roles])
        .values("role_id")
        .annotate(n=Count("pk"))
        .values_list("role_id", "n")
    )

    def read(batch: list[Role]) -> Iterator[tuple[Role, list[str]]]:
        found: dict = {role.pk: [] for role in batch}
        if any(counts.get(role.pk) for role in batch):
            rows = holding.filter(role_id__in=list(found)).order_by("membership__created_at", "membership_id")
            rows = rows.values_list("role_id", "membership__account_id")
            for role_id, account_id in rows[:limit] if len(batch) == 1 else rows:
                found[role_id].append(str(account_id))
        return ((role, found[role.pk]) for role in batch)

    batch: list[Role] = []
    size = 0
    for role in roles:
        large = counts.get(role.pk, 0) > limit
        if batch and (large or size + counts.get(role.pk, 0) > MEMBERS_READ_AT_ONCE):
            yield from read(batch)
            batch, size = [], 0
        batch.append(role)
        size += min(counts.get(role.pk, 0), limit)
        if large:
            yield from read(batch)
            batch, size = [], 0
    yield from read(batch)


def group_external_id(role: Role) -> str | None:
    return ScimGroup.objects.filter(role=role).values_list("external_id", flat=True).first()


def set_group_external_id(role: Role, external_id: str | None) -> None:
    ScimGroup.objects.update_or_create(role=role, defaults={"external_id": external_id})


@transaction.atomic
def create_group(
    workspace: Workspace, *, name: str, members: Iterable[str], external_id: str | None = None
) -> Role:
    """`POST /Groups`: a new role (no permissions: those are the workspace's admins' to attach) with
    these members. A role of that name already: 409 uniqueness. The roles quota holds."""
    if Role.objects.in_workspace(workspace).filter(name=name).exists():
        raise ScimError(409, "displayName already exists", "uniqueness")
    role = create_role(
        workspace, permissions=[], actor=None, name=name, tags=[], meta={"schema_version": "1"}
    )
    if external_id is not None:
        set_group_external_id(role, external_id)
    changes = MemberChanges()
    changes.add(members)
    change_members(role, changes)
    return role


@transaction.atomic
def rename_group(role: Role, name: str) -> Role:
    if name != role.name:
        if Role.objects.in_workspace(role.workspace_id).filter(name=name).exclude(pk=role.pk).exists():
            raise ScimError(409, "displayName already exists", "uniqueness")
        update_role(role, actor=None, name=name)
    return role


# Member values in one request, as many as a Group answers (docs/scim.md#what-the-service-supports): each
# names a membership to change, and one request changes a bounded number.
MAX_MEMBERS_NAMED = 10_000


@dataclass
class MemberChanges:
    """What one request's operations do to a Group's members, folded in their order, so that each
    membership changes once however many operations name it (a PATCH of a thousand operations is a
    thousand adds and removes of the same few people as often as of many)."""

    replace: dict[str, None] | None = None  # the whole member list: after a replace, or a remove of all
    added: dict[str, None] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)  # every id an add or a replace names: each must be a User
    values: int = 0  # member values the request holds, at most MAX_MEMBERS_NAMED

    def _count(self, ids: list[str]) -> list[str]:
        self.values += len(ids)
        if self.values > MAX_MEMBERS_NAMED:
            raise ScimError(400, f"a request names at most {MAX_MEMBERS_NAMED} members", "tooMany")
        return ids

    def add(self, account_ids: Iterable[str]) -> None:
        ids = self._count([str(pk) for pk in account_ids])
        self.named.update(ids)
        if self.replace is not None:
            self.replace.update(dict.fromkeys(ids))
        else:
            self.added.update(dict.fromkeys(ids))
            self.removed.difference_update(ids)

    def remove(self, account_ids: Iterable[str] | None) -> None:
        """`None`: every member."""
        if account_ids is None:
            self.replace, self.added, self.removed = {}, {}, set()
            return
        for pk in self._count([str(pk) for pk in account_ids]):
            if self.replace is not None:
                self.replace.pop(pk, None)
            else:
                self.added.pop(pk, None)
                self.removed.add(pk)

    def set(self, account_ids: Iterable[str]) -> None:
        self.remove(None)
        self.add(account_ids)


def _users(role: Role, account_ids: Iterable[str]) -> dict[str, Membership]:
    """The workspace memberships of the Users named, locked, with their roles; an id that names no User of
    the workspace (another workspace's, one SCIM does not see, not an id): 400 invalidValue."""
    ids = sorted(set(account_ids))
    for pk in ids:
        try:
            UUID(pk)
        except ValueError:
            raise ScimError(400, MEMBERS_ARE_USERS, "invalidValue") from None
    found: dict[str, Membership] = {}
    for chunk in chunks(ids):
        rows = user_memberships(role.workspace_id).filter(account_id__in=chunk)
        for membership in rows.select_for_update(of=("self",)).prefetch_related("roles").order_by("pk"):
            found[str(membership.account_id)] = membership
    if len(found) != len(ids):
        raise ScimError(400, MEMBERS_ARE_USERS, "invalidValue")
    return found


MEMBERS_ARE_USERS = "members must name users of this workspace"


@transaction.atomic
def change_members(role: Role, changes: MemberChanges) -> None:
    """Applies what a request's operations folded (`MemberChanges`): each membership that gains or loses
    the role changes once, by the rules of `update_membership` (its audit entry, its event, the quota),
    all in a few statements (`rbac.holders`)."""
    users = _users(role, changes.named)
    holding = members(role).select_for_update(of=("self",)).prefetch_related("roles").order_by("pk")
    if changes.replace is not None:
        current = {str(membership.account_id): membership for membership in holding}
        leaving = [membership for pk, membership in current.items() if pk not in changes.replace]
        joining = [users[pk] for pk in changes.replace if pk not in current]
    else:
        leaving = [
            membership
            for chunk in chunks(sorted(changes.removed))
            for membership in holding.filter(account_id__in=chunk)
        ]
        joining = [users[pk] for pk in changes.added]
    change_holders(role, adding=joining, removing=leaving, actor=None)


@transaction.atomic
def delete_group(role: Role) -> None:
    delete_role(role, actor=None)
