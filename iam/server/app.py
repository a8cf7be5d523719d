"""Each request: its body read whole, then the WSGI application on one of the worker's threads,
its answer written whole or streamed, and its access-log line."""

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

from iam.server.protocol import ABORT, DEADLINE, REQUEST_TIMEOUT, error_head_and_body

STREAM_AFTER = 1024 * 1024  # bytes: a longer body is sent as the application produces it, not held whole
# Seconds a streamed answer waits for the client to take its next chunk: a reader that takes none for that
# long is dropped, freeing its thread, well before the worker counts as stuck (gunicorn's `timeout`).
SEND_TIMEOUT = REQUEST_TIMEOUT


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
