"""Invitations by e-mail (docs/api.md#invitations): created, mailed, revoked, resent,
accepted and declined."""

from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Account, account_of, normalize_email
from iam.http.errors import ApiError
from iam.platform import audit, outbox
from iam.platform.service_helpers import apply_changes, unique_conflict
from tenancy.models import Project, Workspace
from tenancy.quotas import check_quota

from .. import policy
from ..models import Invitation, Membership, Role
from .memberships import (
    INVITATION_LIFETIME,
    _check_roles_per_membership,
    _check_scope,
    _ids_change,
    accept_invitation,
    create_membership,
    granted_by,
)

INVITATION_PENDING = "invitation already pending"
ALREADY_MEMBER = "already a member"


def open_invitations(invitations: QuerySet) -> QuerySet:
    """The invitations that can still be accepted: `pending`, and not past `expires_at`."""
    return invitations.filter(status=Invitation.Status.PENDING, expires_at__gt=timezone.now())


def linked_invitation(claims: dict, *, lock: bool = False) -> Invitation | None:
    """The open invitation a mailed `MembershipInvite` link names (its `iid`, and its `sub` the same),
    else None: a used, withdrawn or expired link names nothing. `lock`: for the change it authorizes (two
    uses of one link take turns, and the second finds it used)."""
    invitation_id = _uuid(claims.get("iid"))
    if invitation_id is None:
        return None
    invitations = Invitation.objects.select_for_update() if lock else Invitation.objects.all()
    invitation = open_invitations(invitations).filter(pk=invitation_id).first()
    if invitation is None or str(claims.get("sub")) != str(invitation.pk):
        return None
    return invitation


def linked_membership(claims: dict) -> Membership | None:
    """The invited membership a mailed `MembershipInvite` link names (its `mid`, of the account `sub`),
    while it is open and was never accepted; else None."""
    membership_id, account_id = _uuid(claims.get("mid")), _uuid(claims.get("sub"))
    if membership_id is None or account_id is None:
        return None
    return (
        Membership.objects.filter(status=Membership.Status.INVITED, accepted_at__isnull=True)
        .select_related("account")
        .filter(pk=membership_id, account_id=account_id)
        .first()
    )


def _uuid(value) -> UUID | None:
    try:
        return UUID(str(value))
    except ValueError:
        return None


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
    timing are the same either way (no enumeration). The docs/api.md#authorization escalation rule applies to
    the roles."""
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
        invited_by=account_of(actor),
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


def _change(
    invitation: Invitation,
    action: str,
    changes: dict,
    *,
    actor: Account | None,
    audited: tuple[str, ...] | None = None,
) -> None:
    """Saves `changes` to the invitation and records `action` with what they changed (`audited`: the
    fields the entry names, by default every one)."""
    entry = audit.diff(invitation, changes, audited)
    invitation.save(update_fields=apply_changes(invitation, changes))
    audit.record(
        action,
        resource=("invitation", invitation.pk),
        workspace_id=invitation.workspace_id,
        changes=entry,
        actor=actor,
    )


@transaction.atomic
def revoke_invitation(invitation: Invitation, *, actor: Account | None) -> Invitation:
    """Withdraws a pending invitation: its link opens nothing from now on."""
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if not locked.is_open:
        raise ApiError(400, NOT_PENDING.format("revoked"))
    _change(locked, "invitation.revoke", {"status": Invitation.Status.REVOKED}, actor=actor)
    return locked


@transaction.atomic
def resend_invitation(invitation: Invitation, *, actor: Account | None) -> Invitation:
    """Mails a pending invitation again, valid for another 7 days from now (the admin's "resend")."""
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if not locked.is_open:
        raise ApiError(400, NOT_PENDING.format("resent"))
    _change(locked, "invitation.resend", {"expires_at": timezone.now() + INVITATION_LIFETIME}, actor=actor)
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
        _change(invitation, "invitation.accept", changes, actor=account, audited=("status", "membership"))
    return invitation, membership


@transaction.atomic
def decline_email_invitation(invitation: Invitation, *, account: Account | None) -> Invitation:
    """The invitee declines (`account`: the signed-in one, else None: the link's holder). The inviting
    workspace's log names the account (when known) and the invitation only."""
    with audit.withholding_client(invitation.workspace_id):
        invitation = _still_open(invitation)
        _change(invitation, "invitation.decline", {"status": Invitation.Status.DECLINED}, actor=account)
    return invitation
