"""The RBAC-aware endpoint bases (STYLE "Authorization is decided in one place"). `iam.api` stays the
app-free machinery; these put `rbac.policy`'s two decisions in the one path every request takes:
`policy.EndpointPermission` (the declared permission, before the body; named here, not only in
settings) and `Endpoint.get_object` (the record, once loaded), so no endpoint checks a project, a self
access or a workspace's grants by hand.

An endpoint that loads a record, calls its service and answers the result is a declaration only
(`service`, `lookup`, `get_queryset`, the serializers): `Endpoint.handle` is written once, here."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from rest_framework.request import Request

from iam import api, list_endpoint
from iam.api import first_match, not_found

from . import policy
from .policy import EndpointPermission


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the record or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}


class Endpoint(api.Endpoint):
    """An endpoint acting on one record. Declares `get_queryset(request)` (already scoped to the
    workspace) and `lookup` (the body's keys naming the record); `get_object(request, data)` loads the
    record and asks `policy.authorize` with it: its project (`project_aware`), its account (self
    access), the workspace it is (a workspace's own endpoints). A refusal that does not depend on the
    record comes before the lookup's 404, as CONTRACT 1 orders them.

    `handle` is written once: without `service` it answers the record (describe); with one it calls
    `service(record, **changes, actor=caller)` (update, delete), or with `creates`
    `service(workspace, **changes, actor=caller)`, and answers the result: a record serialized with
    `response_serializer` (re-read through `get_queryset` when `reload`: its relations changed), a
    summary (a delete's) as it is. `changes(request, data)` turns the body into the service's keyword
    arguments (override it to resolve references).

    `per_record`: `permission` is decided on the record alone (`policy.admit` lets the request through
    to the body)."""

    permission_classes: ClassVar[list] = [EndpointPermission]
    lookup: ClassVar[tuple[str, ...]] = ("id",)
    per_record: ClassVar[bool] = False
    service: ClassVar[Callable[..., Any] | None] = None
    creates: ClassVar[bool] = False
    reload: ClassVar[bool] = False

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

    def handle(self, request: Request, data: dict) -> Any:
        target = request.workspace if self.creates else self.get_object(request, data)
        service = type(self).service  # read on the class: a plain function, not a bound method
        if service is None:
            return self.serialize(target)
        result = self.call(service, target, self.changes(request, data), request)
        if not isinstance(result, Model):
            return result
        if self.reload:
            result = self.get_queryset(request).get(pk=result.pk)
        return self.serialize(result)

    def changes(self, request: Request, data: dict) -> dict:
        """The service's keyword arguments: the body, less the keys naming the record (an update's)."""
        return data if self.creates else changes_of(data, *self.lookup)

    def call(self, service: Callable[..., Any], target: Any, changes: dict, request: Request) -> Any:
        return service(target, **changes, actor=request.user)


class ProjectScopedList(list_endpoint.ListEndpoint):
    """A list whose records belong to projects: a project-scope grant of `permission` lets the caller
    in, and `visible_projects` narrows the list to the projects where it holds it."""

    permission_classes: ClassVar[list] = [EndpointPermission]
    project_aware = True

    def visible_projects(self, request: Request) -> list[str] | None:
        return policy.visible_projects(request.user, request.workspace, self.permission)
