"""SCIM resources as the directory sees them (RFC 7643): a User is an account with its workspace
membership, a Group a role of the workspace. The models and their JSON come from `scim2-models`; the
filter grammar too (`ScimFilter`, `Path`), and this module turns its syntax tree into a query over the
few attributes the service filters on."""

import json
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import Q
from scim2_models import (
    Context,
    Email,
    EnterpriseUser,
    Group,
    Meta,
    Name,
    User,
)
from scim2_models.exceptions import InvalidFilterException, InvalidPathException
from scim2_models.path import CompareOperator, Comparison, LogicalExpr, LogicalOperator, Path, ScimFilter

from accounts.models import normalize_email
from rbac.models import Membership, Role

from .models import ScimGroup, ScimUser
from .services import ScimError

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
RESPONSE = Context.RESOURCE_QUERY_RESPONSE
MAX_FILTER_LENGTH = 4096
MAX_MEMBERS_SHOWN = 10_000


def dump(model: Any) -> dict:
    return model.model_dump(scim_ctx=RESPONSE)


# Attributes


def attribute(name: str, uri: str | None, schema: str) -> str:
    """An attribute's name in lower case (RFC 7643 2.1: names are case-insensitive), with the core
    schema's URN prefix allowed."""
    if uri is not None and uri.lower() != schema.lower():
        return f"{uri.lower()}:{name.lower()}"
    return name.lower()


def as_bool(value: Any, name: str) -> bool:
    """A boolean, or the strings Microsoft Entra ID sends for one (`"True"`, `"False"`, any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ScimError(400, f"{name} must be a boolean", "invalidValue")


def as_text(value: Any, name: str, *, limit: int = 255, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ScimError(400, f"{name} must be a string", "invalidValue")
    if len(value) > limit or "\x00" in value:
        raise ScimError(400, f"{name} is too long or malformed", "invalidValue")
    return value


# Filters


def parse_filter(text: str) -> Any:
    if len(text) > MAX_FILTER_LENGTH:
        raise ScimError(400, "filter too long", "invalidFilter")
    try:
        return ScimFilter(text).ast
    except (InvalidFilterException, ValueError, TypeError, RecursionError) as exc:
        raise ScimError(400, f"invalid filter: {exc}", "invalidFilter") from None


def filter_query(node: Any, attributes: dict[str, Any], schema: str) -> Q:
    """`eq` on the attributes named (lower-case name -> a function of the value that answers a `Q`),
    combined with `and` and `or`; anything else is 400 invalidFilter."""
    if isinstance(node, LogicalExpr) and node.op in (LogicalOperator.and_, LogicalOperator.or_):
        parts = [filter_query(term, attributes, schema) for term in node.terms]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined & part if node.op == LogicalOperator.and_ else combined | part
        return combined
    if isinstance(node, Comparison) and node.op == CompareOperator.eq:
        path = node.attr_path
        name = attribute(path.attr, path.uri, schema)
        if path.sub_attr is not None:
            name = f"{name}.{path.sub_attr.lower()}"
        if name in attributes and isinstance(node.value, str):
            return attributes[name](node.value)
    raise ScimError(400, f"unsupported filter: {node}", "invalidFilter")


def user_filter(workspace_id: Any, text: str) -> Q:
    """`eq` on `userName`, `emails.value` (the account's address, compared case-insensitively) and
    `externalId`."""

    def by_email(value: str) -> Q:
        return Q(account__email=normalize_email(value))

    def by_external_id(value: str) -> Q:
        linked = ScimUser.objects.filter(workspace_id=workspace_id, external_id=value).values("account_id")
        return Q(account_id__in=linked)

    attributes = {
        "username": by_email,
        "emails.value": by_email,
        "emails": by_email,
        "externalid": by_external_id,
    }
    return filter_query(parse_filter(text), attributes, USER_SCHEMA)


def group_filter(text: str) -> Q:
    """`eq` on `displayName`, `externalId` and `id`: how directories look up a group before creating
    it."""

    def by_external_id(value: str) -> Q:
        return Q(pk__in=ScimGroup.objects.filter(external_id=value).values("role_id"))

    attributes = {"displayname": lambda value: Q(name=value), "externalid": by_external_id, "id": _by_id}
    return filter_query(parse_filter(text), attributes, GROUP_SCHEMA)


def _by_id(value: str) -> Q:
    try:
        return Q(pk=uuid.UUID(value))
    except ValueError:
        return Q(pk__in=[])


def parse_path(text: Any) -> Any:
    """A PATCH operation's `path` as `scim2-models` parses it: an attribute path, or a value path with a
    filter (`members[value eq "<id>"]`)."""
    if not isinstance(text, str) or len(text) > MAX_FILTER_LENGTH:
        raise ScimError(400, "path must be a string", "invalidPath")
    try:
        return Path(text).ast
    except (InvalidPathException, InvalidFilterException, ValueError, TypeError, RecursionError) as exc:
        raise ScimError(400, f"invalid path: {exc}", "invalidPath") from None


def filtered_values(node: Any) -> list[str]:
    """The member ids a value filter names: `value eq "<id>"`, or an `or` of them."""
    if isinstance(node, LogicalExpr) and node.op == LogicalOperator.or_:
        return [value for term in node.terms for value in filtered_values(term)]
    if (
        isinstance(node, Comparison)
        and node.op == CompareOperator.eq
        and node.attr_path.attr.lower() == "value"
        and node.attr_path.sub_attr is None
        and isinstance(node.value, str)
    ):
        return [node.value]
    raise ScimError(400, f"unsupported member filter: {node}", "invalidFilter")


# Users


def user_resource(membership: Membership, external_id: str | None, base: str) -> dict:
    account = membership.account
    location = f"{base}/Users/{account.pk}"
    changed = max(filter(None, [membership.updated_at, account.updated_at, membership.created_at]))
    user = User[EnterpriseUser](
        id=str(account.pk),
        user_name=account.email,
        external_id=external_id,
        display_name=account.name,
        name=Name(formatted=account.name),
        active=membership.status == Membership.Status.ACTIVE,
        # Not validated again: an address the service holds may be one pydantic's checker refuses
        # (a reserved name such as `.test`), and answering it must not fail.
        emails=[Email.model_construct(value=account.email, primary=True, type=Email.Type.work)],
        meta=Meta(
            resource_type="User",
            created=membership.created_at,
            last_modified=changed,
            location=location,
        ),
    )
    return dump(user)


def external_ids(workspace_id: Any, account_ids: Iterable[Any]) -> dict[str, str | None]:
    rows = ScimUser.objects.filter(workspace_id=workspace_id, account_id__in=list(account_ids))
    return {
        str(account_id): external_id
        for account_id, external_id in rows.values_list("account_id", "external_id")
    }


def user_fields(body: dict) -> dict:
    """What a POST or PUT body says about a User: `userName`, the name, `externalId`, `active`. Other
    attributes (phone numbers, the enterprise extension, ...) are accepted and not kept."""
    fields: dict[str, Any] = {}
    for key, value in body.items():
        name = key.lower()
        if name == "username":
            fields["email"] = as_text(value, "userName", limit=254, required=True)
        elif name == "externalid":
            fields["external_id"] = as_text(value, "externalId")
            fields["set_external_id"] = True
        elif name == "active":
            fields["active"] = as_bool(value, "active")
        elif name == "displayname" and value is not None:
            fields["display_name"] = as_text(value, "displayName")
        elif name == "name" and isinstance(value, dict):
            fields["name"] = value
    return fields


def display_name(fields: dict) -> str | None:
    """The account's name from what the directory sent: `displayName`, else `name.formatted`, else the
    given and family names."""
    if fields.get("display_name"):
        return fields["display_name"][:255]
    name = {str(key).lower(): value for key, value in (fields.get("name") or {}).items()}
    if isinstance(name.get("formatted"), str) and name["formatted"].strip():
        return name["formatted"][:255]
    parts = [name.get("givenname"), name.get("familyname")]
    joined = " ".join(part for part in parts if isinstance(part, str) and part.strip())
    return joined[:255] or None


# Groups


def group_resource(role: Role, base: str, external_id: str | None, members: list[str] | None) -> dict:
    """`members`: the ids of those shown (`member_ids(role, limit=members_shown(base))`), or None when
    the answer leaves them out."""
    group = Group(
        id=str(role.pk),
        external_id=external_id,
        display_name=role.name,
        meta=Meta(
            resource_type="Group",
            created=role.created_at,
            last_modified=role.updated_at or role.created_at,
            location=f"{base}/Groups/{role.pk}",
        ),
    )
    resource = dump(group)
    if members is not None:
        resource["members"] = [{"value": pk, "$ref": f"{base}/Users/{pk}"} for pk in members]
    return resource


def members_shown(base: str) -> int:
    """How many members a Group answers: at most MAX_MEMBERS_SHOWN, and no more than keep one Group within
    a page's byte budget (docs/api.md#lists). A role's holders are not bounded by a quota: directories
    read large groups without members (`excludedAttributes=members`) and change them by PATCH."""
    entry = len(json.dumps({"value": str(uuid.UUID(int=0)), "$ref": f"{base}/Users/{uuid.UUID(int=0)}"}))
    room = settings.IAM_PAGE_MAX_BYTES - GROUP_WITHOUT_MEMBERS - len(base)
    return max(0, min(MAX_MEMBERS_SHOWN, room // (entry + 1)))


GROUP_WITHOUT_MEMBERS = 2048  # bytes: a Group's other attributes (a name and an externalId of 255 at most)


def external_group_ids(role_ids: Iterable[Any]) -> dict[Any, str | None]:
    rows = ScimGroup.objects.filter(role_id__in=list(role_ids)).values_list("role_id", "external_id")
    return dict(rows)


def project(resource: dict, attributes: str | list | None, excluded: str | list | None) -> dict:
    """RFC 7644 3.4.2.5 `attributes` and `excludedAttributes` (top-level names; `schemas` and `id` are
    always returned)."""

    def names(value: str | list | None) -> set[str]:
        items = value.split(",") if isinstance(value, str) else (value if isinstance(value, list) else [])
        found = set()
        for item in items:
            if isinstance(item, str) and item.strip():
                name = item.strip().rpartition(":")[2] if item.lower().startswith("urn:") else item.strip()
                found.add(name.split(".")[0].lower())
        return found

    kept, dropped = names(attributes), names(excluded)
    always = {"schemas", "id"}
    if kept:
        return {key: value for key, value in resource.items() if key in always or key.lower() in kept}
    return {key: value for key, value in resource.items() if key in always or key.lower() not in dropped}


def member_values(value: Any) -> list[str]:
    """`[{"value": "<id>"}, ...]` (a single object too, as some directories send) as ids."""
    items = value if isinstance(value, list) else [value]
    ids = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("value"), str):
            raise ScimError(400, "members must be objects with a value", "invalidValue")
        ids.append(item["value"])
    return ids
