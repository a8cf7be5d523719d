"""Writes to memberships: created, invited, updated, accepted, declined and deleted."""

from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Account
from iam.http.errors import ApiError
from iam.platform import audit, events, outbox
from iam.platform.service_helpers import UNSET, apply_changes, sent, unique_conflict
from tenancy.models import Project, Workspace
from tenancy.quotas import check_quota
from tenancy.workspace_cache import forget_authorization

from .. import policy
from ..models import Invitation, Membership, Permission, Role


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


def machine_holders(service_accounts: QuerySet) -> dict:
    """What a role's or a permission's event adds for the service accounts holding it
    (docs/integration.md#push-events): `service_account_ids`, when there are any."""
    ids = sorted({str(pk) for pk in service_accounts.values_list("pk", flat=True)})
    return {"service_account_ids": ids} if ids else {}


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
    """docs/api.md#invitations: a membership of another account, made by anyone but an operator, starts
    `invited` whatever `status` says, and the account is e-mailed an invitation; it joins only by accepting.
    `invitation`: the invitation by e-mail the account (`actor`) accepts; its inviter's grants were
    weighed when it was made (docs/api.md#authorization), so the account's own are not."""
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


INVITATION_LIFETIME = timedelta(days=7)  # docs/api.md#invitations


def invite(membership: Membership) -> None:
    """Records the invitation e-mail in the change's transaction; `authn.emails` mints the single-use
    `MembershipInvite` link when it sends it (the outbox never stores a usable token)."""
    outbox.enqueue(
        "email",
        {"kind": "invite", "account_id": str(membership.account_id), "membership_id": str(membership.pk)},
        within=INVITATION_LIFETIME,
    )


def granted_by(roles: Iterable[Role]) -> list[str]:
    """The permission names the given roles grant (what the docs/api.md#authorization escalation rule
    weighs)."""
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
    """`roles` replaces the assigned roles (docs/api.md#answers). Moving to workspace scope drops the project.
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
    """docs/api.md#invitations: the invited account's own act; the caller has checked that it is the
    account's. The row is locked and checked again, so two uses of one link accept it once. The workspace's
    log names the account and the membership only: not the invitee's address or user agent. `roles`: those an
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
    """The workspace's log names the account and the membership only (docs/api.md#invitations)."""
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
