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
from collections.abc import Iterable
from uuid import UUID

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Account, normalize_email
from accounts.services import create_account, update_account
from authn.services import reclaim_account
from iam import audit, crypto
from iam.errors import ApiError
from iam.service_helpers import save_new
from rbac import policy
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
    save_new(token, audited=("name",), actor=actor, unique=("name",))
    return token, raw


def get_token(workspace: Workspace, *, id: UUID) -> ScimToken:
    """A token of this workspace, else 404: one of another workspace is not found."""
    token = ScimToken.objects.in_workspace(workspace).filter(pk=id).first()
    if token is None:
        raise ApiError(404, "scim token not found")
    return token


@transaction.atomic
def delete_token(token: ScimToken, *, actor: Account | None) -> dict:
    """The directory holding it is refused from now on."""
    audit.record_for(token, "delete", changes=audit.removed(token, ("name",)), actor=actor)
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


def user_memberships(workspace: Workspace) -> QuerySet:
    """The memberships that make the workspace's Users: one workspace-scope membership per account."""
    return Membership.objects.in_workspace(workspace).filter(scope=Membership.Scope.WORKSPACE)


def find_user(workspace: Workspace, account_id: str) -> Membership:
    """The User `account_id` names in this workspace (its workspace membership), else 404: an account
    with no membership here, or of another workspace only, is not found."""
    try:
        UUID(str(account_id))
    except ValueError:
        raise ScimError(404, "user not found") from None
    membership = user_memberships(workspace).select_related("account").filter(account_id=account_id).first()
    if membership is None:
        raise ScimError(404, "user not found")
    return membership


def verified_domains(workspace: Workspace) -> set[str]:
    return set(
        SsoDomain.objects.filter(workspace=workspace, verified_at__isnull=False).values_list(
            "domain", flat=True
        )
    )


def domain_of(email: str) -> str:
    return email.rpartition("@")[2].lower()


EXISTS = "userName already exists"


@transaction.atomic
def provision_user(
    workspace: Workspace, *, email: str, name: str | None, external_id: str | None, active: bool
) -> Membership:
    """`POST /Users`: a new account (verified: the workspace's directory vouches for the address), or an
    existing one whose address is in a domain this workspace has verified (one never verified is
    reclaimed, as an SSO login reclaims it: its passwords and sessions end). Any other existing address,
    or a member already: 409 uniqueness. The account's workspace membership is made active (or suspended,
    for `active: false`) with no roles."""
    email = normalize_email(email)
    account = Account.objects.select_for_update().filter(email=email).first()
    created = account is None
    if account is None:
        account = create_account(
            email=email, name=name or email.partition("@")[0], password=None, verified=True
        )
    else:
        if user_memberships(workspace).filter(account=account).exists():
            raise ScimError(409, EXISTS, "uniqueness")
        if domain_of(email) not in verified_domains(workspace):
            raise ScimError(409, EXISTS, "uniqueness")
        if not account.verified:
            reclaim_account(account, password=None, actor=None)
    membership = create_membership(
        workspace,
        account=account,
        scope=Membership.Scope.WORKSPACE,
        status=Membership.Status.ACTIVE if active else Membership.Status.SUSPENDED,
        roles=[],
        tags=[],
        meta={"schema_version": "1"},
        actor=None,
    )
    ScimUser.objects.update_or_create(
        workspace=workspace,
        account=account,
        defaults={"external_id": external_id, "created_account": created},
    )
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
    workspace membership active and resumes the suspended ones."""
    memberships = (
        Membership.objects.select_for_update()
        .filter(workspace_id=membership.workspace_id, account_id=membership.account_id)
        .order_by("created_at", "pk")
    )
    for each in memberships:
        if active:
            resume = each.pk == membership.pk or each.status == Membership.Status.SUSPENDED
            if resume and each.status != Membership.Status.ACTIVE:
                update_membership(each, status=Membership.Status.ACTIVE, actor=None)
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
    ScimUser.objects.filter(workspace_id=membership.workspace_id, account_id=membership.account_id).delete()


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


def member_ids(role: Role, *, limit: int | None = None) -> list[str]:
    """The accounts holding the role on their workspace membership: the Group's members (the first
    `limit` of them)."""
    holders = (
        role.memberships.filter(scope=Membership.Scope.WORKSPACE)
        .order_by("created_at", "pk")
        .values_list("account_id", flat=True)
    )
    return [str(pk) for pk in (holders if limit is None else holders[:limit])]


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
    add_members(role, members)
    return role


@transaction.atomic
def rename_group(role: Role, name: str) -> Role:
    if name != role.name:
        if Role.objects.in_workspace(role.workspace_id).filter(name=name).exclude(pk=role.pk).exists():
            raise ScimError(409, "displayName already exists", "uniqueness")
        update_role(role, actor=None, name=name)
    return role


def _members(role: Role, account_ids: Iterable[str]) -> list[Membership]:
    """The workspace memberships of the accounts named, locked; an id that names no User of the
    workspace: 400 invalidValue."""
    ids = list(dict.fromkeys(str(pk) for pk in account_ids))
    for pk in ids:
        try:
            UUID(pk)
        except ValueError:
            raise ScimError(400, "members must name users of this workspace", "invalidValue") from None
    found = list(
        Membership.objects.select_for_update()
        .in_workspace(role.workspace_id)
        .filter(scope=Membership.Scope.WORKSPACE, account_id__in=ids)
        .order_by("created_at", "pk")
    )
    if len(found) != len(ids):
        raise ScimError(400, "members must name users of this workspace", "invalidValue")
    return found


@transaction.atomic
def add_members(role: Role, account_ids: Iterable[str]) -> None:
    for membership in _members(role, account_ids):
        held = list(membership.roles.all())
        if role not in held:
            update_membership(membership, roles=[*held, role], actor=None)


@transaction.atomic
def remove_members(role: Role, account_ids: Iterable[str] | None) -> None:
    """`None`: every member."""
    ids = member_ids(role) if account_ids is None else list(account_ids)
    holders = set(member_ids(role))
    for membership in _members(role, [pk for pk in ids if pk in holders]):
        update_membership(
            membership, roles=[held for held in membership.roles.all() if held != role], actor=None
        )


@transaction.atomic
def set_members(role: Role, account_ids: Iterable[str]) -> None:
    wanted = list(dict.fromkeys(str(pk) for pk in account_ids))
    current = member_ids(role)
    remove_members(role, [pk for pk in current if pk not in wanted])
    add_members(role, [pk for pk in wanted if pk not in current])


@transaction.atomic
def delete_group(role: Role) -> None:
    delete_role(role, actor=None)


def refuse(error: ApiError) -> ScimError:
    """An API service's refusal as SCIM says it: a conflict is `uniqueness`, a bad value `invalidValue`."""
    scim_type = {409: "uniqueness", 400: "invalidValue"}.get(error.status)
    return ScimError(error.status, error.message, scim_type)
