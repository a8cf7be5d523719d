"""What every part of `make bench` shares: its knobs, the table it prints, the bench database, a
sequential HTTP client."""

import contextlib
import http.client
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SECONDS = int(os.environ.get("BENCH_SECONDS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "8"))  # validate's goal: p99 <= 10 ms at 8 connections
BURST = int(os.environ.get("BENCH_BURST", "2000"))
SEED_ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
ALL_PARTS = "validate,login,totp,token,machines,lists,neighbour,push,push-recovery"
PARTS = set(os.environ.get("BENCH_PARTS", ALL_PARTS).split(","))
TOTP_ACCOUNTS = int(os.environ.get("BENCH_TOTP_ACCOUNTS", "200"))
LIST_REQUESTS = int(os.environ.get("BENCH_LIST_REQUESTS", "40"))
LIST_WARMUP = 4
WORKERS = 2  # gunicorn's
PUSH_CLIENTS = 5
SLOW_CLIENTS = 50
PASSWORD = "bench-password-" + secrets.token_urlsafe(8)

LUA = """
wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["Content-Type"] = "application/json"
"""

rows: list[tuple[str, str, str]] = []  # (figure, measured, goal): the table
notes: list[str] = []


def process_cpu(pid: int) -> float:
    """CPU seconds used so far by process `pid` and its children (utime and stime, as `ps` counts them)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for each in [pid, *map(int, children)]:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def backend_cpu() -> float | None:
    """CPU seconds used so far by the PostgreSQL backend of this process's connection (utime and stime
    from its /proc entry), or None: another database, or a server on another machine."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with contextlib.suppress(OSError):
        return process_cpu(pid)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bench_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("make bench needs DATABASE_URL=postgres://... (it makes <name>_bench beside it)")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_bench"))


def admin_sql(url: str, statement: str) -> None:
    import psycopg

    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as connection:
        connection.execute(statement)


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


class Api:
    """Sequential keep-alive client for latency figures."""

    def __init__(self, base: str):
        parts = urlsplit(base)
        self.base = base
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def post(self, path: str, body: dict, headers: dict | None = None) -> tuple[dict, float]:
        sent = (json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        started = time.perf_counter()
        try:
            self.connection.request("POST", path, *sent)
            response = self.connection.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The kept connection sat idle past the server's keep-alive (another part ran meanwhile):
            # a new one, and the time counted from it, as any HTTP client's pool does.
            self.connection.close()
            started = time.perf_counter()
            self.connection.request("POST", path, *sent)
            response = self.connection.getresponse()
        payload = json.loads(response.read())
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"{path}: {response.status} {payload}")
        return payload["data"], elapsed


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]
