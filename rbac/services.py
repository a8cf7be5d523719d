"""Writes to permissions, roles and memberships, and the owner set-up of a new workspace. Every change to
who may do what bumps the workspace's authorization generation (dropping its cached grants after commit)
and records the push event CONTRACT 8 owes, in the same transaction."""

from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Account, normalize_email
from iam import audit, events, outbox
from iam.errors import ApiError
from iam.service_helpers import UNSET, apply_changes, save_unique, sent, unique_conflict
from tenancy.models import Project, Workspace
from tenancy.quotas import check_quota
from tenancy.workspace_cache import forget_authorization

from . import policy
from .models import Invitation, Membership, Permission, Role

OWNER_ROLE = "owner"
ALL_PERMISSIONS = "*"


def resolve(queryset: QuerySet, ids: Iterable[UUID], *, field: str) -> list:
    """The records of `queryset` (scoped to the workspace) that `ids` name; any other id is a 400 naming the
    request field (CONTRACT 12), whether it is unknown or belongs to another workspace."""
    ids = list(dict.fromkeys(ids))
    found = list(queryset.filter(pk__in=ids))
    if len(found) != len(ids):
        noun = queryset.model._meta.verbose_name
        raise ApiError(400, f"{field} must name {noun}s of this workspace", field)
    return found


def _ids_change(current, new: Iterable | None, name: str) -> dict:
    """The audit `changes` of a replaced relation (`current`: its manager, None for a new record)."""
    if new is None:
        return {}
    before = sorted(str(pk) for pk in current.values_list("pk", flat=True)) if current is not None else None
    after = sorted(str(item.pk) for item in new)
    return {} if before == after else {name: {"before": before, "after": after}}


def _active_holders(memberships: QuerySet) -> list[UUID]:
    return list(
        memberships.filter(status=Membership.Status.ACTIVE).values_list("account_id", flat=True).distinct()
    )


# Workspaces


@transaction.atomic
def create_workspace(
    *,
    owner: Account,
    actor: Account | None,
    name: str,
    slug: str,
    config: dict[str, Any],
    tags: list[str],
    meta: dict[str, Any],
    description: str | None = None,
    mfa_required: bool = False,
) -> Workspace:
    """CONTRACT 4: `owner` becomes the owner, in the same transaction. `actor`, the account whose request
    creates it (None: a command), is its `created_by`, and the workspaces it created count against its
    quota (CONTRACT 16)."""
    check_quota(
        "workspaces",
        settings.IAM_QUOTA_WORKSPACES,
        actor=actor,
        records=Workspace.objects.filter(created_by=actor),
        owner=actor,
    )
    workspace = Workspace(
        created_by=actor,
        name=name,
        slug=slug,
        description=description,
        config=config,
        mfa_required=mfa_required,
        tags=tags,
        meta=meta,
    )
    save_unique(workspace, Workspace.objects.all(), {"slug": slug}, force_insert=True)
    audit.record(  # the request's account is the actor (none for a command)
        "workspace.create",
        resource=("workspace", workspace.pk),
        workspace_id=workspace.pk,
        changes=audit.created(workspace, ("name", "slug", "description", "mfa_required", "tags")),
    )
    ensure_owner(workspace, owner)
    return workspace


@transaction.atomic
def ensure_owner(workspace: Workspace, account: Account) -> Membership:
    """Idempotent: the workspace's `*` permission, its `owner` role holding it, and the account's active
    workspace-scope membership with that role."""
    permission, _ = Permission.objects.get_or_create(
        workspace=workspace, name=ALL_PERMISSIONS, defaults={"meta": {"schema_version": "1"}}
    )
    role, _ = Role.objects.get_or_create(
        workspace=workspace,
        name=OWNER_ROLE,
        defaults={"description": "Holds every permission of the workspace.", "meta": {"schema_version": "1"}},
    )
    role.permissions.add(permission)
    membership, made = Membership.objects.get_or_create(
        workspace=workspace,
        account=account,
        scope=Membership.Scope.WORKSPACE,
        defaults={
            "status": Membership.Status.ACTIVE,
            "accepted_at": timezone.now(),  # creating the workspace is the owner's own act (CONTRACT 15)
            "meta": {"schema_version": "1"},
        },
    )
    if made:  # the owner set-up of workspace/create, `bootstrap` or `create_workspace`
        changes = audit.created(membership, ("account_id", "scope", "status"))
        audit.record(
            "membership.create",
            resource=("membership", membership.pk),
            workspace_id=workspace.pk,
            changes=changes | {"roles": {"before": None, "after": [OWNER_ROLE]}},
        )
    if membership.status != Membership.Status.ACTIVE or membership.accepted_at is None:
        membership.status = Membership.Status.ACTIVE
        membership.accepted_at = membership.accepted_at or timezone.now()
        membership.save(update_fields=["status", "accepted_at"])
    membership.roles.add(role)
    forget_authorization(workspace.pk)
    return membership


# Permissions


@transaction.atomic
def create_permission(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    tags: list[str],
    meta: dict[str, Any],
    code: str | None = None,
    description: str | None = None,
) -> Permission:
    policy.require_grantable(actor, workspace, [name])
    check_quota(
        "permissions",
        settings.IAM_QUOTA_PERMISSIONS,
        actor=actor,
        records=Permission.objects.in_workspace(workspace),
        owner=workspace,
    )
    permission = Permission(
        workspace=workspace, name=name, code=code, description=description, tags=tags, meta=meta
    )
    peers = Permission.objects.in_workspace(workspace)
    save_unique(permission, peers, {"name": name, "code": code}, force_insert=True)
    audit.record(
        "permission.create",
        resource=("permission", permission.pk),
        workspace_id=workspace.pk,
        changes=audit.created(permission, ("name", "code", "description", "tags")),
        actor=actor,
    )
    return permission


@transaction.atomic
def update_permission(
    permission: Permission,
    *,
    actor: Account | None,
    name: str = UNSET,
    code: str | None = UNSET,
    description: str | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Permission:
    changes = sent(name=name, code=code, description=description, tags=tags, meta=meta)
    renamed = "name" in changes and changes["name"] != permission.name
    if renamed:
        policy.require_grantable(actor, permission.workspace_id, [name])
    entry = audit.diff(permission, changes)
    fields = apply_changes(permission, changes)
    peers = Permission.objects.in_workspace(permission.workspace_id)
    save_unique(
        permission, peers, {"name": changes.get("name"), "code": changes.get("code")}, update_fields=fields
    )
    if entry:
        audit.record(
            "permission.update",
            resource=("permission", permission.pk),
            workspace_id=permission.workspace_id,
            changes=entry,
            actor=actor,
        )
    if renamed:
        forget_authorization(permission.workspace_id)
        events.emit(
            "permission.updated",
            resource=("permission", permission.pk),
            account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
            workspace_ids=[permission.workspace_id],
        )
    return permission


@transaction.atomic
def delete_permission(permission: Permission, *, actor: Account | None) -> dict:
    """CONTRACT 6: the permission leaves the roles that held it."""
    audit.record(
        "permission.delete",
        resource=("permission", permission.pk),
        workspace_id=permission.workspace_id,
        changes=audit.removed(permission, ("name", "code")),
        actor=actor,
    )
    forget_authorization(permission.workspace_id)
    events.emit(
        "permission.deleted",
        resource=("permission", permission.pk),
        account_ids=_active_holders(Membership.objects.filter(roles__permissions=permission)),
        workspace_ids=[permission.workspace_id],
    )
    summary = {"id": str(permission.pk)}
    permission.delete()
    return summary


# Roles


@transaction.atomic
def create_role(
    workspace: Workspace,
    *,
    permissions: list[Permission],
    actor: Account | None,
    name: str,
    tags: list[str],
    meta: dict[str, Any],
    description: str | None = None,
) -> Role:
    policy.require_grantable(actor, workspace, [permission.name for permission in permissions])
    _check_permissions_per_role(permissions, actor=actor)
    check_quota(
        "roles",
        settings.IAM_QUOTA_ROLES,
        actor=actor,
        records=Role.objects.in_workspace(workspace),
        owner=workspace,
    )
    role = Role(workspace=workspace, name=name, description=description, tags=tags, meta=meta)
    save_unique(role, Role.objects.in_workspace(workspace), {"name": name}, force_insert=True)
    audit.record(
        "role.create",
        resource=("role", role.pk),
        workspace_id=workspace.pk,
        changes=audit.created(role, ("name", "description", "tags"))
        | _ids_change(None, permissions, "permission_ids"),
        actor=actor,
    )
    role.permissions.set(permissions)
    return role


@transaction.atomic
def update_role(
    role: Role,
    *,
    actor: Account | None,
    name: str = UNSET,
    description: str | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    permissions: list[Permission] | None = None,
) -> Role:
    """`permissions` replaces the attached permissions (SPEC 1)."""
    if permissions is not None:
        policy.require_grantable(actor, role.workspace_id, [permission.name for permission in permissions])
        _check_permissions_per_role(permissions, actor=actor)
    changes = sent(name=name, description=description, tags=tags, meta=meta)
    changed = "name" in changes and changes["name"] != role.name
    entry = audit.diff(role, changes) | _ids_change(role.permissions, permissions, "permission_ids")
    fields = apply_changes(role, changes)
    save_unique(
        role,
        Role.objects.in_workspace(role.workspace_id),
        {"name": changes.get("name")},
        update_fields=fields,
    )
    if entry:
        audit.record(
            "role.update",
            resource=("role", role.pk),
            workspace_id=role.workspace_id,
            changes=entry,
            actor=actor,
        )
    if permissions is not None:
        before = set(role.permissions.values_list("pk", flat=True))
        role.permissions.set(permissions)
        changed = changed or before != {permission.pk for permission in permissions}
    if changed:  # a change to what the role grants
        forget_authorization(role.workspace_id)
        events.emit(
            "role.updated",
            resource=("role", role.pk),
            account_ids=_active_holders(role.memberships.all()),
            workspace_ids=[role.workspace_id],
        )
    return role


def _check_permissions_per_role(permissions: list[Permission], *, actor: Account | None) -> None:
    check_quota(
        "permissions per role",
        settings.IAM_QUOTA_PERMISSIONS_PER_ROLE,
        actor=actor,
        size=len({permission.pk for permission in permissions}),
        field="permission_ids",
    )


@transaction.atomic
def delete_role(role: Role, *, actor: Account | None) -> dict:
    """CONTRACT 6: the role leaves the memberships that held it."""
    audit.record(
        "role.delete",
        resource=("role", role.pk),
        workspace_id=role.workspace_id,
        changes=audit.removed(role, ("name",)),
        actor=actor,
    )
    forget_authorization(role.workspace_id)
    events.emit(
        "role.deleted",
        resource=("role", role.pk),
        account_ids=_active_holders(role.memberships.all()),
        workspace_ids=[role.workspace_id],
    )
    summary = {"id": str(role.pk)}
    role.delete()
    return summary


# Memberships


CONFLICT = "membership already exists"


def _check_scope(scope: str, project: Project | None) -> None:
    if scope == Membership.Scope.PROJECT and project is None:
        raise ApiError(400, "project_id required", "project_id")
    if scope == Membership.Scope.WORKSPACE and project is not None:
        raise ApiError(400, "project_id must be empty for workspace scope", "project_id")


def _membership_exists(
    workspace: Workspace, account_id: UUID, scope: str, project: Project | None, exclude=None
):
    return (
        Membership.objects.in_workspace(workspace)
        .filter(account_id=account_id, scope=scope, project=project)
        .exclude(pk=exclude)
        .exists()
    )


def _check_roles_per_membership(roles: list[Role], *, actor: Account | None) -> None:
    check_quota(
        "roles per membership",
        settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP,
        actor=actor,
        size=len({role.pk for role in roles}),
        field="role_ids",
    )


@transaction.atomic
def create_membership(
    workspace: Workspace,
    *,
    account: Account,
    scope: str,
    status: str,
    roles: list[Role],
    tags: list[str],
    meta: dict,
    project: Project | None = None,
    actor: Account | None,
    invitation: Invitation | None = None,
) -> Membership:
    """CONTRACT 15: a membership of another account, made by anyone but an operator, starts `invited`
    whatever `status` says, and the account is e-mailed an invitation; it joins only by accepting.
    `invitation`: the invitation by e-mail the account (`actor`) accepts; its inviter's grants were
    weighed when it was made (CONTRACT 4), so the account's own are not."""
    _check_scope(scope, project)
    if invitation is None:
        policy.require_grantable(
            actor, workspace, granted_by(roles), project_id=project.pk if project else None
        )
    _check_roles_per_membership(roles, actor=actor)
    if _membership_exists(workspace, account.pk, scope, project):
        raise ApiError(409, CONFLICT)
    consented = actor is None or actor.is_superuser or actor.pk == account.pk
    if not consented:
        status = Membership.Status.INVITED
    membership = Membership(
        workspace=workspace,
        account=account,
        scope=scope,
        status=status,
        project=project,
        tags=tags,
        meta=meta,
        accepted_at=timezone.now() if consented and status != Membership.Status.INVITED else None,
    )
    with unique_conflict(CONFLICT):  # a race past `_membership_exists`
        membership.save(force_insert=True)
    audit.record(
        "membership.create",
        resource=("membership", membership.pk),
        workspace_id=workspace.pk,
        changes=audit.created(membership, ("account_id", "scope", "status", "project_id", "tags"))
        | _ids_change(None, roles, "role_ids"),
        actor=actor,
    )
    membership.roles.set(roles)
    forget_authorization(membership.workspace_id)
    events.emit(
        "membership.created",
        resource=("membership", membership.pk),
        account_ids=[membership.account_id],
        workspace_ids=[membership.workspace_id],
    )
    if membership.status == Membership.Status.INVITED and not (actor and actor.pk == account.pk):
        invite(membership)
    return membership


INVITATION_LIFETIME = timedelta(days=7)  # CONTRACT 15


def invite(membership: Membership) -> None:
    """Records the invitation e-mail in the change's transaction; `authn.emails` mints the single-use
    `MembershipInvite` link when it sends it (the outbox never stores a usable token)."""
    outbox.enqueue(
        "email",
        {"kind": "invite", "account_id": str(membership.account_id), "membership_id": str(membership.pk)},
        within=INVITATION_LIFETIME,
    )


def granted_by(roles: Iterable[Role]) -> list[str]:
    """The permission names the given roles grant (what CONTRACT 4's escalation rule weighs)."""
    return list(
        Permission.objects.filter(roles__in=[role.pk for role in roles])
        .values_list("name", flat=True)
        .distinct()
    )


@transaction.atomic
def update_membership(
    membership: Membership,
    *,
    actor: Account | None,
    scope: str = UNSET,
    status: str = UNSET,
    project: Project | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
    roles: list[Role] | None = None,
    vouched: bool = False,
) -> Membership:
    """`roles` replaces the assigned roles (CONTRACT 6). Moving to workspace scope drops the project.
    `vouched`: the system (`actor=None`) acts for a directory that vouches for the account, so it may
    make a never-accepted membership active (`policy.require_activation`)."""
    changes = sent(scope=scope, status=status, project=project, tags=tags, meta=meta)
    scope = changes.get("scope", membership.scope)
    if scope == Membership.Scope.WORKSPACE and "scope" in changes and "project" not in changes:
        changes["project"] = None
    project = changes.get("project", membership.project)
    _check_scope(scope, project)
    activating = (
        changes.get("status") == Membership.Status.ACTIVE and membership.status != Membership.Status.ACTIVE
    )
    if activating:
        policy.require_activation(actor, membership, vouched=vouched)
        if membership.accepted_at is None:  # an operator, or the account itself, acts for it
            changes["accepted_at"] = timezone.now()
    widening = {"scope", "project"} & changes.keys() or activating
    if roles is not None or widening:
        result = roles if roles is not None else list(membership.roles.all())
        policy.require_grantable(
            actor, membership.workspace_id, granted_by(result), project_id=project.pk if project else None
        )
    if roles is not None:
        _check_roles_per_membership(roles, actor=actor)
    if _membership_exists(membership.workspace, membership.account_id, scope, project, exclude=membership.pk):
        raise ApiError(409, CONFLICT)
    entry = audit.diff(membership, changes) | _ids_change(membership.roles, roles, "role_ids")
    fields = apply_changes(membership, changes)
    with unique_conflict(CONFLICT):  # a race past `_membership_exists`
        membership.save(update_fields=fields)
    if entry:
        audit.record(
            "membership.update",
            resource=("membership", membership.pk),
            workspace_id=membership.workspace_id,
            changes=entry,
            actor=actor,
        )
    if roles is not None:
        membership.roles.set(roles)
    forget_authorization(membership.workspace_id)
    events.emit(
        "membership.updated",
        resource=("membership", membership.pk),
        account_ids=[membership.account_id],
        workspace_ids=[membership.workspace_id],
    )
    return membership


@transaction.atomic
def accept_invitation(membership: Membership, *, roles: Iterable[Role] = ()) -> Membership:
    """CONTRACT 15: the invited account's own act; the caller has checked that it is the account's. The
    row is locked and checked again, so two uses of one link accept it once. The workspace's log names
    the account and the membership only: not the invitee's address or user agent. `roles`: those an
    invitation by e-mail for the same place adds."""
    with audit.withholding_client(membership.workspace_id):
        membership = _still_invited(membership)
        membership.status = Membership.Status.ACTIVE
        membership.accepted_at = timezone.now()
        membership.updated_at = membership.accepted_at
        membership.save(update_fields=["status", "accepted_at", "updated_at"])
        changes = {"status": {"before": Membership.Status.INVITED, "after": Membership.Status.ACTIVE}}
        held = set(membership.roles.values_list("pk", flat=True))
        added = [role for role in roles if role.pk not in held]
        if added:
            changes |= _ids_change(membership.roles, [*membership.roles.all(), *added], "role_ids")
            membership.roles.add(*added)
        audit.record(
            "membership.accept",
            resource=("membership", membership.pk),
            workspace_id=membership.workspace_id,
            changes=changes,
            actor=membership.account,
        )
        forget_authorization(membership.workspace_id)
        events.emit(
            "membership.updated",
            resource=("membership", membership.pk),
            account_ids=[membership.account_id],
            workspace_ids=[membership.workspace_id],
        )
    return membership


@transaction.atomic
def decline_invitation(membership: Membership) -> dict:
    """The workspace's log names the account and the membership only (CONTRACT 15)."""
    with audit.withholding_client(membership.workspace_id):
        membership = _still_invited(membership)
        return delete_membership(membership, actor=membership.account)


def _still_invited(membership: Membership) -> Membership:
    locked = (
        Membership.objects.select_for_update()
        .filter(pk=membership.pk, status=Membership.Status.INVITED)
        .first()
    )
    if locked is None:
        raise ApiError(404, "membership not found")
    return locked


@transaction.atomic
def delete_membership(membership: Membership, *, actor: Account | None) -> dict:
    audit.record(
        "membership.delete",
        resource=("membership", membership.pk),
        workspace_id=membership.workspace_id,
        changes=audit.removed(membership, ("account_id", "scope", "status", "project_id")),
        actor=actor,
    )
    forget_authorization(membership.workspace_id)
    events.emit(
        "membership.deleted",
        resource=("membership", membership.pk),
        account_ids=[membership.account_id],
        workspace_ids=[membership.workspace_id],
    )
    summary = {"id": str(membership.pk)}
    membership.delete()
    return summary


# Invitations by e-mail (CONTRACT 15, revised 2026-11-24)

INVITATION_PENDING = "invitation already pending"
ALREADY_MEMBER = "already a member"


def open_invitations(invitations: QuerySet) -> QuerySet:
    """The invitations that can still be accepted: `pending`, and not past `expires_at`."""
    return invitations.filter(status=Invitation.Status.PENDING, expires_at__gt=timezone.now())


def invitations_in_status(status: str) -> Q:
    """The condition of the invitations whose `current_status` is `status`."""
    now = timezone.now()
    if status == Invitation.Status.PENDING:
        return Q(status=status, expires_at__gt=now)
    if status == Invitation.Status.EXPIRED:
        return Q(status=status) | Q(status=Invitation.Status.PENDING, expires_at__lte=now)
    return Q(status=status)


@transaction.atomic
def create_invitation(
    workspace: Workspace,
    *,
    email: str,
    scope: str,
    roles: list[Role],
    tags: list[str] | None = None,
    meta: dict | None = None,
    project: Project | None = None,
    actor: Account | None,
) -> Invitation:
    """Invites an address, whether an account holds it or not: nothing here reads the accounts but
    through this workspace's own memberships, and the e-mail goes out after commit, so the answer and its
    timing are the same either way (no enumeration). CONTRACT 4's escalation rule applies to the roles."""
    _check_scope(scope, project)
    policy.require_grantable(actor, workspace, granted_by(roles), project_id=project.pk if project else None)
    _check_roles_per_membership(roles, actor=actor)  # the roles the membership will hold
    email = normalize_email(email)
    now = timezone.now()
    same_place = Invitation.objects.in_workspace(workspace).filter(email=email, scope=scope, project=project)
    # An expired invitation makes room for a new one; it is written as what it already reads as.
    same_place.filter(status=Invitation.Status.PENDING, expires_at__lte=now).update(
        status=Invitation.Status.EXPIRED, updated_at=now
    )
    if same_place.filter(status=Invitation.Status.PENDING).exists():
        raise ApiError(409, INVITATION_PENDING, "email")
    members = Membership.objects.in_workspace(workspace).filter(
        account__email=email, scope=scope, project=project, accepted_at__isnull=False
    )
    if members.exists():
        raise ApiError(409, ALREADY_MEMBER, "email")
    check_quota(
        "pending invitations",
        settings.IAM_QUOTA_PENDING_INVITATIONS,
        actor=actor,
        records=open_invitations(Invitation.objects.in_workspace(workspace)),
        owner=workspace,
    )
    invitation = Invitation(
        workspace=workspace,
        email=email,
        scope=scope,
        project=project,
        tags=tags or [],
        meta=meta or {"schema_version": "1"},
        invited_by=actor,
        created_at=now,
        expires_at=now + INVITATION_LIFETIME,
    )
    with unique_conflict(INVITATION_PENDING, "email"):  # a race past the pending check
        invitation.save(force_insert=True)
    audit.record(
        "invitation.create",
        resource=("invitation", invitation.pk),
        workspace_id=workspace.pk,
        changes=audit.created(invitation, ("email", "scope", "project_id", "tags"))
        | _ids_change(None, roles, "role_ids"),
        actor=actor,
    )
    invitation.roles.set(roles)
    mail_invitation(invitation)
    return invitation


def mail_invitation(invitation: Invitation) -> None:
    """Records the invitation e-mail in the change's transaction; `authn.emails` sends it after commit,
    to the address, with a single-use `MembershipInvite` link minted then (the outbox stores no token)."""
    outbox.enqueue(
        "email",
        {"kind": "invitation", "account_id": None, "invitation_id": str(invitation.pk)},
        within=INVITATION_LIFETIME,
    )


def _still_open(invitation: Invitation) -> Invitation:
    """The invitation, locked, when it can still be acted on; else 404 (a used, withdrawn or expired
    link names nothing)."""
    locked = (
        open_invitations(Invitation.objects.select_for_update()).filter(pk=invitation.pk).first()
        if invitation is not None
        else None
    )
    if locked is None:
        raise ApiError(404, "invitation not found")
    return locked


NOT_PENDING = "only a pending invitation can be {}"


@transaction.atomic
def revoke_invitation(invitation: Invitation, *, actor: Account | None) -> Invitation:
    """Withdraws a pending invitation: its link opens nothing from now on."""
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if not locked.is_open:
        raise ApiError(400, NOT_PENDING.format("revoked"))
    changes = {"status": Invitation.Status.REVOKED}
    entry = audit.diff(locked, changes)
    locked.save(update_fields=apply_changes(locked, changes))
    audit.record(
        "invitation.revoke",
        resource=("invitation", locked.pk),
        workspace_id=locked.workspace_id,
        changes=entry,
        actor=actor,
    )
    return locked


@transaction.atomic
def resend_invitation(invitation: Invitation, *, actor: Account | None) -> Invitation:
    """Mails a pending invitation again, valid for another 7 days from now (the admin's "resend")."""
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if not locked.is_open:
        raise ApiError(400, NOT_PENDING.format("resent"))
    changes = {"expires_at": timezone.now() + INVITATION_LIFETIME}
    entry = audit.diff(locked, changes)
    locked.save(update_fields=apply_changes(locked, changes))
    audit.record(
        "invitation.resend",
        resource=("invitation", locked.pk),
        workspace_id=locked.workspace_id,
        changes=entry,
        actor=actor,
    )
    mail_invitation(locked)
    return locked


@transaction.atomic
def accept_email_invitation(invitation: Invitation, *, account: Account) -> tuple[Invitation, Membership]:
    """The account whose address the invitation names accepts it (the caller has proved that: the mailed
    token, or a signed-in account's verified address). The membership it describes is created active
    (`membership.created`), or an invited one for the same place is accepted (`membership.updated`). The
    inviting workspace's log names the account and the invitation only."""
    with audit.withholding_client(invitation.workspace_id):
        invitation = _still_open(invitation)
        roles = list(invitation.roles.all())
        existing = (
            Membership.objects.select_for_update()
            .in_workspace(invitation.workspace)
            .filter(account=account, scope=invitation.scope, project=invitation.project_id)
            .first()
        )
        if existing is not None and existing.accepted_at is not None:
            raise ApiError(409, ALREADY_MEMBER)
        if existing is not None:
            membership = accept_invitation(existing, roles=roles)
        else:
            membership = create_membership(
                invitation.workspace,
                account=account,
                scope=invitation.scope,
                status=Membership.Status.ACTIVE,
                roles=roles,
                tags=invitation.tags,
                meta=invitation.meta or {"schema_version": "1"},
                project=invitation.project,
                actor=account,
                invitation=invitation,
            )
        now = timezone.now()
        changes = {"status": Invitation.Status.ACCEPTED, "accepted_at": now, "membership": membership}
        entry = audit.diff(invitation, changes, ("status", "membership"))
        invitation.save(update_fields=apply_changes(invitation, changes))
        audit.record(
            "invitation.accept",
            resource=("invitation", invitation.pk),
            workspace_id=invitation.workspace_id,
            changes=entry,
            actor=account,
        )
    return invitation, membership


@transaction.atomic
def decline_email_invitation(invitation: Invitation, *, account: Account | None) -> Invitation:
    """The invitee declines (`account`: the signed-in one, else None: the link's holder). The inviting
    workspace's log names the account (when known) and the invitation only."""
    with audit.withholding_client(invitation.workspace_id):
        invitation = _still_open(invitation)
        changes = {"status": Invitation.Status.DECLINED}
        entry = audit.diff(invitation, changes)
        invitation.save(update_fields=apply_changes(invitation, changes))
        audit.record(
            "invitation.decline",
            resource=("invitation", invitation.pk),
            workspace_id=invitation.workspace_id,
            changes=entry,
            actor=account,
        )
    return invitation
