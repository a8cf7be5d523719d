"""The in-process layer of the Redis cache (iam/redis_cache.py): warm reads make no round trip, and a
change made by another process is seen by the next read, because Redis reports it (tracking) and each
read drains the reports first."""

import pytest
import redis
from django.core.cache import cache, caches

from iam.redis_cache import RedisCache


@pytest.fixture
def backend():
    if not isinstance(caches["default"], RedisCache):
        pytest.skip("the local layer belongs to the Redis cache (CI runs with REDIS_URL)")
    return caches["default"]._cache


@pytest.fixture
def other_process(backend):
    """A Redis connection of its own, as another worker of the service has."""
    kwargs = backend._get_connection_pool(True).connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0))
    yield lambda key, value: client.set(cache.make_and_validate_key(key), backend._serializer.dumps(value))
    client.close()


def test_a_warm_read_makes_no_round_trip(backend, monkeypatch):
    cache.set("client:local-1", {"secret": 1}, 60)
    assert cache.get_many(["client:local-1"]) == {"client:local-1": {"secret": 1}}

    def no_round_trip(*args, **kwargs):
        raise AssertionError("went to Redis")

    monkeypatch.setattr(backend.get_client(None), "mget", no_round_trip)
    assert cache.get_many(["client:local-1"]) == {"client:local-1": {"secret": 1}}
    assert cache.get("client:local-1") == {"secret": 1}
    first, second = cache.get("client:local-1"), cache.get("client:local-1")
    assert first == second and first is not second  # each read its own copy


def test_a_change_by_another_process_is_seen_by_the_next_read(backend, other_process):
    for version in range(50):
        cache.get_many(["account:local-2", "client:local-2"])  # warm
        other_process("account:local-2", {"session_version": version})
        assert cache.get_many(["account:local-2"]) == {"account:local-2": {"session_version": version}}


def test_a_change_by_this_process_is_seen_at_once(backend):
    cache.set("grants:local-3", "old", 60)
    assert cache.get("grants:local-3") == "old"
    cache.set("grants:local-3", "new", 60)
    assert cache.get("grants:local-3") == "new"
    cache.delete_many(["grants:local-3"])
    assert cache.get("grants:local-3") is None


def test_keys_outside_the_prefixes_are_always_read_from_redis(backend, other_process):
    cache.set("throttle:local-4", 1, 60)
    assert cache.get("throttle:local-4") == 1
    assert not any("throttle:local-4" in key for key in backend._invalidations.entries)


def test_with_the_reports_lost_reads_go_to_redis(backend, other_process):
    cache.set("client:local-5", "before", 60)
    assert cache.get("client:local-5") == "before"
    backend._invalidations.sock.close()  # the connection breaks: no report can be trusted
    other_process("client:local-5", "after")
    assert cache.get("client:local-5") == "after"
    assert backend._invalidations.entries == {}
