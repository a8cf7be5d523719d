"""SCIM `Users` (RFC 7644 section 3): list, search, create, read, replace, patch, delete."""

import json
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest, HttpResponse

from .. import messages, resources, services
from ..services import ScimError
from .endpoint import ScimView, list_response, scim_response


class Users(ScimView):
    http_method_names: ClassVar[list[str]] = ["get", "post"]
    search: ClassVar[bool] = False  # `POST /Users/.search` (RFC 7644 3.4.3): a query in the body

    def get(self, request: HttpRequest) -> HttpResponse:
        query = self.query(request)
        start, count = messages.page(query)
        memberships = services.user_memberships(self.workspace).select_related("account")
        if text := messages.filter_text(query):
            memberships = memberships.filter(resources.user_filter(self.workspace.pk, text))
        total = memberships.count()
        page = list(memberships.order_by("created_at", "pk")[start - 1 : start - 1 + count]) if count else []
        ids = resources.external_ids(self.workspace.pk, [each.account_id for each in page])
        items = (
            self.shown(resources.user_resource(each, ids.get(str(each.account_id)), self.base), query)
            for each in page
        )
        return list_response(total, start, items)

    def post(self, request: HttpRequest) -> HttpResponse:
        if self.search:
            return self.get(request)
        fields = resources.user_fields(self.body(request))
        if "email" not in fields:
            raise ScimError(400, "userName required", "invalidValue")
        if not _is_email(fields["email"]):
            raise ScimError(400, "userName must be an e-mail address", "invalidValue")
        membership = services.provision_user(
            self.workspace,
            email=fields["email"],
            name=resources.display_name(fields),
            external_id=fields.get("external_id"),
            active=fields.get("active", True),
        )
        resource = resources.user_resource(membership, fields.get("external_id"), self.base)
        return scim_response(resource, 201, {"Location": resource["meta"]["location"]})


def _is_email(value: str) -> bool:
    """An address with exactly one `@` and no quoted local part (docs/scim.md#what-maps-to-what): a
    service that reads the domain after the first `@` reads the one that was checked."""
    if value.count("@") != 1 or '"' in value:
        return False
    try:
        validate_email(value)
    except ValidationError:
        return False
    return True


class UserDetail(ScimView):
    http_method_names: ClassVar[list[str]] = ["get", "put", "patch", "delete"]

    def answer(self, membership) -> HttpResponse:
        link = services.scim_user(membership)
        return scim_response(resources.user_resource(membership, link and link.external_id, self.base))

    def get(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        response = self.answer(services.find_user(self.workspace, resource_id))
        return scim_response(self.shown(json.loads(response.content), self.query(request)))

    def put(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        """A whole User (Okta): what it says of the name, `externalId` and `active` replaces."""
        membership = services.find_user(self.workspace, resource_id)
        fields = resources.user_fields(self.body(request))
        if "email" not in fields:
            raise ScimError(400, "userName required", "invalidValue")
        membership = services.update_user(
            membership,
            email=fields["email"],
            name=resources.display_name(fields),
            external_id=fields.get("external_id"),
            set_external_id=True,
            active=fields.get("active"),
        )
        return self.answer(membership)

    def patch(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        """RFC 7644 3.5.2 on the attributes kept (`active`, `externalId`, `userName`, the name): with a
        path, or without one (the value an object of attributes, as Entra ID sends). Others are accepted
        and not kept."""
        membership = services.find_user(self.workspace, resource_id)
        changes: dict[str, Any] = {}
        for op, path, value in self.operations(request):
            if path is None:
                attributes = {}
                for key, item in value.items():
                    parsed = resources.parse_path(key)
                    if getattr(parsed, "attr", None) is not None:
                        attributes[self._key(parsed)] = item
                self._apply(changes, op, attributes)
            else:
                if not hasattr(path, "attr"):  # a value path: emails[type eq "work"].value
                    continue
                self._apply(changes, op, {self._key(path): value})
        membership = services.update_user(membership, **changes)
        return self.answer(membership)

    @staticmethod
    def _key(path: Any) -> str:
        name = resources.attribute(path.attr, path.uri, resources.USER_SCHEMA)
        return f"{name}.{path.sub_attr.lower()}" if path.sub_attr else name

    @staticmethod
    def _apply(changes: dict, op: str, attributes: dict[str, Any]) -> None:
        for name, value in attributes.items():
            if name == "active":
                if op != "remove":
                    changes["active"] = resources.as_bool(value, "active")
            elif name == "externalid":
                changes["external_id"] = None if op == "remove" else resources.as_text(value, "externalId")
                changes["set_external_id"] = True
            elif name == "username" and op != "remove":
                changes["email"] = resources.as_text(value, "userName", limit=254, required=True)
            elif name == "displayname" and op != "remove" and value:
                changes["name"] = resources.as_text(value, "displayName")
            elif name == "name" and op != "remove" and isinstance(value, dict):
                changes["name"] = resources.display_name({"name": value}) or changes.get("name")
            elif name == "name.formatted" and op != "remove" and isinstance(value, str) and value.strip():
                changes["name"] = value[:255]

    def delete(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        services.deprovision_user(services.find_user(self.workspace, resource_id))
        return scim_response(None, 204)
