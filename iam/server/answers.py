"""The answer path: the WSGI application runs in a pool thread, and its answer reaches the client without
holding that thread while the client does not read.

- **Whole answers.** The thread reads the application's body up to HOLD bytes. An answer that ends
  within it (every list page, every object but the largest memberships, an error) is handed whole to the
  event loop and the thread is free at once; the loop writes it in slices as the client takes them. The
  worker holds at most `budget` bytes of such answers not yet taken (`IAM_WEB_BUFFER_BYTES`, a pool apart
  from the request bodies'), and the read-rate rule (iam/server/protocol.py) drops a client that does not
  take its answer, so what they hold is given back within seconds.
- **Streamed answers.** An answer past HOLD bytes (a membership of 50 roles of 500 large permissions:
  hundreds of megabytes), or one that would take the worker's held answers past the budget, cannot be
  held: it is sent from its thread as the client takes it, a slice at a time, so the worker holds about a
  slice of it, and its thread is held until the client has taken it, as slowly as the read-rate rule
  allows and no slower. One client address holds at most STREAMS_PER_ADDRESS of these at once per
  worker: a third is answered 503 `service unavailable` instead (the client retries), so an address
  cannot hold a worker's threads with large answers it reads slowly.
- **Every wait of a thread on the loop is bounded.** The thread waits for each slice in steps of a
  second; a connection that takes nothing for STALL_TIMEOUT seconds is dropped, whatever else happens
  (the read-rate rule drops it long before). A thread is never parked on a send without a timeout."""

import asyncio
import collections
import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from iam.server.responses import error_head_and_body

HOLD = 16 * 1024 * 1024  # bytes of an answer produced before it is handed off whole or sent as a stream
SLICE = 256 * 1024  # bytes written at a time, each when the client has taken the ones before
STREAMS_PER_ADDRESS = 2  # streamed answers of one client address at once, per worker
STALL_TIMEOUT = 10.0  # seconds a streaming thread waits with nothing taken before it drops the client
WAIT_STEP = 1.0  # seconds between two looks of a waiting thread at its connection

logger = logging.getLogger("uvicorn.error")


class Whole:
    """An answer produced whole: its status line, headers and body (a list of chunks); `held` bytes of it
    reserved in the worker's answer budget."""

    __slots__ = ("body", "headers", "held", "status")

    def __init__(self, status: str, headers: list[tuple[bytes, bytes]], body: list[bytes], held: int = 0):
        self.status, self.headers, self.body, self.held = status, headers, body, held


def error_answer(status: int, reason: str) -> Whole:
    headers, body = error_head_and_body(status)
    return Whole(f"{status} {reason}", headers, [body])


STREAMED = object()  # `Answers.run`'s result once its thread has sent the answer itself


def taken_from(chunks: list[bytes]) -> Iterator[bytes]:
    """The chunks of `chunks`, each dropped from the list as it is taken: memory goes as they are sent."""
    chunks.reverse()
    while chunks:
        yield chunks.pop()


def slices(chunks: Iterable[bytes]) -> Iterator[memoryview]:
    """`chunks` as views of at most SLICE bytes (no copy)."""
    for chunk in chunks:
        view = memoryview(chunk)
        for start in range(0, len(view), SLICE):
            yield view[start : start + SLICE]


class Budget:
    """Bytes of whole answers the worker holds that their clients have not taken, across threads and the
    loop."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self.lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        with self.lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            return True

    def release(self, size: int) -> None:
        with self.lock:
            self.held -= size


class Streams:
    """Streamed answers at once by client address."""

    def __init__(self, limit: int = STREAMS_PER_ADDRESS):
        self.limit = limit
        self.by_address: collections.Counter = collections.Counter()
        self.lock = threading.Lock()

    def enter(self, address: str) -> bool:
        with self.lock:
            if self.by_address[address] >= self.limit:
                return False
            self.by_address[address] += 1
            return True

    def leave(self, address: str) -> None:
        with self.lock:
            self.by_address[address] -= 1
            if self.by_address[address] <= 0:
                del self.by_address[address]


class Call:
    """One request run in a pool thread: what the thread reads of the loop's side (the ASGI `send` and
    `receive`, the connection), and what the worker reads of it (`since`, for the stuck-request check)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, receive, send, connection=None):
        self.loop, self.receive, self.send = loop, receive, send
        self.connection = connection  # the HttpProtocol, when the server gives it (its writes, `abort`)
        self.since: float | None = None  # when a thread started running it, or its stream last moved
        self.sent = 0
        self.status = ""
        self.headers: list[tuple[bytes, bytes]] = []
        self.gone = threading.Event()
        self.watch: asyncio.Future | None = None

    # In the thread

    def stream(self, status: str, headers: list[tuple[bytes, bytes]], body: Iterable[bytes]) -> None:
        """Sends the answer from this thread, each slice once the client has taken the ones before."""
        self.status, self.headers = status, headers
        start = {"type": "http.response.start", "status": int(status[:3]), "headers": headers}
        if not self.wait(self.on_loop(self._start(start))):
            return
        for piece in slices(body):
            if not self.wait(self.on_loop(self._send(piece))):
                return  # the client is gone or took nothing: nothing more is read or written
            self.sent += len(piece)
            self.since = time.monotonic()  # progress: not a stuck request (Worker.callback_notify)
        self.wait(self.on_loop(self._end()))

    def on_loop(self, coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def wait(self, future: concurrent.futures.Future) -> bool:
        """Waits for `future` (a send, which waits while the client is behind); False when the client is
        gone, or took nothing for STALL_TIMEOUT seconds (its connection is then dropped)."""
        moved_at, written = time.monotonic(), self.written()
        while True:
            try:
                future.result(timeout=WAIT_STEP)
                return not self.gone.is_set()
            except concurrent.futures.TimeoutError:
                pass
            except Exception:  # the connection failed under it: uvicorn refused the message
                self.gone.set()
                return False
            now = time.monotonic()
            if self.gone.is_set():
                future.cancel()
                return False
            if self.written() != written:
                moved_at, written = now, self.written()
                self.since = now  # progress: not a stuck request (Worker.callback_notify)
            elif now - moved_at >= STALL_TIMEOUT:
                future.cancel()
                self.gone.set()
                if self.connection is not None:
                    self.loop.call_soon_threadsafe(self.connection.abort)
                return False

    def written(self) -> int:
        """Bytes written to the connection so far: they move only as the client takes what waits."""
        return self.connection.counted.written if self.connection is not None else self.sent

    # On the loop

    async def _start(self, start: dict) -> None:
        self.watch = asyncio.ensure_future(self._watch())
        await self.send(start)

    async def _send(self, piece: memoryview) -> None:
        await self.send({"type": "http.response.body", "body": piece, "more_body": True})

    async def _end(self) -> None:
        self.stop_watching()
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _watch(self) -> None:
        # The request was read whole: what `receive` answers next is the client's disconnect (or the end
        # of the response).
        await self.receive()
        self.gone.set()

    def stop_watching(self) -> None:
        if self.watch is not None:
            self.watch.cancel()


class Answers:
    """Runs the WSGI application in a pool thread and decides how its answer goes out."""

    def __init__(self, wsgi_app, *, budget: int, address_of=None):
        self.wsgi_app = wsgi_app
        self.budget = Budget(budget)
        self.streams = Streams()
        self.address_of = address_of or (lambda environ: environ.get("REMOTE_ADDR", ""))

    def run(self, environ: dict, call: Call) -> Whole | Any:
        """In a pool thread: the application's answer, whole (for the loop to send), or STREAMED once this
        thread has sent it. Its body is read in the thread that ran the application: its database
        connection is this thread's."""
        call.since = time.monotonic()
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
                if chunk:
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > HOLD:
                        break
            else:
                pieces = None
            status, headers = started
            encoded = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
            if pieces is None:  # whole: it goes with its length, not chunked
                lengthless = not any(name == b"content-length" for name, _ in encoded)
                if lengthless and status[:3] not in ("204", "304"):
                    encoded.append((b"content-length", str(size).encode("ascii")))
                if self.budget.reserve(size):
                    return Whole(status, encoded, chunks, held=size)
            address = self.address_of(environ)
            if not self.streams.enter(address):
                logger.warning("refused a streamed answer to %s: it holds %d", address, self.streams.limit)
                return error_answer(503, "Service Unavailable")
            try:
                call.stream(status, encoded, itertools.chain(taken_from(chunks), pieces or ()))
            finally:
                self.streams.leave(address)
            return STREAMED
        finally:
            if hasattr(result, "close"):
                result.close()
