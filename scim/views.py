"""The SCIM 2.0 service of each workspace (RFC 7644) at `/scim/v2/<workspace id>/`: `Users`, `Groups`,
`ServiceProviderConfig`, `ResourceTypes` and `Schemas`. It speaks SCIM, not the API's envelope: bodies
are `application/scim+json`, errors RFC 7644 section 3.12's. A request is authenticated by a SCIM token of
that workspace alone, acts in an `iam.context` of kind `scim` (its audit entries name the token), and is
logged with its outcome (`ScimRequest`, the admin's "SCIM requests")."""

import json
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from scim2_models import Error as ScimErrorModel

from iam import context, parsers
from iam.errors import ApiError
from iam.timeouts import timed_out
from rbac.models import Role

from . import groups, messages, resources, services
from .models import ScimRequest, ScimToken
from .services import ScimError

logger = logging.getLogger(__name__)

MEDIA_TYPE = "application/scim+json"
UNAUTHORIZED = "a SCIM token of this workspace is required"


def scim_response(payload: Any, status: int = 200, headers: dict | None = None) -> HttpResponse:
    body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
    response = HttpResponse(body, status=status, content_type=MEDIA_TYPE if payload is not None else None)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def error_response(error: ScimError) -> HttpResponse:
    payload = resources.dump(
        ScimErrorModel(status=error.status, scim_type=error.scim_type, detail=error.detail)
    )
    headers = {"WWW-Authenticate": 'Bearer realm="scim"'} if error.status == 401 else None
    return scim_response(payload, error.status, headers)


@method_decorator(csrf_exempt, name="dispatch")
class ScimView(View):
    """The door of every SCIM request: the workspace in the path, its token, the context, one
    transaction for a write, the errors as RFC 7644 says them, and the log line."""

    http_method_names: ClassVar[list[str]] = ["get"]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        started = time.monotonic()
        workspace_id = _uuid(kwargs.pop("workspace_id"))
        token = None
        try:
            token = self.authenticate(request, workspace_id)
            if request.method.lower() not in self.http_method_names:
                raise ScimError(405, f"{request.method} is not supported here")
            ctx = context.current()
            scim_ctx = context.Context(
                context.SCIM, request=request, request_id=ctx.request_id, actor_id=token.pk
            )
            self.workspace, self.base = token.workspace, _base_url(request, workspace_id)
            with context.acting(scim_ctx):
                handler = getattr(self, request.method.lower())
                if request.method == "GET":
                    response = handler(request, *args, **kwargs)
                else:
                    with transaction.atomic():
                        response = handler(request, *args, **kwargs)
        except ScimError as exc:
            response = error_response(exc)
        except ApiError as exc:  # a refusal of the API's services: a quota, a conflict
            response = error_response(services.refuse(exc))
        except Exception as exc:
            if not timed_out(exc):
                raise
            response = error_response(ScimError(503, "request took too long"))
        self.log(request, workspace_id, token, response, started)
        return response

    def authenticate(self, request: HttpRequest, workspace_id: uuid.UUID | None) -> ScimToken:
        scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
        token = None
        if workspace_id is not None and scheme.lower() == "bearer" and raw.strip():
            token = services.authenticate(workspace_id, raw.strip())
        if token is None:
            raise ScimError(401, UNAUTHORIZED)
        return token

    def log(
        self,
        request: HttpRequest,
        workspace_id: uuid.UUID | None,
        token: ScimToken | None,
        response: HttpResponse,
        started: float,
    ) -> None:
        """One row per authenticated request, kept for its workspace's admin's eyes: what arrives without
        its token writes nothing (anyone can send it). A log that cannot be written costs the request
        nothing."""
        if workspace_id is None or token is None:
            return
        scim_type, detail = "", ""
        if response.status_code >= 400 and response.content:
            try:
                error = json.loads(response.content)
                scim_type, detail = error.get("scimType") or "", error.get("detail") or ""
            except (ValueError, AttributeError):
                pass
        try:
            ScimRequest.objects.create(
                workspace_id=workspace_id,
                token=token,
                method=request.method[:8],
                path=request.get_full_path()[:1024].replace("\x00", ""),
                status=response.status_code,
                scim_type=str(scim_type)[:32],
                detail=str(detail)[:512].replace("\x00", ""),
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        except Exception:
            logger.exception("scim request log not written")

    # Helpers for the resources

    def body(self, request: HttpRequest) -> dict:
        """The body as the API reads one (`iam.parsers.loads`: bounded depth and numbers, no NUL or lone
        surrogate, which no column can hold), refused as SCIM says."""
        try:
            body = parsers.loads(request.body or b"{}")
        except ApiError as exc:
            raise ScimError(400, f"the body is not valid: {exc.message}", "invalidSyntax") from None
        if not isinstance(body, dict):
            raise ScimError(400, "the body must be a JSON object", "invalidSyntax")
        return body

    def query(self, request: HttpRequest) -> dict:
        """A query's parameters: from the URL (GET), or from a SearchRequest body (`POST .search`)."""
        if request.method == "GET":
            query = request.GET.dict()
            if any(parsers.unstorable(key) or parsers.unstorable(value) for key, value in query.items()):
                raise ScimError(400, "the query holds a NUL or a lone surrogate", "invalidValue")
            return query
        body = self.body(request)
        return {key: value for key, value in body.items() if key != "schemas"}

    @staticmethod
    def shown(resource: dict, query: dict) -> dict:
        return resources.project(resource, query.get("attributes"), query.get("excludedAttributes"))

    def operations(self, request: HttpRequest) -> list[tuple[str, Any, Any]]:
        return messages.operations(self.body(request))


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _base_url(request: HttpRequest, workspace_id: uuid.UUID) -> str:
    return request.build_absolute_uri(f"/scim/v2/{workspace_id}")


def list_response(total: int, start: int, items: Iterable[dict]) -> HttpResponse:
    return HttpResponse(messages.list_body(total, start, items), content_type=MEDIA_TYPE)


# Users


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


# Groups


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


# Discovery (RFC 7644 section 4)


class ServiceProviderConfigView(ScimView):
    def get(self, request: HttpRequest) -> HttpResponse:
        return scim_response(messages.service_provider_config(self.base))


class ResourceTypes(ScimView):
    def get(self, request: HttpRequest, name: str | None = None) -> HttpResponse:
        found = messages.resource_types(self.base)
        if name is None:
            return list_response(len(found), 1, found)
        for item in found:
            if item["id"] == name:
                return scim_response(item)
        raise ScimError(404, "resource type not found")


class Schemas(ScimView):
    def get(self, request: HttpRequest, urn: str | None = None) -> HttpResponse:
        found = messages.schemas(self.base)
        if urn is None:
            return list_response(len(found), 1, found)
        for item in found:
            if item["id"] == urn:
                return scim_response(item)
        raise ScimError(404, "schema not found")


class Unknown(ScimView):
    """Any other path under a workspace's SCIM service: a SCIM 404 (to its directory only)."""

    http_method_names: ClassVar[list[str]] = ["get", "post", "put", "patch", "delete"]

    def get(self, request: HttpRequest, rest: str = "") -> HttpResponse:
        if rest.strip("/") == ".search" and request.method == "POST":  # RFC 7644 3.4.3, from the root
            raise ScimError(501, "a search of several resource types at once is not supported")
        raise ScimError(404, "no such SCIM endpoint")

    post = put = patch = delete = get
