"""What the apps' serializers share: the fields every record ends with, and the update request built from
the create request, so that one field's rules are written once."""

from typing import Any

from rest_framework import serializers

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
