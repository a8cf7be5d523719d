"""The RBAC-aware endpoint bases (STYLE "Authorization is decided in one place"). `iam.api` stays the
app-free machinery; these put `rbac.policy`'s record decision in the one path every endpoint that acts on
a record takes, so no endpoint checks a project, a self access or a workspace's grants by hand."""

from typing import Any, ClassVar

from django.db.models import QuerySet
from rest_framework.request import Request

from iam import api, list_endpoint
from iam.api import first_match, not_found

from . import policy


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the record or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}


class Endpoint(api.Endpoint):
    """An endpoint acting on one record. Declares `get_queryset(request)` (already scoped to the
    workspace) and `lookup` (the body's keys naming the record), and calls `get_object(request, data)`,
    which loads the record and asks `policy.authorize` with it: its project (`project_aware`), its
    account (self access), the workspace it is (a workspace's own endpoints). A refusal that does not
    depend on the record comes before the lookup's 404, as CONTRACT 1 orders them.

    `per_record`: `permission` is decided on the record alone (`policy.admit` lets the request through
    to the body)."""

    lookup: ClassVar[tuple[str, ...]] = ("id",)
    per_record: ClassVar[bool] = False

    def get_queryset(self, request: Request) -> QuerySet:
        raise NotImplementedError

    def find(self, request: Request, data: dict) -> Any | None:
        """The record the body names, or None. Override for a lookup that is more than equal keys."""
        return first_match(self.get_queryset(request), data, self.lookup)

    def get_object(self, request: Request, data: dict) -> Any:
        record = self.find(request, data)
        self.authorize(request, record, fields=data)
        if record is None:
            raise not_found(self.get_queryset(request))
        return record

    def authorize(self, request: Request, record: Any, *, fields: Any = None) -> None:
        """`policy.authorize` for this endpoint; also for a record the request is about to create or move
        to (a membership's project, or the workspace itself for a workspace-scope membership)."""
        policy.authorize(
            request.user,
            getattr(request, "workspace", None),
            self.permission,
            record,
            project_scoped=self.project_aware,
            fields=fields,
        )


class ProjectScopedList(list_endpoint.ListEndpoint):
    """A list whose records belong to projects: a project-scope grant of `permission` lets the caller
    in, and `visible_projects` narrows the list to the projects where it holds it."""

    project_aware = True

    def visible_projects(self, request: Request) -> list[str] | None:
        return policy.visible_projects(request.user, request.workspace, self.permission)
