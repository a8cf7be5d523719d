"""SCIM `Groups`: the workspace's roles and who holds them."""

from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse

from rbac.models import Role

from .. import groups, messages, resources
from ..services import ScimError
from .endpoint import ScimView, list_response, scim_response


def _wants_members(query: dict) -> bool:
    """Members are read only when answered (Okta and Entra ID ask for groups without them)."""
    shown = resources.project({"members": True}, query.get("attributes"), query.get("excludedAttributes"))
    return "members" in shown


class Groups(ScimView):
    http_method_names: ClassVar[list[str]] = ["get", "post"]
    search: ClassVar[bool] = False  # `POST /Groups/.search`

    def get(self, request: HttpRequest) -> HttpResponse:
        query = self.query(request)
        start, count = messages.page(query)
        roles = Role.objects.in_workspace(self.workspace)
        if text := messages.filter_text(query):
            roles = roles.filter(resources.group_filter(text))
        total = roles.count()
        page = list(roles.order_by("created_at", "pk")[start - 1 : start - 1 + count]) if count else []
        external_ids = resources.external_group_ids(role.pk for role in page)
        if _wants_members(query):
            limit = resources.members_shown(self.base)
            found = groups.members_of(self.workspace, page, limit=limit)
        else:
            found = ((role, None) for role in page)
        items = (
            self.shown(resources.group_resource(role, self.base, external_ids.get(role.pk), ids), query)
            for role, ids in found
        )
        return list_response(total, start, items)

    def post(self, request: HttpRequest) -> HttpResponse:
        if self.search:
            return self.get(request)
        body = {key.lower(): value for key, value in self.body(request).items()}
        name = resources.as_text(body.get("displayname"), "displayName", required=True)
        members = resources.member_values(body["members"]) if body.get("members") else []
        external_id = resources.as_text(body.get("externalid"), "externalId")
        role = groups.create_group(
            self.workspace, name=name.strip(), members=members, external_id=external_id
        )
        response = group_response(role, self.base, {})
        response.status_code = 201
        response["Location"] = f"{self.base}/Groups/{role.pk}"
        return response


def group_response(role: Role, base: str, query: dict) -> HttpResponse:
    """One Group, with at most `members_shown` members (fewer than its byte budget holds)."""
    role.refresh_from_db()
    ids = groups.member_ids(role, limit=resources.members_shown(base)) if _wants_members(query) else None
    resource = resources.group_resource(role, base, groups.group_external_id(role), ids)
    return scim_response(
        resources.project(resource, query.get("attributes"), query.get("excludedAttributes"))
    )


class GroupDetail(ScimView):
    http_method_names: ClassVar[list[str]] = ["get", "put", "patch", "delete"]

    def answer(self, request: HttpRequest, role) -> HttpResponse:
        return group_response(role, self.base, self.query(request) if request.method == "GET" else {})

    def get(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        return self.answer(request, groups.find_group(self.workspace, resource_id))

    def put(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        role = groups.find_group(self.workspace, resource_id)
        body = {key.lower(): value for key, value in self.body(request).items()}
        name = resources.as_text(body.get("displayname"), "displayName", required=True)
        groups.rename_group(role, name.strip())
        if "externalid" in body:
            groups.set_group_external_id(role, resources.as_text(body["externalid"], "externalId"))
        if "members" in body:
            changes = groups.MemberChanges()
            changes.set(resources.member_values(body["members"] or []))
            groups.change_members(role, changes)
        return self.answer(request, role)

    def patch(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        """RFC 7644 3.5.2: `displayName`, `externalId` and `members`, with a path (`members[value eq
        "<id>"]` to remove one) or without one (an object of attributes). The operations are folded in
        their order and applied once: the last name, the last externalId, and each membership that gains
        or loses the role changed once."""
        role = groups.find_group(self.workspace, resource_id)
        changes, edits = groups.MemberChanges(), {}
        for op, path, value in self.operations(request):
            if path is None:
                for key, item in value.items():
                    self._apply(changes, edits, op, resources.parse_path(key), item)
            else:
                self._apply(changes, edits, op, path, value)
        if "name" in edits:
            groups.rename_group(role, edits["name"])
        if "external_id" in edits:
            groups.set_group_external_id(role, edits["external_id"])
        groups.change_members(role, changes)
        return self.answer(request, role)

    @staticmethod
    def _apply(changes: groups.MemberChanges, edits: dict, op: str, path: Any, value: Any) -> None:
        if not hasattr(path, "attr"):  # members[value eq "<id>"]
            if path.attr_path.attr.lower() != "members" or op != "remove":
                raise ScimError(400, f"unsupported path: {path}", "invalidPath")
            changes.remove(resources.filtered_values(path.val_filter))
            return
        name = resources.attribute(path.attr, path.uri, resources.GROUP_SCHEMA)
        if name == "displayname" and path.sub_attr is None:
            if op == "remove":
                raise ScimError(400, "displayName is required", "mutability")
            edits["name"] = resources.as_text(value, "displayName", required=True).strip()
        elif name == "members" and path.sub_attr is None:
            if op == "remove":
                changes.remove(None if value is None else resources.member_values(value))
            elif op == "add":
                changes.add(resources.member_values(value or []))
            else:
                changes.set(resources.member_values(value or []))
        elif name == "externalid" and path.sub_attr is None:
            edits["external_id"] = None if op == "remove" else resources.as_text(value, "externalId")
        else:
            raise ScimError(400, f"unsupported path: {path}", "invalidPath")

    def delete(self, request: HttpRequest, resource_id: str) -> HttpResponse:
        groups.delete_group(groups.find_group(self.workspace, resource_id))
        return scim_response(None, 204)
