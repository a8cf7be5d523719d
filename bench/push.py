"""The `push` part: a change to its first delivery, and a burst's deliveries per second, at a local
receiver."""

import os
import signal
import subprocess
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.common import BURST, PARTS, PUSH_CLIENTS, ROOT, Api, percentile, rows

# Push receiver: a separate process, so its work does not slow the emitting loop of this one.


def receive_pushes(port: int, arrivals, ready) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self.rfile.read(length)
            arrivals.put((time.time(), self.headers.get("webhook-id"), self.path))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    ready.set()
    server.serve_forever()


def push_figures(api: Api, token: str, push_space, pushed, arrivals, workers: "Workers") -> None:
    headers = {"Authorization": f"Bearer {token}", "X-Workspace": str(push_space.pk)}
    arrived = Arrivals(arrivals)

    time.sleep(3)  # the worker's start-up
    if "push" in PARTS:
        # Idle latency: one change every 0.3 s, acknowledged by the API, to its first delivery.
        latencies = []
        status = "suspended"
        for _ in range(30):
            before = set(arrived.seen)
            api.post("/memberships/update", {"id": str(pushed.pk), "status": status}, headers)
            acknowledged = time.time()
            status = "active" if status == "suspended" else "suspended"
            arrived.drain(acknowledged + 5, len(before) + PUSH_CLIENTS)
            new = [at for key, at in arrived.seen.items() if key not in before]
            if new:
                latencies.append(max(0.0, min(new) - acknowledged) * 1000)
            time.sleep(0.3)
        rows.append(
            (
                "change acknowledged -> first push delivery, one change every 0.3 s, 5 clients",
                f"p50 {percentile(latencies, 0.5):.0f} ms, p95 {percentile(latencies, 0.95):.0f} ms",
                "<= 250 ms p95",
            )
        )

        # Burst: BURST changes, each in its own transaction, as fast as this process can commit them, with the
        # workers paused: on 2 shared cores this one process commits a few dozen changes a second, which would
        # cap the figure at its own pace. Resumed, the workers find the whole burst owed at once.
        want = BURST * PUSH_CLIENTS
        arrived.clear()
        emitted, resumed = burst(push_space, pushed, workers)
        arrived.drain(resumed + 120, want)  # a slow machine reports the rate of what arrived in time
        fault_free = arrived.last(resumed) - resumed
        rows.append(
            (
                f"push deliveries per second, 2 worker processes, burst of {BURST:,} changes x 5 clients",
                f"{len(arrived.seen) / max(fault_free, 0.001):.0f} /s ({len(arrived.seen):,} of {want:,} in "
                f"{fault_free:.1f} s after the workers resumed; burst emitted in {emitted:.1f} s with them "
                "paused)",
                ">= 5,000 /s",
            )
        )
    if "push-recovery" in PARTS:
        recovery_figure(push_space, pushed, workers, arrived)


def recovery_figure(push_space, pushed, workers: "Workers", arrived: "Arrivals") -> None:
    """A directory-sized change: BURST events of one kind committed in one transaction (`emit_each`, as a
    Group change of thousands of memberships writes them), 5 clients each, with the worker running;
    first without a fault, then with its worker killed (SIGKILL to its process group: the main process and
    its pool, with the tasks they ran and the ones they had taken from the queue) each time another
    quarter of the deliveries has arrived, three times, and started again at once, as a supervisor does.
    Beat runs throughout (its push sweep hands over what no task took). The figure: the time from the
    commit to the last delivery, with the faults against without, and the deliveries that never arrived
    and the ones that arrived twice (a batch in flight when its worker died is sent again)."""
    want = BURST * PUSH_CLIENTS
    took, kills = {}, []
    for faults in (0, 3):
        arrived.clear()
        committed = change_at_once(push_space, pushed)
        for quarter in range(1, faults + 1):
            arrived.drain(committed + 600, want * quarter // 4)
            workers.kill()
            kills.append(time.time() - committed)
            workers.start()
        arrived.drain(committed + 600, want)
        took[faults] = arrived.last(committed) - committed
    missing = want - len(arrived.seen)
    rows.append(
        (
            f"push recovery: {want:,} deliveries of one change, worker killed (-9) and restarted 3 times",
            f"{took[3]:.1f} s against {took[0]:.1f} s fault-free = {took[3] / max(took[0], 0.001):.1f}x; "
            f"{missing:,} missing, {arrived.twice:,} delivered twice (kills at "
            + ", ".join(f"{at:.1f}" for at in kills)
            + " s)",
            "<= 2x",
        )
    )


def change_at_once(push_space, pushed) -> float:
    """BURST events in one transaction; time.time() of its commit."""
    from django.db import transaction

    from iam.platform import events

    with transaction.atomic():
        events.emit_each(
            "membership.updated",
            [(("membership", pushed.pk), [pushed.account_id])] * BURST,
            workspace_id=push_space.pk,
        )
    return time.time()


def burst(push_space, pushed, workers: "Workers") -> tuple[float, float]:
    """Commits BURST changes with the workers paused, then resumes them: (seconds it took to commit them,
    time.time() of the resumption)."""
    from django.db import transaction

    from iam.platform import events

    started = time.time()
    workers.pause()
    for _ in range(BURST):
        with transaction.atomic():
            events.emit(
                "membership.updated",
                resource=("membership", pushed.pk),
                account_ids=[pushed.account_id],
                workspace_ids=[push_space.pk],
            )
    committed = time.time()
    workers.resume()
    return committed - started, committed


class Arrivals:
    """The deliveries the receiver reported: the first arrival of each (event id and client path), and how
    many arrived again."""

    def __init__(self, queue):
        self.queue = queue
        self.seen: dict[str, float] = {}
        self.twice = 0

    def clear(self) -> None:
        self.seen.clear()
        self.twice = 0

    def drain(self, until: float, want: int) -> None:
        while time.time() < until and len(self.seen) < want:
            try:
                at, event_id, path = self.queue.get(timeout=0.2)
            except Exception:
                continue
            key = f"{event_id} {path}"
            if key in self.seen:
                self.twice += 1
            else:
                self.seen[key] = at

    def last(self, default: float) -> float:
        return max(self.seen.values()) if self.seen else default


class Workers:
    """The Celery worker of the push part (2 pool processes), in a process group of its own so that a
    signal reaches its pool too."""

    def __init__(self, command: list[str], env: dict, processes: list):
        self.command, self.env, self.processes = command, env, processes
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, start_new_session=True)
        self.processes.append(self.process)

    def pause(self) -> None:
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
