"""What the apps' serializers share: the fields every record ends with, and the update request built from
the create request, so that one field's rules are written once."""

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

from .fields import JsonObject, Tags

# The fields every record of the API ends with (CONTRACT 12), after its own.
RECORD_TAIL = ["tags", "meta", "created_at", "updated_at"]


# The base of a create request: its own fields, then every record's `tags` and `meta` (CONTRACT 12), last
# as SPEC lists them. (Comments, not docstrings, here: the OpenAPI document would show them on every
# request.)
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
# then the create request's fields, each optional (an update changes only what it sends); with
# `RecordRequest` in its place, only `tags` and `meta`. A field the class
# declares itself replaces the create request's of the same name and goes last; `name = None` removes one.
class UpdateRequest(serializers.Serializer):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        create = cls.__bases__[-1]
        if not issubclass(create, serializers.Serializer) or create is UpdateRequest:
            raise TypeError(f"{cls.__name__}: the last base must be the create request")
        cls.optional_fields = frozenset(create._declared_fields)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in self.optional_fields & fields.keys():  # not one the class removed (`name = None`)
            fields[name].required = False
        return fields


# Response records (issue 14): DRF's `to_representation` walks every field through `get_attribute`,
# `SkipField` handling and a `to_representation` call, ~30 Python calls a value; a list page of 100
# memberships, each with its roles and their permissions, spends thousands of them. `Record` compiles,
# once per serializer class, what each readable field needs and keeps DRF's output byte for byte: a
# field read from one column gets `getattr` and a converter chosen by its field class (the same
# conversion DRF's would do), a nested `many=True` serializer over a many-to-many relation maps its
# child over `.all()` (prefetched by the lists), and any other field goes DRF's own way.
class Record(serializers.ModelSerializer):
    def to_representation(self, instance: Any) -> dict[str, Any]:
        plan = self.__dict__.get("_bound_plan")
        if plan is None:
            plan = self._bound_plan = _bind(self, _class_plan(self))
        if not isinstance(instance, models.Model):
            return super().to_representation(instance)
        ret = {}
        for name, attr, convert, field in plan:
            if attr is None:  # DRF's own way (Serializer.to_representation)
                try:
                    value = field.get_attribute(instance)
                except SkipField:
                    continue
                check = value.pk if isinstance(value, PKOnlyObject) else value
                ret[name] = None if check is None else field.to_representation(value)
            else:
                value = getattr(instance, attr)
                ret[name] = value if convert is None or value is None else convert(value)
        return ret


_COLUMN, _MANY, _DRF = "column", "many", "drf"
_AS_IS = (serializers.JSONField, serializers.ReadOnlyField)
_STR = (serializers.CharField, serializers.EmailField, serializers.URLField, serializers.SlugField)
_PLANS: dict[type, tuple[tuple[str, str | None, str], ...]] = {}


def _class_plan(serializer: Record) -> tuple[tuple[str, str | None, str], ...]:
    """(field name, attribute read, how) for each readable field, computed once per serializer class."""
    cls = type(serializer)
    if cls not in _PLANS:
        meta = serializer.Meta.model._meta
        columns = {field.attname for field in meta.concrete_fields}
        relations = {field.name for field in meta.many_to_many}
        plan = []
        for field in serializer._readable_fields:
            source = field.source_attrs
            attr = source[0] if len(source) == 1 else None
            if type(field) is serializers.ListSerializer and attr in relations:
                plan.append((field.field_name, attr, _MANY))
            elif attr in columns and not isinstance(field, serializers.BaseSerializer):
                plan.append((field.field_name, attr, _COLUMN))
            else:
                plan.append((field.field_name, None, _DRF))
        _PLANS[cls] = tuple(plan)
    return _PLANS[cls]


def _bind(serializer: Record, plan) -> list[tuple[str, str | None, Callable | None, serializers.Field]]:
    """The class's plan with this serializer's own fields and converters."""
    fields = serializer.fields
    return [
        (name, attr, _converter(fields[name]) if how != _DRF else None, fields[name])
        for name, attr, how in plan
    ]


def _converter(field: serializers.Field) -> Callable | None:
    """What turns a non-null value of `field` into DRF's output for it (None: the value as is)."""
    kind = type(field)
    if kind is serializers.ListSerializer:
        child = field.child.to_representation
        return lambda manager: [child(item) for item in manager.all()]
    if kind in _AS_IS and not getattr(field, "binary", False):
        return None
    if kind in _STR or (kind is serializers.UUIDField and field.uuid_format == "hex_verbose"):
        return str
    if kind is serializers.DateTimeField and not hasattr(field, "format") and not hasattr(field, "timezone"):
        return partial(_iso_datetime, field)
    return field.to_representation


def _iso_datetime(field: serializers.DateTimeField, value: Any) -> Any:
    """DateTimeField.to_representation under ISO 8601 and USE_TZ: in the current time zone, `Z` for UTC."""
    if (
        isinstance(value, datetime)
        and value.tzinfo is not None
        and settings.USE_TZ
        and api_settings.DATETIME_FORMAT.lower() == ISO_8601
    ):
        text = value.astimezone(timezone.get_current_timezone()).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return field.to_representation(value)
