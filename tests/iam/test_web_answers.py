"""iam/server/answers.py and the read-rate rule of iam/server/protocol.py: an answer reaches its client
without holding a pool thread while the client reads nothing. The live layer measures
it against the Procfile's shape (tests/live/test_slow_readers_live.py)."""

import contextlib
import json
import threading
import time

import pytest

from iam.server import answers, protocol
from iam.server.app import ReadWhole
from tests.iam.web_servers import connect, read_answer, serving

MIB = 1024 * 1024
CHUNK = 64 * 1024
SMALL_BUFFER = 32 * 1024  # the client's receive buffer: its kernel takes little of an answer for it


class Body:
    """A WSGI application answering `chunks` chunks of 64 KiB with no length, made one at a time as the
    server asks; it counts what it made, whether it was closed, and the requests it got."""

    def __init__(self, chunks: int):
        self.chunks = chunks
        self.made = 0
        self.calls = 0
        self.closed = threading.Event()

    def __call__(self, environ, start_response):
        self.calls += 1
        start_response("200 OK", [("Content-Type", "application/json")])
        if environ["PATH_INFO"] == "/small":
            return [b'{"ok":true}']
        return self

    def __iter__(self):
        for n in range(self.chunks):
            self.made += 1
            yield bytes([48 + n % 10]) * CHUNK

    def close(self):
        self.closed.set()


def pool(app, *, threads: int = 1, budget: int = 64 * MIB) -> ReadWhole:
    return ReadWhole(app, threads=threads, max_body=MIB, buffer_bytes=budget)


def ask(port: int, path: str = "/big", **connection) -> "socket.socket":  # noqa: F821
    sock = connect(port, **connection)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
    return sock


def small(port: int) -> tuple[int, bytes]:
    sock = ask(port, "/small")
    try:
        status, _, body = read_answer(sock, timeout=5)
        return status, body
    finally:
        sock.close()


def test_a_whole_answer_frees_its_thread_while_its_client_reads_nothing(monkeypatch):
    """8 MiB (within HOLD): made whole, handed to the loop; the pool's one thread serves another request
    while the first client reads nothing (no reader is dropped here: the hand-off alone frees it); then
    that client gets all of it, with its length."""
    monkeypatch.setattr(protocol, "MIN_READ_RATE", 0)
    app = Body(128)
    server = pool(app)
    with serving(server) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        assert app.closed.wait(5) and app.made == 128  # made, and the thread let go of it
        assert small(port) == (200, b'{"ok":true}')  # the one thread is free
        status, headers, body = read_answer(reader)
        reader.close()
    assert status == 200 and headers["content-length"] == str(128 * CHUNK) and len(body) == 128 * CHUNK
    assert server.answers.budget.held == 0


def test_a_client_that_takes_nothing_of_its_answer_is_dropped_within_seconds(monkeypatch):
    """After the first second, an answer must be taken at 64 KiB a second: a client that takes nothing is
    dropped within about two seconds, and what the worker held for it is given back."""
    app = Body(128)
    server = pool(app)
    with serving(server) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        assert app.closed.wait(5)
        held = server.answers.budget.held
        started = time.monotonic()
        deadline = started + 10
        while server.answers.budget.held and time.monotonic() < deadline:
            time.sleep(0.1)
        dropped_after = time.monotonic() - started
        status, _, body = read_answer(reader)
        reader.close()
    assert held > 0 and server.answers.budget.held == 0, dropped_after
    assert status == 200 and len(body) < 128 * CHUNK  # cut short: the connection was dropped


@pytest.mark.parametrize(
    ("per_read", "kept"), [(16 * 1024, True), (1600, False)], ids=["160 KiB/s", "16 KiB/s"]
)
def test_a_client_must_take_its_answer_at_the_minimal_rate(monkeypatch, per_read, kept):
    """8 MiB (more than the kernel's buffers hold), read a piece every 0.1 s for 4 s: above 64 KiB a
    second the client keeps its connection; below, it is dropped."""
    app = Body(128)
    server = pool(app)
    with serving(server) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        reader.settimeout(1)
        received, ended = 0, False
        for _ in range(40):
            try:
                chunk = reader.recv(per_read)
            except (ConnectionError, TimeoutError):
                chunk = b""
            if not chunk:
                ended = True
                break
            received += len(chunk)
            time.sleep(0.1)
        still_sending = server.answers.budget.held > 0
        reader.close()
    assert (not ended and still_sending) is kept, (received, ended, still_sending)


def test_a_client_that_reads_in_bursts_keeps_its_connection():
    """A streamed answer: it reads 20 MiB as fast as they come, then works 3 s on them taking nothing,
    then reads the rest. Over its last 10 s of waiting it kept the pace, so it is not dropped (a first
    version measured from the last time it had caught up, and dropped the live layer's client of a 600 MB
    answer while it parsed a role)."""
    app = Body(400)
    with serving(pool(app)) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        reader.settimeout(5)
        received = 0
        while received < 20 * MIB:
            received += len(reader.recv(1024 * 1024))
        time.sleep(3)
        with contextlib.suppress(ConnectionError):
            while received < 400 * CHUNK and (chunk := reader.recv(1024 * 1024)):
                received += len(chunk)
        reader.close()
    assert received > 400 * CHUNK  # the head and the whole body


def test_a_long_answer_is_streamed_from_its_thread_as_the_client_takes_it():
    """62.5 MiB (past HOLD): chunked, made no further ahead of a client that reads nothing than HOLD and
    what the buffers hold; then the client gets all of it, in order."""
    app = Body(1000)
    with serving(pool(app)) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        time.sleep(0.5)
        waiting = app.made
        status, headers, body = read_answer(reader, timeout=30)
        reader.close()
    assert waiting < answers.HOLD // CHUNK + 40, f"{waiting} chunks made ahead of a client that reads nothing"
    assert status == 200 and headers["transfer-encoding"] == "chunked" and "content-length" not in headers
    assert len(body) == 1000 * CHUNK and body[-1:] == b"9" and app.made == 1000
    assert app.closed.wait(5)


def test_a_streamed_answer_whose_client_reads_nothing_is_dropped_and_frees_its_thread():
    app = Body(1000)
    with serving(pool(app)) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)  # and then read nothing
        assert app.closed.wait(10), "the answer was never stopped"
        made = app.made
        assert small(port) == (200, b'{"ok":true}')  # the thread serves the next request
        reader.close()
    assert app.made == made < 1000


def test_a_thread_waits_for_a_client_that_takes_nothing_no_longer_than_the_stall_timeout(monkeypatch):
    """The backstop: were the read-rate rule off, a streaming thread still gives up on a client that
    takes nothing, after STALL_TIMEOUT, and drops its connection."""
    monkeypatch.setattr(protocol, "MIN_READ_RATE", 0)
    monkeypatch.setattr(answers, "STALL_TIMEOUT", 1.0)
    monkeypatch.setattr(answers, "WAIT_STEP", 0.1)
    app = Body(1000)
    with serving(pool(app)) as port:
        reader = ask(port, receive_buffer=SMALL_BUFFER)
        assert app.closed.wait(10), "the thread never gave up"
        assert small(port) == (200, b'{"ok":true}')
        reader.close()
    assert app.made < 1000


def test_one_address_holds_at_most_two_streamed_answers_a_third_is_answered_503(monkeypatch):
    """Three threads, three streamed answers asked from 127.0.0.1, none read: the third is refused 503
    with the error body and headers, while another address still gets its streamed answer."""
    monkeypatch.setattr(protocol, "MIN_READ_RATE", 0)  # none is dropped meanwhile
    app = Body(1000)
    with serving(pool(app, threads=4)) as port:
        held = [ask(port, receive_buffer=SMALL_BUFFER) for _ in range(2)]
        time.sleep(1)  # both are streaming
        status, headers, body = read_answer(ask(port), timeout=10)
        other = ask(port, source="127.0.0.2", receive_buffer=SMALL_BUFFER)
        other_status, _, _ = read_answer(other, timeout=10)
        for sock in [*held, other]:
            sock.close()
    assert status == 503 and json.loads(body)["message"] == "service unavailable"
    assert headers["x-content-type-options"] == "nosniff" and headers["connection"] == "close"
    assert other_status == 200


def test_past_the_workers_answer_budget_a_whole_answer_is_streamed(monkeypatch):
    """A budget of 1 MiB: two 8 MiB answers nobody reads are each sent from their thread (streamed
    answers, two for the address), so a third is refused rather than held."""
    monkeypatch.setattr(protocol, "MIN_READ_RATE", 0)
    app = Body(128)
    server = pool(app, threads=4, budget=MIB)
    with serving(server) as port:
        held = [ask(port, receive_buffer=SMALL_BUFFER) for _ in range(2)]
        time.sleep(1)
        assert server.answers.budget.held == 0 and sum(server.answers.streams.by_address.values()) == 2
        status, _, _ = read_answer(ask(port), timeout=10)
        first_status, first_headers, first_body = read_answer(held[0], timeout=10)
        for sock in held:
            sock.close()
    assert status == 503
    assert first_status == 200 and first_headers["content-length"] == str(128 * CHUNK)
    assert len(first_body) == 128 * CHUNK


class Failing:
    def __init__(self, when: str):
        self.when = when

    def __call__(self, environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json")])
        if self.when == "at once":
            raise RuntimeError("the server failed")
        return self

    def __iter__(self):
        yield b"x" * CHUNK
        raise RuntimeError("the body failed")


@pytest.mark.parametrize("when", ["at once", "in the body"])
def test_a_failure_under_the_application_is_answered_500_with_the_error_body(when):
    with serving(pool(Failing(when))) as port:
        status, headers, body = read_answer(ask(port), timeout=10)
    assert status == 500 and json.loads(body) == {
        "success": False,
        "status": 500,
        "message": "internal server error",
    }
    assert headers["x-frame-options"] == "DENY"
