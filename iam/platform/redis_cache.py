"""Django's Redis cache backend, keeping one `redis.Redis` client per connection pool. Django builds a new
client for every cache call, and a redis-py client costs about as much to build as the round trip itself;
the clients are thread-safe, so one per pool serves every thread of the process.

With `LOCAL_PREFIXES` in the cache's OPTIONS, entries under those key names are also kept in process
memory, and Redis reports every change to
them to every process: client-side caching with tracking in broadcast mode, on a redis-py connection of
the process's own (RESP3: the reports are push messages) that each read drains first without waiting.
Redis writes a report out before the writer's reply, so a read that comes after the writer heard back
finds the report waiting. When that connection is lost, or before it is up, every read goes to Redis as
without this layer. An entry is kept decoded when it is made only of immutable values (the narrow tuples
the hot path reads), so every reader can share it; any other value is kept as the bytes Redis holds and
each read decodes its own copy.

redis-py's own client-side cache (`protocol=3, cache_config=...`) is not used: it refuses servers older
than Redis 7.4 (Debian 12 and CI run 7.0), and it caches every GET and MGET, of any key, with no age bound."""

import contextlib
import datetime
import os
import select
import threading
import time
import uuid
from collections.abc import Iterator

from django.core.cache.backends import redis
from redis.exceptions import RedisError


class Invalidations:
    """The entries that may be served locally, and a connection on which Redis reports every key changed
    under `prefixes` (RESP3 push messages). `poll()` drops what Redis reported since, and says whether the
    reports can be trusted."""

    LIMIT = 10_000  # entries; the whole set is dropped when full
    # Seconds an entry is served locally at most. Reports drop an entry at once; this bounds the one case
    # they cannot cover, a tracking connection that went silent without closing (a network partition):
    # a revocation made meanwhile is then refused here within 5 s, as it is at once elsewhere.
    MAX_AGE = 5.0
    RETRY_SECONDS = 5.0

    def __init__(self, pool, prefixes: list[str]):
        # Named, so that `CLIENT LIST` tells it from the pool's connections.
        name = f"iam-invalidations-{os.getpid()}"
        self.connection = pool.connection_class(
            **{**pool.connection_kwargs, "protocol": 3, "client_name": name}
        )
        self.connection._parser.set_invalidation_push_handler(self._report)  # as redis-py's own cache does
        self.prefixes = tuple(prefixes)
        # key -> (bytes, decoded value or ENCODED, served until); a key marked while its read is in flight
        # holds (MARK, None, 0.0)
        self.entries: dict[str, tuple[object, object, float]] = {}
        self.lock = threading.Lock()
        self.retry_at = 0.0
        self.poller, self.polled = select.poll(), None  # the poll(2) set of the socket `polled`

    def poll(self) -> bool:
        """Applies the reports already received. False (and nothing served locally) when not connected."""
        try:
            if not self.connection.is_connected:
                if time.monotonic() < self.retry_at:
                    return False
                self.connection.connect()  # AUTH and SELECT as the pool's connections do
                prefixes = [part for prefix in self.prefixes for part in ("PREFIX", prefix)]
                self.connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", *prefixes)
                self.connection.read_response()
            while self._waiting():
                self.connection.read_response(push_request=True)  # a report: `_report` applies it
        except (RedisError, OSError):
            self.connection.disconnect()
            self.retry_at = time.monotonic() + self.RETRY_SECONDS
            self.entries.clear()
            return False
        return True

    def _waiting(self) -> bool:
        """Whether a report waits to be read: in the parser's buffer, or on the socket (one poll(2) that
        does not wait; redis-py's `can_read` adds two `settimeout` calls and an exception to its `recv`,
        a third of a warm read). A closed socket counts as waiting: reading it raises."""
        buffer = getattr(self.connection._parser, "_buffer", None)
        if buffer is None:  # another parser than redis-py's own
            return self.connection.can_read(timeout=0)
        if buffer.unread_bytes():
            return True
        sock = self.connection._sock
        if sock is not self.polled:
            self.poller, self.polled = select.poll(), sock
            self.poller.register(sock, select.POLLIN)
        return bool(self.poller.poll(0))

    def _report(self, message) -> None:
        if message[1] is None:  # the server flushed: everything may have changed
            self.entries.clear()
        for key in message[1] or ():
            self.entries.pop(key.decode(), None)


class Reads:
    """What a computation on one thread read of the cache (`RedisCacheClient.recording`): the
    process-memory entries it was served, each with the key it was read under, the earliest time one of
    them stops being served (`until`, time.monotonic()), and `whole`: no read went anywhere else (Redis,
    or an error). What was computed from these reads alone is as current as they are: `current()`."""

    __slots__ = ("entries", "local", "pid", "until", "whole")

    def __init__(self, local: Invalidations) -> None:
        self.local, self.pid = local, os.getpid()
        self.entries: list[tuple[str, tuple]] = []
        self.until = float("inf")
        self.whole = True

    def current(self) -> bool:
        """Whether every entry read is still the one this process serves: none reported changed (the
        reports are drained first, as every read does), none past its age, the reports still arriving."""
        if not self.whole or self.until <= time.monotonic() or self.pid != os.getpid():
            return False
        local = self.local
        with local.lock:
            if not local.poll():
                return False
            entries = local.entries
            return all(entries.get(key) is entry for key, entry in self.entries)


_recording = threading.local()


def recorded() -> Reads | None:
    """The reads being recorded on this thread, if any."""
    return getattr(_recording, "reads", None)


def read_elsewhere() -> None:
    """Notes, in the reads recorded on this thread, a read not served from process memory."""
    reads = recorded()
    if reads is not None:
        reads.whole = False


ENCODED = object()  # an entry not kept decoded: each read decodes its bytes
MARK = object()  # a key read from Redis with no report since: what Redis answers may be kept
_IMMUTABLE = (str, bytes, int, float, bool, type(None), uuid.UUID, datetime.datetime, datetime.date)


def immutable(value: object) -> bool:
    """True when `value` and everything in it is immutable, so one decoded copy can serve every read."""
    if isinstance(value, tuple | frozenset):
        return all(immutable(item) for item in value)
    return isinstance(value, _IMMUTABLE)


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
        if self._local_prefixes and self._pid != os.getpid():  # a forked worker opens its own connection
            self._invalidations = Invalidations(self._get_connection_pool(False), self._local_prefixes)
            self._pid = os.getpid()
        return self._invalidations

    def get_many(self, keys):
        local = self._local()
        if local is None:
            read_elsewhere()
            return super().get_many(keys)
        found: dict[str, object] = {}
        missing: list[str] = []  # the keys to read from Redis
        now = time.monotonic()
        reads = recorded()
        with local.lock:
            if not local.poll():
                missing = list(keys)
            else:
                if len(local.entries) + len(keys) > local.LIMIT:
                    local.entries.clear()
                for key in keys:
                    entry = local.entries.get(key)
                    if entry is not None and entry[2] > now:
                        if entry[0] is not None:  # None: known to be absent
                            found[key] = self._serializer.loads(entry[0]) if entry[1] is ENCODED else entry[1]
                        if reads is not None:
                            reads.entries.append((key, entry))
                            reads.until = min(reads.until, entry[2])
                        continue
                    if key.startswith(local.prefixes):
                        local.entries[key] = (MARK, None, 0.0)  # never served; a report drops it
                    missing.append(key)
        if missing:
            read_elsewhere()
            values = self.get_client(None).mget(missing)
            with local.lock:
                live = local.poll()
                for key, raw in zip(missing, values, strict=True):
                    value = None if raw is None else self._serializer.loads(raw)
                    if value is not None:
                        found[key] = value
                    if live and local.entries.get(key, (None,))[0] is MARK:
                        kept = value if immutable(value) else ENCODED
                        local.entries[key] = (raw, kept, now + local.MAX_AGE)
        return found

    @contextlib.contextmanager
    def recording(self) -> Iterator[Reads | None]:
        """Records what this thread reads in the block (None when there is no local layer)."""
        local = self._local()
        if local is None:
            yield None
            return
        reads = _recording.reads = Reads(local)
        try:
            yield reads
        finally:
            _recording.reads = None

    def get(self, key, default):
        if self._local() is None:
            read_elsewhere()
            return super().get(key, default)
        return self.get_many([key]).get(key, default)


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

    def validate_key(self, key):
        """Django's check warns about keys memcached would refuse (over 250 characters, spaces or control
        characters); Redis takes any key, and the check cost a fifth of a warm `clients/validate`'s cache
        read. Django's documentation invites a backend that accepts more keys to override it."""
