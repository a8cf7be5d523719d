"""The live layer: the service as it is deployed, driven over HTTP, with no test transaction.

The session fixture `live` starts, once: a redis-server of its own on a free loopback port (outage tests
stop and start it), a fresh PostgreSQL database migrated with `manage.py migrate`, the Procfile's `web`
command (gunicorn, its worker class and threads) with 2 workers and DEBUG off, and the Procfile's `worker`
and `beat` commands. Everything is killed at the end,
whatever the tests did (and by the kernel if this process dies: PR_SET_PDEATHSIG). The interface is
described in the README's "Test layers" section; other test modules code against it."""

import contextlib
import ctypes
import email
import email.policy
import json
import os
import random
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import requests
from requests.adapters import HTTPAdapter

BASE_DIR = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PASSWORD = "a-long-live-passphrase"
OPERATOR_EMAIL = "operator@live.example.com"
START_TIMEOUT = 60
T = TypeVar("T")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.live)


@pytest.fixture(autouse=True)
def _clean_cache():
    """Overrides the unit suite's: the live service has its own Redis; the shared one is not touched."""


def wait_for(predicate: Callable[[], T], timeout: float = 60, interval: float = 0.2, what: str = "") -> T:
    """Polls `predicate` until it returns something truthy, which it returns; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


def free_port() -> int:
    """A port free now, below Linux's ephemeral range (32768-60999): the kernel hands ports of that range
    to every outgoing connection, so one chosen there can be taken before the process that is to listen on
    it starts (a flake seen: the example app's EADDRINUSE)."""
    while True:
        port = random.randint(20000, 32767)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _own_group_and_die_with_parent() -> None:
    # A process group of its own, so a kill reaches gunicorn's and Celery's children too; and the kernel
    # sends SIGKILL if the test process dies first (a crashed or killed pytest leaves nothing running).
    os.setsid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Process:
    def __init__(self, name: str, command: list[str], env: dict, log: Path):
        self.name, self.log = name, log
        with log.open("ab") as out:
            self.popen = subprocess.Popen(
                command,
                env=env,
                cwd=BASE_DIR,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_own_group_and_die_with_parent,  # spawned from the main thread only
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signum)

    def kill(self) -> None:
        self.signal_group(signal.SIGKILL)
        self.popen.wait()

    def stop(self, timeout: float = 5) -> None:
        self.signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)
        self.kill()  # the group: children that outlived their parent too

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class SourceAddressAdapter(HTTPAdapter):
    """Sends from a given loopback address (127.0.0.0/8 is all ours): the server sees it as REMOTE_ADDR."""

    def __init__(self, source: str):
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


def procfile() -> dict[str, list[str]]:
    """The Procfile's commands: the live layer runs web, worker and beat exactly as deployed. A
    `${NAME:-default}` takes its default (the live layer sets no such variable)."""
    commands = {}
    for line in (BASE_DIR / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if command.strip():
            commands[name.strip()] = shlex.split(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", command))
    return commands


def web_command(port: int, workers: int) -> list[str]:
    """The Procfile's `web` command (its server, worker class and threads), on a loopback port, with
    `workers` workers and an access log that names each line's worker process."""
    command = procfile()["web"]
    for option in ("--bind", "--workers", "--access-logfile"):
        if option in command:
            at = command.index(option)
            del command[at : at + 2]
    assert command[0] == "gunicorn", command
    return [
        str(BIN / "gunicorn"),
        *command[1:],
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--access-logfile",
        "-",
        "--access-logformat",
        '%(p)s %(h)s "%(r)s" %(s)s',
    ]


class Web:
    def __init__(self, process: Process, url: str):
        self.process, self.url = process, url

    def stop(self) -> None:
        self.process.stop()


class LiveService:
    def __init__(self, tmp: Path, database_url: str):
        self.tmp = tmp
        self.processes: list[Process] = []
        self.redis_port = free_port()
        parts = urlsplit(database_url)
        self.database = f"{parts.path.lstrip('/')}_live_{os.getpid()}"
        self.admin_url = urlunsplit(parts._replace(path="/postgres"))
        self.mail_dir = tmp / "mail"
        self.mail_dir.mkdir()
        environ = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("IAM_", "CELERY_", "PYTEST_", "DJANGO_", "EMAIL_", "DB_"))
        }
        self.env = {
            **environ,
            "PATH": f"{BIN}{os.pathsep}{environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "iam.settings",
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(48),
            "IAM_JWT_SIGNING_KEY": secrets.token_urlsafe(48),
            "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "DATABASE_URL": urlunsplit(parts._replace(path=f"/{self.database}")),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "IAM_WEBHOOK_ALLOW_PRIVATE": "true",
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(self.mail_dir),
            "IAM_OUTBOX_SWEEP_SECONDS": "1",
            "IAM_OUTBOX_SWEEP_GRACE_SECONDS": "2",
            "LOG_LEVEL": "INFO",
            # Web and worker write their metrics side by side, as on one host (README, Metrics).
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
            "IAM_METRICS_TOKEN": secrets.token_urlsafe(24),
            # A configured provider, so the OAuth endpoints run their real code (nothing listens there).
            "IAM_IDP_A_CLIENT_ID": "live-client",
            "IAM_IDP_A_CLIENT_SECRET": "live-secret",
            "IAM_IDP_A_AUTHORIZE_URL": "http://127.0.0.1:9/authorize",
            "IAM_IDP_A_TOKEN_URL": "http://127.0.0.1:9/token",
            "IAM_IDP_A_USERINFO_URL": "http://127.0.0.1:9/userinfo",
            "IAM_OAUTH_REDIRECT_ALLOWLIST": "http://localhost:3000",
            # The whole layer registers its accounts from one address within the hour.
            "IAM_REGISTRATIONS_PER_IP_PER_HOUR": "100000",
        }
        self.redis: Process | None = None
        self.worker: Process | None = None
        self.beat: Process | None = None
        self.web: Web | None = None
        self._operator: tuple[str, str, str] | None = None
        self._workers_started = 0

    # Processes

    def spawn(self, name: str, command: list[str], env: dict | None = None) -> Process:
        process = Process(name, command, {**self.env, **(env or {})}, self.tmp / f"{name}.log")
        self.processes.append(process)
        return process

    def start(self) -> None:
        self.redis_start()
        self._create_database()
        migrated = self.manage("migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        # As deployed: the admin renders with DEBUG off from the collected files and their manifest.
        collected = self.manage("collectstatic", "--noinput")
        assert collected.returncode == 0, collected.stdout + collected.stderr
        # The three boot at once (each imports Django): the layer's start-up is the slowest of them.
        web = self.spawn_web(workers=2)
        self.worker = self.spawn_worker()
        self.beat = self.spawn_beat()
        self.web = self.wait_for_web(*web)
        self.wait_for_log(self.worker, " ready.")
        self.wait_for_log(self.beat, "beat: Starting")

    def close(self) -> None:
        for process in self.processes:
            process.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(max(0.0, deadline - time.monotonic()))
            process.kill()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    @property
    def url(self) -> str:
        assert self.web is not None
        return self.web.url

    def start_web(self, workers: int = 2, env: dict | None = None) -> Web:
        """The Procfile's `web` (gunicorn with its worker class, on a loopback port); another call starts
        another web tier that shares only PostgreSQL and Redis with the first, with `env`'s settings over
        the layer's own (`{"IAM_QUOTA_PROJECTS": "5"}`)."""
        return self.wait_for_web(*self.spawn_web(workers, env))

    def spawn_web(self, workers: int, env: dict | None = None) -> tuple[Process, str]:
        port = free_port()
        return self.spawn(f"web-{port}", web_command(port, workers), env), f"http://127.0.0.1:{port}"

    def wait_for_web(self, process: Process, url: str) -> Web:
        def healthy() -> bool:
            assert process.alive(), f"gunicorn exited:\n{process.tail()}"
            try:
                return requests.get(f"{url}/health-check", timeout=5).status_code == 200
            except requests.RequestException:  # refused or slow while gunicorn's workers boot
                return False

        wait_for(healthy, START_TIMEOUT, what="gunicorn to answer /health-check")
        return Web(process, url)

    def spawn_worker(self) -> Process:
        self._workers_started += 1
        return self.spawn(f"worker-{self._workers_started}", procfile()["worker"])

    def start_worker(self) -> Process:
        self.worker = self.spawn_worker()
        self.wait_for_log(self.worker, " ready.")
        return self.worker

    def spawn_beat(self) -> Process:
        return self.spawn("beat", [*procfile()["beat"], "--schedule", str(self.tmp / "celerybeat-schedule")])

    def start_beat(self) -> Process:
        self.beat = self.spawn_beat()
        self.wait_for_log(self.beat, "beat: Starting")
        return self.beat

    def kill_worker(self) -> None:
        """kill -9 of the worker and its pool processes, with no warning."""
        assert self.worker is not None
        self.worker.kill()

    def redis_start(self) -> None:
        self.redis = self.spawn(
            "redis",
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
        )

        def pong() -> bool:
            assert self.redis.alive(), f"redis-server exited:\n{self.redis.tail()}"
            try:
                with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_for(pong, START_TIMEOUT, interval=0.05, what="redis-server")

    def redis_stop(self) -> None:
        assert self.redis is not None
        self.redis.stop()

    def wait_for_log(self, process: Process, text: str, timeout: float = START_TIMEOUT) -> None:
        def found() -> bool:
            assert process.alive(), f"{process.name} exited:\n{process.tail()}"
            return text in process.tail(10**6)

        wait_for(found, timeout, what=f"{process.name} to log {text!r}")

    def _create_database(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.database}"')

    # HTTP

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        workspace: str | None = None,
        headers: dict | None = None,
        raw: bytes | str | None = None,
        source: str | None = None,
        base: str | None = None,
        timeout: float = 30,
    ) -> requests.Response:
        """One request on a new connection (so consecutive calls spread over gunicorn's workers)."""
        merged = {"Content-Type": "application/json"}
        if token:
            merged["Authorization"] = f"Bearer {token}"
        if workspace:
            merged["X-Workspace"] = str(workspace)
        merged.update(headers or {})
        data = None if method == "GET" else (raw if raw is not None else json.dumps(body or {}))
        with requests.Session() as session:
            if source:
                session.mount("http://", SourceAddressAdapter(source))
            return session.request(
                method, f"{base or self.url}{path}", data=data, headers=merged, timeout=timeout
            )

    def post(self, path: str, body: Any = None, **kwargs) -> requests.Response:
        return self.request("POST", path, body, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        return self.request("GET", path, **kwargs)

    # Helpers

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            env=self.env,
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def bootstrap_operator(self) -> tuple[str, str, str]:
        if self._operator is None:
            done = self.manage("bootstrap", "--email", OPERATOR_EMAIL, "--password", PASSWORD)
            assert done.returncode == 0, done.stdout + done.stderr
            response = self.post("/auth/login", {"email": OPERATOR_EMAIL, "password": PASSWORD})
            assert response.status_code == 200, response.text
            self._operator = (OPERATOR_EMAIL, PASSWORD, response.json()["data"]["access_token"])
        return self._operator

    def register(self, email: str | None = None, password: str = PASSWORD) -> dict:
        email = email or f"user-{uuid.uuid4().hex[:12]}@example.com"
        response = self.post("/auth/register", {"email": email, "password": password})
        assert response.status_code == 200, response.text
        return response.json()["data"]

    def emails(self) -> list[Message]:
        """Every message the worker sent (Django's file backend: messages separated by a line of dashes)."""
        found = []
        for path in sorted(self.mail_dir.glob("*.log")):
            for chunk in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n"):
                if chunk.strip():
                    found.append(email.message_from_bytes(chunk, policy=email.policy.default))
        return found

    def emails_to(self, address: str) -> list[Message]:
        return [message for message in self.emails() if message["To"] == address]

    @staticmethod
    def wait_for(predicate: Callable[[], T], timeout: float = 60, interval: float = 0.2, what: str = "") -> T:
        return wait_for(predicate, timeout, interval, what)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} (pid {p.pid}) ---\n{p.tail()}" for p in self.processes)


def _missing() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return "the live layer needs DATABASE_URL pointing at PostgreSQL"
    for binary in ("redis-server",):
        if shutil.which(binary) is None:
            return f"the live layer needs the {binary} binary"
    for binary in ("gunicorn", "celery"):
        if not (BIN / binary).exists():
            return f"the live layer needs {binary} installed beside {sys.executable}"
    return None


_current: list[LiveService] = []


@pytest.fixture(scope="session")
def live(tmp_path_factory) -> LiveService:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI=true: a missing service is a failure)")
        pytest.skip(reason)
    service = LiveService(tmp_path_factory.mktemp("live"), os.environ["DATABASE_URL"])
    _current.append(service)
    try:
        service.start()
        yield service
    finally:
        _current.remove(service)
        service.close()


@pytest.fixture(autouse=True)
def _running(live) -> None:
    """Each test starts with every process up, whatever the test before it killed or left dead."""
    if not live.redis.alive():
        live.redis_start()
    if not live.worker.alive():
        live.start_worker()
    if not live.beat.alive():
        live.start_beat()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and _current:
        report.sections.append(("live service logs", _current[0].logs()))
    return report


class Receiver:
    """A client endpoint on loopback that records the push events POSTed to it and answers 204."""

    def __init__(self):
        self.events: list[dict] = []
        self.delay = 0.0  # seconds before answering: keeps a worker busy in the middle of a delivery
        self.arrivals = 0  # requests that reached the handler (counted before the delay)
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._changed:
                    receiver.arrivals += 1
                time.sleep(receiver.delay)
                with receiver._changed:
                    receiver.events.append(
                        {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(body)}
                    )
                    receiver._changed.notify_all()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def unique(self) -> dict[str, dict]:
        """The events by `webhook-id` (delivery is at least once: receivers deduplicate)."""
        with self._changed:
            return self._unique()

    def _unique(self) -> dict[str, dict]:
        return {event["headers"]["webhook-id"]: event for event in self.events}

    def wait_for(self, n: int, timeout: float = 60) -> list[dict]:
        """Waits until `n` distinct events arrived; returns them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._unique()) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{len(self._unique())} of {n} push events within {timeout} s")
                self._changed.wait(remaining)
            return list(self._unique().values())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()
