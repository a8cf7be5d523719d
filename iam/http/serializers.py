"""What the apps' serializers share: the fields every record ends with, and the update request built from
the create request, so that one field's rules are written once."""

from collections.abc import Callable, Iterable
from datetime import tzinfo
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Prefetch
from django.db.models.constants import LOOKUP_SEP
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

from .fields import JsonObject, Tags

# The fields every record of the API ends with (docs/api.md#validation), after its own.
RECORD_TAIL = ["tags", "meta", "created_at", "updated_at"]


# The base of a create request: its own fields, then every record's `tags` and `meta`
# (docs/api.md#validation), last as the API lists them. (Comments, not docstrings, here: the OpenAPI document
# would show them on every request.)
class RecordRequest(serializers.Serializer):
    tags = Tags()
    meta = JsonObject()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in ("tags", "meta"):
            if name in fields:
                fields[name] = fields.pop(name)
        return fields


# The base of `class XUpdateRequest(UpdateRequest, XRef, XCreateRequest)`: the reference's fields first,
# then those of the create request it extends (the `RecordRequest` among its bases; `RecordRequest` itself:
# only `tags` and `meta`), each optional: an update changes only what it sends. A field the class declares
# itself replaces the create request's of the same name and goes last; `name = None` removes one.
class UpdateRequest(serializers.Serializer):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, RecordRequest):
            raise TypeError(f"{cls.__name__}: an update request extends its create request (a RecordRequest)")

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        creates = [
            c for c in type(self).__mro__ if issubclass(c, RecordRequest) and not issubclass(c, UpdateRequest)
        ]
        for name in {name for create in creates for name in create._declared_fields} & fields.keys():
            fields[name].required = False  # (not one the class removed: `name = None`)
        return fields


# Response records: DRF's `to_representation` walks every field through `get_attribute`,
# `SkipField` handling and a `to_representation` call, ~30 Python calls a value; a list page of 100
# memberships, each with its roles and their permissions, spends thousands of them. `ResourceSerializer`
# compiles, once per serializer class, what each readable field needs and keeps DRF's output byte for byte: a
# field read from one column gets `getattr` and a converter chosen by its field class (the same conversion
# DRF's would do; a date-time's time zone is looked up once per record tree, not per value), a nested
# `many=True` record serializer over a many-to-many relation maps its child's plan over the prefetched rows,
# and any other field goes DRF's own way.
class ResourceSerializer(serializers.ModelSerializer):
    def to_representation(self, instance: Any) -> dict[str, Any]:
        if not isinstance(instance, models.Model):
            return super().to_representation(instance)
        return self.represent(instance, _iso_zone())

    def represent(self, instance: models.Model, zone: tzinfo | None) -> dict[str, Any]:
        """The record as DRF gives it; `zone`: the time zone of ISO 8601 date-times, None: DRF's way."""
        return self.represent_fields(instance, zone, self.bound_plan())

    def bound_plan(self) -> list[tuple[str, str, str | None, Callable | None, serializers.Field]]:
        plan = self.__dict__.get("_bound_plan")
        if plan is None:
            plan = self._bound_plan = _bind(self, _class_plan(self))
        return plan

    def represent_fields(self, instance: models.Model, zone: tzinfo | None, plan: Iterable) -> dict[str, Any]:
        """`represent` of the fields of `plan` (a part of `bound_plan()`)."""
        ret = {}
        for name, how, attr, convert, field in plan:
            if how is _COLUMN:
                value = getattr(instance, attr)
                ret[name] = value if convert is None or value is None else convert(value)
            elif how is _TIME:
                value = getattr(instance, attr)
                if value is None:
                    ret[name] = None
                elif zone is None or value.tzinfo is None:
                    ret[name] = field.to_representation(value)
                else:
                    text = value.astimezone(zone).isoformat()
                    ret[name] = text[:-6] + "Z" if text.endswith("+00:00") else text
            elif how is _MANY:
                rows = _prefetched(instance, attr)
                ret[name] = [convert(row, zone) for row in rows]
            else:  # DRF's own way (Serializer.to_representation)
                try:
                    value = field.get_attribute(instance)
                except SkipField:
                    continue
                check = value.pk if isinstance(value, PKOnlyObject) else value
                ret[name] = None if check is None else field.to_representation(value)
        return ret


_COLUMN, _TIME, _MANY, _DRF = "column", "time", "many", "drf"
_AS_IS = (serializers.JSONField, serializers.ReadOnlyField)
_STR = (serializers.CharField, serializers.EmailField, serializers.URLField, serializers.SlugField)
_PLANS: dict[type, tuple[tuple[str, str, str | None], ...]] = {}


def _class_plan(serializer: ResourceSerializer) -> tuple[tuple[str, str, str | None], ...]:
    """(field name, how, attribute read) for each readable field, computed once per serializer class."""
    cls = type(serializer)
    if cls not in _PLANS:
        meta = serializer.Meta.model._meta
        columns = {field.attname for field in meta.concrete_fields}
        relations = {field.name for field in meta.many_to_many}
        plan = []
        for field in serializer._readable_fields:
            source = field.source_attrs
            attr = source[0] if len(source) == 1 else None
            if (
                type(field) is serializers.ListSerializer
                and isinstance(field.child, ResourceSerializer)
                and attr in relations
            ):
                plan.append((field.field_name, _MANY, attr))
            elif attr in columns and not isinstance(field, serializers.BaseSerializer):
                simple_time = not hasattr(field, "format") and not hasattr(field, "timezone")
                time = type(field) is serializers.DateTimeField and simple_time
                plan.append((field.field_name, _TIME if time else _COLUMN, attr))
            else:
                plan.append((field.field_name, _DRF, None))
        _PLANS[cls] = tuple(plan)
    return _PLANS[cls]


def _bind(
    serializer: ResourceSerializer, plan
) -> list[tuple[str, str, str | None, Callable | None, serializers.Field]]:
    """The class's plan with this serializer's own fields and converters."""
    fields = serializer.fields
    return [(name, how, attr, _converter(fields[name], how), fields[name]) for name, how, attr in plan]


def _converter(field: serializers.Field, how: str) -> Callable | None:
    """What turns a non-null value of a column field into DRF's output for it (None: the value as is); for
    a nested many, its child's `represent`."""
    kind = type(field)
    if how == _MANY:
        return field.child.represent
    if how != _COLUMN or (kind in _AS_IS and not getattr(field, "binary", False)):
        return None
    if kind in _STR or (kind is serializers.UUIDField and field.uuid_format == "hex_verbose"):
        return str
    return field.to_representation


def _iso_zone() -> tzinfo | None:
    """DateTimeField.to_representation's time zone when it writes ISO 8601 (then `Z` for UTC); None when
    it does anything else (the field's own way then)."""
    if settings.USE_TZ and str(api_settings.DATETIME_FORMAT).lower() == ISO_8601:  # None: as is
        return timezone.get_current_timezone()
    return None


def prefetch(path: str) -> Prefetch:
    """`prefetch_related` of a many-to-many relation a `ResourceSerializer` serializes (`"roles"`, then
    `"roles__permissions"` for theirs): each instance gets its rows as a plain list (Django's `to_attr`).
    Django's own cache builds a manager and a filtered queryset per instance to hold them, ~0.1 ms each:
    a third of a page of 100 memberships."""
    *through, relation = path.split(LOOKUP_SEP)
    lookup = LOOKUP_SEP.join([*(PREFETCHED + step for step in through), relation])
    return Prefetch(lookup, to_attr=PREFETCHED + relation)


PREFETCHED = "prefetched_"


def _prefetched(instance: models.Model, relation: str) -> Iterable[models.Model]:
    """The rows of a many-to-many relation: the prefetched ones (`prefetch`, or `prefetch_related`)
    without building its manager, else its `.all()` (a query, as DRF would make)."""
    rows = getattr(instance, PREFETCHED + relation, None)
    if rows is None:
        rows = getattr(instance, "_prefetched_objects_cache", {}).get(relation)
    return getattr(instance, relation).all() if rows is None else rows


def changes_of(data: dict, *identifiers: str) -> dict:
    """An update's fields: the validated body less the keys that name the object or its references."""
    return {key: value for key, value in data.items() if key not in identifiers}
