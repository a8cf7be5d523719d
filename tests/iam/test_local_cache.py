"""The in-process layer of the Redis cache (iam/platform/redis_cache.py): warm reads make no round trip, and a
change made by another process is seen by the next read, because Redis reports it (tracking) and each
read drains the reports first."""

import json
import os
import subprocess
import sys
import uuid

import pytest
import redis
from django.conf import settings
from django.core.cache import cache, caches

from iam.platform.redis_cache import Invalidations, RedisCache

# Another process of the service as far as the cache goes: the same CACHES setting, its own memory and
# its own connections. It answers one JSON command a line: ["get", key], ["set", key, value],
# ["delete", key], or ["warm", key]: reads until a read is served from memory, and answers that read's
# value (an entry can be dropped between two reads by any FLUSHDB on the Redis server, even of another
# database: the test suite's other workers flush theirs before each test).
OTHER_PROCESS = """
import json, sys
from django.conf import settings
settings.configure(CACHES={"default": json.loads(sys.argv[1])})
from django.core.cache import cache
client = cache._cache.get_client(None)
for line in sys.stdin:
    command, key, *value = json.loads(line)
    if command == "set":
        cache.set(key, value[0], 60)
    elif command == "delete":
        cache.delete_many([key])
    result = cache.get(key)
    for _ in range(20 if command == "warm" else 0):
        cache.get(key)
        client.mget = None  # a read that goes to Redis raises
        try:
            result = cache.get(key)
            break
        except TypeError:
            pass
        finally:
            del client.mget
    else:
        assert command != "warm", "never served from memory"
    print(json.dumps(result), flush=True)
"""


@pytest.fixture
def backend():
    if not isinstance(caches["default"], RedisCache):
        pytest.skip("the local layer belongs to the Redis cache (CI runs with REDIS_URL)")
    return caches["default"]._cache


@pytest.fixture
def other_connection(backend):
    """A Redis connection of its own, writing as another worker of the service does."""
    kwargs = backend._get_connection_pool(True).connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0))
    yield lambda key, value: client.set(cache.make_and_validate_key(key), backend._serializer.dumps(value))
    client.close()


@pytest.fixture
def other_process(backend):
    process = subprocess.Popen(
        [sys.executable, "-c", OTHER_PROCESS, json.dumps(settings.CACHES["default"])],
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def call(*command):
        process.stdin.write(json.dumps(command) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    yield call
    process.stdin.close()
    process.wait(timeout=10)


def went_to_redis(*args, **kwargs):
    raise AssertionError("went to Redis")


def served_from_memory(backend, monkeypatch, key, read=cache.get, times=1):
    """What `times` reads (`read(key)`) in a row answer, the first such run in which none makes a round trip
    (a FLUSHDB anywhere on the server, as the suite's other workers make before each test, can drop the
    entry between two reads)."""
    for _ in range(20):
        read(key)
        with monkeypatch.context() as patch:
            patch.setattr(backend.get_client(None), "mget", went_to_redis)
            try:
                answers = [read(key) for _ in range(times)]
            except AssertionError:
                continue
            return answers[0] if times == 1 else answers
    raise AssertionError(f"{key} was never served from memory")


def test_a_warm_read_makes_no_round_trip(backend, monkeypatch):
    cache.set("client:local-1", {"secret": 1}, 60)
    both = served_from_memory(backend, monkeypatch, "client:local-1", lambda key: cache.get_many([key]))
    assert both == {"client:local-1": {"secret": 1}}
    first, second = served_from_memory(backend, monkeypatch, "client:local-1", times=2)
    assert first == second == {"secret": 1} and first is not second  # each read its own copy


def test_an_immutable_entry_is_decoded_once_and_shared(backend, monkeypatch):
    """The narrow tuples the hot path reads are decoded once; anything a reader could change in place is
    decoded afresh for each read, so one request can never alter what another reads."""
    entry = ("c1", "digest", 3, None, uuid.UUID(int=7), (frozenset({"a"}), 1.5))
    cache.set("client:local-9", entry, 60)
    cache.set("client:local-10", ("c1", ["a list"]), 60)
    first, second = served_from_memory(backend, monkeypatch, "client:local-9", times=2)
    assert first == entry and first is second
    first, second, third = served_from_memory(backend, monkeypatch, "client:local-10", times=3)
    assert first == ("c1", ["a list"])
    first[1].append("changed by one reader")
    assert second == third == ("c1", ["a list"])
    assert served_from_memory(backend, monkeypatch, "client:local-10") == ("c1", ["a list"])


def test_a_key_known_to_be_absent_makes_no_round_trip(backend, monkeypatch):
    cache.delete_many(["session:local-11"])
    assert cache.get("session:local-11") is None
    for _ in range(20):  # a FLUSHDB by another worker of the suite may drop the entry once
        cache.get("session:local-11")
        with monkeypatch.context() as patch:
            patch.setattr(backend.get_client(None), "mget", went_to_redis)
            try:
                assert cache.get("session:local-11", "default") == "default"
                break
            except AssertionError as error:
                if "went to Redis" not in str(error):
                    raise
    else:
        raise AssertionError("the absence was never served from memory")
    cache.set("session:local-11", "now here", 60)
    assert cache.get("session:local-11") == "now here"


def test_long_keys_do_not_warn(backend, recwarn):
    """memcached's key rules do not apply to Redis: Django's check is skipped (it cost a fifth of a read)."""
    key = "client:" + "x" * 300
    cache.set(key, 1, 60)
    assert cache.get(key) == 1
    assert not [warning for warning in recwarn if "memcached" in str(warning.message)]


def test_a_change_by_another_connection_is_seen_by_the_next_read(backend, other_connection):
    for version in range(50):
        cache.get_many(["account:local-2", "client:local-2"])  # warm
        other_connection("account:local-2", {"session_version": version})
        assert cache.get_many(["account:local-2"]) == {"account:local-2": {"session_version": version}}


def test_a_change_made_in_one_process_is_seen_at_once_in_another(backend, other_process):
    """Both processes hold the entry in memory; each change made through one process's cache is seen by
    the other's very next read, a set as well as a delete (what a revocation does)."""
    for version in range(20):
        cache.set("session:local-6", version, 60)
        assert other_process("warm", "session:local-6") == version  # now served from its memory
        assert cache.get("session:local-6") == version
        cache.set("session:local-6", {"revoked": version}, 60)
        assert other_process("get", "session:local-6") == {"revoked": version}
        other_process("set", "session:local-6", f"from the other {version}")
        assert cache.get("session:local-6") == f"from the other {version}"
        assert other_process("warm", "session:local-6") == f"from the other {version}"
        cache.delete_many(["session:local-6"])
        assert other_process("get", "session:local-6") is None
        other_process("set", "session:local-6", "again")
        assert cache.get("session:local-6") == "again"
        other_process("delete", "session:local-6")
        assert cache.get("session:local-6") is None


def test_a_change_by_this_process_is_seen_at_once(backend):
    cache.set("grants:local-3", "old", 60)
    assert cache.get("grants:local-3") == "old"
    cache.set("grants:local-3", "new", 60)
    assert cache.get("grants:local-3") == "new"
    cache.delete_many(["grants:local-3"])
    assert cache.get("grants:local-3") is None


def test_keys_outside_the_prefixes_are_always_read_from_redis(backend, monkeypatch):
    cache.set("throttle:local-4", 1, 60)
    assert cache.get("throttle:local-4") == 1
    monkeypatch.setattr(backend.get_client(None), "mget", went_to_redis)
    with pytest.raises(AssertionError, match="went to Redis"):
        cache.get("throttle:local-4")


def kill_the_report_connection(backend):
    admin = backend.get_client(None)
    name = f"iam-invalidations-{os.getpid()}"
    ours = [client["id"] for client in admin.client_list() if client["name"] == name]
    assert ours, "no report connection of this process"
    for client_id in ours:  # one per cache backend this process has built
        admin.client_kill_filter(_id=client_id)


def test_with_the_reports_lost_reads_go_to_redis(backend, other_connection, monkeypatch):
    monkeypatch.setattr(Invalidations, "RETRY_SECONDS", 0)  # the next test finds the connection up
    cache.set("client:local-5", "before", 60)
    assert cache.get("client:local-5") == "before"
    kill_the_report_connection(backend)  # no report can be trusted
    other_connection("client:local-5", "after")
    assert cache.get("client:local-5") == "after"


def test_after_the_reports_return_reads_are_served_from_memory_again(backend, other_connection, monkeypatch):
    monkeypatch.setattr(Invalidations, "RETRY_SECONDS", 0)
    cache.set("client:local-7", "before", 60)
    assert cache.get("client:local-7") == "before"
    kill_the_report_connection(backend)
    other_connection("client:local-7", "after")
    assert cache.get("client:local-7") == "after"  # the loss is seen
    assert cache.get("client:local-7") == "after"  # a new connection, and the entry kept again
    assert served_from_memory(backend, monkeypatch, "client:local-7") == "after"
    other_connection("client:local-7", "later")
    assert cache.get("client:local-7") == "later"


def test_a_value_changed_while_it_was_read_is_not_kept(backend, other_connection, monkeypatch):
    cache.set("account:local-8", "old", 60)
    client = backend.get_client(None)
    read = client.mget

    def changed_meanwhile(keys):
        values = read(keys)
        other_connection("account:local-8", "new")  # after Redis answered, before the entry is kept
        return values

    monkeypatch.setattr(client, "mget", changed_meanwhile)
    assert cache.get("account:local-8") == "old"
    monkeypatch.undo()
    assert cache.get("account:local-8") == "new"
