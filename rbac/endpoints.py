"""The two steps every endpoint acting on one stored object shares, written once and called by name
from each endpoint's `handle`:

- `get_object` loads the object the body names, through the one policy (`rbac.policy.authorize`): what
  does not depend on the object is refused first, an object that does not exist within the caller's
  reach is a 404 `<model> not found`, then the decision on the object itself (its project, its account).
- `named_by` turns the body's naming keys (`id` and/or `slug`, say) into `get_object`'s lookup.
- `in_visible_projects` narrows a project-scoped list to the projects where the caller holds the list's
  permission (all of them for a workspace-wide grant).
- `answer_fresh` answers an object as the database holds it after a change, written as a list page writes
  its items (`iam.serializers.Encoder`: nested objects read a few at a time, JSON columns as stored) and
  streamed when large (`iam.api.encoded_response`), so a membership of 50 roles of 500 permissions at
  their size limits is never held whole, nor as parsed Python objects.

The endpoint's permission (`permission = "roles:update"`), its workspace scoping (`workspace_scoped =
True`) and its route (the app's urls.py) are written on the endpoint itself; the permission before the
body and the `X-Workspace` selection are `rbac.policy.EndpointPermission`'s (DRF's permission class,
named in settings.REST_FRAMEWORK)."""

from collections.abc import Iterable
from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.request import Request
from rest_framework.serializers import Serializer

from iam.api import EncodedJson
from iam.errors import ApiError
from iam.serializers import Encoder

from . import policy


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
    that every `lookup` key names, once the caller may act on it with `permission`. `project_scoped`: a
    project-scope grant counts for the object's own project. `fields`: the request's fields (an update's),
    for the rules that depend on what changes (an account's own flags, a credential's secret)."""
    found = queryset.filter(**lookup).first() if lookup else None
    policy.authorize(
        request.user,
        getattr(request, "workspace", None),
        permission,
        found,
        project_scoped=project_scoped,
        fields=fields,
        claims=getattr(request, "auth", None),
    )
    if found is None:
        raise ApiError(404, f"{queryset.model._meta.verbose_name} not found")
    return found


def named_by(data: dict, *keys: str) -> dict:
    """The lookup of the object the body names by any of `keys` (`id`, `slug`): every key sent must match."""
    return {key: data[key] for key in keys if key in data}


def answer_fresh(
    request: Request,
    serializer: type[Serializer],
    queryset: QuerySet,
    obj: Model,
    context: dict | None = None,
) -> EncodedJson:
    """`obj` re-read from `queryset` (its relations changed by the service) and written by `serializer`,
    as a stream of pieces (`Encoder.stream`): its nested objects are read a few at a time while the
    answer is sent, so a membership of 50 roles of 500 large permissions is never held whole. `obj`'s own
    row is read now, its nested rows as the answer is written (`iam.api.encoded_object` puts several of
    these in one answer). `context`: more of the serializer's context."""
    encoder = Encoder(serializer(context={"request": request, **(context or {})}))
    fresh = encoder.prepare(queryset.prefetch_related(None)).get(pk=obj.pk)
    return EncodedJson(encoder.stream(fresh))


def in_visible_projects(
    request: Request, queryset: QuerySet, *, permission: str, project_field: str = "project_id"
) -> QuerySet:
    """For a list a project-scope grant of `permission` lets in (`project_scoped = True`): `queryset` (of
    the `X-Workspace` workspace) as it is for a workspace-wide grant, else only what belongs to the
    projects where the caller holds `permission` (`project_field` names an object's project)."""
    visible = policy.visible_projects(request.user, request.workspace, permission)
    return queryset if visible is None else queryset.filter(**{f"{project_field}__in": visible})
