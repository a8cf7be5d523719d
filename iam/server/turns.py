"""The web workers' turns at the listening socket they share (the Procfile's `web`: gunicorn's master opens
it, each worker inherits it).

Every worker waits on that socket, and a connection wakes them all; the event loop's own server then
accepts every connection waiting, so the first worker awake took them all: clients that open their
connections at once (a proxy's keep-alive pool after a restart, a service's client pool, a load
generator) were served by one worker, on one core, while the others idled (measured: 4 keep-alive
connections all on one of 2 workers in 4 to 7 tries of 10, at half the requests per second;
docs/performance.md#latest-figures).

So a worker accepts one connection at a time (`TakingTurns`), and leaves the next one to another worker
that holds at least two connections fewer than it does: each worker's count is kept in memory the master
shares with the workers it forks (`held`, one slot per worker: given by `pre_fork`, freed by
`child_exit`, iam/server/gunicorn.conf.py). A worker that stepped aside looks again every `LOOK_AGAIN`
and takes its turn back as soon as nobody holds that few, or after `STEP_ASIDE` at most (the other is
busy, stuck or gone): a turn costs a connection a few milliseconds at most, never its answer."""

import asyncio
import ctypes
import logging
import multiprocessing.sharedctypes
import socket
from collections.abc import Callable

from uvicorn import Server

log = logging.getLogger("iam.server")

LOOK_AGAIN = 0.0005  # seconds between looks at the others' counts while stepping aside
STEP_ASIDE = 0.005  # seconds at most a worker leaves a connection to a worker that holds fewer
RETRY_AFTER_ERROR = 1.0  # seconds without accepting after the socket failed (out of descriptors: as asyncio)
WORKER_SLOTS = 128  # workers at once (gunicorn's TTIN adds some): past it, a worker takes every connection

# Each worker's open connections, by slot; -1: no worker accepting. Made at import, in the master
# (gunicorn imports the worker class before it forks), so every worker shares it.
held = multiprocessing.sharedctypes.RawArray(ctypes.c_long, [-1] * WORKER_SLOTS)
own_slot: int | None = None  # this worker's, set as it starts (`Worker._serve`); None: no turns


def give_slot(worker, workers) -> None:
    """In the master, before `worker` is forked: the first slot no live worker (`workers`) holds. It
    stays -1 until the worker accepts connections: a worker still loading the application is left none."""
    taken = {getattr(other, "turn_slot", None) for other in workers}
    worker.turn_slot = next((slot for slot in range(WORKER_SLOTS) if slot not in taken), None)
    if worker.turn_slot is not None:
        held[worker.turn_slot] = -1


def free_slot(worker) -> None:
    """In the master, once `worker` has exited."""
    if getattr(worker, "turn_slot", None) is not None:
        held[worker.turn_slot] = -1


def publish(count: int) -> None:
    """This worker now holds `count` connections."""
    if own_slot is not None:
        held[own_slot] = count


def stop_taking_turns() -> None:
    """This worker accepts no more connections (it is shutting down): the others leave it none, however
    few it holds."""
    global own_slot
    if own_slot is not None:
        held[own_slot] = -1
        own_slot = None


def another_holds_fewer(mine: int) -> bool:
    """Whether another worker accepting connections holds at least two fewer than `mine`. Not one fewer:
    that is what taking turns leaves anyway, and stepping aside for it made connections that carry one
    request each (`Connection: close`) wait, a fifth fewer requests per second for no better balance."""
    return any(0 <= count < mine - 1 for slot, count in enumerate(held) if slot != own_slot)


class TakingTurns:
    """`sock`, served by this worker one connection at a time, in turn with the others (the module's
    docstring). `connections`: the worker's open connections (uvicorn's set, which `HttpProtocol`
    keeps)."""

    def __init__(
        self, sock: socket.socket, protocol_factory: Callable[[], asyncio.Protocol], connections: set
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.sockets = [sock]  # what uvicorn reads of a server
        self.protocol_factory = protocol_factory
        self.connections = connections
        self.pending: set[object] = set()  # accepted, their protocol not yet made: not in `connections`
        self.aside_until = 0.0  # while it steps aside (the loop's time)
        self.looking: asyncio.TimerHandle | None = None  # its reader removed meanwhile
        sock.setblocking(False)
        self.loop.add_reader(sock.fileno(), self.accept)
        publish(self.held())

    def held(self) -> int:
        return len(self.connections) + len(self.pending)

    def accept(self) -> None:
        if own_slot is not None and another_holds_fewer(self.held()):
            self.step_aside()
        else:
            self.take_one()

    def take_one(self) -> None:
        try:
            connection, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another worker took it, or its client gave up meanwhile
        except OSError as error:
            log.error("accepting a connection failed, retrying in %s s: %s", RETRY_AFTER_ERROR, error)
            self.loop.remove_reader(self.sock.fileno())
            self.looking = self.loop.call_later(RETRY_AFTER_ERROR, self.resume)
            return
        connection.setblocking(False)
        token = object()
        self.pending.add(token)
        publish(self.held())

        def protocol() -> asyncio.Protocol:  # made as the connection joins `connections`
            self.pending.discard(token)
            return self.protocol_factory()

        task = self.loop.create_task(self.loop.connect_accepted_socket(protocol, connection))
        task.add_done_callback(lambda task: self.connected(task, token))

    def connected(self, task: asyncio.Task, token: object) -> None:
        self.pending.discard(token)  # a connection that failed before its protocol was made
        if not task.cancelled() and task.exception() is not None:
            log.info("a connection could not be set up: %s", task.exception())
        publish(self.held())

    def step_aside(self) -> None:
        """No connection accepted while another worker holds fewer, for `STEP_ASIDE` at most."""
        self.loop.remove_reader(self.sock.fileno())
        self.aside_until = self.loop.time() + STEP_ASIDE
        self.looking = self.loop.call_later(LOOK_AGAIN, self.look_again)

    def look_again(self) -> None:
        if self.loop.time() < self.aside_until and another_holds_fewer(self.held()):
            self.looking = self.loop.call_later(LOOK_AGAIN, self.look_again)
        else:
            self.resume()

    def resume(self) -> None:
        """Its turn: the connection nobody took meanwhile is this worker's."""
        self.looking = None
        self.loop.add_reader(self.sock.fileno(), self.accept)
        self.take_one()

    def close(self) -> None:
        stop_taking_turns()
        if self.looking is not None:
            self.looking.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())

    async def wait_closed(self) -> None:
        """Nothing to wait for: uvicorn waits for the connections themselves."""


class TurnTakingServer(Server):
    """uvicorn's server, its listening sockets served by `TakingTurns` instead of the event loop's
    server."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None or self.config.ssl:
            await super().startup(sockets)
            return
        await super().startup(sockets=[])  # the lifespan (off) and `started`, no listener

        def protocol() -> asyncio.Protocol:
            return self.config.http_protocol_class(
                config=self.config, server_state=self.server_state, app_state=self.lifespan.state
            )

        connections = self.server_state.connections
        self.servers = [TakingTurns(sock, protocol, connections) for sock in sockets]
