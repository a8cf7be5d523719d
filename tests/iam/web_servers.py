"""A web worker's server in a thread of the test process: uvicorn with iam/server's protocol in front of a
`ReadWhole`, on a loopback port, for tests that speak HTTP to it over sockets."""

import contextlib
import socket
import threading
from collections.abc import Iterator

import uvicorn

from iam.server.app import ReadWhole
from iam.server.protocol import HttpProtocol


@contextlib.contextmanager
def serving(app: ReadWhole, host: str = "127.0.0.1") -> Iterator[int]:
    """Serves `app` until the block ends; yields its port."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=HttpProtocol,
        ws="none",
        interface="asgi3",
        lifespan="off",
        server_header=False,  # as the worker (iam/server/worker.py)
        loop="asyncio",
        log_level="critical",
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    while not running.started:
        thread.join(0.05)
    try:
        yield port
    finally:
        running.should_exit = True
        thread.join(5)
        app.executor.shutdown(wait=False, cancel_futures=True)


def connect(port: int, *, source: str = "127.0.0.1", receive_buffer: int | None = None) -> socket.socket:
    """A connection from `source`; `receive_buffer` bounds what its kernel takes for it while it reads
    nothing (so a test knows how much of an answer waits in the server)."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def read_answer(sock: socket.socket, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Reads one whole answer (`Content-Length` or chunked) or, when the server drops the connection, what
    came; returns its status, headers (lower-case names) and body."""
    sock.settimeout(timeout)
    data = bytearray()
    with contextlib.suppress(ConnectionError, TimeoutError):
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines[0] else 0
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", -1))
    body = bytearray(rest)
    with contextlib.suppress(ConnectionError, TimeoutError):
        while (length < 0 or len(body) < length) and not body.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(1024 * 1024)
            if not chunk:
                break
            body += chunk
    if headers.get("transfer-encoding") == "chunked":
        return status, headers, dechunk(bytes(body))
    return status, headers, bytes(body)


def dechunk(data: bytes) -> bytes:
    body, at = bytearray(), 0
    while at < len(data):
        end = data.index(b"\r\n", at)
        size = int(data[at:end], 16)
        if size == 0:
            break
        body += data[end + 2 : end + 2 + size]
        at = end + 2 + size + 2
    return bytes(body)
