"""Every write of SCIM provisioning: the tokens (the API and the admin call these), and what a workspace's
directory asks of its SCIM service, mapped onto the services of the API so that the same audit entries,
push events, cache invalidation and quotas follow.

A SCIM request acts as no account: the services are called with `actor=None` inside an `iam.context`
of kind `scim` whose actor id is the token's, so their audit entries name the token, and the quotas
hold (`tenancy.quotas.exempt`). The directory vouches for the people it provisions: a membership it
makes is active without an invitation, as an operator's would be. What it may grant is bounded where its
token is issued: only a caller who could grant every permission of the workspace (`*`) issues one, since
the directory can attach any role (Group) of the workspace to any member."""

import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from uuid import UUID

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import create_account, update_account
from authn.services import reclaim_account
from iam import audit, crypto
from iam.errors import ApiError
from iam.service_helpers import save_unique
from rbac import policy
from rbac.holders import change_holders
from rbac.models import Membership, Role
from rbac.services import (
    create_membership,
    create_role,
    delete_membership,
    delete_role,
    update_membership,
    update_role,
)
from sso.models import SsoDomain
from tenancy.models import Workspace

from .models import ScimGroup, ScimToken, ScimUser

TOKEN_PREFIX = "scim_"
USED_EVERY_SECONDS = 60  # `last_used_at` is written at most this often per token


class ScimError(Exception):
    """An RFC 7644 section 3.12 error: `status`, `scimType` where one applies, and `detail`."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None):
        super().__init__(detail)
        self.status, self.detail, self.scim_type = status, detail, scim_type


# Tokens


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@transaction.atomic
def create_token(workspace: Workspace, *, name: str, actor: Account | None) -> tuple[ScimToken, str]:
    """A new token of `workspace`'s SCIM service, and the token itself (answered once, stored as its keyed
    digest). The directory that holds it may attach any role of the workspace to any member, so the
    caller must be able to grant every permission (`*`): the escalation rule."""
    policy.require_grantable(actor, workspace, ["*"])
    raw = new_token()
    token = ScimToken(
        workspace=workspace,
        name=name,
        token_digest=crypto.digest(raw),
        created_by=actor,
        meta={"schema_version": "1"},
    )
    save_unique(token, ScimToken.objects.in_workspace(workspace), {"name": name}, force_insert=True)
    audit.record(
        "scimtoken.create",
        resource=("scimtoken", token.pk),
        workspace_id=workspace.pk,
        changes=audit.created(token, ("name",)),
        actor=actor,
    )
    return token, raw


@transaction.atomic
def delete_token(token: ScimToken, *, actor: Account | None) -> dict:
    """The directory holding it is refused from now on."""
    audit.record(
        "scimtoken.delete",
        resource=("scimtoken", token.pk),
        workspace_id=token.workspace_id,
        changes=audit.removed(token, ("name",)),
        actor=actor,
    )
    summary = {"id": str(token.pk)}
    token.delete()
    return summary


def authenticate(workspace_id: UUID, raw: str) -> ScimToken | None:
    """The token of this workspace that `raw` is, or None: a token of another workspace, an API token or
    anything else opens nothing here."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 128:
        return None
    token = (
        ScimToken.objects.select_related("workspace")
        .filter(token_digest=crypto.digest(raw), workspace_id=workspace_id)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > USED_EVERY_SECONDS:
        ScimToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


# Users: an account with a workspace membership


def verified_domains(workspace: Workspace) -> list[str]:
    return sorted(
        SsoDomain.objects.filter(workspace=workspace, verified_at__isnull=False).values_list(
            "domain", flat=True
        )
    )


def domain_of(email: str) -> str:
    return email.rpartition("@")[2].lower()


def vouched_for(workspace: Workspace) -> Q:
    """The accounts the workspace's directory vouches for, as a condition on memberships: an address in a
    domain the workspace has verified for its SSO connection, or an account its SCIM created. Never an
    operator's: no tenant's directory reaches an account that administers the platform."""
    created = ScimUser.objects.filter(workspace=workspace, created_account=True).values("account_id")
    vouched = Q(account_id__in=created)
    for domain in verified_domains(workspace):
        vouched |= Q(account__email__endswith=f"@{domain}")  # addresses are stored lower-cased
    return vouched & Q(account__is_superuser=False)


def user_memberships(workspace: Workspace) -> QuerySet:
    """The memberships that make the workspace's Users: one workspace-scope membership per account, active
    or suspended (an invitation not yet accepted is the account's to accept, not the directory's), of an
    account the directory vouches for. Any other account is invisible to SCIM."""
    return (
        Membership.objects.in_workspace(workspace)
        .filter(scope=Membership.Scope.WORKSPACE, status__in=USER_STATUSES)
        .filter(vouched_for(workspace))
    )


USER_STATUSES = (Membership.Status.ACTIVE, Membership.Status.SUSPENDED)


def find_user(workspace: Workspace, account_id: str) -> Membership:
    """The User `account_id` names in this workspace (its workspace membership), else 404: an account
    that is no User here (no membership, an invited one, another workspace's, an address outside the
    workspace's domains, an operator) is not found."""
    try:
        UUID(str(account_id))
    except ValueError:
        raise ScimError(404, "user not found") from None
    membership = user_memberships(workspace).select_related("account").filter(account_id=account_id).first()
    if membership is None:
        raise ScimError(404, "user not found")
    return membership


EXISTS = "userName already exists"
OUTSIDE_DOMAINS = "userName must be in a verified domain of this workspace"


@transaction.atomic
def provision_user(
    workspace: Workspace, *, email: str, name: str | None, external_id: str | None, active: bool
) -> Membership:
    """`POST /Users`, for an address in a domain the workspace has verified only (else 400, whether or not
    an account has the address: no oracle). A new account is created verified (the directory vouches
    for its own domain); an existing one is linked (one never verified is reclaimed, as an SSO login
    reclaims it: whatever its earlier holder set ends). Its workspace membership is made active (or
    suspended, for `active: false`) with no roles, an invited one included. A User already, or an
    operator's account: 409 uniqueness."""
    email = normalize_email(email)
    if domain_of(email) not in verified_domains(workspace):
        raise ScimError(400, OUTSIDE_DOMAINS, "invalidValue")
    status = Membership.Status.ACTIVE if active else Membership.Status.SUSPENDED
    account = Account.objects.select_for_update().filter(email=email).first()
    link, created = None, account is None
    if account is None:
        account = create_account(
            email=email, name=name or email.partition("@")[0], password=None, verified=True
        )
        membership = None
    else:
        if account.is_superuser:
            raise ScimError(409, EXISTS, "uniqueness")
        link = ScimUser.objects.filter(workspace=workspace, account=account).first()
        membership = (
            Membership.objects.select_for_update()
            .in_workspace(workspace)
            .filter(account=account, scope=Membership.Scope.WORKSPACE)
            .first()
        )
        if membership is not None and membership.status != Membership.Status.INVITED:
            raise ScimError(409, EXISTS, "uniqueness")
        if not account.verified:
            reclaim_account(account, password=None, actor=None)
    if membership is None:
        membership = create_membership(
            workspace,
            account=account,
            scope=Membership.Scope.WORKSPACE,
            status=status,
            roles=[],
            tags=[],
            meta={"schema_version": "1"},
            actor=None,
        )
    else:  # invited: the directory vouches for its own domain
        update_membership(membership, status=status, actor=None, vouched=True)
    created = created or (link is not None and link.created_account)  # it stays the directory's
    defaults = {"external_id": external_id, "created_account": created}
    ScimUser.objects.update_or_create(workspace=workspace, account=account, defaults=defaults)
    return membership


def scim_user(membership: Membership) -> ScimUser | None:
    return ScimUser.objects.filter(
        workspace_id=membership.workspace_id, account_id=membership.account_id
    ).first()


@transaction.atomic
def update_user(
    membership: Membership,
    *,
    email: str | None = None,
    name: str | None = None,
    external_id: str | None = None,
    set_external_id: bool = False,
    active: bool | None = None,
) -> Membership:
    """A change the directory sends (PUT or PATCH). The address is the account's everywhere, so it does
    not change here (400 mutability); the name changes only on an account this workspace's directory
    created. `active` suspends or reactivates every membership of the account in the workspace."""
    account = membership.account
    if email is not None and normalize_email(email) != account.email:
        raise ScimError(400, "userName cannot change", "mutability")
    link = scim_user(membership)
    if set_external_id:
        if link is None:
            ScimUser.objects.create(
                workspace_id=membership.workspace_id, account=account, external_id=external_id
            )
        elif link.external_id != external_id:
            ScimUser.objects.filter(pk=link.pk).update(external_id=external_id)
    if name and link is not None and link.created_account and name != account.name:
        update_account(account, name=name, actor=None)
    if active is not None:
        set_active(membership, active)
    membership.refresh_from_db()
    return membership


def set_active(membership: Membership, active: bool) -> None:
    """`active: false` suspends every membership of the account in the workspace (its grants there end
    at once: the services drop the cached grants and push `membership.updated`); `true` makes the
    workspace membership active and resumes the suspended ones. The account is a User of the workspace
    (`find_user`), one its directory vouches for, so a membership it never accepted may become active."""
    memberships = (
        Membership.objects.select_for_update()
        .filter(workspace_id=membership.workspace_id, account_id=membership.account_id)
        .order_by("created_at", "pk")
    )
    for each in memberships:
        if active:
            resume = each.pk == membership.pk or each.status == Membership.Status.SUSPENDED
            if resume and each.status != Membership.Status.ACTIVE:
                update_membership(each, status=Membership.Status.ACTIVE, actor=None, vouched=True)
        elif each.status == Membership.Status.ACTIVE:
            update_membership(each, status=Membership.Status.SUSPENDED, actor=None)


@transaction.atomic
def deprovision_user(membership: Membership) -> None:
    """`DELETE /Users/<id>`: the account leaves the workspace (every membership of it there); the account
    itself stays."""
    memberships = Membership.objects.select_for_update().filter(
        workspace_id=membership.workspace_id, account_id=membership.account_id
    )
    for each in memberships:
        delete_membership(each, actor=None)
    # An account the directory created stays its own (`vouched_for`), its `externalId` forgotten.
    links = ScimUser.objects.filter(workspace_id=membership.workspace_id, account_id=membership.account_id)
    links.filter(created_account=False).delete()
    links.update(external_id=None)


# Groups: the workspace's roles


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


IN_AT_ONCE = 5_000  # ids in one `IN (...)`: PostgreSQL takes at most 65,535 parameters


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), IN_AT_ONCE):
        yield ids[start : start + IN_AT_ONCE]


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
    for chunk in _chunks(ids):
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
            for chunk in _chunks(sorted(changes.removed))
            for membership in holding.filter(account_id__in=chunk)
        ]
        joining = [users[pk] for pk in changes.added]
    change_holders(role, adding=joining, removing=leaving, actor=None)


@transaction.atomic
def delete_group(role: Role) -> None:
    delete_role(role, actor=None)


def refuse(error: ApiError) -> ScimError:
    """An API service's refusal as SCIM says it: a conflict is `uniqueness`, a bad value `invalidValue`."""
    scim_type = {409: "uniqueness", 400: "invalidValue"}.get(error.status)
    return ScimError(error.status, error.message, scim_type)
