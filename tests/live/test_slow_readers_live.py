"""The web server against the Procfile's `web` shape (2 workers of 2 threads): slow readers, the
connections of one address, the request deadline, and what the server answers and logs by itself.

Before: 8 loops that each asked for an answer over 1 MiB (the API reference's 3.9 MB redoc `.js.map`,
unauthenticated, or a large `roles/describe`) and read nothing, reconnecting after 11 s, held the 4
threads: another tenant's `clients/validate` took 9 to 11 s again and again, and two such readers of one
large answer got a worker killed (`WORKER TIMEOUT`). Now static files go out from the event loop, an
answer within 16 MiB is handed to the loop whole (its thread free at once), and a reader that takes
nothing is dropped within about 1.5 s: the other tenant's validate p50 and p99 are printed."""

import contextlib
import json
import math
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import requests

from tests.live.api import META, create_role, create_workspace, err, memory, ok, validating_tenant
from tests.live.conftest import free_port, web_command

MAP = "/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js.map"  # 3.9 MB
READERS = 8
RECONNECT_AFTER = 11  # seconds each reader holds its connection, reading nothing
RUN_SECONDS = 35
PERMISSIONS = 500  # IAM_QUOTA_PERMISSIONS_PER_ROLE: one role holding them all
MIB = 1024 * 1024

SEED_PERMISSIONS = """
INSERT INTO rbac_permission (id, workspace_id, name, code, description, tags, meta, created_at, updated_at)
SELECT gen_random_uuid(), %(workspace)s, format('big%%s:read', n), format('big%%s:read', n),
       repeat('d', 4096), '[]'::jsonb,
       jsonb_build_object('schema_version', '1', 'notes', repeat('m', 6000)), now(), now()
FROM generate_series(1, %(count)s) AS n
"""
SEED_LINKS = """
INSERT INTO rbac_role_permissions (role_id, permission_id)
SELECT %(role)s, id FROM rbac_permission WHERE workspace_id = %(workspace)s AND name LIKE 'big%%'
"""


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg-runtime")


@pytest.fixture(scope="module")
def tier(live, runtime_dir):
    """The Procfile's shape, on a port of its own: its memory and log are this module's to read. Its
    runtime directory is where gunicorn would put its default control socket."""
    web = live.start_web(workers=2, env={"XDG_RUNTIME_DIR": str(runtime_dir)})
    yield web
    web.stop()


@pytest.fixture(scope="module")
def big_role(live, tier) -> dict:
    """A tenant's role of 500 permissions of about 10 KB each: `roles/describe` answers some 5 MB."""
    owner = live.register()["access_token"]
    workspace = create_workspace(live, owner)["id"]
    role = create_role(live, owner, workspace)
    with psycopg.connect(live.env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(SEED_PERMISSIONS, {"workspace": workspace, "count": PERMISSIONS})
        conn.execute(SEED_LINKS, {"workspace": workspace, "role": role["id"]})
    body = {"id": role["id"]}
    response = live.post("/roles/describe", body, token=owner, workspace=workspace, base=tier.url)
    assert len(response.content) > 4 * MIB and len(ok(response)["permissions"]) == PERMISSIONS
    return {"token": owner, "workspace": workspace, "id": role["id"]}


def worker_pids(web) -> list[int]:
    master = web.process.pid
    return sorted(int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split())


def request_bytes(kind: str, role: dict) -> bytes:
    if kind == "static":
        return f"GET {MAP} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    body = json.dumps({"id": role["id"]}).encode()
    return (
        f"POST /roles/describe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {role['token']}\r\nX-Workspace: {role['workspace']}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class Readers:
    """READERS loops: each asks for a large answer, reads nothing for RECONNECT_AFTER seconds, closes, and
    asks again, until stopped. Counts what they asked and how the server ended their connections."""

    def __init__(self, url: str, role: dict):
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.role = role
        self.stopped = threading.Event()
        self.asked = 0
        self.dropped = 0  # connections the server had reset by the time the reader looked again
        self.lock = threading.Lock()
        kinds = ["static", "describe"] * (READERS // 2)
        self.threads = [threading.Thread(target=self.run, args=(kind,), daemon=True) for kind in kinds]
        for thread in self.threads:
            thread.start()

    def run(self, kind: str) -> None:
        while not self.stopped.is_set():
            with socket.create_connection(self.address, timeout=10) as sock:
                sock.sendall(request_bytes(kind, self.role))
                with self.lock:
                    self.asked += 1
                self.stopped.wait(RECONNECT_AFTER)
                reset = False
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    try:
                        while sock.recv(1024 * 1024):
                            pass
                    except ConnectionResetError:
                        reset = True
                if reset:
                    with self.lock:
                        self.dropped += 1

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(RECONNECT_AFTER + 5)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def test_readers_that_read_nothing_starve_no_other_tenant(live, tier, big_role, runtime_dir):
    tenant = validating_tenant(live)
    workers = worker_pids(tier)
    for pid in workers:
        with contextlib.suppress(OSError):  # resets VmHWM to the current VmRSS
            Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = {pid: memory(pid)["VmRSS"] for pid in workers}
    readers = Readers(tier.url, big_role)
    latencies, statuses = [], []
    try:
        time.sleep(1)  # every reader has asked
        ends = time.monotonic() + RUN_SECONDS
        while time.monotonic() < ends:
            started = time.monotonic()
            response = live.post("/clients/validate", tenant, base=tier.url, timeout=30)
            latencies.append(time.monotonic() - started)
            statuses.append(response.status_code)
            if response.status_code == 200:
                assert response.json()["data"]["authorized"] is True, response.text
            time.sleep(0.05)
    finally:
        readers.stop()
    growth = {pid: memory(pid)["VmHWM"] - before[pid] for pid in workers}
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    report = (
        f"another tenant's clients/validate beside {READERS} readers reading nothing ({readers.asked} asked, "
        f"{readers.dropped} seen reset): {len(latencies)} calls, p50 {p50 * 1000:.1f} ms, p99 "
        f"{p99 * 1000:.1f} ms, max {max(latencies) * 1000:.0f} ms; worker peak RSS growth "
        + ", ".join(f"{value / MIB:.0f} MiB" for value in growth.values())
    )
    print(report)
    assert statuses == [200] * len(statuses), report
    assert p99 < 1.0, report  # a liveness bound: the figure itself is printed (the goal is 100 ms)
    assert all(value < 128 * MIB for value in growth.values()), report
    assert worker_pids(tier) == workers, "a worker was replaced"
    log = tier.process.tail(10**6)
    assert "WORKER TIMEOUT" not in log, log[-3000:]
    assert not (runtime_dir / "gunicorn.ctl").exists(), "gunicorn opened its shared control socket"


def raw(url: str, data: bytes, source: str = "127.0.0.1") -> tuple[int, dict, bytes]:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), 10, source_address=(source, 0)) as sock:
        sock.sendall(data)
        answer = b""
        with contextlib.suppress(ConnectionError):
            while chunk := sock.recv(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


def test_one_address_cannot_take_the_connections_of_the_others(live):
    """150 idle connections from 127.0.0.1 to a worker: 100 are held, the rest answered 503 and closed;
    127.0.0.2 still gets in meanwhile; once they close, 127.0.0.1 gets in again."""
    web = live.start_web(workers=1)
    parts = urlsplit(web.url)
    held: list[socket.socket] = []
    try:
        tenant = validating_tenant(live)
        for _ in range(150):
            held.append(socket.create_connection((parts.hostname, parts.port), timeout=10))
        time.sleep(0.5)
        refused = []
        for sock in held:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                refused.append(sock.recv(65536))
        assert len([found for found in refused if found.startswith(b"HTTP/1.1 503 ")]) == 50, refused[:3]
        head, _, body = refused[-1].partition(b"\r\n\r\n")
        assert json.loads(body) == {"success": False, "status": 503, "message": "service unavailable"}
        assert b"x-content-type-options: nosniff" in head.lower()
        ok(live.post("/clients/validate", tenant, base=web.url, source="127.0.0.2", timeout=5))
        status, _, body = raw(web.url, b"")  # one more from 127.0.0.1: answered before it sends a byte
        assert status == 503 and json.loads(body)["message"] == "service unavailable"
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.5)
    ok(live.post("/clients/validate", tenant, base=web.url, timeout=5))
    web.stop()


def test_a_request_past_its_deadline_answers_503_and_writes_nothing(live):
    """A tier whose requests have 2 s in all, under the default 5-second statement timeout: a write that
    waits on a row lock is cancelled when the deadline comes, not at 5 s; nothing is written."""
    web = live.start_web(workers=1, env={"IAM_REQUEST_SECONDS": "2"})
    try:
        token = live.register()["access_token"]
        workspace = create_workspace(live, token)
        update = {"id": workspace["id"], "name": "renamed while locked", "meta": META}
        with psycopg.connect(live.env["DATABASE_URL"]) as holder:
            holder.execute("SELECT id FROM tenancy_workspace WHERE id = %s FOR UPDATE", (workspace["id"],))
            started = time.monotonic()
            response = live.post("/workspace/update", update, token=token, base=web.url)
            err(response, 503, "request took too long")
            waited = time.monotonic() - started
            holder.rollback()
        assert 1.5 <= waited < 4.5, waited
        described = ok(live.post("/workspace/describe", {"id": workspace["id"]}, token=token, base=web.url))
        assert described["name"] == workspace["name"]
    finally:
        web.stop()


def test_a_worker_refuses_to_start_with_a_timeout_within_the_request_deadline(live):
    port = free_port()
    process = live.spawn(f"web-{port}", [*web_command(port, 1), "--timeout", "20"])
    live.wait_for(lambda: not process.alive(), timeout=60, what="gunicorn to give up")
    assert "must be above IAM_REQUEST_SECONDS" in process.tail(10**6)


def test_the_parsers_refusals_and_the_access_log(live):
    """A request httptools refuses gets the error body and headers; an OAuth callback's code and state
    stay out of the access log."""
    smuggled = b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    status, headers, body = raw(live.url, b"POST /auth/login HTTP/1.1\r\nHost: a\r\n" + smuggled)
    assert status == 400 and json.loads(body) == {"success": False, "status": 400, "message": "bad request"}
    assert headers["x-frame-options"] == "DENY" and headers["content-type"] == "application/json"
    callback = "/auth/oauth/idp_a/callback?code=live-c0de-SECRET&state=live-st4te-SECRET"
    assert requests.get(f"{live.url}{callback}", allow_redirects=False, timeout=10).status_code == 302
    time.sleep(0.5)  # the access line is written
    log = live.web.process.tail(10**6)
    assert "/auth/oauth/idp_a/callback?code=[redacted]&state=[redacted]" in log
    assert "SECRET" not in log
