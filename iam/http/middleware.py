import io
import time

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse

from iam.http import pages
from iam.http.errors import STATUS_MESSAGES, error_response, method_not_allowed
from iam.platform import context, metrics, timeouts

HSTS = "max-age=31536000"  # a year; no includeSubDomains: other hosts of the domain are not ours


def security_headers() -> dict[str, str]:
    """The headers every response carries (docs/security.md, "Headers"), for responses made outside Django
    too (iam/server/responses.py's 400, 408, 503; the static files iam/server/static.py serves)."""
    headers = {
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
    }
    if settings.IAM_BEHIND_PROXY:  # TLS ends at the proxy; a browser ignores the header over plain http
        headers["Strict-Transport-Security"] = HSTS
    return headers


class SecurityHeadersMiddleware:
    """docs/security.md#the-edges: every response carries these headers, errors included. It wraps every other
    middleware, so the responses JsonErrorsMiddleware makes itself (the 413, the re-rendered 404/405/500) and
    those made where SecurityMiddleware never ran get them too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        for name, value in security_headers().items():
            # A view may only choose a stricter Referrer-Policy: the OAuth callback, whose redirect
            # carries tokens, sends none.
            if name == "Referrer-Policy":
                response.headers.setdefault(name, value)
            else:
                response[name] = value
        if pages.is_page(response):  # docs/pages.md#security-headers
            response["Content-Security-Policy"] = pages.CONTENT_SECURITY_POLICY
        return response


class JsonErrorsMiddleware:
    """Renders every error that did not come from our exception handler (Django's 404 and 500 pages, a
    body over the size limit) as the docs/api.md#errors flat JSON, so an API client never receives an HTML
    page. The admin and the hosted pages keep their HTML.

    It also reads a chunked body (`Transfer-Encoding: chunked`, no `Content-Length`), which Django takes
    for an empty one: whole, within the same 1 MiB limit (413 past it), so the view sees it as it would
    the same body sent with a length. The server (gunicorn) has decoded the chunks."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.admin_prefix = "/admin/"
        self.max_body = settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._declared_length(request) > self.max_body:
            return error_response(413, STATUS_MESSAGES[413])
        if self._chunked(request) and not self._read_chunked(request):
            return error_response(413, STATUS_MESSAGES[413])
        response = self.get_response(request)
        if response.status_code < 400 or request.path.startswith(self.admin_prefix):
            return response
        if pages.is_page(response):
            return response  # a hosted page's 403 or 429 is a page too (iam/http/pages.py)
        if response.get("Content-Type", "").startswith(("application/json", "application/scim+json")):
            return response  # ours already, or a SCIM error (RFC 7644 3.12)
        status = response.status_code
        if status == 405 and response.get("Allow"):  # a view of Django's (`require_GET`): says what to use
            error = method_not_allowed([method.strip() for method in response["Allow"].split(",")])
            return error_response(error.status, error.message, headers=error.headers)
        rendered = error_response(status, STATUS_MESSAGES.get(status, "error"))
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                rendered[header] = response[header]
        return rendered

    @staticmethod
    def _chunked(request: HttpRequest) -> bool:
        coding = request.META.get("HTTP_TRANSFER_ENCODING", "")
        return "chunked" in coding.lower() and not request.META.get("CONTENT_LENGTH")

    def _read_chunked(self, request: HttpRequest) -> bool:
        """Reads the body into the request, as if it had come with its length; False when over the limit."""
        body = request.META["wsgi.input"].read(self.max_body + 1)
        if len(body) > self.max_body:
            return False
        request.META["CONTENT_LENGTH"] = str(len(body))
        request._stream = LimitedStream(io.BytesIO(body), len(body))
        return True

    @staticmethod
    def _declared_length(request: HttpRequest) -> int:
        try:
            return int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return 0


class RequestContextMiddleware:
    """Gives every request an id (`X-Request-ID` from a trusted proxy, that is when IAM_NUM_PROXIES is set,
    else a fresh one), echoes it on every response, errors included, and makes the request the context
    of what it changes (`iam.platform.context`: audit actor, address, user agent) and of what it logs."""

    header = "X-Request-ID"

    def __init__(self, get_response):
        self.get_response = get_response
        self.trust_header = bool(settings.REST_FRAMEWORK.get("NUM_PROXIES"))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        sent = request.META.get("HTTP_X_REQUEST_ID", "") if self.trust_header else ""
        request_id = sent if context.REQUEST_ID_RE.fullmatch(sent) else context.new_request_id()
        kind = context.OPERATOR if request.path.startswith("/admin/") else context.ACCOUNT
        with context.acting(context.Context(kind, request=request, request_id=request_id)):
            response = self.get_response(request)
        response[self.header] = request_id
        return response


class RequestDeadlineMiddleware:
    """No request runs longer than `IAM_REQUEST_SECONDS` in all (iam/platform/timeouts.py): from when the web
    worker had it whole (its `iam.received`), or from now. Past it the request answers 503 `request took
    too long` and writes nothing: at once when it waited that long for a thread, else when a statement or
    a `check_deadline()` finds it late. A view that lets the error out (not the API's endpoints, which
    answer it themselves) gets the same 503."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = request.META.get("iam.received")
        with timeouts.request_deadline(started if isinstance(started, float) else time.monotonic()):
            try:
                timeouts.check_deadline()
            except timeouts.RequestTooLong:
                return error_response(503, timeouts.TOO_LONG)
            return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if timeouts.timed_out(exception):
            return error_response(503, timeouts.TOO_LONG)
        return None


class MetricsMiddleware:
    """One counter and one histogram observation per request, labelled with the route pattern (never the
    raw path, so the label set stays bounded); no query, no lock beyond prometheus-client's own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        endpoint = match.route if match is not None else "unmatched"
        metrics.REQUESTS.labels(endpoint, str(response.status_code)).inc()
        metrics.LATENCY.labels(endpoint).observe(time.perf_counter() - started)
        return response
