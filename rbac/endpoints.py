"""The RBAC-aware endpoint bases: what an endpoint whose records belong to projects needs from the policy
(CONTRACT 4). `iam.api` stays the app-free machinery; these add the rules of this app on top of it."""

from typing import Any, ClassVar

from rest_framework.request import Request

from . import policy


class ProjectScoped:
    """Mixed into an `Endpoint` or a `ListEndpoint` whose records belong to projects: a project-scope grant
    of `permission` lets the caller in (`rbac.permissions`); the handler then checks the record's project
    with `check_project`, and a list narrows itself to `visible_projects`."""

    project_aware: ClassVar[bool] = True
    permission: ClassVar[str | None]

    def check_project(self, request: Request, project_id: Any) -> None:
        """For a `project_aware` endpoint, once the record is found: a project-scope grant counts for its
        own project only (CONTRACT 4)."""
        if self.permission and self.project_aware:
            policy.require(request.user, request.workspace, self.permission, project_id=project_id)

    def visible_projects(self, request: Request) -> list[str] | None:
        """For a `project_aware` list: None when the caller holds the permission workspace-wide, else the
        projects in which a project-scope membership grants it."""
        if not self.permission or request.user.is_superuser:
            return None
        grants = policy.grants(request.user.pk, request.workspace.pk)
        if grants.allows(self.permission):
            return None
        return grants.projects_allowing(self.permission)
