"""iam/server/turns.py: the web workers take turns at the listening socket they share, so that clients
opening their connections at once are served by every worker, and no connection is ever left waiting for
more than a turn. The workers' balance itself, under the Procfile's gunicorn:
tests/live/test_web_turns_live.py."""

import asyncio
import socket
from types import SimpleNamespace

import pytest

from iam.server import turns


@pytest.fixture(autouse=True)
def _fresh_table(monkeypatch):
    saved = list(turns.held)
    monkeypatch.setattr(turns, "own_slot", None)
    turns.held[:] = [-1] * turns.WORKER_SLOTS
    yield
    turns.held[:] = saved


def test_each_worker_gets_the_first_free_slot_and_counts_once_it_accepts():
    first, second, third = SimpleNamespace(), SimpleNamespace(), SimpleNamespace()
    turns.give_slot(first, [])
    turns.give_slot(second, [first])
    assert (first.turn_slot, second.turn_slot) == (0, 1)
    assert turns.held[0] == turns.held[1] == -1  # loading the application: left no connection
    turns.free_slot(first)
    turns.give_slot(third, [second])
    assert third.turn_slot == 0


def test_past_the_table_a_worker_takes_no_turns():
    workers = [SimpleNamespace(turn_slot=slot) for slot in range(turns.WORKER_SLOTS)]
    late = SimpleNamespace()
    turns.give_slot(late, workers)
    assert late.turn_slot is None
    turns.free_slot(late)  # nothing to free


def test_a_worker_steps_aside_only_for_one_holding_two_fewer(monkeypatch):
    monkeypatch.setattr(turns, "own_slot", 0)
    turns.held[0] = 5
    turns.held[1] = 4  # one fewer: what turns leave anyway
    turns.held[2] = -1  # no worker, or one not accepting
    assert not turns.another_holds_fewer(5)
    turns.held[1] = 3
    assert turns.another_holds_fewer(5)
    turns.held[0] = 0  # its own count is not another's
    assert not turns.another_holds_fewer(2)


class Recorded(asyncio.Protocol):
    """A connection the server under test made, kept in `connections` while open, as uvicorn's are."""

    def __init__(self, connections: set):
        self.connections = connections

    def connection_made(self, transport):
        self.connections.add(self)

    def connection_lost(self, exc):
        self.connections.discard(self)


async def settle(condition, seconds: float = 2.0) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.0005)
    return True


def serve(check, *, own_slot: int | None = None, others: dict[int, int] | None = None) -> None:
    """Runs `await check(listener, taking_turns, port)` against a `TakingTurns` on a fresh loopback
    socket, this worker at `own_slot` and the other workers' counts `others` in the table."""
    turns.own_slot = own_slot
    for slot, count in (others or {}).items():
        turns.held[slot] = count

    async def main():
        listener = socket.create_server(("127.0.0.1", 0))
        connections: set = set()
        server = turns.TakingTurns(listener, lambda: Recorded(connections), connections)
        try:
            await check(listener, server, listener.getsockname()[1])
        finally:
            server.close()
            listener.close()

    asyncio.run(main())


def open_connections(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]


def test_alone_a_worker_takes_every_connection():
    async def check(listener, server, port):
        clients = open_connections(port, 5)
        assert await settle(lambda: len(server.connections) == 5)
        for client in clients:
            client.close()
        assert await settle(lambda: not server.connections)

    serve(check)


def test_a_worker_publishes_what_it_holds_and_stops_counting_when_it_closes():
    async def check(listener, server, port):
        assert turns.held[3] == 0  # accepting now
        clients = open_connections(port, 2)
        assert await settle(lambda: len(server.connections) == 2 and turns.held[3] == 2)
        server.close()
        assert turns.held[3] == -1 and turns.own_slot is None  # shutting down: the others leave it none
        for client in clients:
            client.close()

    serve(check, own_slot=3)


def test_a_connection_left_to_a_worker_holding_fewer_is_taken_after_a_turn_when_nobody_does(monkeypatch):
    # Another worker holds none while this one holds two: the third connection is left to it; that
    # worker never takes it (it is asleep), so this one does, a turn later: never lost, never stuck.
    monkeypatch.setattr(turns, "STEP_ASIDE", 0.2)  # a turn long enough to be seen on a busy machine

    async def check(listener, server, port):
        clients = open_connections(port, 2)
        assert await settle(lambda: len(server.connections) == 2)
        turns.held[1] = 0
        started = asyncio.get_running_loop().time()
        clients += open_connections(port, 1)
        assert await settle(lambda: server.looking is not None)  # stepped aside
        assert len(server.connections) == 2
        assert await settle(lambda: len(server.connections) == 3)
        assert asyncio.get_running_loop().time() - started >= turns.STEP_ASIDE * 0.9
        for client in clients:
            client.close()

    serve(check, own_slot=0)


def test_a_worker_takes_its_turn_back_as_soon_as_nobody_holds_fewer(monkeypatch):
    monkeypatch.setattr(turns, "STEP_ASIDE", 30.0)  # the turn back can only come from a look at the others

    async def check(listener, server, port):
        clients = open_connections(port, 2)
        assert await settle(lambda: len(server.connections) == 2)
        turns.held[1] = 0
        clients += open_connections(port, 1)
        assert await settle(lambda: server.looking is not None)
        turns.held[1] = 5  # the other worker took connections meanwhile
        assert await settle(lambda: len(server.connections) == 3, seconds=5)
        for client in clients:
            client.close()

    serve(check, own_slot=0)
