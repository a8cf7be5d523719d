"""The one API machinery: every endpoint of the service is an `Endpoint` or a `ListEndpoint`.

An endpoint declares who may call it and what it reads; this module parses the body (CONTRACT 1: JSON
whatever the Content-Type, SPEC 7's parse messages), validates it with the declared serializer, wraps the
result in the envelope, and leaves authentication, workspace selection and the permission check to the
classes named in `REST_FRAMEWORK` (`authn.authentication`, `rbac.permissions`)."""

import datetime as dt
from collections.abc import Mapping
from typing import Any, ClassVar

from django.db import models, transaction
from django.db.models import Q, QuerySet
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from iam.errors import INVALID_STRUCTURE, ApiError
from iam.fields import Integer, Invalid, String, Tags
from iam.lookups import HasTags

JSON_RENDERER = JSONRenderer()
MAX_PAGE_SIZE = 1000  # CONTRACT 11
DEFAULT_PAGE_SIZE = 100  # SPEC 8
DEFAULT_ORDER = "!created_at"  # SPEC 8
MAX_ORDER_BYS = 8  # CONTRACT 12
DEEP_OFFSET = 1000  # from here a page reads its ids first (ListEndpoint._page)


def envelope(data: Any) -> dict:
    return {"success": True, "status": 200, "data": data}


def _first_error(errors: Any, prefix: str = "") -> tuple[str, Any]:
    if isinstance(errors, Mapping):
        key, value = next(iter(errors.items()))
        name = prefix if key == "non_field_errors" else (f"{prefix}.{key}" if prefix else str(key))
        return _first_error(value, name)
    if isinstance(errors, list) and errors and not isinstance(errors[0], str | serializers.ErrorDetail):
        # ListField / nested list errors: {index: [...]} or [[...]]
        return _first_error(errors[0], prefix)
    if isinstance(errors, list):
        return prefix, errors[0]
    return prefix, errors


_MESSAGES = {
    "required": "{field} required",
    "null": "{field} required",
    "blank": "{field} required",
    "empty": "{field} required",
    "max_length": "{field} must have at most {limit}",
    "min_length": "{field} must have at least {limit}",
    "max_value": "{field} must be at most {limit}",
    "min_value": "{field} must be at least {limit}",
    "not_a_list": "{field} must be an array",
    "not_a_dict": "{field} must be an object",
}


def validation_error(serializer: serializers.Serializer) -> ApiError:
    """Turns DRF's first validation error into CONTRACT's short message naming the field."""
    field, detail = _first_error(serializer.errors)
    code = getattr(detail, "code", "invalid")
    label = field or "body"
    if code == "iam":
        return ApiError(400, str(detail), field or None)
    if code in ("max_length", "min_length"):
        limit = _limit_from(serializer, field, code)
        unit = "items" if _is_list_field(serializer, field) else "characters"
        return ApiError(400, _MESSAGES[code].format(field=label, limit=f"{limit} {unit}"), field or None)
    if code in ("max_value", "min_value"):
        return ApiError(
            400, _MESSAGES[code].format(field=label, limit=_limit_from(serializer, field, code)), field
        )
    if code in _MESSAGES:
        return ApiError(400, _MESSAGES[code].format(field=label, limit=""), field or None)
    if not field:
        return ApiError(400, INVALID_STRUCTURE)
    return ApiError(400, f"invalid {label}", field)


def _resolve_field(serializer: serializers.Serializer, dotted: str) -> serializers.Field | None:
    node: Any = serializer
    for part in dotted.split("."):
        fields = getattr(node, "fields", None)
        if fields is None or part not in fields:
            child = getattr(node, "child", None)
            if child is None:
                return node if part.isdigit() else None
            node = child
            continue
        node = fields[part]
    return node


def _limit_from(serializer: serializers.Serializer, field: str, code: str) -> Any:
    return getattr(_resolve_field(serializer, field), code, None)


def _is_list_field(serializer: serializers.Serializer, field: str) -> bool:
    return isinstance(_resolve_field(serializer, field), serializers.ListField)


def require_one(attrs: dict, *names: str) -> dict:
    """For `validate()` of a request that identifies its record by one of several keys (`id` or `code`)."""
    if not any(name in attrs for name in names):
        raise serializers.ValidationError(
            {names[0]: serializers.ErrorDetail(f"{' or '.join(names)} required", code="iam")}
        )
    return attrs


def first_match(queryset: QuerySet, ref: Mapping[str, Any], keys: tuple[str, ...] = ("id",)) -> Any:
    """The record of `queryset` (already scoped to what the caller may reach) that every given key of
    `ref` names, or None."""
    lookup = {("pk" if key == "id" else key): ref[key] for key in keys if key in ref}
    return queryset.filter(**lookup).first() if lookup else None


def not_found(queryset: QuerySet) -> ApiError:
    return ApiError(404, f"{queryset.model._meta.verbose_name} not found")


def find_one(queryset: QuerySet, ref: Mapping[str, Any], keys: tuple[str, ...] = ("id",)) -> Any:
    """`first_match`, or 404 `<model> not found`: a record of another workspace is not found, never
    forbidden."""
    found = first_match(queryset, ref, keys)
    if found is None:
        raise not_found(queryset)
    return found


class Endpoint(APIView):
    """POST-only JSON endpoint. Subclasses declare:

    - `permission`: the permission the caller needs (`"projects:create"`), checked before the body; None
      when the handler decides itself (self-service on accounts) or the endpoint is public.
    - `public`: no Bearer token needed.
    - `workspace_scoped`: the request acts in the workspace named by `X-Workspace` (CONTRACT 2), available
      to the handler as `request.workspace`.
    - `project_aware`: a project-scope grant of `permission` lets the caller in; the record's project is
      then checked once the record is loaded (`rbac.endpoints.Endpoint`, CONTRACT 4).
    - `request_serializer` / `response_serializer`: the body's and the `data`'s shapes.

    and implement `handle(request, data) -> payload`.

    One transaction boundary (STYLE "Transactions have one boundary"): `handle` runs inside one
    `transaction.atomic()`, owned here, so no call site has to open one. The request's writes commit
    together or not at all, row locks (`select_for_update`) are held until that commit, `on_commit` work
    (publishes, cache purges) runs only once everything has committed, and an `ApiError` rolls the whole
    request back, unless it says `commit=True` (a refusal whose writes must stand). The reads (every
    describe and list, and `clients/validate`) declare `read_only`: they neither write nor lock, and skip
    the BEGIN/COMMIT round trips on the hot paths. tests/iam/test_machinery.py holds every endpoint to
    that rule by its path, so a new write endpoint cannot be left outside."""

    http_method_names = ["post"]
    permission: ClassVar[str | None] = None
    public: ClassVar[bool] = False
    workspace_scoped: ClassVar[bool] = False
    project_aware: ClassVar[bool] = False
    read_only: ClassVar[bool] = False
    request_serializer: ClassVar[type[serializers.Serializer] | None] = None
    response_serializer: ClassVar[type[serializers.Serializer] | None] = None

    def get_authenticators(self):
        return [] if self.public else super().get_authenticators()

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # CONTRACT 1: the answer is JSON whatever the Accept header says; no negotiation to pay for.
        return JSON_RENDERER, JSON_RENDERER.media_type

    def post(self, request: Request) -> Response:
        data = self.read_body(request)
        if self.read_only:
            return Response(envelope(self.handle(request, data)))
        refusal = None
        with transaction.atomic():
            try:
                payload = self.handle(request, data)
            except ApiError as exc:
                if not exc.commit:
                    raise
                refusal = exc
        if refusal is not None:
            raise refusal
        return Response(envelope(payload))

    def read_body(self, request: Request) -> dict:
        body = request.data
        if not isinstance(body, dict):
            raise ApiError(400, INVALID_STRUCTURE)
        if self.request_serializer is None:
            return body
        serializer = self.request_serializer(data=body, context={"request": request})
        if not serializer.is_valid():
            raise validation_error(serializer)
        return serializer.validated_data

    def handle(self, request: Request, data: dict) -> Any:
        raise NotImplementedError

    def serialize(self, instance: Any) -> dict:
        assert self.response_serializer is not None
        return self.response_serializer(instance, context={"request": self.request}).data


# Lists (SPEC 4 "Common list contract", CONTRACT 11)


class ListFilter(serializers.Serializer):
    tags = Tags(required=False)
    fields = serializers.DictField(required=False)


class ListOptions(serializers.Serializer):
    limit = Integer(required=False, min_value=1, max_value=MAX_PAGE_SIZE, default=DEFAULT_PAGE_SIZE)
    offset = Integer(required=False, min_value=0, default=0)
    order_bys = serializers.JSONField(required=False)

    def validate_order_bys(self, value: Any) -> list[str]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
            raise Invalid("options.order_bys must be a string or an array of strings")
        if len(items) > MAX_ORDER_BYS:
            raise Invalid(f"order_bys must have at most {MAX_ORDER_BYS} items")
        return items


class ListRequest(serializers.Serializer):
    filter = ListFilter(required=False)
    options = ListOptions(required=False)


def _parse_filter_value(name: str, field: models.Field, value: Any) -> Any:
    if value is None:
        if not field.null:
            raise ApiError(400, f"invalid value for filter field: {name}", name)
        return None
    target = field.target_field if field.is_relation else field
    internal = target.get_internal_type()
    if internal == "BooleanField":
        ok = isinstance(value, bool)
    elif internal in ("IntegerField", "BigIntegerField", "PositiveIntegerField"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok or (isinstance(value, str) and "\x00" in value):
        raise ApiError(400, f"invalid value for filter field: {name}", name)
    try:
        parsed = target.to_python(value)
    except Exception as exc:
        raise ApiError(400, f"invalid value for filter field: {name}", name) from exc
    if internal == "DateTimeField" and parsed is None:
        raise ApiError(400, f"invalid value for filter field: {name}", name)
    if internal == "DateTimeField" and parsed.tzinfo is not None:
        try:  # the database compares in UTC: 0001-01-01T00:00:00+01:00 has no UTC value
            parsed = parsed.astimezone(dt.UTC)
        except OverflowError as exc:
            raise ApiError(400, f"invalid value for filter field: {name}", name) from exc
    if isinstance(target, models.EmailField):
        parsed = parsed.lower()
    return parsed


class ListEndpoint(Endpoint):
    """SPEC's list contract, once. A list declares `list_key`, `filter_fields` (API name -> model field
    path) and `response_serializer`, and implements `get_queryset(request)`, already scoped to what the
    caller may see; `select_related`/`prefetch_related` there keep the query count fixed per page."""

    list_key: ClassVar[str]
    filter_fields: ClassVar[Mapping[str, str]]
    order_fields: ClassVar[tuple[str, ...]] = ("created_at", "updated_at")  # besides the filter fields
    default_order: ClassVar[str] = DEFAULT_ORDER
    request_serializer = ListRequest
    read_only = True

    def get_queryset(self, request: Request) -> QuerySet:
        raise NotImplementedError

    def handle(self, request: Request, data: dict) -> dict:
        queryset = self.get_queryset(request)
        model = queryset.model
        filters = data.get("filter", {})
        options = data.get("options", {})
        limit = options.get("limit", DEFAULT_PAGE_SIZE)
        offset = options.get("offset", 0)

        condition = Q()
        for name, value in filters.get("fields", {}).items():
            path = self.filter_fields.get(name)
            if path is None:
                raise ApiError(400, f"unknown filter field: {name}", name)
            field = model._meta.get_field(path)
            parsed = _parse_filter_value(name, field, value)
            condition &= Q(**{f"{path}__isnull": True}) if parsed is None else Q(**{path: parsed})
        if filters.get("tags"):
            condition &= Q(HasTags("tags", filters["tags"]))
        queryset = queryset.filter(condition)

        order_bys = options.get("order_bys") or [self.default_order]
        ordering = [self._order_expression(model, item) for item in order_bys]
        descending = ordering[-1].startswith("-")
        ordering.append("-pk" if descending else "pk")  # CONTRACT 11: ties broken by id

        total = queryset.count()
        page = list(self._page(queryset.order_by(*ordering), offset, limit)) if total > offset else []
        return {
            self.list_key: self.response_serializer(page, many=True, context={"request": request}).data,
            "metadata": {
                "total": total,
                "count": len(page),
                "offset": offset,
                "limit": limit,
                "order_bys": order_bys,
            },
        }

    @staticmethod
    def _page(ordered: QuerySet, offset: int, limit: int) -> QuerySet:
        """A deep page finds its ids first, reading only the index that serves the order (an index-only
        scan) instead of every row before the offset; the rows of the page are then fetched by id."""
        if offset < DEEP_OFFSET:
            return ordered[offset : offset + limit]
        ids = ordered.values("pk")[offset : offset + limit]
        return ordered.filter(pk__in=ids)

    def _order_expression(self, model: type[models.Model], item: str) -> str:
        name = item.removeprefix("!")
        if name in self.order_fields:
            path = name
        elif name in self.filter_fields:
            path = self.filter_fields[name]
        else:
            raise ApiError(400, f"unknown filter field: {name}", "options.order_bys")
        return f"-{path}" if item.startswith("!") else path


__all__ = ["ApiError", "Endpoint", "ListEndpoint", "String", "envelope"]
