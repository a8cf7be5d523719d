"""Strict request fields. DRF's own fields coerce (`1` becomes `"1"`, `"yes"` becomes `True`);
docs/api.md#errors wants a field of the wrong type refused, so these accept exactly one JSON type each."""

import json
import re
import uuid
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

META_MAX_BYTES = 16 * 1024  # docs/api.md#validation
SCHEMA_VERSION_MAX = 32
TAGS_MAX = 50
TAG_MAX_LENGTH = 64
NAME_MAX_LENGTH = 255
DESCRIPTION_MAX = 4096
EMAIL_MAX_LENGTH = 254
# Used with fullmatch(): a trailing "$" would let "name\n" through.
SLUG_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
PERMISSION_NAME_RE = re.compile(r"\*|(\*|[A-Za-z0-9_.-]+):(\*|[A-Za-z0-9_.-]+)")
PERMISSION_NAME_MAX = 128


class Invalid(serializers.ValidationError):
    """A validation failure whose message is already the API's wording: shown as is."""

    def __init__(self, message: str):
        super().__init__(message, code="iam")


class String(serializers.CharField):
    default_error_messages = {"not_a_string": "must be a string"}
    defaults: ClassVar[dict[str, Any]] = {}  # a subclass's keyword arguments, which a declaration overrides

    def __init__(self, **kwargs):
        super().__init__(**{"trim_whitespace": False, **self.defaults, **kwargs})

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class Name(String):
    defaults = {"max_length": NAME_MAX_LENGTH}


class Description(String):
    """An optional free text: null or blank clears it."""

    defaults = {"required": False, "allow_null": True, "allow_blank": True, "max_length": DESCRIPTION_MAX}


class Choice(serializers.ChoiceField):
    """One of the choices, as a JSON string (no coercion of other types: DRF's own takes `1` for `"1"`).
    The refusal lists the choices; `listed=False` keeps the bare `invalid <field>` (a membership's scope
    and status)."""

    def __init__(self, choices, *, listed: bool = True, **kwargs):
        self.listed = listed
        super().__init__(choices, **kwargs)

    def to_internal_value(self, data) -> str:
        if not isinstance(data, str) or data not in self.choices:
            if not self.listed:
                self.fail("invalid_choice", input=data)
            raise Invalid(f"{self.field_name} must be one of {', '.join(self.choices)}")
        return data


def is_address(value: str) -> bool:
    """The one rule for an e-mail address, wherever one is taken (docs/api.md#validation): valid as
    Django's validator reads it, at most 254 characters, exactly one `@`, no quoted local part, no
    comment and no escape, so that every service reads the same domain from it
    (`"victim@corp-a.test"@evil-m.test` is refused: a reader splitting at the first `@` would see
    `corp-a.test`)."""
    if len(value) > EMAIL_MAX_LENGTH or value.count("@") != 1 or any(char in value for char in '"()\\'):
        return False
    try:
        EmailValidator()(value)
    except ValidationError:
        return False
    return True


class Email(String):
    """An address (`is_address`), trimmed and lower-cased; any other: 400 `invalid <field>`."""

    default_error_messages = {"invalid": "invalid e-mail address"}
    defaults = {"max_length": EMAIL_MAX_LENGTH}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data).strip().lower()
        if not is_address(value):
            self.fail("invalid")
        return value


class Url(String):
    defaults = {"max_length": 2048}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            URLValidator(schemes=["http", "https"])(value)
        except Exception:
            self.fail("invalid")
        return value


class Slug(String):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not SLUG_RE.fullmatch(value):
            self.fail("invalid")
        return value


class PermissionName(String):
    default_error_messages = {"not_a_permission_name": "must have the form resource:action"}
    defaults = {"max_length": PERMISSION_NAME_MAX}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not PERMISSION_NAME_RE.fullmatch(value):
            self.fail("not_a_permission_name")
        return value


class Boolean(serializers.BooleanField):
    default_error_messages = {"not_a_boolean": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_a_boolean")
        return data


class Integer(serializers.IntegerField):
    default_error_messages = {"not_an_integer": "must be an integer"}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("not_an_integer")
        return super().to_internal_value(data)


class Uuid(serializers.UUIDField):
    default_error_messages = {"not_a_uuid_string": "must be a UUID string"}

    def to_internal_value(self, data: Any) -> uuid.UUID:
        if isinstance(data, uuid.UUID):
            return data
        if not isinstance(data, str):
            self.fail("not_a_uuid_string")
        return super().to_internal_value(data)


class UuidList(serializers.ListField):
    child = Uuid()

    def to_internal_value(self, data: Any) -> list[uuid.UUID]:
        if isinstance(data, list):
            try:
                data = [uuid.UUID(item) for item in data]
            except (TypeError, ValueError, AttributeError):
                raise Invalid(f"{self.field_name} must be an array of UUIDs") from None
        values = super().to_internal_value(data)
        return list(dict.fromkeys(values))  # duplicates name the same record once


class DateTime(serializers.DateTimeField):
    def to_internal_value(self, value: Any):
        try:
            parsed = parse_datetime(value) if isinstance(value, str) else None
        except ValueError:  # well-formed but no such time: 2024-02-30
            parsed = None
        if parsed is None:
            self.fail("invalid", format="RFC 3339")
        return super().to_internal_value(value)


class Tags(serializers.ListField):
    child = String(min_length=1, max_length=TAG_MAX_LENGTH)

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", TAGS_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, list) and not all(
            isinstance(tag, str) and 1 <= len(tag) <= TAG_MAX_LENGTH for tag in data
        ):
            raise Invalid(f"{self.field_name} must be strings of 1 to {TAG_MAX_LENGTH} characters")
        return list(dict.fromkeys(super().to_internal_value(data)))


@extend_schema_field(OpenApiTypes.OBJECT)
class JsonObject(serializers.Field):
    """`meta` and `config`: an object of at most 16 KiB carrying a string `schema_version`
    (docs/api.md#validation)."""

    default_error_messages = {"invalid": "must be an object"}

    def __init__(self, *, require_schema_version: bool = True, **kwargs):
        self.require_schema_version = require_schema_version
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise Invalid(f"{self.field_name} must be an object")
        if len(json.dumps(data, separators=(",", ":")).encode()) > META_MAX_BYTES:
            raise Invalid(f"{self.field_name} must be at most 16 KiB")
        version = data.get("schema_version")
        if version is None and not self.require_schema_version:
            return data
        if version is not None and not isinstance(version, str):
            raise Invalid(f"{self.field_name}.schema_version must be a string")
        if not version:
            raise Invalid(f"{self.field_name}.schema_version required")
        if len(version) > SCHEMA_VERSION_MAX:
            raise Invalid(f"{self.field_name}.schema_version must be at most {SCHEMA_VERSION_MAX} characters")
        return data

    def to_representation(self, value: Any) -> Any:
        return value
