"""Each connection: uvicorn's httptools protocol with a deadline and limits on each request,
and what the server answers itself before Django runs (docs/operations.md#slow-clients)."""

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# seconds: docs/operations.md#slow-clients, "a request not received whole within 10 seconds is dropped"
REQUEST_TIMEOUT = 10.0
DEADLINE = "iam.deadline"  # scope["extensions"] key: the loop time by which the request must be whole
ABORT = "iam.abort"  # scope["extensions"] key: drops the connection at once (a client that reads nothing)
LIMIT_REQUEST_HEAD = 64 * 1024  # bytes of header fields in one request (nginx allows 32 KiB by default)


def security_headers() -> list[tuple[bytes, bytes]]:
    from iam.http.middleware import security_headers as headers

    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers().items()]


def error_head_and_body(status: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The docs/api.md#errors flat error body with the docs/security.md#the-edges headers, for what is
    answered before Django runs; the connection closes after it (the rest of the request is not read)."""
    from iam.http.errors import STATUS_MESSAGES

    body = b'{"success":false,"status":%d,"message":"%s"}' % (status, STATUS_MESSAGES[status].encode("ascii"))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"connection", b"close"),
        *security_headers(),
    ]
    return headers, body


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request and gunicorn's limits on its head.

    The deadline runs from the request's first byte (from the connection's opening, for its first
    request): while the head is incomplete this protocol answers 408 itself; once it is complete, the
    deadline travels in the scope and `ReadWhole` enforces it on the body. httptools sets no bound on a
    request's head: gunicorn's `limit_request_line`, `limit_request_fields` and
    `limit_request_field_size` (set by the worker) apply, as under its own workers, and the whole head is
    bounded too (`LIMIT_REQUEST_HEAD`), so a head cannot hold 100 fields of 8 KiB each. A connection past
    gunicorn's `worker_connections` (1,000 by default) is answered 503 and closed at once: with the head
    bound and uvicorn's 64 KiB of unread body per connection, what open connections hold is bounded."""

    limit_request_line = 4094
    limit_request_fields = 100
    limit_request_field_size = 8190
    limit_connections = 1000

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.deadline_timer: asyncio.TimerHandle | None = None
        self.head_too_large = False
        if len(self.connections) > self.limit_connections:  # this one counted
            self.answer_and_close(503)
            return
        self.start_deadline()

    def start_deadline(self) -> None:
        self.deadline = self.loop.time() + REQUEST_TIMEOUT
        self.deadline_timer = self.loop.call_at(self.deadline, self.head_timed_out)

    def stop_deadline(self) -> None:
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
            self.deadline_timer = None

    def connection_lost(self, exc) -> None:
        self.stop_deadline()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.deadline_timer is None:  # a later request on a kept-alive connection: its first byte
            self.start_deadline()
        self.url_bytes = self.header_bytes = 0

    def on_url(self, url: bytes) -> None:
        self.url_bytes += len(url)
        if self.url_bytes > self.limit_request_line:
            self.head_too_large = True
            return
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if (
            len(self.headers) >= self.limit_request_fields
            or len(name) + len(value) > self.limit_request_field_size
            or self.header_bytes > LIMIT_REQUEST_HEAD
        ):
            self.head_too_large = True
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.head_too_large:
            return  # data_received answers 400 and closes
        self.stop_deadline()
        extensions = self.scope.setdefault("extensions", {})
        extensions[DEADLINE] = self.deadline
        extensions[ABORT] = self.transport.abort
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.head_too_large:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self.head_too_large:
            super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.head_too_large and not self.transport.is_closing():
            self.answer_and_close(400)

    def head_timed_out(self) -> None:
        self.deadline_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # The connection's previous (pipelined) request is still being answered: no room for a 408.
            self.cycle.keep_alive = False
            return
        self.answer_and_close(408)

    def answer_and_close(self, status: int) -> None:
        headers, body = error_head_and_body(status)
        head = b"".join(b"%s: %s\r\n" % header for header in headers)
        reason = {400: b"Bad Request", 408: b"Request Timeout", 503: b"Service Unavailable"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, reason, head, body))
        self.transport.close()
