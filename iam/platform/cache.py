"""Cache access that never fails a request: the cache only speeds reading state that lives in the
database, so when it is down we log and answer from the database (docs/security.md#tokens)."""

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.core.cache import cache, caches
from django.db import transaction

from iam.platform import metrics, redis_cache

logger = logging.getLogger(__name__)

MISSING = object()


def get(key: str) -> Any:
    try:
        return cache.get(key, MISSING)
    except Exception:
        redis_cache.read_elsewhere()
        logger.warning("cache unavailable: get %s", key.split(":", 1)[0], exc_info=True)
        metrics.CACHE_ERRORS.labels("get").inc()
        return MISSING


def read_through(
    key: str,
    load: Callable[[], Any],
    timeout: int,
    *,
    prefetched: Any = MISSING,
    current_shape: Callable[[Any], bool] | None = None,
    absent_timeout: int | None = None,
) -> Any:
    """The cached value of `key`, or `load()` cached for `timeout` seconds. `load` returns a narrow plain
    record (a tuple of the fields the checks read, never a secret beyond a digest), or None when the row
    does not exist: None is cached only with `absent_timeout`. `prefetched` is the entry a caller
    already fetched with others in one round trip (`get_many`); `current_shape` tells an entry of the
    current shape from one a previous release left."""
    value = get(key) if prefetched is MISSING else prefetched
    if value is MISSING or (current_shape is not None and value is not None and not current_shape(value)):
        value = load()
        if value is not None:
            set(key, value, timeout)
        elif absent_timeout is not None:
            set(key, None, absent_timeout)
    return value


@contextlib.contextmanager
def recording() -> Iterator[redis_cache.Reads | None]:
    """Records the cache entries read in the block on this thread (`redis_cache.Reads`), when the cache
    keeps them in process memory (None otherwise): what a caller computed from them alone, it may keep
    while `reads.current()` holds (`clients.api.validate.KeptAnswers`)."""
    backend = caches["default"]
    if not isinstance(backend, redis_cache.RedisCache):
        yield None
        return
    with backend._cache.recording() as reads:
        yield reads


def get_many(keys: list[str]) -> dict[str, Any]:
    try:
        return cache.get_many(keys)
    except Exception:
        redis_cache.read_elsewhere()
        logger.warning("cache unavailable: get_many", exc_info=True)
        metrics.CACHE_ERRORS.labels("get_many").inc()
        return {}


def set(key: str, value: Any, timeout: int) -> None:
    redis_cache.read_elsewhere()  # what is being computed read something the cache did not hold
    try:
        cache.set(key, value, timeout)
    except Exception:
        logger.warning("cache unavailable: set", exc_info=True)
        metrics.CACHE_ERRORS.labels("set").inc()


def add(key: str, value: Any, timeout: int) -> bool:
    """True when the key was not there (and is now)."""
    redis_cache.read_elsewhere()  # a write: what is being computed is no pure read of the cache
    try:
        return bool(cache.add(key, value, timeout))
    except Exception:
        logger.warning("cache unavailable: add", exc_info=True)
        metrics.CACHE_ERRORS.labels("add").inc()
        return False


def delete_many(keys: list[str]) -> None:
    """A purge that cannot reach the cache is not dropped: it goes to the outbox and a worker retries it
    until the cache answers, so an entry that survived the outage (a network split, not a restart) cannot
    outlive the change by more than the retry delay."""
    try:
        cache.delete_many(keys)
    except Exception:
        logger.error("cache unavailable: %d keys left for the outbox to purge", len(keys), exc_info=True)
        metrics.CACHE_ERRORS.labels("delete_many").inc()
        from iam.platform import outbox  # the outbox's models load after this module

        outbox.enqueue(PURGE_TOPIC, {"keys": keys}, within=PURGE_RETRY_WINDOW)


PURGE_TOPIC = "cache.purge"
PURGE_RETRY_WINDOW = timedelta(hours=1)


def purge_later(message) -> None:
    """The outbox handler of `cache.purge` (registered in `iam.apps`)."""
    from iam.platform import outbox

    try:
        cache.delete_many(message.payload["keys"])
    except Exception as exc:
        raise outbox.RetryLater(f"cache unavailable: {exc}") from exc


def new_generation() -> int:
    """A value never used before for a generation key, even after the cache lost it."""
    return time.time_ns()


def incr(key: str, timeout: int) -> int | None:
    """Counter for throttles; None when the cache is down (callers fail open and log)."""
    redis_cache.read_elsewhere()  # a write: what is being computed is no pure read of the cache
    try:
        cache.add(key, 0, timeout)
        return cache.incr(key)
    except ValueError:
        return None
    except Exception:
        logger.warning("cache unavailable: incr", exc_info=True)
        metrics.CACHE_ERRORS.labels("incr").inc()
        return None


def decr(key: str) -> None:
    """Takes one back from a counter of `incr` (an attempt that turned out not to count); quiet when the
    counter is gone or the cache is down."""
    try:
        cache.decr(key)
    except ValueError:
        pass
    except Exception:
        logger.warning("cache unavailable: decr", exc_info=True)
        metrics.CACHE_ERRORS.labels("decr").inc()


def around_commit(purge: Callable[[], None]) -> None:
    """Runs a purge now and again after commit: the first keeps this request from reading what it just
    changed, the second drops what a concurrent request cached from the old rows before the commit."""
    purge()
    transaction.on_commit(purge)
