"""RFC 7644's messages, apart from the resources themselves (`scim.resources`): a PatchOp's operations, a
query's paging and filter, a ListResponse within its byte budget, and the discovery documents
(ServiceProviderConfig, ResourceTypes, Schemas)."""

import json
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    ETag,
    Filter,
    Group,
    Meta,
    Mutability,
    Patch,
    ResourceType,
    ServiceProviderConfig,
    Sort,
    User,
)

from . import resources
from .services import ScimError

DEFAULT_COUNT = 100
MAX_COUNT = 1000
PATCH_OPS = ("add", "replace", "remove")
MAX_OPERATIONS = 1000  # in one PATCH: docs/scim.md#what-the-service-supports


def page(query: dict) -> tuple[int, int]:
    """RFC 7644 3.4.2.4: `startIndex` (1-based; below 1 counts as 1) and `count` (at most 1000; below 0
    counts as 0)."""
    try:
        start = int(query.get("startIndex", 1))
        count = int(query.get("count", DEFAULT_COUNT))
    except (ValueError, TypeError):
        raise ScimError(400, "startIndex and count must be integers", "invalidValue") from None
    return max(start, 1), min(max(count, 0), MAX_COUNT)


def filter_text(query: dict) -> str | None:
    text = query.get("filter")
    if text is not None and not isinstance(text, str):
        raise ScimError(400, "filter must be a string", "invalidFilter")
    return text or None


def operations(body: dict) -> list[tuple[str, Any, Any]]:
    """A PatchOp's operations (at most MAX_OPERATIONS) as (op, parsed path or None, value): `op` in any
    case (Entra sends `Replace`, `Add`)."""
    found = next((value for key, value in body.items() if key.lower() == "operations"), None)
    if not isinstance(found, list) or not found:
        raise ScimError(400, "Operations must be a non-empty array", "invalidSyntax")
    if len(found) > MAX_OPERATIONS:
        raise ScimError(400, f"a PATCH holds at most {MAX_OPERATIONS} operations", "tooMany")
    parsed = []
    for operation in found:
        if not isinstance(operation, dict):
            raise ScimError(400, "each operation must be an object", "invalidSyntax")
        fields = {str(key).lower(): value for key, value in operation.items()}
        op = fields.get("op")
        if not isinstance(op, str) or op.lower() not in PATCH_OPS:
            raise ScimError(400, "op must be add, replace or remove", "invalidSyntax")
        path = fields.get("path")
        path = resources.parse_path(path) if path not in (None, "") else None
        if path is None and op.lower() != "remove" and not isinstance(fields.get("value"), dict):
            raise ScimError(400, "an operation without a path needs an object value", "invalidValue")
        if path is None and op.lower() == "remove":
            raise ScimError(400, "remove needs a path", "noTarget")
        parsed.append((op.lower(), path, fields.get("value")))
    return parsed


def list_body(total: int, start: int, items: Iterable[dict]) -> bytes:
    """A ListResponse of `items`, written as they come: it ends before the one that would take it past the
    byte budget (docs/api.md#lists; it holds at least one), and `itemsPerPage` says how many it holds."""
    parts: list[bytes] = []
    size, budget = 0, settings.IAM_PAGE_MAX_BYTES
    for item in items:
        written = json.dumps(item, separators=(",", ":")).encode()
        if parts and size + len(written) + 1 > budget:
            break
        parts.append(written)
        size += len(written) + 1
    head = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
        "totalResults": total,
        "startIndex": start,
        "itemsPerPage": len(parts),
    }
    return (
        json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"Resources":[' + b",".join(parts) + b"]}"
    )


# Discovery (RFC 7644 section 4)

# What the service keeps of a User and a Group, and so what its schemas publish: a directory (or a
# checker) learns from them which attributes come back. Others are accepted on writes and not kept.
# attribute -> (its sub-attributes kept or None, its mutability, required): what the service keeps of a
# User and a Group, as its schemas publish it. The name is the account's one name (`displayName`,
# which `name.formatted` repeats); the address is `userName`, set once, which `emails` repeats.
USER_ATTRIBUTES = {
    "userName": (None, Mutability.immutable, True),
    "name": (("formatted",), Mutability.read_only, False),
    "displayName": (None, Mutability.read_write, True),
    "active": (None, Mutability.read_write, True),
    "emails": (("value", "type", "primary"), Mutability.read_only, False),
}
GROUP_ATTRIBUTES = {
    "displayName": (None, Mutability.read_write, True),
    "members": (("value", "$ref"), Mutability.read_write, False),
}
READ_ONLY_SUB_ATTRIBUTES: set[tuple[str, str]] = set()


def _schema(model: type, kept: dict) -> Any:
    """`model`'s RFC 7643 schema (from scim2-models) with only the attributes kept, as they are kept."""
    schema = model.to_schema()
    attributes = []
    for item in schema.attributes:
        if item.name not in kept:
            continue
        subs, item.mutability, item.required = kept[item.name]
        if subs is not None:
            item.sub_attributes = [sub for sub in item.sub_attributes if sub.name in subs]
            for sub in item.sub_attributes:
                if (
                    item.mutability == Mutability.read_only
                    or (item.name, sub.name) in READ_ONLY_SUB_ATTRIBUTES
                ):
                    sub.mutability = Mutability.read_only
        attributes.append(item)
    schema.attributes = attributes
    return schema


def service_provider_config(base: str) -> dict:
    config = ServiceProviderConfig(
        documentation_uri=None,
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_COUNT),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        authentication_schemes=[
            AuthenticationScheme(
                type="oauthbearertoken",
                name="Bearer token",
                description="A SCIM token of this workspace (POST /scim-tokens/create)",
                primary=True,
            )
        ],
        meta=Meta(resource_type="ServiceProviderConfig", location=f"{base}/ServiceProviderConfig"),
    )
    return resources.dump(config)


def resource_types(base: str) -> list[dict]:
    types = []
    for model, name in ((User, "User"), (Group, "Group")):
        resource_type = ResourceType.from_resource(model)
        resource_type.meta = Meta(resource_type="ResourceType", location=f"{base}/ResourceTypes/{name}")
        types.append(resources.dump(resource_type))
    return types


def schemas(base: str) -> list[dict]:
    found = []
    for model, kept in ((User, USER_ATTRIBUTES), (Group, GROUP_ATTRIBUTES)):
        schema = _schema(model, kept)
        schema.meta = Meta(resource_type="Schema", location=f"{base}/Schemas/{schema.id}")
        found.append(resources.dump(schema))
    return found
