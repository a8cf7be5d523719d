"""The ASGI application each web worker serves (`ReadWhole`): it reads each request's body whole on the
event loop, within the request's deadline and the worker's budget of body bytes, then serves a static
file on the loop (iam/server/static.py) or runs the WSGI application in one of the worker's threads
(iam/server/answers.py), and writes the access-log line (iam/server/access.py).

A worker holds at most `buffer_bytes` (`IAM_WEB_BUFFER_BYTES`) of request bodies at once, across all its
connections (bodies arriving, waiting for a thread, or running): a chunk that would pass it makes the
worker refuse the body still arriving that holds the most, this one included, with 503 and a closed
connection, so the many large partial bodies are refused before the small whole ones. A body past
`max_body` (`DATA_UPLOAD_MAX_MEMORY_SIZE`) is not read further: Django answers 413 from the length seen,
and the connection is closed."""

import asyncio
import io
import logging
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from iam.server.access import Sent, logged_environ, logged_headers
from iam.server.answers import STREAMED, Answers, Call, Whole, error_answer, slices, taken_from
from iam.server.protocol import CONNECTION, DEADLINE, REQUEST_TIMEOUT

# environ key: time.monotonic() when the request was whole (iam.platform.timeouts' start)
RECEIVED = "iam.received"

logger = logging.getLogger("uvicorn.error")


class Held:
    """One request's body while its worker holds it: counted in `ReadWhole.buffered` from its first byte
    until the request ends (it is refused, or answered, or its client goes away)."""

    __slots__ = ("chunks", "refused", "size", "task")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.refused = False
        self.task: asyncio.Task | None = None  # the one reading it, while it waits for more of it


TIMED_OUT, DISCONNECTED, TOO_LARGE, REFUSED = object(), object(), object(), object()


class ReadWhole:
    def __init__(
        self,
        wsgi_app,
        *,
        threads: int,
        max_body: int,
        buffer_bytes: int,
        log=None,
        static=None,
        address_of=None,
    ):
        self.answers = Answers(wsgi_app, budget=buffer_bytes, address_of=address_of)
        self.max_body = max_body
        self.buffer_bytes = buffer_bytes
        self.buffered = 0  # bytes of the bodies held: arriving, waiting for a thread, or running
        self.arriving: set[Held] = set()  # bodies not yet whole: those that may be refused to make room
        self.running: set[Call] = set()  # requests handed to the pool, with their start (`since`)
        self.log = log  # gunicorn's logger: access lines in its configured format
        self.static = static  # iam.server.static.StaticFiles, or None
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="web")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off and WebSocket unsupported: nothing else comes
            return
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        extensions = scope.get("extensions", {})
        deadline = extensions.get(DEADLINE) or loop.time() + REQUEST_TIMEOUT
        connection = extensions.get(CONNECTION)
        held = Held()
        try:
            body = await self.read_body(scope, receive, deadline, held)
            if not isinstance(body, bytes):
                self.release(held)  # nothing of it is kept
            if body is DISCONNECTED:
                return
            environ = self.environ(scope, body)
            if body is TIMED_OUT:
                answer = error_answer(408, "Request Timeout")
            elif body is REFUSED:
                answer = error_answer(503, "Service Unavailable")
            elif body is not TOO_LARGE and (
                found := self.static and self.static.find(scope["method"], scope["path"])
            ):
                status, headers, sent = await self.static.serve(found, environ, send, connection)
                self.log_access(status, headers, sent, scope, environ, started)
                return
            else:
                call = Call(loop, receive, send, connection)
                answer = await self.run(environ, call)
                if answer is STREAMED:  # sent by its thread, slice by slice
                    self.log_access(call.status, call.headers, call.sent, scope, environ, started)
                    return
                if answer is None:  # the application failed after its answer started: cut short
                    return
                if body is TOO_LARGE:  # Django answered 413 from the length; the rest is not read
                    kept = [header for header in answer.headers if header[0] != b"connection"]
                    answer.headers = [*kept, (b"connection", b"close")]
            sent = await self.send_whole(answer, send)
            self.log_access(answer.status, answer.headers, sent, scope, environ, started)
        finally:
            self.release(held)

    async def run(self, environ: dict, call: Call) -> Whole | object | None:
        """The WSGI application on the request, in a pool thread. A failure there (Django answers its own
        errors: this is the server's) is answered 500 with the error body, or, once the answer has
        started, ends the connection (None)."""
        loop = asyncio.get_running_loop()
        environ[RECEIVED] = time.monotonic()
        self.running.add(call)
        try:
            return await loop.run_in_executor(self.executor, self.answers.run, environ, call)
        except Exception:
            logger.exception("the web application failed")
            if call.status:  # started: the client gets a cut answer
                if call.connection is not None:
                    call.connection.abort()
                return None
            return error_answer(500, "Internal Server Error")
        finally:
            self.running.discard(call)

    async def send_whole(self, answer: Whole, send) -> int:
        """Writes an answer produced whole, a slice at a time as the client takes them (uvicorn's send
        waits while the connection's buffer is full); what it held of the worker's answer budget is given
        back as it goes. Returns the bytes sent."""
        sent, held = 0, answer.held
        try:
            status = int(answer.status[:3])
            await send({"type": "http.response.start", "status": status, "headers": answer.headers})
            for piece in slices(taken_from(answer.body)):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                sent += len(piece)
                if held:
                    given = min(held, len(piece))
                    self.answers.budget.release(given)
                    held -= given
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if held:
                self.answers.budget.release(held)
        return sent

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
        """Seconds since the request that has run longest in the pool started in its thread (or its
        streamed answer last moved); 0 with none running. A request waiting for a thread does not count:
        a queue under load is not a stuck request."""
        oldest = min((call.since for call in self.running if call.since is not None), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def log_access(self, status: str, headers: list, sent: int, scope, environ: dict, started: float) -> None:
        if self.log is not None:
            self.log.access(
                Sent(status, headers, sent),
                logged_headers(scope["headers"]),
                logged_environ(environ),
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
