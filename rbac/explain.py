"""Explaining a decision (`permissions/check`, `clients/validate` with `explain`): the grant
paths behind it, by the rules of rbac/policy.py, and why there is none."""

from uuid import UUID

from accounts.models import Account

from .models import Membership
from .policy import grants, matches

# Explaining a decision (`POST /permissions/check`, `clients/validate` with `explain`)


def grant_paths(
    account_id: UUID, workspace_id: UUID, permission: str, project_id: UUID | str | None = None
) -> list[dict]:
    """Every (active membership, role, permission pattern) of the account in the workspace that grants
    `permission`, by the rules of `Grants.allows`: a workspace-scope membership everywhere, a project-scope
    one only for its own project (docs/api.md#authorization). Read from the same rows `_load_grants` reads."""
    rows = Membership.roles.through.objects.filter(
        membership__account_id=account_id,
        membership__workspace_id=workspace_id,
        membership__status=Membership.Status.ACTIVE,
        role__permissions__name__isnull=False,
    ).values_list(
        "membership_id",
        "membership__scope",
        "membership__project_id",
        "role_id",
        "role__name",
        "role__permissions__name",
    )
    paths = [
        {
            "membership_id": str(membership_id),
            "scope": scope,
            "project_id": str(project) if project else None,
            "role_id": str(role_id),
            "role": role,
            "pattern": pattern,
        }
        for membership_id, scope, project, role_id, role, pattern in rows
        if matches(pattern, permission)
        and (
            scope == Membership.Scope.WORKSPACE
            or (project_id is not None and str(project) == str(project_id))
        )
    ]
    return sorted(paths, key=lambda path: (path["scope"] != "workspace", path["role"], path["pattern"]))


def explain(
    account: Account, workspace_id: UUID, permission: str, *, project_id: UUID | str | None = None
) -> dict:
    """`allowed` is the decision `clients/validate` makes (`grants().allows`); `matched` every grant path
    behind it, or `reason` why there is none. A disabled account is named only to a workspace it belongs
    to. Operators pass API checks whatever this says (docs/api.md#authorization): it explains grants, not the
    flag. An account that never accepted a membership here (one only invited) is `not_a_member`, whatever its
    flags: an invitation tells a workspace nothing about the account (docs/api.md#invitations)."""
    statuses = set(
        Membership.objects.filter(
            account_id=account.pk, workspace_id=workspace_id, accepted_at__isnull=False
        ).values_list("status", flat=True)
    )
    reason = None
    if not statuses:
        reason = "not_a_member"
    elif not account.enabled:
        reason = "account_disabled"
    elif Membership.Status.ACTIVE not in statuses:
        reason = "not_active"
    elif not grants(account.pk, workspace_id).allows(permission, project_id):
        reason = "no_matching_permission"
    matched = grant_paths(account.pk, workspace_id, permission, project_id) if reason is None else []
    return {"allowed": reason is None, "matched": matched, "reason": reason}
