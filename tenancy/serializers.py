import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from iam.http.endpoint import require_one
from iam.http.fields import (
    NAME_MAX_LENGTH,
    Boolean,
    Description,
    Invalid,
    JsonObject,
    Name,
    Slug,
    String,
    Uuid,
)
from iam.http.serializers import RECORD_TAIL, RecordRequest, ResourceSerializer, UpdateRequest

from .models import Project, Workspace

CODE_MAX = 64


LOGO_URL_MAX = 2048
_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
_HTTPS_URL = URLValidator(schemes=["https"])


class WorkspaceBrandingSerializer(serializers.Serializer):
    """A workspace's look on the hosted pages shown for it; every key is optional."""

    display_name = serializers.CharField(required=False, max_length=NAME_MAX_LENGTH)
    logo_url = serializers.URLField(required=False, max_length=LOGO_URL_MAX, help_text="an https URL")
    primary_color = serializers.RegexField(r"^#[0-9a-f]{6}$", required=False, help_text="#rrggbb")


@extend_schema_field(WorkspaceBrandingSerializer)
class Branding(serializers.Field):
    """docs/pages.md#branding: a workspace's look on the pages shown for it. Every key is optional (null
    or absent: not set); the object replaces the stored one."""

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise Invalid("branding must be an object")
        for key in data:
            if key not in ("display_name", "logo_url", "primary_color"):
                raise Invalid(f"unknown branding field: {key}")
        branding = {}
        name = data.get("display_name")
        if name is not None:
            if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX_LENGTH:
                raise Invalid(f"branding.display_name must be a string of 1 to {NAME_MAX_LENGTH} characters")
            branding["display_name"] = name.strip()
        url = data.get("logo_url")
        if url is not None:
            if not isinstance(url, str) or len(url) > LOGO_URL_MAX or not _is_https_url(url):
                raise Invalid(f"branding.logo_url must be an https URL of at most {LOGO_URL_MAX} characters")
            branding["logo_url"] = url
        color = data.get("primary_color")
        if color is not None:
            if not isinstance(color, str) or not _COLOR.fullmatch(color):
                raise Invalid("branding.primary_color must be a color like #1a6fd0")
            branding["primary_color"] = color.lower()
        return branding

    def to_representation(self, value: dict) -> dict:
        return value


def _is_https_url(url: str) -> bool:
    try:
        _HTTPS_URL(url)
    except ValidationError:
        return False
    return True


class WorkspaceSerializer(ResourceSerializer):
    branding = Branding()

    class Meta:
        model = Workspace
        fields = ["id", "name", "slug", "description", "config", "mfa_required", "branding", *RECORD_TAIL]


class WorkspaceRef(serializers.Serializer):
    id = Uuid(required=False)
    slug = String(required=False, max_length=63)

    def validate(self, attrs: dict) -> dict:
        return require_one(attrs, "id", "slug")


class WorkspaceCreateRequest(RecordRequest):
    name = Name()
    slug = Slug(max_length=63)
    description = Description()
    config = JsonObject()
    mfa_required = Boolean(required=False)
    branding = Branding(required=False)


class WorkspaceUpdateRequest(UpdateRequest, WorkspaceRef, WorkspaceCreateRequest):
    pass  # its slug is the reference's: an update does not change it


class WorkspaceDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()


class ProjectSerializer(ResourceSerializer):
    class Meta:
        model = Project
        fields = [
            "id",
            "workspace_id",
            "name",
            "code",
            "description",
            "config",
            "tags",
            "meta",
            "created_by",
            "created_at",
            "updated_at",
        ]


class ProjectRef(serializers.Serializer):
    id = Uuid(required=False)
    code = String(required=False, max_length=CODE_MAX)

    def validate(self, attrs: dict) -> dict:
        return require_one(attrs, "id", "code")


class ProjectCreateRequest(RecordRequest):
    name = Name()
    code = String(required=False, allow_null=True, min_length=1, max_length=CODE_MAX)
    description = Description()
    config = JsonObject()


class ProjectUpdateRequest(UpdateRequest, ProjectRef, RecordRequest):
    name = Name(required=False)
    new_code = String(required=False, allow_null=True, min_length=1, max_length=CODE_MAX)
    description = Description()
    config = JsonObject(required=False)


class ProjectDeleted(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    code = serializers.CharField(allow_null=True)
