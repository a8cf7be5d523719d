"""iam/server: the web process reads each request whole, within its deadline, before a thread runs the WSGI
application on it. (The server itself, slow connections and the 408 over a socket: tests/live.)"""

import asyncio
import contextlib
import json
import socket
import threading
import time

import pytest

from iam.server import protocol
from iam.server.app import ReadWhole
from iam.server.protocol import DEADLINE, HttpProtocol
from iam.server.worker import Worker
from tests.iam.web_servers import serving

LIMIT = 1024 * 1024
BUDGET = 64 * LIMIT


class App:
    """A WSGI application that records the environ and the body it was given."""

    def __init__(self):
        self.environ = None
        self.body = None

    def __call__(self, environ, start_response):
        self.environ = environ
        self.body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"ok":', b"true}"]


def scope(headers=(), *, path="/clients/validate", raw_path=None, deadline=None) -> dict:
    found = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": raw_path or path.encode(),
        "query_string": b"",
        "headers": [(name.encode(), value.encode()) for name, value in headers],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.9", 40000),
    }
    if deadline is not None:
        found["extensions"] = {DEADLINE: deadline}
    return found


def serve(app, scope_, messages, *, delay: float = 0.0):
    """Runs ReadWhole on one request whose body arrives as `messages`, `delay` seconds apart; returns the
    response start, its body, and how many body messages were read."""
    sent = []
    read = [0]

    async def receive():
        if read[0] >= len(messages):
            await asyncio.sleep(3600)  # the client sends nothing more
        await asyncio.sleep(delay)
        read[0] += 1
        return messages[read[0] - 1]

    async def send(message):
        sent.append(message)

    async def main():
        server = ReadWhole(app, threads=1, max_body=LIMIT, buffer_bytes=BUDGET)
        if scope_.get("extensions", {}).get(DEADLINE) == "soon":
            scope_["extensions"][DEADLINE] = asyncio.get_running_loop().time() + 0.3
        await server(scope_, receive, send)
        server.executor.shutdown()

    asyncio.run(main())
    start, *bodies = sent
    return start, b"".join(bytes(message["body"]) for message in bodies), read[0]


def chunk(body: bytes, more: bool = True) -> dict:
    return {"type": "http.request", "body": body, "more_body": more}


def test_a_body_in_pieces_reaches_the_application_whole_with_its_length():
    app = App()
    pieces = [chunk(b'{"a":'), chunk(b"1}", False)]
    start, body, _ = serve(app, scope([("transfer-encoding", "chunked")]), pieces)
    assert start["status"] == 200 and body == b'{"ok":true}'
    assert (b"content-length", b"11") in start["headers"]
    assert app.body == b'{"a":1}' and app.environ["CONTENT_LENGTH"] == "7"


def test_a_body_not_whole_by_the_deadline_is_answered_408_and_the_connection_closed():
    app = App()
    start, body, _ = serve(
        app, scope([("content-length", "100")], deadline="soon"), [chunk(b"{")] * 100, delay=0.1
    )
    assert app.environ is None  # the application never ran
    assert start["status"] == 408
    assert json.loads(body) == {"success": False, "status": 408, "message": "request timeout"}
    headers = dict(start["headers"])
    assert headers[b"connection"] == b"close"
    assert headers[b"x-content-type-options"] == b"nosniff" and headers[b"x-frame-options"] == b"DENY"


def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body():
    app = App()
    start, _, read = serve(app, scope([("content-length", str(LIMIT + 1))]), [chunk(b"x" * 1000)])
    assert read == 0
    assert app.body == b"" and app.environ["CONTENT_LENGTH"] == str(LIMIT + 1)  # Django answers 413
    assert dict(start["headers"])[b"connection"] == b"close"


def test_a_chunked_body_is_read_no_further_than_the_limit():
    app = App()
    messages = [chunk(b"x" * 256 * 1024)] * 8
    start, _, read = serve(app, scope([("transfer-encoding", "chunked")]), messages)
    assert read == 5  # the fifth piece passes 1 MiB: nothing more is read
    assert app.body == b"" and int(app.environ["CONTENT_LENGTH"]) > LIMIT
    assert dict(start["headers"])[b"connection"] == b"close"


@pytest.mark.parametrize("name", ["X_Forwarded_For", "x_request_id"])
def test_header_names_with_underscores_are_dropped(name):
    """As gunicorn does: `X_Forwarded_For` would otherwise pass for `X-Forwarded-For` in the environ."""
    app = App()
    serve(app, scope([(name, "203.0.113.7"), ("x-forwarded-for", "198.51.100.1")]), [chunk(b"", False)])
    assert app.environ["HTTP_X_FORWARDED_FOR"] == "198.51.100.1"
    assert "HTTP_X_REQUEST_ID" not in app.environ
    assert app.environ["REMOTE_ADDR"] == "127.0.0.9"


def test_the_environ_is_pep_3333s():
    app = App()
    headers = [("content-type", "application/json"), ("accept", "a"), ("accept", "b")]
    serve(app, scope(headers, raw_path=b"/caf%C3%A9"), [chunk(b"{}", False)])
    environ = app.environ
    assert environ["PATH_INFO"] == "/café".encode().decode("latin-1")
    assert environ["RAW_URI"] == "/caf%C3%A9"
    assert environ["CONTENT_TYPE"] == "application/json" and environ["HTTP_ACCEPT"] == "a,b"
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1" and environ["wsgi.url_scheme"] == "http"


@pytest.fixture
def server(monkeypatch):
    """uvicorn with iam/server's protocol and application on a loopback port, in a thread; its deadline
    made 0.5 s."""
    monkeypatch.setattr(protocol, "REQUEST_TIMEOUT", 0.5)
    with serving(ReadWhole(App(), threads=1, max_body=LIMIT, buffer_bytes=BUDGET)) as port:
        yield port


def exchange(port: int, data: bytes) -> tuple[int, bytes, float]:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body, time.monotonic() - started


def test_a_head_not_whole_by_the_deadline_is_answered_408_and_closed(server):
    status, body, elapsed = exchange(server, b"POST /clients/validate HTTP/1.1\r\nHost: a\r\n")
    assert status == 408 and json.loads(body)["message"] == "request timeout"
    assert 0.4 < elapsed < 3


@pytest.mark.parametrize(
    "head",
    [
        b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: a\r\n\r\n",  # request line over 4094
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",  # a field over 8190
        b"GET / HTTP/1.1\r\nHost: a\r\n" + b"X-Many: a\r\n" * 101 + b"\r\n",  # over 100 fields
    ],
)
def test_gunicorns_limits_bound_a_requests_head(server, head):
    status, body, _ = exchange(server, head)
    assert status == 400
    assert json.loads(body) == {"success": False, "status": 400, "message": "bad request"}


def test_a_head_is_bounded_as_a_whole(server):
    """Each field within gunicorn's 8190 bytes, but together past the head's 64 KiB: 400, closed. The
    server closes with the rest of the head unread, so the client's kernel may follow the 400 with a
    reset: the answer read before it counts."""
    fields = b"".join(b"X-F%d: %s\r\n" % (n, b"a" * 8000) for n in range(12))
    answer = b""
    with socket.create_connection(("127.0.0.1", server), timeout=5) as sock:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n" + fields + b"\r\n")
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionError:
            pass
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 400 Bad Request"
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["message"] == "bad request"


def test_connections_past_the_workers_limit_are_answered_503_and_closed(server, monkeypatch):
    monkeypatch.setattr(HttpProtocol, "limit_connections", 3)
    held = [socket.create_connection(("127.0.0.1", server), timeout=5) for _ in range(3)]
    try:
        time.sleep(0.1)  # the three are accepted
        status, body, _ = exchange(server, b"")
        assert status == 503 and json.loads(body) == {
            "success": False,
            "status": 503,
            "message": "service unavailable",
        }
        held.pop().close()
        time.sleep(0.1)
        request = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        assert exchange(server, request)[0] == 200  # room again
    finally:
        for sock in held:
            sock.close()


def test_a_request_within_the_limits_and_the_deadline_is_served(server):
    request = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    status, body, _ = exchange(server, request)
    assert status == 200 and body == b'{"ok":true}'


# The worker's budget of request-body bytes (IAM_WEB_BUFFER_BYTES, docs/operations.md#slow-clients): many
# connections at once.

KIB = 1024


class Connection:
    """One connection's request to a shared ReadWhole, its body messages fed by the test."""

    def __init__(self, server: ReadWhole, headers=(("transfer-encoding", "chunked"),), deadline=None):
        self.messages: asyncio.Queue = asyncio.Queue()
        self.sent: list[dict] = []
        self.task = asyncio.ensure_future(
            server(scope(headers, deadline=deadline), self.messages.get, self.send)
        )

    async def send(self, message) -> None:
        self.sent.append(message)

    async def feed(self, size: int, more: bool = True) -> None:
        await self.messages.put(chunk(b"x" * size, more))
        for _ in range(5):  # the server takes it
            await asyncio.sleep(0)

    async def disconnect(self) -> None:
        await self.messages.put({"type": "http.disconnect"})
        await asyncio.wait_for(self.task, 5)

    async def answer(self) -> tuple[int, bytes]:
        await asyncio.wait_for(self.task, 5)
        return self.sent[0]["status"], b"".join(bytes(message["body"]) for message in self.sent[1:])


def budgeted(app, budget: int, threads: int = 1) -> ReadWhole:
    return ReadWhole(app, threads=threads, max_body=LIMIT, buffer_bytes=budget)


def test_past_the_budget_the_body_arriving_that_holds_the_most_is_refused_503_and_closed():
    """Two large bodies arrive slowly and fill the worker's budget; a small whole one still fits: the
    largest arriving body is refused (its bytes dropped at once), answered 503 with the docs/api.md#errors
    body at its next message, its connection closed; the other large one completes and is served."""
    app = App()

    async def main():
        server = budgeted(app, 250 * KIB)
        large, larger = Connection(server), Connection(server)
        await large.feed(100 * KIB)
        await larger.feed(100 * KIB)
        await larger.feed(40 * KIB)
        assert server.buffered == 240 * KIB
        small = Connection(server, headers=[("content-length", str(20 * KIB))])
        await small.feed(20 * KIB, more=False)
        assert await small.answer() == (200, b'{"ok":true}') and len(app.body) == 20 * KIB
        assert server.buffered == 100 * KIB  # `larger` was dropped to make room; `small` is done
        await larger.feed(10 * KIB)
        status, body = await larger.answer()
        assert status == 503 and json.loads(body) == {
            "success": False,
            "status": 503,
            "message": "service unavailable",
        }
        assert dict(larger.sent[0]["headers"])[b"connection"] == b"close"
        await large.feed(50 * KIB, more=False)
        assert await large.answer() == (200, b'{"ok":true}') and len(app.body) == 150 * KIB
        assert server.buffered == 0 and not server.arriving
        server.executor.shutdown()

    asyncio.run(main())


def test_the_request_that_would_hold_the_most_is_the_one_refused():
    app = App()

    async def main():
        server = budgeted(app, 100 * KIB)
        first, second = Connection(server), Connection(server)
        await first.feed(60 * KIB)
        await second.feed(30 * KIB)
        await second.feed(40 * KIB)  # 70 KiB with this chunk: more than `first` holds
        status, _ = await second.answer()  # refused at once: this message was its next
        assert status == 503 and server.buffered == 60 * KIB
        await first.feed(40 * KIB, more=False)  # exactly the budget
        assert await first.answer() == (200, b'{"ok":true}') and len(app.body) == 100 * KIB
        assert server.buffered == 0
        server.executor.shutdown()

    asyncio.run(main())


def test_a_body_refused_while_it_waits_for_more_is_answered_503_at_once():
    async def main():
        server = budgeted(App(), 100 * KIB)
        waiting = Connection(server, deadline=asyncio.get_running_loop().time() + 5)
        await waiting.feed(80 * KIB)
        other = Connection(server, headers=[("content-length", str(30 * KIB))])
        await other.feed(30 * KIB, more=False)
        assert (await other.answer())[0] == 200 and server.buffered == 0  # `waiting`'s bytes dropped
        await asyncio.wait_for(waiting.task, 0.5)  # no message came: answered without one, long before 5 s
        assert waiting.sent[0]["status"] == 503

    asyncio.run(main())


class Failing(App):
    def __call__(self, environ, start_response):
        super().__call__(environ, start_response)
        raise RuntimeError("the application failed")


@pytest.mark.parametrize("app", [App(), Failing()], ids=["answered", "application failed"])
def test_after_many_requests_whatever_their_end_the_worker_holds_no_byte(app):
    """Every way a request ends gives back exactly what it held: served, refused, timed out, gone, too
    large, or its application raising."""

    async def main():
        server = budgeted(app, 300 * KIB)
        peak = 0
        loop = asyncio.get_running_loop()
        for round_ in range(20):
            served = [Connection(server) for _ in range(3)]
            gone = Connection(server)
            late = Connection(server, deadline=loop.time() + 0.05)
            too_large = Connection(server)
            for connection in [*served, gone, late, too_large]:
                await connection.feed(50 * KIB + round_)
                peak = max(peak, server.buffered)
            await too_large.feed(LIMIT)  # past DATA_UPLOAD_MAX_MEMORY_SIZE
            refused = Connection(server)
            await refused.feed(90 * KIB)  # the largest arriving: refused to make room for the next
            await refused.feed(20 * KIB)
            peak = max(peak, server.buffered)
            await gone.disconnect()
            for connection in served:
                await connection.feed(KIB, more=False)
            for connection in [*served, late, too_large, refused]:
                with contextlib.suppress(RuntimeError):
                    await asyncio.wait_for(connection.task, 5)
            assert late.sent[0]["status"] == 408 and refused.sent[0]["status"] == 503
            assert server.buffered == 0 and not server.arriving and not server.running, round_
        assert peak <= 300 * KIB
        server.executor.shutdown()

    asyncio.run(main())


def test_a_request_counts_as_running_from_its_start_in_a_thread_until_it_ends():
    """What Worker.callback_notify compares with gunicorn's timeout: the time a request has run in its
    thread, not its wait for a thread (a queue under load is not a stuck request)."""
    releases = [threading.Event(), threading.Event()]

    class Blocking(App):
        def __call__(self, environ, start_response):
            releases[int(environ["wsgi.input"].getvalue())].wait(5)
            return super().__call__(environ, start_response)

    async def main():
        server = budgeted(Blocking(), BUDGET, threads=1)
        assert server.longest_running() == 0.0
        first, second = (Connection(server, headers=[("content-length", "1")]) for _ in range(2))
        await first.messages.put(chunk(b"0", False))
        await second.messages.put(chunk(b"1", False))
        await asyncio.sleep(0.3)
        assert 0.25 < server.longest_running() < 1  # the first, running; the second waits for the thread
        releases[0].set()
        assert (await first.answer())[0] == 200
        await asyncio.sleep(0.05)
        assert server.longest_running() < 0.2  # the second, from its start in the thread: not 0.35 s
        releases[1].set()
        assert (await second.answer())[0] == 200
        assert server.longest_running() == 0.0 and server.buffered == 0
        server.executor.shutdown()

    asyncio.run(main())


class Notified:
    """What Worker.callback_notify reads of its worker."""

    def __init__(self, running: float, timeout: int):
        self.wsgi = type("Pool", (), {"longest_running": lambda _: running})()
        self.cfg = type("Cfg", (), {"timeout": timeout})()
        self.log = type("Log", (), {"critical": lambda _, *args: self.logged.append(args)})()
        self.pid, self.notified, self.logged, self.stuck_reported = 1, 0, [], False

    def notify(self) -> None:
        self.notified += 1


@pytest.mark.parametrize(
    ("running", "timeout", "notified"),
    [(0.0, 30, 1), (29.0, 30, 1), (31.0, 30, 0), (1000.0, 0, 1)],
    ids=["idle", "within the timeout", "past the timeout", "no timeout"],
)
def test_the_worker_stops_notifying_the_master_while_a_request_runs_past_the_timeout(
    running, timeout, notified
):
    worker = Notified(running, timeout)
    for _ in range(3):
        asyncio.run(Worker.callback_notify(worker))
    assert worker.notified == 3 * notified
    assert len(worker.logged) == 1 - notified  # said once


def test_a_stuck_request_that_ends_before_the_master_acts_lets_the_worker_notify_again():
    worker = Notified(31.0, 30)
    asyncio.run(Worker.callback_notify(worker))
    worker.wsgi = type("Pool", (), {"longest_running": lambda _: 0.0})()
    asyncio.run(Worker.callback_notify(worker))
    assert worker.notified == 1 and len(worker.logged) == 1 and worker.stuck_reported is False
