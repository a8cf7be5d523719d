"""Django's Redis cache backend, keeping one `redis.Redis` client per connection pool. Django builds a new
client for every cache call, and a redis-py client costs about as much to build as the round trip itself;
the clients are thread-safe, so one per pool serves every thread of the process."""

from django.core.cache.backends import redis


class RedisCacheClient(redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            client = self._clients[index] = super().get_client(key, write=write)
        return client


class RedisCache(redis.RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
