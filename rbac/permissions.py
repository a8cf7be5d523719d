from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission

from iam.errors import ApiError
from tenancy.workspace_cache import find_workspace

from . import policy


class EndpointPermission(BasePermission):
    """Runs after authentication, before the body is read (CONTRACT 1's order): the caller must be
    authenticated, the `X-Workspace` workspace of a workspace-scoped endpoint must exist and count the
    caller as an active member (CONTRACT 2), and the endpoint's declared permission must be held there
    (`policy.admit`)."""

    def has_permission(self, request, view) -> bool:
        if getattr(view, "public", False):
            return True
        account = request.user
        if account is None:
            raise NotAuthenticated()
        workspace = None
        if getattr(view, "workspace_scoped", False):
            workspace = request.workspace = select_workspace(request, account)
        policy.admit(
            account,
            workspace,
            getattr(view, "permission", None),
            project_scoped=getattr(view, "project_aware", False),
            per_record=getattr(view, "per_record", False),
        )
        return True


def select_workspace(request, account):
    ref = request.headers.get("X-Workspace", "").strip()
    if not ref:
        raise ApiError(400, "workspace required", "X-Workspace")
    workspace = find_workspace(ref)
    if workspace is None:
        raise ApiError(404, "workspace not found", "X-Workspace")
    if not account.is_superuser and not policy.grants(account.pk, workspace.pk).member:
        raise ApiError(403, "not a member of this workspace")
    return workspace
