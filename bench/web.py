"""The web process under load: the Procfile's `web` command and plain sync gunicorn beside it, the load
generators (wrk, or Python threads), the server's CPU time per request, and the `validate` part's figures
(`clients/validate` against a bare view, and beside connections that trickle their bodies)."""

import contextlib
import http.client
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import (
    BIN,
    CONNECTIONS,
    LUA,
    ROOT,
    ROUNDS,
    SECONDS,
    SLOW_CLIENTS,
    WORKERS,
    Api,
    free_port,
    notes,
    percentile,
    process_cpu,
    rows,
)

# The web process: the Procfile's `web` command (the shape deployed), and plain sync gunicorn beside it


def web_command() -> list[str]:
    """The Procfile's `web` command (BENCH_WEB replaces it, to measure another shape), with its port and
    worker count made the bench's, and no access log."""
    line = os.environ.get("BENCH_WEB") or next(
        command
        for name, _, command in (line.partition(":") for line in (ROOT / "Procfile").read_text().splitlines())
        if name.strip() == "web"
    )
    line = re.sub(
        r"\$\{(\w+):-([^}]*)\}",
        lambda match: str(WORKERS) if match[1] == "WEB_CONCURRENCY" else os.environ.get(match[1], match[2]),
        line,
    )
    words = [word for word in shlex.split(line) if word != "--access-logfile"]
    if "-" in words:
        words.remove("-")  # the access log's target
    if "--bind" in words:
        bind = words.index("--bind")
        del words[bind : bind + 2]
    return words


SERVERS: dict[str, int] = {}  # base URL -> gunicorn master's pid


def server_cpu(base: str) -> float:
    """CPU seconds used so far by the server at `base`: its master and worker processes."""
    return process_cpu(SERVERS[base])


def load_cpu(base: str, path: str, body: str | None, workdir: Path, headers: dict | None = None) -> dict:
    """`load`, with the server's own CPU time per request (microseconds): unlike req/s, it hardly moves
    when other processes take the machine's cores."""
    before = server_cpu(base)
    result = load(f"{base}{path}", body, workdir, headers=headers)
    result["cpu_us"] = (server_cpu(base) - before) / max(result["rps"] * SECONDS, 1) * 1e6
    return result


SYNC_COMMAND = [
    "gunicorn",
    "iam.wsgi:application",
    "-c",
    "iam/server/gunicorn.conf.py",
    "--workers",
    str(WORKERS),
]


def serve(command: list[str], env: dict, processes: list) -> str:
    """Starts `command` on a free loopback port; returns its base URL once the bare view answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    program = shutil.which(command[0], path=str(BIN)) or command[0]
    server = subprocess.Popen(
        [program, *command[1:], "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT,
        env=env,
    )  # gunicorn writes no access log unless --access-logfile is given
    processes.append(server)
    SERVERS[base] = server.pid
    for _ in range(300):
        if server.poll() is not None:
            raise SystemExit(f"{command[0]} exited during start-up")
        try:
            urllib.request.urlopen(f"{base}/bench/ping", timeout=1).read()
            return base
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{command[0]} did not answer within 30 s")


# Load generators


def run_wrk(
    url: str, body: str | None, workdir: Path, *, connections: int, seconds: int, headers: dict
) -> dict:
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if body is not None:
        script = workdir / f"post-{uuid.uuid4().hex}.lua"
        extra = "".join(f'wrk.headers["{name}"] = "{value}"\n' for name, value in headers.items())
        script.write_text(LUA.format(body=body) + extra)
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


def run_python(url: str, body: str | None, *, connections: int, seconds: int, headers: dict) -> dict:
    """Fallback load generator: threads with keep-alive connections (slower than wrk: it takes CPU from
    the server, so its ratios are lower bounds)."""
    parts = urlsplit(url)
    latencies: list[float] = []
    errors = [0]
    deadline = time.monotonic() + seconds

    def worker() -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if body is None:
                connection.request("GET", parts.path)
            else:
                connection.request("POST", parts.path, body, {"Content-Type": "application/json", **headers})
            response = connection.getresponse()
            response.read()
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                errors[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "rps": len(latencies) / seconds,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
        "errors": errors[0],
    }


def load(
    url: str,
    body: str | None,
    workdir: Path,
    *,
    connections: int = CONNECTIONS,
    seconds: int = SECONDS,
    headers: dict | None = None,
):
    """Requests to `url` (POST `body` with `headers` when given, else GET) from `connections` keep-alive
    connections for `seconds`: req/s, p50 and p99 (ms), and the answers that were not 2xx."""
    if shutil.which("wrk"):
        return run_wrk(url, body, workdir, connections=connections, seconds=seconds, headers=headers or {})
    return run_python(url, body, connections=connections, seconds=seconds, headers=headers or {})


def validate_figures(base: str, sync_base: str, body: str, workdir: Path) -> None:
    """`clients/validate` against the bare view under the Procfile's `web` command, and both under plain
    sync gunicorn (whose workers read requests themselves: a slow client holds one) for the cost of the
    Procfile's arrangement."""
    ping, validate, sync_ping, sync_validate = [], [], [], []
    for _ in range(ROUNDS):  # alternate, so drifting load on a shared machine hits all alike
        ping.append(load_cpu(base, "/bench/ping", None, workdir))
        validate.append(load_cpu(base, "/clients/validate", body, workdir))
        sync_ping.append(load_cpu(sync_base, "/bench/ping", None, workdir))
        sync_validate.append(load_cpu(sync_base, "/clients/validate", body, workdir))
    floor = statistics.median(result["rps"] for result in ping)
    rps = statistics.median(result["rps"] for result in validate)
    sync_floor = statistics.median(result["rps"] for result in sync_ping)
    sync_rps = statistics.median(result["rps"] for result in sync_validate)
    p99 = statistics.median(result["p99"] for result in validate)
    cpu = {
        name: statistics.median(result["cpu_us"] for result in results)
        for name, results in (
            ("ping", ping),
            ("validate", validate),
            ("sync_ping", sync_ping),
            ("sync_validate", sync_validate),
        )
    }
    errors = sum(result["errors"] for result in ping + validate + sync_ping + sync_validate)
    shape = " ".join(word for word in web_command() if word not in ("-c", "iam/server/gunicorn.conf.py"))
    rows.append(
        (
            f"bare Django view (floor), same server and middleware (`{shape}`)",
            f"{floor:,.0f} req/s, p99 {statistics.median(r['p99'] for r in ping):.1f} ms",
            "-",
        )
    )
    rows.append(
        (
            "`clients/validate` req/s / floor req/s",
            f"{rps:,.0f} / {floor:,.0f} = {rps / floor:.2f}, p99 {p99:.1f} ms",
            ">= 0.85, p99 <= 10 ms",
        )
    )
    rows.append(
        (
            "slow-client arrangement's cost: `clients/validate` req/s, this shape / plain sync gunicorn",
            f"{rps:,.0f} / {sync_rps:,.0f} = {rps / sync_rps:.2f} (bare view {floor:,.0f} / "
            f"{sync_floor:,.0f} = {floor / sync_floor:.2f}; sync's own ratio {sync_rps / sync_floor:.2f})",
            "-",
        )
    )
    rows.append(
        (
            "server CPU per request (steady on a busy machine): floor / `clients/validate`, this shape",
            f"{cpu['ping']:.0f} / {cpu['validate']:.0f} us = {cpu['ping'] / cpu['validate']:.2f} (plain sync "
            f"gunicorn {cpu['sync_ping']:.0f} / {cpu['sync_validate']:.0f} us = "
            f"{cpu['sync_ping'] / cpu['sync_validate']:.2f})",
            "-",
        )
    )
    # Under saturation a request's latency is mostly its wait in line: by Little's law the mean is the
    # connections over the throughput, so the p99 above cannot be below that. The same two endpoints at
    # one connection per worker show the service's own tail.
    unqueued_floor = load(f"{base}/bench/ping", None, workdir, connections=WORKERS)
    unqueued = load(f"{base}/clients/validate", body, workdir, connections=WORKERS)
    rows.append(
        (
            f"`clients/validate` p99 at {WORKERS} connections (one per worker: no wait in line)",
            f"p99 {unqueued['p99']:.1f} ms (p50 {unqueued['p50']:.1f}); "
            f"floor p99 {unqueued_floor['p99']:.1f}",
            "p99 <= 10 ms",
        )
    )
    notes.append(
        f"validate at {CONNECTIONS} connections: Little's law puts the mean latency at {CONNECTIONS} / "
        f"{rps:,.0f} req/s = {CONNECTIONS / rps * 1000:.1f} ms (the floor's: {CONNECTIONS / floor * 1000:.1f}"
        " ms), the wait for a worker; its p99 is that wait's tail"
    )
    errors += unqueued["errors"] + unqueued_floor["errors"]
    if errors:
        notes.append(f"{errors} non-2xx answers during the validate runs")
    notes.append(
        "validate rounds (req/s, floor/validate, Procfile's shape then plain sync gunicorn): "
        + ", ".join(
            f"{p['rps']:.0f}/{v['rps']:.0f} {sp['rps']:.0f}/{sv['rps']:.0f}"
            for p, v, sp, sv in zip(ping, validate, sync_ping, sync_validate, strict=True)
        )
    )


def slow_clients_figure(base: str, body: str) -> None:
    """`clients/validate` one request at a time while SLOW_CLIENTS connections send their headers and then
    one byte of their body every 0.25 s (under sync gunicorn each would hold a worker for 30 s)."""
    parts = urlsplit(base)
    head = b"POST /clients/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
    slow = []
    for _ in range(SLOW_CLIENTS):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
        sock.sendall(head)
        slow.append(sock)
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.25):
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.send(b" ")

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(1)
        api = Api(base)
        timings = [api.post("/clients/validate", json.loads(body))[1] for _ in range(100)]
    finally:
        stop.set()
        thread.join()
        for sock in slow:
            sock.close()
    rows.append(
        (
            f"`clients/validate` one at a time beside {SLOW_CLIENTS} connections trickling their bodies",
            f"p95 {percentile(timings, 0.95):.1f} ms (p50 {percentile(timings, 0.5):.1f})",
            "p95 < 1000 ms",
        )
    )
