"""`clients/validate`: the hot path other services call on every request they serve."""

import functools
import hashlib
import time
import uuid
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request

from iam.http import parsers
from iam.http.endpoint import JSON_RENDERER, Endpoint, envelope
from iam.http.errors import ApiError, error_response
from iam.http.fields import PERMISSION_NAME_MAX, PERMISSION_NAME_RE
from iam.platform import cache, metrics
from iam.platform.redis_cache import Reads

from .. import serializers, validation


def _is_permission_name(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= PERMISSION_NAME_MAX
        and bool(PERMISSION_NAME_RE.fullmatch(value))
    )


class ClientValidate(Endpoint):
    """Validates a user's access token for a client service. Public: the client authenticates itself with its
    id and secret in the body. The answer is always 200 for a well-formed body: `authorized` is true only when
    the client id and secret match, the token is a valid, unexpired, unrevoked access token of an enabled
    account, that account has an active membership in the client's workspace, and the token's session
    meets the workspace's MFA policy (`mfa_required`: two factors, or that workspace's own SSO); else
    `reason` says why (`invalid_client`, `invalid_token`, `token_expired`, `token_revoked`,
    `account_disabled`, `not_a_member`, `mfa_required`).
    `roles` and `permissions` are the account's there (project-scope ones only when `project_id` names their
    project); `allowed` answers `permission` (null when none was asked); `expires_at` is the token's
    expiry."""

    summary = "Validate an access token for a client service"
    example_request = {
        "client_id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38",
        "client_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwz0nF3yNp7Aw=",
        "token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlNGI4ZDJmNiJ9.c2lnbmF0dXJl",
        "permission": "invoices:read",
        "project_id": "3b9d6f12-7c4a-4e8b-a1d5-9f2c6e3b8d41",
    }

    public = True
    read_only = True  # answers from the cache or plain reads: no transaction on the hot path
    request_serializer = serializers.ValidateRequest
    response_serializer = serializers.ValidateResponse

    @classmethod
    def as_view(cls, **initkwargs):
        """The benchmarked hot path: a well-formed POST is answered without DRF's request, negotiation and
        response layers (they cost more than the validation), and the same body again, while nothing it
        was answered from has changed, with the same answer (`KeptAnswers`); anything else (another
        method, a body the fast path does not take) goes through the full endpoint, which words every
        error."""
        view = super().as_view(**initkwargs)

        @functools.wraps(view)  # keeps `cls` and `csrf_exempt` for the schema and the CSRF middleware
        def fast_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            body = cls.fast_bytes(request) if request.method == "POST" else None
            kept = None if body is None else kept_answers.find(body)
            if kept is None:
                data = None if body is None else cls.fast_body(body)
                if data is None:
                    return view(request, *args, **kwargs)
                try:
                    kept = answered(body, data)
                except ApiError as exc:  # `workspace_id` from a client outside the root workspace
                    return error_response(exc.status, exc.message, exc.field)
            kept.counted.inc()
            return HttpResponse(kept.content, content_type="application/json")

        return fast_view

    @staticmethod
    def fast_bytes(request: HttpRequest) -> bytes | None:
        """The request's body, when its length is one the fast path takes."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        if not 0 < length <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return None
        return request.body

    @staticmethod
    def fast_body(body: bytes) -> dict | None:
        """The request's fields when the body is exactly what a calling service sends, else None. It reads
        the body with the one parser (`iam.http.parsers.loads`: depth, lone surrogates, NUL, number ranges),
        and leaves whatever that refuses to the full endpoint, which answers its 400."""
        try:
            return read_validate_body(parsers.loads(body))
        except ApiError:
            return None

    def read_body(self, request: Request) -> dict:
        data = read_validate_body(request.data)
        return super().read_body(request) if data is None else data

    def handle(self, request: Request, data: dict) -> dict:
        return answer(data)


def answer(data: dict) -> dict:
    """The validation, counted by reason; with `explain`, the grant paths behind it."""
    result = validated(data)
    metrics.VALIDATIONS.labels(result["reason"] or "ok").inc()
    return result


def validated(data: dict) -> dict:
    data = dict(data)
    explain = data.pop("explain", False)
    result = validation.validate(**data)
    if explain:
        return validation.explained(
            result, permission=data.get("permission"), project_id=data.get("project_id")
        )
    return result


class Kept(NamedTuple):
    content: bytes  # the answer's body
    counted: object  # its reason's counter (metrics.VALIDATIONS)
    fresh_until: float  # time.time() from which it is not served again: the token's expiry, or its next check
    reads: Reads | None  # the cache entries it was computed from (None: no local layer, never kept)


class KeptAnswers(dict):
    """The SHA-256 of a request body -> the answer it was given (`Kept`). A calling service sends the same
    body (its id and secret, the user's token, the permission) for every request of that user it serves,
    and the answer changes only when what it was read from changes: so it is kept, and served again while
    - it was computed from the process-memory cache alone: no round trip to Redis, no statement
      (`cache.recording`), no `explain`;
    - each of those cache entries is still the one this process serves (`Reads.current`): Redis has
      reported no change to any (the reports are drained first, as every cached read does), none is past
      its age, the reports still arrive. A revocation, a rotation, a removed membership or a changed MFA
      policy purges one of them: the next call in every process computes its answer afresh;
    - the token has not expired, and its signature is not yet due to be verified again
      (`validation.VerifiedTokens`).
    Answers refusing the client or the token are not kept: anyone can make those up by the thousand, and
    they would push out the ones worth keeping. Bounded: the whole set is dropped when full."""

    LIMIT = 10_000
    NOT_KEPT = frozenset({"invalid_client", "invalid_token", "token_expired"})

    def find(self, body: bytes) -> Kept | None:
        kept = self.get(hashlib.sha256(body).digest())
        if kept is None or time.time() >= kept.fresh_until or not kept.reads.current():
            return None
        return kept

    def keep(self, body: bytes, kept: Kept) -> None:
        if len(self) >= self.LIMIT:
            self.clear()
        self[hashlib.sha256(body).digest()] = kept


kept_answers = KeptAnswers()


def answered(body: bytes, data: dict) -> Kept:
    """The answer to a well-formed body, computed, and kept when it can be (`KeptAnswers`)."""
    statements = []

    def counted_statement(execute, *args):
        statements.append(args[0])
        return execute(*args)

    with cache.recording() as reads, connection.execute_wrapper(counted_statement):
        result = validated(data)
    reason = result["reason"]
    kept = Kept(
        content=JSON_RENDERER.render(envelope(result)),
        counted=metrics.VALIDATIONS.labels(reason or "ok"),
        fresh_until=validation.verified_until(data["token"]),
        reads=reads,
    )
    computed_from_memory = reads is not None and reads.whole and not statements
    if computed_from_memory and not data.get("explain") and reason not in KeptAnswers.NOT_KEPT:
        kept_answers.keep(body, kept)
    return kept


FAST_FIELDS = frozenset(
    {"client_id", "client_secret", "token", "permission", "project_id", "workspace_id", "explain"}
)


def read_validate_body(body: object) -> dict | None:
    """A well-formed body read without the serializer's machinery (a third of the request's time); None
    for anything unusual, which the serializer then words as a 400."""
    if not isinstance(body, dict) or not body.keys() <= FAST_FIELDS:
        return None  # a field this reader does not know: the serializer decides what it means
    try:
        data = {
            "client_id": uuid.UUID(body["client_id"]),
            "client_secret": body["client_secret"],
            "token": body["token"],
        }
        permission, project_id = body.get("permission"), body.get("project_id")
        workspace_id = body.get("workspace_id")
        if permission is not None:
            data["permission"] = permission
        if project_id is not None:
            data["project_id"] = uuid.UUID(project_id)
        if workspace_id is not None:
            data["workspace_id"] = uuid.UUID(workspace_id)
        if body.get("explain") is not None:
            data["explain"] = body["explain"]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if (
        not isinstance(body["client_id"], str)
        or not isinstance(data["client_secret"], str)
        or not 0 < len(data["client_secret"]) <= serializers.ValidateRequest.SECRET_MAX
        or not isinstance(data["token"], str)
        or not 0 < len(data["token"]) <= serializers.ValidateRequest.TOKEN_MAX
        or not (permission is None or _is_permission_name(permission))
        or not (project_id is None or isinstance(project_id, str))
        or not (workspace_id is None or isinstance(workspace_id, str))
        or not isinstance(data.get("explain", False), bool)
    ):
        return None
    return data
