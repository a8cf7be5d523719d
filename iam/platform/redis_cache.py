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

import datetime
import os
import threading
import time
import uuid

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
            while self.connection.can_read(timeout=0):
                self.connection.read_response(push_request=True)  # a report: `_report` applies it
        except (RedisError, OSError):
            self.connection.disconnect()
            self.retry_at = time.monotonic() + self.RETRY_SECONDS
            self.entries.clear()
            return False
        return True

    def _report(self, message) -> None:
        if message[1] is None:  # the server flushed: everything may have changed
            self.entries.clear()
        for key in message[1] or ():
            self.entries.pop(key.decode(), None)


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
            return super().get_many(keys)
        found: dict[str, object] = {}
        missing: list[str] = []  # the keys to read from Redis
        now = time.monotonic()
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
                        continue
                    if key.startswith(local.prefixes):
                        local.entries[key] = (MARK, None, 0.0)  # never served; a report drops it
                    missing.append(key)
        if missing:
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

    def get(self, key, default):
        if self._local() is None:
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
