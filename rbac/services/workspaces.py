"""The owner set-up of a new workspace: its `*` permission, its `owner` role and the
creator's active membership, in one transaction (docs/api.md#authorization)."""

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from iam.platform import audit
from iam.platform.service_helpers import save_unique
from tenancy.models import Workspace
from tenancy.quotas import check_quota
from tenancy.workspace_cache import forget_authorization

from ..models import Membership, Permission, Role

OWNER_ROLE = "owner"
ALL_PERMISSIONS = "*"


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
    branding: dict[str, str] | None = None,
) -> Workspace:
    """docs/api.md#authorization: `owner` becomes the owner, in the same transaction. `actor`, the account
    whose request creates it (None: a command), is its `created_by`, and the workspaces it created count
    against its quota (docs/api.md#quotas-and-budgets)."""
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
        branding=Workspace.normalized_branding(branding),
        tags=tags,
        meta=meta,
    )
    save_unique(workspace, Workspace.objects.all(), {"slug": slug}, force_insert=True)
    audit.record(  # the request's account is the actor (none for a command)
        "workspace.create",
        resource=("workspace", workspace.pk),
        workspace_id=workspace.pk,
        changes=audit.created(workspace, ("name", "slug", "description", "mfa_required", "branding", "tags")),
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
            # creating the workspace is the owner's own act (docs/api.md#invitations)
            "accepted_at": timezone.now(),
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
