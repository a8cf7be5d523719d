"""Each connection's HTTP/1.1: uvicorn's httptools protocol with the limits a client must keep to.

- **Its request in time.** A request must be received whole within REQUEST_TIMEOUT seconds of its first
  byte (of the connection's opening, for its first request): while its head is incomplete this protocol
  answers 408 itself; once the head is whole, the deadline travels in the scope and the application
  (`iam.server.app.ReadWhole`) enforces it on the body.
- **A bounded head.** httptools sets no bound on a request's head: gunicorn's `limit_request_line`,
  `limit_request_fields` and `limit_request_field_size` (set by the worker) apply, as under its own
  workers, and the head as a whole is bounded too (LIMIT_REQUEST_HEAD), so a head cannot hold 100 fields
  of 8 KiB each. Past one: 400.
- **A request the parser refuses** (a body length given twice or two ways, a bare LF, a folded or NUL
  header line...) is answered 400 with the service's error body, not uvicorn's plain text.
- **Its share of the connections.** A connection past gunicorn's `worker_connections` (1,000 by default),
  or past CONNECTIONS_PER_ADDRESS open connections from its address, is answered 503 and closed at once:
  one address cannot take the whole limit from the others.
- **Taking its answer.** While bytes of an answer wait in the worker for the client, it must take them
  at MIN_READ_RATE: over its last RATE_WINDOW seconds of waiting (fewer, while it has waited less), at
  least MIN_READ_RATE for each second but the first (READ_GRACE), or the connection is dropped
  (`check_reader`). Only time when bytes wait counts: a client that keeps up owes nothing, whatever pace
  the answer is produced at. So a client that reads nothing holds its answer's memory, and any thread
  sending it, for about a second and a half; one that reads in bursts (reading, then working on what it
  read) keeps its connection as long as it keeps the pace, and stalls at most RATE_WINDOW seconds.

Every error answered here carries the service's error body and headers (`iam.server.responses`)."""

import asyncio
import collections
import contextlib
import fcntl
import logging
import socket
import struct
import termios

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from iam.server import turns
from iam.server.responses import error_bytes

REQUEST_TIMEOUT = 10.0  # seconds: "a request not received whole within 10 seconds is dropped"
LIMIT_REQUEST_HEAD = 64 * 1024  # bytes of header fields in one request (nginx allows 32 KiB by default)
CONNECTIONS_PER_ADDRESS = 100  # open connections of one client address, per worker
MIN_READ_RATE = 64 * 1024  # bytes a second a client must take of an answer waiting for it...
RATE_WINDOW = 10.0  # ...over its last this many seconds of waiting...
READ_GRACE = 1.0  # ...but one
CHECK_EVERY = 0.5  # seconds between two looks at a connection whose answer waits

DEADLINE = "iam.deadline"  # scope["extensions"] key: the loop time by which the request must be whole
CONNECTION = "iam.connection"  # scope["extensions"] key: the request's HttpProtocol (its writes, `abort`)

logger = logging.getLogger("uvicorn.error")  # gunicorn's error log, under the worker


class CountingTransport:
    """The connection's transport as uvicorn uses it, counting the bytes written to it (`written`). A
    write that leaves bytes waiting in the worker starts the watch on the reader
    (`HttpProtocol.watch_reader`)."""

    def __init__(self, transport: asyncio.Transport, on_waiting):
        self.transport = transport
        self.on_waiting = on_waiting
        self.written = 0

    def write(self, data) -> None:
        self.written += len(data)
        self.transport.write(data)
        if self.transport.get_write_buffer_size():
            self.on_waiting()

    def __getattr__(self, name: str):
        return getattr(self.transport, name)


def open_per_address(server_state) -> collections.Counter:
    """The worker's open connections by client address (kept beside uvicorn's own set of them)."""
    counts = getattr(server_state, "iam_per_address", None)
    if counts is None:
        counts = server_state.iam_per_address = collections.Counter()
    return counts


class HttpProtocol(HttpToolsProtocol):
    limit_request_line = 4094
    limit_request_fields = 100
    limit_request_field_size = 8190
    limit_connections = 1000
    limit_per_address: int | None = CONNECTIONS_PER_ADDRESS  # None: off (behind proxies, one address)

    def connection_made(self, transport) -> None:
        self.counted = CountingTransport(transport, self.watch_reader)
        self.deadline_timer: asyncio.TimerHandle | None = None
        self.reader_timer: asyncio.TimerHandle | None = None
        self.waited = 0.0  # seconds bytes of this connection's answers have waited in the worker, in all
        self.ticked_at = 0.0  # when `waited` was last brought up to date
        # (waited, bytes taken by then): from the start, so what a client took while it kept up counts
        self.taken_at: collections.deque = collections.deque([(0.0, 0)])
        self.head_too_large = False
        self.refusing = False  # a request was refused while an earlier one is still being answered
        super().connection_made(self.counted)
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        self.address = self.client[0] if self.client else ""
        per_address = open_per_address(self.server_state)
        per_address[self.address] += 1  # this one counted, as in `connections`
        limit = self.limit_per_address
        if len(self.connections) > self.limit_connections or (limit and per_address[self.address] > limit):
            self.answer_and_close(503)
            return
        self.start_deadline()

    def connection_lost(self, exc) -> None:
        self.stop_deadline()
        if self.reader_timer is not None:
            self.reader_timer.cancel()
            self.reader_timer = None
        per_address = open_per_address(self.server_state)
        per_address[self.address] -= 1
        if per_address[self.address] <= 0:
            del per_address[self.address]
        super().connection_lost(exc)
        turns.publish(len(self.connections))  # the other workers take the next turns accordingly

    # The request's deadline

    def start_deadline(self) -> None:
        self.deadline = self.loop.time() + REQUEST_TIMEOUT
        self.deadline_timer = self.loop.call_at(self.deadline, self.head_timed_out)

    def stop_deadline(self) -> None:
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
            self.deadline_timer = None

    def head_timed_out(self) -> None:
        self.deadline_timer = None
        if not self.transport.is_closing():
            self.refuse(408)

    # The request's head

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
        extensions[CONNECTION] = self
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.head_too_large:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self.head_too_large:
            super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self.refusing or self.transport.is_closing():
            return  # nothing more is read of a connection that ends
        super().data_received(data)  # a request httptools refuses: `send_400_response`
        if self.head_too_large and not self.transport.is_closing():
            self.refuse(400)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request httptools refuses (`msg` is uvicorn's plain text): the service's
        400 instead."""
        self.refuse(400)

    def refuse(self, status: int) -> None:
        """Answers `status` and closes; or, while an earlier request of the connection is still being
        answered (pipelined), lets that answer end the connection, so no answer is cut into another."""
        if self.answering_earlier():
            self.cycle.keep_alive = False
            self.refusing = True
            return
        self.answer_and_close(status)

    def answering_earlier(self) -> bool:
        """Whether a request before the one being received is still being answered: one is queued behind
        it, or the last whose head came is whole and not yet answered."""
        cycle = self.cycle
        if self.pipeline:
            return True
        return (
            cycle is not None
            and not cycle.response_complete
            and (cycle.response_started or not cycle.more_body)
        )

    def answer_and_close(self, status: int) -> None:
        self.transport.write(error_bytes(status))
        self.transport.close()

    def abort(self) -> None:
        """Drops the connection at once: its unsent bytes are discarded, the kernel's too (a reset, not
        a close that would still send them)."""
        sock = self.counted.transport.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.counted.transport.abort()

    # The client taking its answer

    def watch_reader(self) -> None:
        """Bytes wait in the worker for this client: they are watched until it has taken them all."""
        if self.reader_timer is None:
            self.ticked_at = self.loop.time()
            self.taken_at.append((self.waited, self.taken()))
            self.reader_timer = self.loop.call_later(CHECK_EVERY, self.check_reader)

    def taken(self) -> int:
        """Bytes the client has taken: written to the connection, less those still waiting in the worker
        and those its kernel has not acknowledged yet. (The kernel's own buffer takes megabytes at once,
        and frees room in large steps: what it holds is not taken until the client acknowledges it.)"""
        return self.counted.written - self.counted.transport.get_write_buffer_size() - self.unacknowledged()

    def unacknowledged(self) -> int:
        """Bytes in the kernel's send queue of the connection not yet acknowledged (Linux's SIOCOUTQ);
        0 where the system cannot tell."""
        try:
            return struct.unpack("i", fcntl.ioctl(self.fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        except OSError:
            return 0

    def check_reader(self) -> None:
        """Drops the connection when the client took less than MIN_READ_RATE for each second but
        READ_GRACE of its last RATE_WINDOW seconds of waiting (of all of them, if fewer)."""
        self.reader_timer = None
        now, taken = self.loop.time(), self.taken()
        self.waited += now - self.ticked_at
        self.ticked_at = now
        samples = self.taken_at
        samples.append((self.waited, taken))
        while len(samples) > 1 and samples[1][0] <= self.waited - RATE_WINDOW:
            samples.popleft()
        if not self.counted.transport.get_write_buffer_size():
            return  # all taken: a later wait starts the watch again
        waited_then, taken_then = samples[0]  # the window's start
        if taken - taken_then < MIN_READ_RATE * (self.waited - waited_then - READ_GRACE):
            logger.info(
                "dropped %s: it took %d bytes of its answer in %.1f s of waiting (at least %d a second)",
                self.address,
                taken - taken_then,
                self.waited - waited_then,
                MIN_READ_RATE,
            )
            self.abort()
            return
        self.reader_timer = self.loop.call_later(CHECK_EVERY, self.check_reader)
