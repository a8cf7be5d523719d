"""The SCIM 2.0 service of each workspace (RFC 7644) at `/scim/v2/<workspace id>/`: `Users`, `Groups`,
`ServiceProviderConfig`, `ResourceTypes` and `Schemas`. It speaks SCIM, not the API's envelope: bodies
are `application/scim+json`, errors RFC 7644 section 3.12's. A request is authenticated by a SCIM token of
that workspace alone, acts in an `iam.platform.context` of kind `scim` (its audit entries name the token), and
is logged with its outcome (`ScimRequest`, the admin's "SCIM requests")."""

import json
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any, ClassVar

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from scim2_models import Error as ScimErrorModel

from iam.http import parsers
from iam.http.errors import ApiError
from iam.platform import context
from iam.platform.service_helpers import uuid_or_none
from iam.platform.timeouts import timed_out

from .. import messages, resources, services
from ..models import ScimRequest, ScimToken
from ..services import ScimError

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
        workspace_id = uuid_or_none(kwargs.pop("workspace_id"))
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
        """The body as the API reads one (`iam.http.parsers.loads`: bounded depth and numbers, no NUL or lone
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


def _base_url(request: HttpRequest, workspace_id: uuid.UUID) -> str:
    return request.build_absolute_uri(f"/scim/v2/{workspace_id}")


def list_response(total: int, start: int, items: Iterable[dict]) -> HttpResponse:
    return HttpResponse(messages.list_body(total, start, items), content_type=MEDIA_TYPE)


class Unknown(ScimView):
    """Any other path under a workspace's SCIM service: a SCIM 404 (to its directory only)."""

    http_method_names: ClassVar[list[str]] = ["get", "post", "put", "patch", "delete"]

    def get(self, request: HttpRequest, rest: str = "") -> HttpResponse:
        if rest.strip("/") == ".search" and request.method == "POST":  # RFC 7644 3.4.3, from the root
            raise ScimError(501, "a search of several resource types at once is not supported")
        raise ScimError(404, "no such SCIM endpoint")

    post = put = patch = delete = get
