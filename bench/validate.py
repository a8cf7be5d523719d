"""Benchmark of `POST /clients/validate` (CONTRACT 7), the hot path other services call per request.

Starts gunicorn (2 workers) on a fresh database (SQLite in a temporary directory, or DATABASE_URL), makes
a workspace, a member, a client and a token, then drives the endpoint with `wrk` (or a Python fallback)
and prints requests/s with p50/p99 latency beside the same figures for a trivial Django view.

    make bench            # BENCH_SECONDS=10 BENCH_CONNECTIONS=16 by default
"""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "16"))

SETUP = """
import json, django
django.setup()
from accounts.models import Account
from authn.sessions import issue_session
from clients.services import create_client
from rbac.models import Membership, Permission, Role
from tenancy.models import Workspace

workspace = Workspace.objects.create(name="Bench", slug="bench", config={"schema_version": "1"})
account = Account.objects.create(email="bench@example.com", name="Bench", verified=True)
permission = Permission.objects.create(workspace=workspace, name="projects:*")
role = Role.objects.create(workspace=workspace, name="editor")
role.permissions.add(permission)
membership = Membership.objects.create(
    account=account, workspace=workspace, scope="workspace", status="active"
)
membership.roles.add(role)
client, secret = create_client(workspace, name="bench", tags=[], meta={"schema_version": "1"}, actor=account)
print(json.dumps({"client_id": str(client.pk), "client_secret": secret,
                  "token": issue_session(account)["access_token"], "permission": "projects:update"}))
"""

LUA = """
wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["Content-Type"] = "application/json"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen) -> None:
    for _ in range(200):
        if server.poll() is not None:
            raise SystemExit("gunicorn exited during start-up")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("gunicorn did not start")


def run_wrk(url: str, body: str | None, workdir: Path) -> dict:
    command = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "--latency"]
    if body is not None:
        script = workdir / "post.lua"
        script.write_text(LUA.format(body=body))
        command += ["-s", str(script)]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50": _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1)),
        "p99": _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1)),
        "errors": int(non_2xx.group(1)) if non_2xx else 0,
    }


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(\w+)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1, "s": 1000}[unit]


def run_python(url: str, body: str | None) -> dict:
    """Fallback load generator: CONNECTIONS threads with keep-alive connections."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    latencies: list[float] = []
    errors = [0]
    deadline = time.monotonic() + SECONDS

    def worker() -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if body is None:
                connection.request("GET", parts.path)
            else:
                connection.request("POST", parts.path, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                errors[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "rps": len(latencies) / SECONDS,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
        "errors": errors[0],
    }


def main() -> None:
    if not os.environ.get("REDIS_URL"):
        # CONTRACT 14: with DEBUG off the service does not start on per-process caches.
        sys.exit("make bench needs REDIS_URL (a Redis the two gunicorn workers share)")
    workdir = Path(tempfile.mkdtemp(prefix="iam-bench-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY", secrets.token_urlsafe(50)),
        "IAM_JWT_SIGNING_KEY": os.environ.get("IAM_JWT_SIGNING_KEY", secrets.token_urlsafe(50)),
        "DEBUG": "0",
        "PYTHONPATH": str(ROOT),
        "PYTHONWARNINGS": "ignore:No directory at",  # whitenoise: no collectstatic for a benchmark
    }
    env.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    python = str(BIN / "python")
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    body = json.loads(
        subprocess.run([python, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "iam.wsgi",
            "-w",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_until_up(f"{base}/bench/ping", server)
        payload = json.dumps(body)
        request = urllib.request.Request(
            f"{base}/clients/validate", payload.encode(), {"Content-Type": "application/json"}
        )
        answer = json.loads(urllib.request.urlopen(request, timeout=5).read())["data"]
        assert answer["authorized"] and answer["allowed"], answer
        use_wrk = shutil.which("wrk") is not None
        results = {}
        for name, url, post in [
            ("GET /bench/ping (trivial view)", f"{base}/bench/ping", None),
            ("POST /clients/validate", f"{base}/clients/validate", payload),
        ]:
            results[name] = run_wrk(url, post, workdir) if use_wrk else run_python(url, post)
        database = env["DATABASE_URL"].split(":", 1)[0]
        print(
            f"\ngunicorn -w 2, {CONNECTIONS} connections, {SECONDS}s each, "
            f"load by {'wrk' if use_wrk else 'python threads'}, db {database}, cache redis\n"
        )
        print(f"{'endpoint':34} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
        for name, figures in results.items():
            print(
                f"{name:34} {figures['rps']:>10.0f} {figures['p50']:>8.2f} {figures['p99']:>8.2f} "
                f"{figures['errors']:>8}"
            )
        ping, validate = (figures["rps"] for figures in results.values())
        print(f"\nclients/validate: {validate / ping:.0%} of the trivial view's throughput (target: 50%)")
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
