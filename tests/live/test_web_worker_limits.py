"""docs/operations.md#slow-clients against the Procfile's `web` shape: what one web worker holds, and for how
long.

- The request bodies a worker holds at once stay within `IAM_WEB_BUFFER_BYTES`: 100 connections that each
  send most of a 1 MiB body grow the worker by about that budget, not by their 100 MiB; the bodies refused
  to stay within it are answered 503 and closed, and another tenant's `clients/validate` answers meanwhile.
- A request stuck in Python past gunicorn's `timeout` gets its worker killed and replaced by the master,
  as under gunicorn's sync workers; the service answers again."""

import contextlib
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.live.api import memory, validating_tenant, worker_pid
from tests.live.conftest import free_port, web_command

MIB = 1024 * 1024
BUDGET = 16 * MIB  # IAM_WEB_BUFFER_BYTES for the measured tier: the default is 64 MiB
CONNECTIONS = 100
SENT = 1000 * 1024  # of each connection's declared 1 MiB body: never whole
MARGIN = 24 * MIB  # what else a worker allocates meanwhile (uvicorn's per-connection buffers, ...)
HANG = "/test/hang"  # tests/live/hanging_wsgi.py: a request that never ends
TIMEOUT = 3  # gunicorn's --timeout for the tier with a stuck request


@pytest.fixture(scope="module")
def tenant(live) -> dict:
    return validating_tenant(live)


def validate(live, tenant, base: str) -> None:
    response = live.post("/clients/validate", tenant, base=base, timeout=10)
    assert response.status_code == 200 and response.json()["data"]["authorized"] is True, response.text


def answers_health(url: str) -> bool:
    """Whether the tier answers; False while its new worker boots (the master holds the connection)."""
    try:
        return requests.get(f"{url}/health-check", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def partial_body(url: str) -> socket.socket:
    """A connection that sends its headers and most of its 1 MiB body, then nothing more."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.sendall(
        b"POST /clients/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % MIB
    )
    with contextlib.suppress(OSError):  # refused to stay within the budget: closed while it sends
        sock.sendall(b"{" + b" " * (SENT - 1))
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the server answered on `sock` within 0.2 s (b"" for nothing yet)."""
    sock.settimeout(0.2)
    received = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_the_bodies_one_worker_holds_stay_within_its_budget(live, tenant):
    web = live.start_web(workers=1, env={"IAM_WEB_BUFFER_BYTES": str(BUDGET)})
    try:
        validate(live, tenant, web.url)  # warm: the code paths, the caches, a database connection
        pid = worker_pid(web)
        with contextlib.suppress(OSError):  # resets VmHWM to the current VmRSS
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = memory(pid)
        with ThreadPoolExecutor(8) as pool:
            sockets = list(pool.map(lambda _: partial_body(web.url), range(CONNECTIONS)))
        try:
            time.sleep(0.5)  # what was sent is read
            held = memory(pid)
            started = time.monotonic()
            validate(live, tenant, web.url)  # another tenant, meanwhile: a small body still fits
            elapsed = time.monotonic() - started
            answers = [answer(sock) for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        after = memory(pid)
        growth = max(held["VmRSS"], after["VmHWM"]) - before["VmRSS"]
        refused = [found for found in answers if found]
        report = (
            f"{CONNECTIONS} x {SENT // 1024} KiB sent, budget {BUDGET // MIB} MiB: worker RSS "
            f"{before['VmRSS'] / MIB:.0f} MiB before, peak {after['VmHWM'] / MIB:.0f} MiB: "
            f"+{growth / MIB:.1f} MiB; "
            f"{len(refused)} refused; validate meanwhile {elapsed * 1000:.0f} ms"
        )
        print(report)
        assert growth < BUDGET + MARGIN, report
        # The refused ones were answered 503 and closed; the others are held unanswered, within the budget.
        assert CONNECTIONS - BUDGET // SENT - 1 <= len(refused) < CONNECTIONS, report
        for found in refused:
            head, _, body = found.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nconnection: close" in head.lower(), found
            assert json.loads(body) == {"success": False, "status": 503, "message": "service unavailable"}
        # Every byte held was given back when those connections closed: 12 bodies of 1 MiB at once (within
        # the 16 MiB budget) are all read and answered by the application (400: not JSON), none refused.
        time.sleep(0.5)
        body = b"[" * MIB

        def whole(_) -> int:
            return requests.post(f"{web.url}/clients/validate", data=body, timeout=30).status_code

        with ThreadPoolExecutor(12) as pool:
            statuses = list(pool.map(whole, range(12)))
        assert statuses == [400] * 12, statuses
        assert worker_pid(web) == pid
    finally:
        web.stop()


def test_a_request_stuck_past_the_timeout_gets_its_worker_replaced(live, tenant):
    port = free_port()
    command = web_command(port, 1)
    command[command.index("iam.wsgi:application")] = "tests.live.hanging_wsgi:application"
    # The request deadline must stay below gunicorn's timeout (the worker refuses to start otherwise);
    # the stuck path runs outside Django, where no deadline reaches it.
    env = {"IAM_REQUEST_SECONDS": str(TIMEOUT - 1)}
    process = live.spawn(f"web-{port}", [*command, "--timeout", str(TIMEOUT)], env)
    web = live.wait_for_web(process, f"http://127.0.0.1:{port}")
    try:
        validate(live, tenant, web.url)
        pid = worker_pid(web)
        outcome: dict = {}

        def hang() -> None:
            started = time.monotonic()
            try:
                outcome["status"] = requests.post(f"{web.url}{HANG}", json={}, timeout=60).status_code
            except requests.RequestException as error:
                outcome["error"] = error
            outcome["after"] = time.monotonic() - started

        thread = threading.Thread(target=hang)
        thread.start()
        time.sleep(1)
        validate(live, tenant, web.url)  # the worker's other thread still serves meanwhile
        master = web.process.pid

        def replaced() -> bool:
            children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
            return len(children) == 1 and int(children[0]) != pid

        live.wait_for(replaced, timeout=30, what="the master to replace the worker")
        thread.join(30)
        assert "error" in outcome, outcome  # its connection ended with the worker
        assert TIMEOUT <= outcome["after"] < 4 * TIMEOUT, outcome
        live.wait_for(lambda: answers_health(web.url), 30, what="the new worker")
        validate(live, tenant, web.url)
        log = process.tail(10**6)
        assert "past the timeout" in log and "WORKER TIMEOUT" in log, log[-3000:]
    finally:
        web.stop()
