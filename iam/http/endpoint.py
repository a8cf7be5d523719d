"""The one API machinery: every endpoint of the service is an `Endpoint` (a list: a
`ListEndpoint`, in iam/http/list_endpoint.py).

An endpoint declares who may call it and what it reads; this module parses the body (docs/api.md#errors: JSON
whatever the Content-Type, the docs/api.md#errors parse messages), validates it with the declared serializer,
wraps the result in the envelope, and leaves authentication, workspace selection and the permission check to
DRF's authentication and permission classes: those named in `REST_FRAMEWORK` (`authn.authentication`,
`rbac.api.access.EndpointPermission`; `iam` may not import the apps). Each app's urls.py lists its endpoints
by path."""

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from iam.http.encoder import Encoder, to_json
from iam.http.errors import INVALID_STRUCTURE, ApiError
from iam.platform import timeouts

JSON_RENDERER = JSONRenderer()


def envelope(data: Any) -> dict:
    return {"success": True, "status": 200, "data": data}


class EncodedJson:
    """A payload a handler has already written as JSON, in parts: a list page's (iam/http/list_endpoint.py,
    bounded by its byte budget) answered joined; or one object's pieces as an iterator
    (`iam.http.encoder.Encoder.stream`), which may be far larger than a worker should hold (a membership
    of 50 roles of 500 permissions: hundreds of megabytes) and is answered as a stream when it is past
    STREAM_FROM bytes."""

    def __init__(self, parts: Iterable[bytes]):
        self.parts = parts


def encoded_object(members: Mapping[str, Any]) -> EncodedJson:
    """A JSON object of `members`, in order, as JSONRenderer writes the dict of them: a member that is an
    `EncodedJson` (an object's `Encoder.stream`, `answer_fresh`) is written as its parts,
    read as the answer is sent; any other value as its JSON. So an answer of several large objects
    (`invitations/accept`: the invitation and the membership, each of up to 50 roles of 500 permissions)
    streams like one (docs/api.md#quotas-and-budgets)."""
    return EncodedJson(_members(members))


def _members(members: Mapping[str, Any]) -> Iterator[bytes]:
    yield b"{"
    for index, (name, value) in enumerate(members.items()):
        yield (b"," if index else b"") + to_json(name) + b":"
        if isinstance(value, EncodedJson):
            yield from value.parts
        else:
            yield to_json(value)
    yield b"}"


STREAM_FROM = 1024 * 1024  # an answer of one object up to this size is joined and sent with its length
CHUNK_BYTES = 256 * 1024  # a streamed answer goes out in chunks of about this size

ENVELOPE_HEAD, ENVELOPE_TAIL = b'{"success":true,"status":200,"data":', b"}"


def encoded_response(parts: Iterable[bytes]) -> HttpResponse:
    """The envelope around `parts`: one body with its length when it comes to at most STREAM_FROM
    bytes (every list page, most objects); past that, a streamed body of CHUNK_BYTES chunks, each piece
    read and written as the server sends the previous chunk on, so a worker holds a chunk and the rows
    of one read, never the answer."""
    if isinstance(parts, list):
        return HttpResponse([ENVELOPE_HEAD, *parts, ENVELOPE_TAIL], content_type=JSON_RENDERER.media_type)
    pieces = iter(parts)
    head, size = [ENVELOPE_HEAD], len(ENVELOPE_HEAD)
    for piece in pieces:
        head.append(piece)
        size += len(piece)
        if size > STREAM_FROM:
            break
    else:
        head.append(ENVELOPE_TAIL)
        return HttpResponse(head, content_type=JSON_RENDERER.media_type)
    body = _chunks(itertools.chain(head, pieces, [ENVELOPE_TAIL]))
    return StreamingHttpResponse(body, content_type=JSON_RENDERER.media_type)


def _chunks(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """`pieces` joined into chunks of about CHUNK_BYTES (a piece is a few fields, a chunk a few hops to
    the server's event loop fewer)."""
    chunk, size = [], 0
    for piece in pieces:
        chunk.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(chunk)
            chunk, size = [], 0
    if chunk:
        yield b"".join(chunk)


def _first_error(errors: Any, prefix: str = "") -> tuple[str, Any]:
    if isinstance(errors, Mapping):
        key, value = next(iter(errors.items()))
        name = prefix if key == "non_field_errors" else (f"{prefix}.{key}" if prefix else str(key))
        return _first_error(value, name)
    if isinstance(errors, list) and errors and not isinstance(errors[0], str | serializers.ErrorDetail):
        # ListField / nested list errors: {index: [...]} or [[...]]
        return _first_error(errors[0], prefix)
    if isinstance(errors, list):
        return prefix, errors[0]
    return prefix, errors


_MESSAGES = {
    "required": "{field} required",
    "null": "{field} required",
    "blank": "{field} required",
    "empty": "{field} required",
    "max_length": "{field} must have at most {limit}",
    "min_length": "{field} must have at least {limit}",
    "max_value": "{field} must be at most {limit}",
    "min_value": "{field} must be at least {limit}",
    "not_a_list": "{field} must be an array",
    "not_a_dict": "{field} must be an object",
    # A value of the wrong JSON type says which type the field takes.
    "not_a_string": "{field} must be a string",
    "not_a_uuid_string": "{field} must be a UUID string",
    "not_a_boolean": "{field} must be true or false",
    "not_an_integer": "{field} must be an integer",
    "not_a_permission_name": "{field} must have the form resource:action (each side a name or *), or *",
}


def validation_error(serializer: serializers.Serializer) -> ApiError:
    """Turns DRF's first validation error into the API's short message naming the field."""
    field, detail = _first_error(serializer.errors)
    code = getattr(detail, "code", "invalid")
    label = field or "body"
    if code == "iam":
        return ApiError(400, str(detail), field or None)
    if code in ("max_length", "min_length"):
        limit = _limit_from(serializer, field, code)
        unit = "items" if _is_list_field(serializer, field) else "characters"
        return ApiError(400, _MESSAGES[code].format(field=label, limit=f"{limit} {unit}"), field or None)
    if code in ("max_value", "min_value"):
        return ApiError(
            400, _MESSAGES[code].format(field=label, limit=_limit_from(serializer, field, code)), field
        )
    if code in _MESSAGES:
        return ApiError(400, _MESSAGES[code].format(field=label, limit=""), field or None)
    if not field:
        return ApiError(400, INVALID_STRUCTURE)
    return ApiError(400, f"invalid {label}", field)


def _resolve_field(serializer: serializers.Serializer, dotted: str) -> serializers.Field | None:
    node: Any = serializer
    for part in dotted.split("."):
        fields = getattr(node, "fields", None)
        if fields is None or part not in fields:
            child = getattr(node, "child", None)
            if child is None:
                return node if part.isdigit() else None
            node = child
            continue
        node = fields[part]
    return node


def _limit_from(serializer: serializers.Serializer, field: str, code: str) -> Any:
    return getattr(_resolve_field(serializer, field), code, None)


def _is_list_field(serializer: serializers.Serializer, field: str) -> bool:
    return isinstance(_resolve_field(serializer, field), serializers.ListField)


def require_one(attrs: dict, *names: str) -> dict:
    """For `validate()` of a request that identifies its record by one of several keys (`id` or `code`)."""
    if not any(name in attrs for name in names):
        raise serializers.ValidationError(
            {names[0]: serializers.ErrorDetail(f"{' or '.join(names)} required", code="iam")}
        )
    return attrs


class Endpoint(APIView):
    """POST-only JSON endpoint. Subclasses declare:

    - `summary`: what the operation does, in one line: the API reference (/docs) lists it by it.
    - `permission`: the permission the caller needs (`"projects:create"`), checked before the body; None
      when the handler decides itself (self-service on accounts) or the endpoint is public.
    - `public`: no Bearer token needed.
    - `workspace_scoped`: the request acts in the workspace named by `X-Workspace` (docs/api.md#x-workspace):
      `rbac.api.access.EndpointPermission` (DRF's permission class, named in REST_FRAMEWORK) selects it
      before the body is read and sets `request.workspace`, which `handle` reads.
    - `project_scoped`: a project-scope grant of `permission` lets the caller in; the record's project is
      then checked once the object is loaded (`rbac.api.access.get_object`, docs/api.md#authorization).
    - `decided_on_object`: `permission` is decided once the object is loaded, not before the body: an
      account's self access, a workspace's own grants (`rbac.policy.authorize`).
    - `request_serializer` / `response_serializer`: the body's and the `data`'s shapes.
    - `example_request`: a real request body, shown as the operation's example in the API reference
      (/docs); tests/iam/test_docs.py checks that the request serializer accepts it.

    and implement `handle(request, data) -> payload`.

    One transaction boundary (docs/architecture.md): `handle` runs inside one
    `transaction.atomic()`, owned here, so no call site has to open one. The request's writes commit
    together or not at all, row locks (`select_for_update`) are held until that commit, `on_commit` work
    (publishes, cache purges) runs only once everything has committed, and an `ApiError` rolls the whole
    request back, unless it says `commit=True` (a refusal whose writes must stand). The reads (every
    describe and list, and `clients/validate`) declare `read_only`: they neither write nor lock, and skip
    the BEGIN/COMMIT round trips on the hot paths. tests/iam/test_machinery.py holds every endpoint to
    that rule by its path, so a new write endpoint cannot be left outside."""

    http_method_names = ["post"]
    summary: ClassVar[str | None] = None
    permission: ClassVar[str | None] = None
    public: ClassVar[bool] = False
    workspace_scoped: ClassVar[bool] = False
    project_scoped: ClassVar[bool] = False
    decided_on_object: ClassVar[bool] = False
    read_only: ClassVar[bool] = False
    request_serializer: ClassVar[type[serializers.Serializer] | None] = None
    response_serializer: ClassVar[type[serializers.Serializer] | None] = None
    example_request: ClassVar[dict | None] = None

    def get_authenticators(self):
        return [] if self.public else super().get_authenticators()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # The method first, whoever asks: `GET /roles/list` answers 405 `use POST`, not 401, so a newcomer
        # trying an endpoint in a browser or with a bare curl learns how to call it.
        if request.method.lower() not in self.http_method_names:
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # docs/api.md#errors: the answer is JSON whatever the Accept header says; no negotiation to pay for.
        return JSON_RENDERER, JSON_RENDERER.media_type

    def post(self, request: Request) -> Response:
        data = self.read_body(request)
        if self.read_only:
            return self.respond(self.handle(request, data))
        refusal = None
        with transaction.atomic():
            try:
                payload = self.handle(request, data)
                timeouts.check_deadline()  # finished past the deadline: it commits nothing
            except ApiError as exc:
                if not exc.commit:
                    raise
                refusal = exc
        if refusal is not None:
            raise refusal
        return self.respond(payload)

    def respond(self, payload: Any) -> HttpResponse:
        if isinstance(payload, EncodedJson):
            parts, payload.parts = payload.parts, []
            return encoded_response(parts)
        return Response(envelope(payload))

    def read_body(self, request: Request) -> dict:
        body = request.data
        if not isinstance(body, dict):
            raise ApiError(400, INVALID_STRUCTURE)
        if self.request_serializer is None:
            return body
        serializer = self.request_serializer(data=body, context={"request": request})
        if not serializer.is_valid():
            raise validation_error(serializer)
        return serializer.validated_data

    def handle(self, request: Request, data: dict) -> Any:
        raise NotImplementedError

    def serialize(self, instance: Any) -> dict:
        assert self.response_serializer is not None
        return self.response_serializer(instance, context={"request": self.request}).data


def answer_fresh(
    request: Request,
    serializer: type[serializers.Serializer],
    queryset: QuerySet,
    obj: Model,
    context: dict | None = None,
) -> EncodedJson:
    """`obj` re-read from `queryset` (its relations changed by the service) and written by `serializer`,
    as a stream of pieces (`Encoder.stream`): its nested objects are read a few at a time while the
    answer is sent, so a membership of 50 roles of 500 large permissions is never held whole. `obj`'s own
    row is read now, its nested rows as the answer is written (`encoded_object` puts several of these
    in one answer). `context`: more of the serializer's context."""
    encoder = Encoder(serializer(context={"request": request, **(context or {})}))
    fresh = encoder.prepare(queryset.prefetch_related(None)).get(pk=obj.pk)
    return EncodedJson(encoder.stream(fresh))
