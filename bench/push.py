"""The `push` part: a change to its first delivery, and a burst's deliveries per second, at a local
receiver."""

import itertools
import os
import signal
import subprocess
import time

from bench.common import BURST, PARTS, PUSH_CLIENTS, ROOT, Api, percentile, process_cpu, rows

# Push receiver: a separate process, so its work does not slow the emitting loop of this one. A fast one, so
# that the figure is the workers': uvloop's event loop and httptools' parser (the web process's, uvicorn's),
# answering each POST 204 at once, on any number of kept-alive connections, and reporting the arrivals to
# this process in one message every 50 ms rather than one per request.


def receive_pushes(port: int, arrivals, ready) -> None:
    import asyncio

    import httptools
    import uvloop

    seen: list[tuple[float, str, str]] = []

    class Receiver(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.transport = transport
            self.parser = httptools.HttpRequestParser(self)

        def data_received(self, data: bytes) -> None:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                self.transport.close()

        def on_message_begin(self) -> None:
            self.path, self.event_id = b"", b""

        def on_url(self, url: bytes) -> None:
            self.path += url

        def on_header(self, name: bytes, value: bytes) -> None:
            if name.lower() == b"webhook-id":
                self.event_id = value

        def on_message_complete(self) -> None:
            seen.append((time.time(), self.event_id.decode(), self.path.decode()))
            self.transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")

    async def serve() -> None:
        await asyncio.get_running_loop().create_server(Receiver, "127.0.0.1", port, backlog=1024)
        ready.set()
        while True:
            await asyncio.sleep(0.05)
            if seen:
                arrivals.put(seen[:])
                seen.clear()

    uvloop.run(serve())


def push_figures(
    api: Api, token: str, push_space, pushed, arrivals, workers: "Workers", receiver: int
) -> None:
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
        cpu = process_cpu(workers.process.pid), process_cpu(receiver)
        emitted, resumed = burst(push_space, pushed, workers)
        arrived.drain(resumed + 120, want)  # a slow machine reports the rate of what arrived in time
        fault_free = arrived.last(resumed) - resumed
        # CPU time per delivery, which the machine's other load distorts less than the rate: the worker's
        # processes (paused while the burst is committed) and the receiver's.
        worker_us, receiver_us = (
            (process_cpu(pid) - before) / max(len(arrived.seen), 1) * 1e6
            for pid, before in zip((workers.process.pid, receiver), cpu, strict=True)
        )
        rows.append(
            (
                f"push deliveries per second, 2 worker processes, burst of {BURST:,} changes x 5 clients, "
                "receiver: uvloop + httptools, 204 at once",
                f"{len(arrived.seen) / max(fault_free, 0.001):.0f} /s ({len(arrived.seen):,} of {want:,} in "
                f"{fault_free:.1f} s after the workers resumed; burst emitted in {emitted:.1f} s with them "
                f"paused); CPU per delivery: worker {worker_us:.0f} us, receiver {receiver_us:.0f} us",
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
            kills.append(time.time())
            workers.start()
        arrived.drain(committed + 600, want)
        took[faults] = arrived.last(committed) - committed
    missing = want - len(arrived.seen)
    stopped = silences(sorted(arrived.seen.values()), kills)
    rows.append(
        (
            f"push recovery: {want:,} deliveries of one change, worker killed (-9) and restarted 3 times",
            f"{took[3]:.1f} s against {took[0]:.1f} s fault-free = {took[3] / max(took[0], 0.001):.1f}x; "
            f"{missing:,} missing, {arrived.twice:,} delivered twice; kills at "
            + ", ".join(f"{at - committed:.1f}" for at in kills)
            + " s, after which no new delivery arrived for "
            + ", ".join(f"{seconds:.2f}" for seconds in stopped)
            + " s",
            "<= 2x",
        )
    )


def silences(arrivals: list[float], kills: list[float]) -> list[float]:
    """For each kill, the longest time without a new delivery from it to the next kill (or to the last
    arrival): what the worker's absence, its start again included, cost the burst. `arrivals` and `kills`
    are sorted times (`time.time()`); a delivery sent before the kill that lands just after it does not
    hide the silence that follows."""
    stopped = []
    for kill, until in zip(kills, [*kills[1:], float("inf")], strict=True):
        between = [kill, *(at for at in arrivals if kill < at < until)]
        stopped.append(max((after - before for before, after in itertools.pairwise(between)), default=0.0))
    return stopped


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
                reported = self.queue.get(timeout=0.2)
            except Exception:
                continue
            for at, event_id, path in reported:
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
