"""Django's Redis cache backend, keeping one `redis.Redis` client per connection pool. Django builds a new
client for every cache call, and a redis-py client costs about as much to build as the round trip itself;
the clients are thread-safe, so one per pool serves every thread of the process.

With `LOCAL_PREFIXES` in the cache's OPTIONS, entries under those key names are also kept in process
memory, as the bytes Redis holds (each read unpickles its own copy), and Redis reports every change to
them to every process: client-side caching with tracking in broadcast mode (redis.io/docs "client-side
caching"), on a connection of the process's own that each read drains first (a non-blocking `recv`,
no round trip). Redis queues the report as it makes the change, so a read that comes after the writer
heard back finds the report waiting; a change made by this process is dropped here at once. When that
connection is lost, or before it is up, every read goes to Redis as without this layer."""

import contextlib
import os
import socket
import threading
import time

from django.core.cache.backends import redis


class Invalidations:
    """A connection on which Redis reports every key changed under `prefixes` (RESP2: tracking redirected
    to the connection itself, which subscribes to `__redis__:invalidate`). `entries` holds what may be
    served locally; `poll()` drops what Redis reported since, and says whether the reports can be trusted."""

    LIMIT = 10_000  # entries; the whole set is dropped when full
    # Seconds an entry is served locally at most. Reports drop an entry at once; this bounds the one case
    # they cannot cover, a tracking connection that went silent without closing (a network partition):
    # a revocation made meanwhile is then refused here within 5 s, as it is at once elsewhere.
    MAX_AGE = 5.0
    RETRY_SECONDS = 5.0

    def __init__(self, host: str, port: int, db: int, password: str | None, prefixes: list[str]):
        self.address, self.db, self.password, self.prefixes = (host, port), db, password, tuple(prefixes)
        self.entries: dict[str, tuple[bytes | None, float]] = {}
        self.changes = 0  # counts reports: a read fills only if none came while it was away
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.buffer = b""
        self.retry_at = 0.0

    def tracks(self, key: str) -> bool:
        return key.startswith(self.prefixes)

    def poll(self) -> bool:
        """Drains the reports already received. False (and nothing served locally) when not connected."""
        if self.sock is None and not self._connect():
            return False
        try:
            while True:
                try:
                    data = self.sock.recv(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break  # nothing reported since the last read
                if not data:
                    raise ConnectionError("closed by the server")
                self.buffer += data
                self._consume()
        except (OSError, ValueError):
            self._lose()
            return False
        return True

    def forget(self, keys) -> None:
        with self.lock:
            self.changes += 1
            for key in keys:
                self.entries.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self.changes += 1
            self.entries.clear()

    def _connect(self) -> bool:
        if time.monotonic() < self.retry_at:
            return False
        try:
            sock = socket.create_connection(self.address, timeout=0.5)
            self.sock, self.buffer = sock, b""
            if self.password:
                self._call("AUTH", self.password)
            self._call("SELECT", str(self.db))
            client_id = self._call("CLIENT", "ID")
            prefixes = [part for prefix in self.prefixes for part in ("PREFIX", prefix)]
            self._call("CLIENT", "TRACKING", "on", "REDIRECT", str(client_id), "BCAST", *prefixes)
            self._call("SUBSCRIBE", "__redis__:invalidate")
            sock.setblocking(False)  # from here on, reads only take what has arrived
        except (OSError, ValueError):
            self._lose()
            return False
        return True

    def _lose(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock, self.buffer = None, b""
        self.retry_at = time.monotonic() + self.RETRY_SECONDS
        self.changes += 1
        self.entries.clear()

    def _call(self, *args: str):
        command = f"*{len(args)}\r\n".encode() + b"".join(
            f"${len(arg.encode())}\r\n".encode() + arg.encode() + b"\r\n" for arg in args
        )
        self.sock.sendall(command)
        while True:
            reply, end = _parse(self.buffer, 0)
            if reply is not _INCOMPLETE:
                self.buffer = self.buffer[end:]
                if isinstance(reply, Exception):
                    raise ValueError(str(reply))
                return reply
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.buffer += data

    def _consume(self) -> None:
        while True:
            message, end = _parse(self.buffer, 0)
            if message is _INCOMPLETE:
                return
            self.buffer = self.buffer[end:]
            if not (isinstance(message, list) and len(message) == 3 and message[0] == b"message"):
                continue
            self.changes += 1
            if message[2] is None:  # the server flushed: everything may have changed
                self.entries.clear()
            else:
                for key in message[2]:
                    self.entries.pop(key.decode(), None)


_INCOMPLETE = object()


def _parse(buffer: bytes, start: int):
    """One RESP2 reply from `buffer[start:]`: (value, end), or (_INCOMPLETE, start)."""
    line_end = buffer.find(b"\r\n", start)
    if line_end < 0:
        return _INCOMPLETE, start
    kind, body, after = buffer[start : start + 1], buffer[start + 1 : line_end], line_end + 2
    if kind == b"+":
        return body, after
    if kind == b"-":
        return ValueError(body.decode(errors="replace")), after
    if kind == b":":
        return int(body), after
    if kind == b"$":
        length = int(body)
        if length < 0:
            return None, after
        if len(buffer) < after + length + 2:
            return _INCOMPLETE, start
        return buffer[after : after + length], after + length + 2
    if kind == b"*":
        count = int(body)
        if count < 0:
            return None, after
        items = []
        for _ in range(count):
            item, after = _parse(buffer, after)
            if item is _INCOMPLETE:
                return _INCOMPLETE, start
            items.append(item)
        return items, after
    raise ValueError(f"unexpected reply {kind!r}")


class RedisCacheClient(redis.RedisCacheClient):
    def __init__(self, *args, local_prefixes: list[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}
        self._local_prefixes = local_prefixes or []
        self._invalidations: Invalidations | None = None
        self._pid = 0

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            client = self._clients[index] = super().get_client(key, write=write)
        return client

    def _local(self) -> Invalidations | None:
        if not self._local_prefixes:
            return None
        if self._pid != os.getpid():  # a forked worker opens its own connection
            pool = self._get_connection_pool(False)
            kwargs = pool.connection_kwargs
            self._invalidations = Invalidations(
                kwargs.get("host", "127.0.0.1"),
                kwargs.get("port", 6379),
                kwargs.get("db", 0),
                kwargs.get("password"),
                [prefix for prefix in self._local_prefixes],
            )
            self._pid = os.getpid()
        return self._invalidations

    def get_many(self, keys):
        local = self._local()
        if local is None:
            return super().get_many(keys)
        keys = list(keys)
        found: dict[str, bytes | None] = {}
        now = time.monotonic()
        with local.lock:
            live = local.poll()
            for key in keys:
                entry = local.entries.get(key) if live else None
                if entry is not None and entry[1] > now:
                    found[key] = entry[0]
            changes = local.changes
        missing = [key for key in keys if key not in found]
        if missing:
            values = self.get_client(None).mget(missing)
            with local.lock:
                keep = local.poll() and local.changes == changes
                if keep and len(local.entries) + len(missing) > local.LIMIT:
                    local.entries.clear()
                for key, value in zip(missing, values, strict=True):
                    found[key] = value
                    if keep and local.tracks(key):
                        local.entries[key] = (value, now + local.MAX_AGE)
        return {key: self._serializer.loads(value) for key, value in found.items() if value is not None}

    def get(self, key, default):
        if self._local() is None:
            return super().get(key, default)
        return self.get_many([key]).get(key, default)

    # A write by this process is not served locally a moment longer, whatever Redis reports and when.

    def _changed(self, keys) -> None:
        local = self._invalidations if self._pid == os.getpid() else None
        if local is not None:
            local.forget(keys)

    def add(self, key, value, timeout):
        self._changed([key])
        try:
            return super().add(key, value, timeout)
        finally:
            self._changed([key])

    def set(self, key, value, timeout):
        self._changed([key])
        super().set(key, value, timeout)
        self._changed([key])

    def delete(self, key):
        try:
            return super().delete(key)
        finally:
            self._changed([key])

    def incr(self, key, delta):
        try:
            return super().incr(key, delta)
        finally:
            self._changed([key])

    def set_many(self, data, timeout):
        try:
            return super().set_many(data, timeout)
        finally:
            self._changed(list(data))

    def delete_many(self, keys):
        keys = list(keys)
        try:
            return super().delete_many(keys)
        finally:
            self._changed(keys)

    def clear(self):
        try:
            return super().clear()
        finally:
            if self._invalidations is not None and self._pid == os.getpid():
                self._invalidations.clear()


class RedisCache(redis.RedisCache):
    def __init__(self, server, params):
        options = dict(params.get("OPTIONS", {}))
        names = options.pop("LOCAL_PREFIXES", [])
        super().__init__(server, {**params, "OPTIONS": options})
        self._class = RedisCacheClient
        # The keys as Django makes them (KEY_PREFIX:VERSION:key) with the default key function.
        self._options = {
            **self._options,
            "local_prefixes": [f"{self.key_prefix}:{self.version}:{name}" for name in names],
        }
