"""The door every API endpoint goes through to the policy (rbac/policy.py):
`EndpointPermission`, DRF's permission class (REST_FRAMEWORK's DEFAULT_PERMISSION_CLASSES), which
selects the `X-Workspace` workspace and admits the endpoint's declared permission before the body is
read; `get_object`, which loads the record a body names and has the policy decide on it; and the list
filter of project-scope grants."""

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from iam.http.errors import ApiError
from iam.platform.service_helpers import resolve
from tenancy.models import Project
from tenancy.workspace_cache import find_workspace

from ..machine_cache import is_service_account
from ..models import Role
from ..policy import admit, authorize, grants, reaches, require_mfa, visible_projects

# The door: DRF's permission class for every API endpoint


class EndpointPermission(BasePermission):
    """Runs after authentication, before the body is read (the docs/api.md#errors order): the caller must be
    authenticated, the `X-Workspace` workspace of a workspace-scoped endpoint must exist, count the
    caller as an active member (docs/api.md#x-workspace) and, when it requires MFA, see a session that meets
    it (`require_mfa`), and the endpoint's declared permission must be held there (`admit`)."""

    def has_permission(self, request, view) -> bool:
        account = request.user
        if is_service_account(account) and not getattr(view, "workspace_scoped", False):
            # A service account acts in its workspace only: every endpoint outside one (`auth/*`,
            # `accounts/*`, `sessions/*`, `workspace/*`, an invitee's own, which is public but reads a
            # Bearer token) refuses its key as no credential at all (docs/api.md#api-keys).
            raise NotAuthenticated()
        if getattr(view, "public", False):
            return True
        if account is None:
            raise NotAuthenticated()
        workspace = None
        if getattr(view, "workspace_scoped", False):
            # The one place `request.workspace` is set: a workspace-scoped endpoint's `handle` reads it.
            workspace = select_workspace(request, account)
            request.workspace = workspace
        admit(
            account,
            workspace,
            getattr(view, "permission", None),
            project_scoped=getattr(view, "project_scoped", False),
            decided_on_object=getattr(view, "decided_on_object", False),
            claims=request.auth,
        )
        return True


def select_workspace(request, account):
    ref = request.headers.get("X-Workspace", "").strip()
    if not ref and is_service_account(account):
        ref = str(account.workspace_id)  # its own, the one it may act in (docs/api.md#api-keys)
    if not ref:
        raise ApiError(400, "workspace required", "X-Workspace")
    workspace = find_workspace(ref)
    if workspace is None:
        raise ApiError(404, "workspace not found", "X-Workspace")
    if is_service_account(account) and workspace.pk != account.workspace_id:
        raise ApiError(403, "not a member of this workspace")
    if not account.is_superuser and not grants(account.pk, workspace.pk).member:
        raise ApiError(403, "not a member of this workspace")
    require_mfa(request.auth, workspace)
    return workspace


def get_object(
    request: Request,
    queryset: QuerySet,
    *,
    permission: str,
    project_scoped: bool = False,
    fields: Iterable[str] = (),
    **lookup: Any,
) -> Any:
    """The object of `queryset` (already scoped to the `X-Workspace` workspace where it belongs to one)
    that every `lookup` key names, found first and then decided (docs/api.md#conventions): what does not
    exist within the caller's reach (`reaches`) is 404 whoever asks, before any rule that depends on the
    object or on what the request changes (`authorize`). `project_scoped`: a project-scope grant counts
    for the object's own project. `fields`: the request's fields (an update's): an account's own flags,
    a credential's secret."""
    found = queryset.filter(**lookup).first() if lookup else None
    if found is None or not reaches(request.user, found, permission):
        raise ApiError(404, f"{str(queryset.model._meta.verbose_name).lower()} not found")
    authorize(
        request.user,
        getattr(request, "workspace", None),
        permission,
        found,
        project_scoped=project_scoped,
        fields=fields,
        claims=getattr(request, "auth", None),
    )
    return found


def named_by(data: dict, *keys: str) -> dict:
    """The lookup of the object the body names by any of `keys` (`id`, `slug`): every key sent must match."""
    return {key: data[key] for key in keys if key in data}


def project_named(request: Request, project_id) -> Project:
    """The project of the `X-Workspace` workspace that `project_id` names (400 for any other)."""
    project = Project.objects.in_workspace(request.workspace).filter(pk=project_id).first()
    if project is None:
        raise ApiError(400, "project_id must name a project of this workspace", "project_id")
    return project


def roles_named(request: Request, ids: list, *, field: str = "role_ids") -> list[Role]:
    """The roles of the `X-Workspace` workspace that `field` names (400 for any other)."""
    return resolve(Role.objects.in_workspace(request.workspace), ids, field=field)


def in_visible_projects(
    request: Request, queryset: QuerySet, *, permission: str, project_field: str = "project_id"
) -> QuerySet:
    """For a list a project-scope grant of `permission` lets in (`project_scoped = True`): `queryset` (of
    the `X-Workspace` workspace) as it is for a workspace-wide grant, else only what belongs to the
    projects where the caller holds `permission` (`project_field` names an object's project)."""
    visible = visible_projects(request.user, request.workspace, permission)
    return queryset if visible is None else queryset.filter(**{f"{project_field}__in": visible})
