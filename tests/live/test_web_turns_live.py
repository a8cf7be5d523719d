"""The Procfile's `web` with 2 workers: connections waiting to be accepted together are shared by both
workers (iam/server/turns.py). Without turns, the first worker awake accepted every connection waiting:
under `wrk -c8` all 8 keep-alive connections sat on one worker in 6 tries of 10, which then served them
on one core."""

import os
import re
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.live.conftest import wait_for

CONNECTIONS = 8
TRIES = 3


@pytest.fixture(scope="module")
def web(live):
    tier = live.start_web(workers=2)
    yield tier
    tier.stop()


def worker_pids(web) -> list[int]:
    master = web.process.pid
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def answered_by(web) -> set[int]:
    """The worker processes named in the tier's access log (`%(p)s`, tests/live/conftest.py)."""
    return {int(pid) for pid in re.findall(r"^<(\d+)>", web.process.tail(200_000), re.M)}


def established(port: int) -> set[str]:
    """Each worker's established connections on `port`: socket inodes of /proc/net/tcp against each
    worker's descriptors."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01":
            inodes.add(fields[9])
    return inodes


def held_by(pid: int, inodes: set[str]) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            count += 1
    return count


def health_check(sock: socket.socket) -> None:
    sock.sendall(b"GET /health-check HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer


def test_connections_opened_at_once_are_shared_by_the_workers(web):
    port = urlsplit(web.url).port
    workers = worker_pids(web)
    assert len(workers) == 2

    def both_accept() -> bool:  # each worker has loaded the application and answers
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            health_check(sock)
        return answered_by(web) >= set(workers)

    wait_for(both_accept, 60, interval=0.05, what="both workers to answer")
    for _ in range(TRIES):
        # The connections wait in the socket's queue while the workers are busy (stopped, here), then
        # both workers find them there at once, sharing one core as a busy machine has them (without
        # turns, whichever ran first took all 8).
        for pid in workers:
            os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})
            os.kill(pid, signal.SIGSTOP)
        try:
            clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(CONNECTIONS)]
        finally:
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
        try:
            for sock in clients:
                health_check(sock)
            inodes = established(port)
            held = {pid: held_by(pid, inodes) for pid in workers}
            assert sum(held.values()) == CONNECTIONS, held
            assert min(held.values()) >= 2, held
        finally:
            for sock in clients:
                sock.close()
        wait_for(lambda: not established(port), 10, what="the connections to close")
