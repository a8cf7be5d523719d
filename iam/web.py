"""The web process's server (the Procfile's `web`: `gunicorn -k iam.web.Worker`): gunicorn's master, as
before, and in each worker process uvicorn's event loop in front of the project's WSGI application.

A slow client must hold no worker (CONTRACT 13). gunicorn's sync worker reads a request on the worker
itself, so a client that sends its headers, or its body, a byte at a time holds that worker until the
30 s timeout: two such connections stopped the service. Here the event loop reads every request whole,
headers and body, for any number of connections at once; only then does one of a fixed pool of threads
(`--threads` per worker) run Django's WSGI application on it, exactly as it runs under a sync worker
behind a buffering proxy, with its persistent database connection per thread. A request not received
whole within `REQUEST_TIMEOUT` seconds of its first byte (of its connection's opening, for the first
one) is answered 408 and its connection closed; a body past `DATA_UPLOAD_MAX_MEMORY_SIZE` is not read
further (Django answers 413 from the length seen) and its connection is closed.

A worker holds at most `IAM_WEB_BUFFER_BYTES` of request bodies at once, across all its connections (bodies
arriving, waiting for a thread, or running): a chunk that would pass it makes the worker refuse the body
still arriving that holds the most, this one included, with 503 and a closed connection, so the many
large partial bodies are refused before the small whole ones. And as under gunicorn's sync workers, a
request that runs in a thread longer than gunicorn's `timeout` (with no progress on a streamed answer)
gets its worker killed and replaced by the master: the worker stops notifying it.

Why not Django's own ASGI handler (`django.core.asgi`): it runs each request's sync code in a thread of
its own, with a database connection of its own, and hops between the loop and that thread several times
a request; `make bench` measured the bare view at a third of sync gunicorn's throughput and
`clients/validate` at a seventh. This adapter costs one hop to the pool and back."""

import asyncio
import concurrent.futures
import io
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker

REQUEST_TIMEOUT = 10.0  # seconds: CONTRACT 13, "a request not received whole within 10 seconds is dropped"
STREAM_AFTER = 1024 * 1024  # bytes: a longer body is sent as the application produces it, not held whole
DEADLINE = "iam.deadline"  # scope["extensions"] key: the loop time by which the request must be whole
ABORT = "iam.abort"  # scope["extensions"] key: drops the connection at once (a client that reads nothing)
# Seconds a streamed answer waits for the client to take its next chunk: a reader that takes none for that
# long is dropped, freeing its thread, well before the worker counts as stuck (gunicorn's `timeout`).
SEND_TIMEOUT = REQUEST_TIMEOUT
LIMIT_REQUEST_HEAD = 64 * 1024  # bytes of header fields in one request (nginx allows 32 KiB by default)


def security_headers() -> list[tuple[bytes, bytes]]:
    from iam.middleware import security_headers as headers

    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers().items()]


def error_head_and_body(status: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """CONTRACT 1's flat error body with CONTRACT 14's headers, for what is answered before Django runs;
    the connection closes after it (the rest of the request is not read)."""
    from iam.errors import STATUS_MESSAGES

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


class Held:
    """One request's body while its worker holds it: counted in `ReadWhole.buffered` from its first byte
    until the request ends (it is refused, or answered, or its client goes away)."""

    __slots__ = ("chunks", "refused", "size", "task")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.refused = False
        self.task: asyncio.Task | None = None  # the one reading it, while it waits for more of it


class ReadWhole:
    """The ASGI application each worker serves: reads the request's body whole, within the deadline, on
    the event loop, then runs the WSGI application on it in one of `threads` threads. The bodies it holds
    at once stay within `buffer_bytes` (`IAM_WEB_BUFFER_BYTES`)."""

    def __init__(self, wsgi_app, *, threads: int, max_body: int, buffer_bytes: int, log=None):
        self.wsgi_app = wsgi_app
        self.max_body = max_body
        self.buffer_bytes = buffer_bytes
        self.buffered = 0  # bytes of the bodies held: arriving, waiting for a thread, or running
        self.arriving: set[Held] = set()  # bodies not yet whole: those that may be refused to make room
        self.running: set[Stream] = set()  # requests handed to the pool, with their start (`since`)
        self.log = log  # gunicorn's logger: access lines in its configured format
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="web")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off and WebSocket unsupported: nothing else comes
            return
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        deadline = scope.get("extensions", {}).get(DEADLINE) or loop.time() + REQUEST_TIMEOUT
        held = Held()
        try:
            body = await self.read_body(scope, receive, deadline, held)
            if not isinstance(body, bytes):
                self.release(held)  # nothing of it is kept
            environ = self.environ(scope, body)
            if body is TIMED_OUT:
                headers, content = error_head_and_body(408)
                status = "408 Request Timeout"
            elif body is REFUSED:
                headers, content = error_head_and_body(503)
                status = "503 Service Unavailable"
            elif body is DISCONNECTED:
                return
            else:
                stream = Stream(loop, receive, send)
                stream.abort = scope.get("extensions", {}).get(ABORT)
                self.running.add(stream)
                try:
                    status, headers, content = await loop.run_in_executor(
                        self.executor, self.run, environ, stream
                    )
                finally:
                    self.running.discard(stream)
                if content is STREAMED:  # sent by `run`, chunk by chunk
                    self.log_access(status, headers, stream.sent, scope, environ, started)
                    return
                if body is TOO_LARGE:  # Django answered 413 from the length; the rest is not read
                    headers = [*(h for h in headers if h[0] != b"connection"), (b"connection", b"close")]
            await send({"type": "http.response.start", "status": int(status[:3]), "headers": headers})
            await send({"type": "http.response.body", "body": content})
            self.log_access(status, headers, len(content), scope, environ, started)
        finally:
            self.release(held)

    def hold(self, held: Held, chunk: bytes) -> bool:
        """Keeps `chunk` of `held`'s body within the worker's budget; False when `held` is refused. Past
        the budget, the body still arriving that holds the most, `held` with its chunk included, is
        refused: its bytes are dropped at once, and its task, waiting for more of it, is woken to answer
        503. One such refusal always makes room: the body refused holds more than the chunk."""
        size = len(chunk)
        if self.buffered + size > self.buffer_bytes:
            others = (other for other in self.arriving if other is not held)
            largest = max(others, key=lambda other: other.size, default=None)
            if largest is None or largest.size <= held.size + size:
                self.refuse(held)
                return False
            self.refuse(largest)
            largest.task.cancel()  # waiting in `read_body`'s receive: it answers 503 at once
        held.chunks.append(chunk)
        held.size += size
        self.buffered += size
        return True

    def refuse(self, held: Held) -> None:
        self.release(held)
        held.refused = True

    def release(self, held: Held) -> None:
        self.buffered -= held.size
        held.size = 0
        held.chunks = []
        self.arriving.discard(held)

    def longest_running(self) -> float:
        """Seconds since the request that has run longest in the pool started in its thread (or last
        sent a chunk of its streamed answer); 0 with none running. A request waiting for a thread does
        not count: a queue under load is not a stuck request."""
        oldest = min((stream.since for stream in self.running if stream.since is not None), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def log_access(self, status: str, headers: list, sent: int, scope, environ: dict, started: float) -> None:
        if self.log is not None:
            self.log.access(
                Sent(status, headers, sent),
                [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]],
                environ,
                timedelta(seconds=time.monotonic() - started),
            )

    async def read_body(self, scope, receive, deadline: float, held: Held):
        declared = self.declared_length(scope)
        if declared is not None and declared > self.max_body:
            return TOO_LARGE
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return DISCONNECTED
                    if held.refused:  # to make room for others, while it arrived
                        return REFUSED
                    chunk = message.get("body", b"")
                    if held.size + len(chunk) > self.max_body:
                        return TOO_LARGE
                    if chunk and not self.hold(held, chunk):
                        return REFUSED
                    if not message.get("more_body", False):
                        self.arriving.discard(held)
                        body = held.chunks[0] if len(held.chunks) == 1 else b"".join(held.chunks)
                        held.chunks = []  # `body` is what is held from here (its size still counted)
                        return body
                    held.task = held.task or asyncio.current_task()
                    self.arriving.add(held)
        except TimeoutError:
            return REFUSED if held.refused else TIMED_OUT
        except asyncio.CancelledError:
            if not held.refused:
                raise
            asyncio.current_task().uncancel()  # `hold` cancelled it to make room for another body
            return REFUSED

    @staticmethod
    def declared_length(scope) -> int | None:
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:  # httptools refuses such a request before it gets here
                    return None
        return None

    def environ(self, scope, body) -> dict:
        """PEP 3333's environ, as gunicorn builds it. Header names holding `_` are dropped (gunicorn's
        default): `X_Forwarded_For` must not pass for `X-Forwarded-For`."""
        server = scope.get("server") or ("localhost", 80)
        client = scope.get("client") or ("", 0)
        query = scope["query_string"].decode("latin-1")
        raw_path = scope.get("raw_path") or scope["path"].encode("utf-8")
        content = body if isinstance(body, bytes) else b""
        environ = {
            "REQUEST_METHOD": scope["method"],
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote_to_bytes(raw_path).decode("latin-1"),
            "QUERY_STRING": query,
            "RAW_URI": raw_path.decode("latin-1") + (f"?{query}" if query else ""),
            "SERVER_NAME": str(server[0]),
            "SERVER_PORT": str(server[1]),
            "SERVER_PROTOCOL": f"HTTP/{scope['http_version']}",
            "REMOTE_ADDR": client[0],
            "REMOTE_PORT": str(client[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": scope.get("scheme", "http"),
            "wsgi.input": io.BytesIO(content),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").upper()
            if "_" in name:
                continue
            value = raw_value.decode("latin-1")
            if name in ("CONTENT-TYPE", "CONTENT-LENGTH"):
                key = name.replace("-", "_")
            else:
                key = "HTTP_" + name.replace("-", "_")
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        # The body's own length: a chunked body is read like any other; one over the limit keeps the
        # length seen (past the limit), which Django refuses with 413 without reading.
        if body is TOO_LARGE:
            environ["CONTENT_LENGTH"] = str(max(self.declared_length(scope) or 0, self.max_body + 1))
        else:
            environ["CONTENT_LENGTH"] = str(len(content))
        return environ

    def run(self, environ: dict, stream: "Stream") -> tuple[str, list[tuple[bytes, bytes]], Any]:
        """The WSGI application on one request, in a pool thread: its status, headers and whole body; or,
        for a body past STREAM_AFTER bytes (a streamed answer of one large object), STREAMED once this
        thread has sent it through `stream`, chunk by chunk as the client takes them. The body is
        iterated in the thread that ran the application: its database connection is this thread's."""
        stream.since = time.monotonic()
        started: list = []
        chunks: list[bytes] = []

        def start_response(status, headers, exc_info=None):
            if exc_info and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [status, headers]
            return chunks.append

        result = self.wsgi_app(environ, start_response)
        try:
            size, pieces = 0, iter(result)
            for chunk in pieces:
                chunks.append(chunk)
                size += len(chunk)
                if size > STREAM_AFTER:
                    break
            else:
                pieces = None
            status, headers = started
            encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
            if pieces is not None:
                # No Content-Length (a streamed answer): uvicorn sends it with chunked transfer encoding.
                stream.start(int(status[:3]), encoded, b"".join(chunks))
                chunks.clear()
                for chunk in pieces:
                    if chunk and not stream.body(chunk):
                        break  # the client is gone: nothing more is read or written
                stream.end()
                return status, encoded, STREAMED
        finally:
            if hasattr(result, "close"):
                result.close()
        content = b"".join(chunks)
        if status[:3] not in ("204", "304") and not any(name == b"content-length" for name, _ in encoded):
            encoded.append((b"content-length", str(len(content)).encode("ascii")))  # whole: no chunking
        return status, encoded, content


class Stream:
    """A response body sent from the pool thread that produces it: each send waits until the event loop
    has written the chunk, and uvicorn's send first waits while the connection's write buffer is full
    (its flow control), so the thread produces the next chunk only as the client takes the previous
    ones and a worker holds about one chunk of a body of any size. A client that goes away stops it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, receive, send):
        self.loop, self.receive, self.send = loop, receive, send
        self.gone: threading.Event | None = None  # made when a body is streamed
        self.sent = 0
        self.since: float | None = None  # when a thread started running it, or it last sent a chunk
        self.watch: asyncio.Future | None = None
        self.abort = None  # drops the connection (HttpProtocol's ABORT), when the server gives it
        self.dropped = False

    def start(self, status: int, headers: list[tuple[bytes, bytes]], first: bytes) -> None:
        self.gone = threading.Event()
        self.call(self._start(status, headers, first))

    def body(self, chunk: bytes) -> bool:
        """Sends `chunk`; False when the client is gone, or took nothing for SEND_TIMEOUT seconds (its
        connection is then dropped)."""
        if self.gone is None or self.gone.is_set():
            return False
        sending = asyncio.run_coroutine_threadsafe(
            self.send({"type": "http.response.body", "body": chunk, "more_body": True}), self.loop
        )
        try:
            sending.result(timeout=SEND_TIMEOUT)
        except concurrent.futures.TimeoutError:
            sending.cancel()
            self.dropped = True
            self.gone.set()
            if self.abort is not None:
                self.loop.call_soon_threadsafe(self.abort)
            return False
        self.sent += len(chunk)
        self.since = time.monotonic()  # progress: not a stuck request (Worker.callback_notify)
        return True

    def end(self) -> None:
        if self.dropped:  # the connection is gone: nothing more is sent on it
            self.loop.call_soon_threadsafe(self._stop_watching)
            return
        self.call(self._end())

    def call(self, coroutine) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def _stop_watching(self) -> None:
        if self.watch is not None:
            self.watch.cancel()

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]], first: bytes) -> None:
        self.watch = asyncio.ensure_future(self._watch())
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": first, "more_body": True})
        self.sent += len(first)

    async def _watch(self) -> None:
        # The request was read whole: what `receive` answers next is the client's disconnect (or the end
        # of the response).
        await self.receive()
        if self.gone is not None:
            self.gone.set()

    async def _end(self) -> None:
        self._stop_watching()
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


class Sent:
    """What gunicorn's access log reads of a response."""

    def __init__(self, status: str, headers: list[tuple[bytes, bytes]], sent: int):
        self.status = status
        self.sent = sent
        self.headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]


TIMED_OUT, DISCONNECTED, TOO_LARGE, REFUSED, STREAMED = object(), object(), object(), object(), object()


class Worker(UvicornWorker):
    """gunicorn's worker class for the web process: uvicorn's loop with `HttpProtocol`, serving the WSGI
    application through `ReadWhole`. Client addresses are the connection's (no `X-Forwarded-*` rewriting
    here: `IAM_NUM_PROXIES` decides, CONTRACT 13), and access lines keep gunicorn's format.

    gunicorn's master kills a worker that has not notified it for `timeout` seconds. uvicorn's loop
    notifies as long as it turns, whatever its threads do; this worker notifies each second unless a
    request has run in its pool for longer than `timeout`: so, as under gunicorn's sync workers, a request
    stuck in Python gets its worker killed (SIGABRT) and replaced."""

    CONFIG_KWARGS = {
        "loop": "uvloop",
        "http": HttpProtocol,
        "interface": "asgi3",
        "lifespan": "off",
        "proxy_headers": False,
        "server_header": False,
        "access_log": False,
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        HttpProtocol.limit_request_line = self.cfg.limit_request_line or sys.maxsize
        HttpProtocol.limit_request_fields = self.cfg.limit_request_fields or sys.maxsize
        HttpProtocol.limit_request_field_size = self.cfg.limit_request_field_size or sys.maxsize
        HttpProtocol.limit_connections = self.cfg.worker_connections
        self.config.timeout_notify = 0.5  # uvicorn checks each second: a notification each second
        self.stuck_reported = False

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.conf import settings

        self.wsgi = ReadWhole(
            self.wsgi,
            threads=self.cfg.threads,
            max_body=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
            buffer_bytes=settings.IAM_WEB_BUFFER_BYTES,
            log=self.log,
        )

    async def callback_notify(self) -> None:
        running = self.wsgi.longest_running()
        if self.cfg.timeout and running > self.cfg.timeout:
            if not self.stuck_reported:
                self.stuck_reported = True
                self.log.critical(
                    "a request has run %.0f s, past the timeout (%s s): no more notifications, the master "
                    "replaces this worker (pid %s)",
                    running,
                    self.cfg.timeout,
                    self.pid,
                )
            return
        self.stuck_reported = False  # it ended before the master acted: the next one is said again
        self.notify()
