"""Lists (docs/api.md#lists): `ListEndpoint`, the one implementation of
filters, ordering and pages every list endpoint shares."""

import datetime as dt
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Prefetch, Q, QuerySet
from rest_framework import serializers
from rest_framework.request import Request

from iam.http.encoder import FIRST_READ, Encoder, to_json
from iam.http.endpoint import EncodedJson, Endpoint
from iam.http.errors import ApiError
from iam.http.fields import Integer, Invalid, Tags
from iam.http.lookups import HasTags
from iam.platform import counts, timeouts

MAX_PAGE_SIZE = 1000  # docs/api.md#lists
DEFAULT_PAGE_SIZE = 100  # docs/api.md#lists
DEFAULT_ORDER = "!created_at"  # docs/api.md#lists
MAX_ORDER_BYS = 8  # docs/api.md#validation
DEEP_OFFSET = 1000  # from here a page reads its ids first (ListEndpoint._page)


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
    """The API's list contract, once. A list declares `list_key`, `filter_fields` (API name -> model field
    path) and `response_serializer`, and implements `get_queryset(request)`, already scoped to what the caller
    may see; `select_related` there keeps the query count fixed per read. The many-to-many relations a
    `ResourceSerializer` response serializer nests are read by the page's `iam.http.encoder.Encoder` (its
    `prefetch_related` is set aside), each related row once per page. A page is read and written a few records
    at a time and ends at its byte budget (docs/api.md#lists), so a worker never holds much more than the page
    it answers. A nested relation the encoder does not read itself (a reverse foreign key, such as an SSO
    connection's domains) is named in `page_prefetch` and prefetched with each
    read of the page.
    """

    list_key: ClassVar[str]
    filter_fields: ClassVar[Mapping[str, str]]
    order_fields: ClassVar[tuple[str, ...]] = ("created_at", "updated_at")  # besides the filter fields
    default_order: ClassVar[str] = DEFAULT_ORDER
    page_prefetch: ClassVar[tuple[str | Prefetch, ...]] = ()
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
        by_column = []  # (column, value): what the database's counts may answer (iam.platform.counts)
        for name, value in filters.get("fields", {}).items():
            path = self.filter_fields.get(name)
            if path is None:
                raise ApiError(400, f"unknown filter field: {name}", name)
            field = model._meta.get_field(path)
            parsed = _parse_filter_value(name, field, value)
            by_column.append((field.column, parsed))
            condition &= Q(**{f"{path}__isnull": True}) if parsed is None else Q(**{path: parsed})
        if filters.get("tags"):
            if not any(field.name == "tags" for field in model._meta.concrete_fields):
                # sessions, audit entries: what carries no tags is not filtered by them
                raise ApiError(400, "unknown filter field: tags", "filter.tags")
            condition &= Q(HasTags("tags", filters["tags"]))
        scoped, queryset = queryset, queryset.filter(condition)

        order_bys = options.get("order_bys") or [self.default_order]
        ordering = [self._order_expression(model, item) for item in order_bys]
        descending = ordering[-1].startswith("-")
        ordering.append("-pk" if descending else "pk")  # docs/api.md#lists: ties broken by id

        # An exact total from the database's counts where they hold it (a million rows), else count(*).
        workspace = getattr(request, "workspace", None)  # None on global lists
        workspace_id = None if workspace is None else workspace.pk
        total = None if filters.get("tags") else counts.total(scoped, by_column, workspace_id=workspace_id)
        if total is None:
            total = queryset.count()
        records: Iterator[tuple[Encoder, Any]] = iter(())
        if total > offset:
            encoder = Encoder(self.response_serializer(context={"request": request}))
            ordered = queryset.prefetch_related(None).order_by(*ordering)
            ordered = ordered.prefetch_related(*self.page_prefetch)
            records = ((encoder, record) for record in self._records(ordered, offset, limit, encoder))
        return encoded_page(
            self.list_key, records, total=total, offset=offset, limit=limit, order_bys=order_bys
        )

    @classmethod
    def _records(cls, ordered: QuerySet, offset: int, limit: int, encoder: Encoder) -> Iterator[Any]:
        """The page's records, each batch `load`ed by the encoder, read a few at a time
        (`Encoder.rows_to_read`): the first read as one query; past it, the ids of the rest of the page
        in one (so they come from one snapshot), and their rows by id. A record the first read holds is
        not repeated."""
        first = list(cls._page(encoder.prepare(ordered), offset, min(limit, encoder.rows_to_read())))
        encoder.load(first)
        yield from first
        if len(first) == limit or len(first) < min(limit, FIRST_READ):
            return
        seen = {record.pk for record in first}
        rest = ordered.values_list("pk", flat=True)[offset + len(first) : offset + limit]
        ids = [pk for pk in rest if pk not in seen]
        while ids:
            read = encoder.rows_to_read()
            batch, ids = ids[:read], ids[read:]
            rows = {record.pk: record for record in encoder.prepare(ordered.filter(pk__in=batch))}
            found = [rows[pk] for pk in batch if pk in rows]
            encoder.load(found)
            yield from found

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


def encoded_page(
    list_key: str,
    records: Iterable[tuple[Encoder, Any]],
    *,
    total: int,
    offset: int,
    limit: int,
    order_bys: list[str],
) -> EncodedJson:
    """A list page of `records` (each with the encoder that writes it, which has `load`ed it), read as
    they are written. docs/api.md#lists: the page ends before the record that would take it past its byte
    budget (it holds at least one); records are read and written a few at a time, so no more is built
    than it holds (`ListEndpoint`, and `invitations/mine`, whose page comes from two tables)."""
    parts, size, count = [b"{" + to_json(list_key) + b":["], 0, 0
    budget = settings.IAM_PAGE_MAX_BYTES
    for encoder, record in records:
        timeouts.check_deadline()
        written = encoder.joined(record, budget - size)
        if isinstance(written, bytes) and not (count and size + len(written) > budget):
            parts += [b",", written] if count else [written]
            size, count = size + len(written), count + 1
            continue
        if count:
            break
        # The first record alone passes the budget (a membership of 50 roles of 500 large permissions:
        # hundreds of megabytes): the page is that record, written as it is sent.
        metadata = {"total": total, "count": 1, "offset": offset, "limit": limit, "order_bys": order_bys}
        tail = b'],"metadata":' + to_json(metadata) + b"}"
        return EncodedJson(itertools.chain(parts, written, [tail]))
    metadata = {"total": total, "count": count, "offset": offset, "limit": limit, "order_bys": order_bys}
    parts.append(b'],"metadata":' + to_json(metadata) + b"}")
    return EncodedJson(parts)
