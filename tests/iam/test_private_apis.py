"""The private parts of libraries this code leans on, each pinned in pyproject.toml to the versions the
suite ran on. When an upgrade moves one, the test that names it fails here, loudly, before the behaviour
built on it breaks quietly (a cache that stops being local, an egress guard whose pool resolves names
again, an encoder whose output drifts from DRF's). Raise the pin once these pass on the new version."""

import inspect
import ssl

import redis
import requests.adapters
import urllib3
import urllib3.connection
from django.core.cache.backends import redis as django_redis
from rest_framework import serializers
from rest_framework.relations import PKOnlyObject
from rest_framework.utils import encoders

from iam.platform import egress, upstream


def moved(what: str, user: str) -> str:
    return f"{what} moved: {user} leans on it (see its pin in pyproject.toml)"


# Django's Redis cache backend and redis-py (iam/platform/redis_cache.py)


def test_django_redis_cache_client_internals():
    client = django_redis.RedisCacheClient(["redis://127.0.0.1:9/0"])  # builds no connection
    for name in ("_get_connection_pool", "_get_connection_pool_index", "get_client", "get_many", "get"):
        assert callable(getattr(client, name, None)), moved(f"RedisCacheClient.{name}", "RedisCacheClient")
    assert callable(getattr(client._serializer, "loads", None)), moved(
        "RedisCacheClient._serializer", "get_many"
    )
    assert "write" in inspect.signature(client.get_client).parameters, moved(
        "get_client(write=)", "get_client"
    )
    cache = django_redis.RedisCache("redis://127.0.0.1:9/0", {})
    assert cache._class is django_redis.RedisCacheClient, moved("RedisCache._class", "RedisCache.__init__")
    assert isinstance(cache._options, dict), moved("RedisCache._options", "RedisCache.__init__")


def test_redis_py_connection_internals():
    pool = redis.ConnectionPool.from_url("redis://127.0.0.1:9/0")
    assert pool.connection_class is redis.Connection, moved(
        "ConnectionPool.connection_class", "Invalidations"
    )
    assert isinstance(pool.connection_kwargs, dict), moved(
        "ConnectionPool.connection_kwargs", "Invalidations"
    )
    connection = pool.connection_class(**{**pool.connection_kwargs, "protocol": 3, "client_name": "pin"})
    handler = getattr(connection._parser, "set_invalidation_push_handler", None)
    assert callable(handler), moved("Connection._parser.set_invalidation_push_handler", "Invalidations")
    assert connection.is_connected is False, moved("Connection.is_connected", "Invalidations.poll")


# urllib3, requests and ssl under the egress guard and the network budget (iam/platform/egress.py,
# iam/platform/upstream.py)


def test_urllib3_connections_open_their_socket_in_new_conn():
    for cls in (urllib3.connection.HTTPConnection, urllib3.connection.HTTPSConnection):
        assert "_new_conn" in inspect.getsource(cls.connect), moved(
            f"{cls.__name__}.connect -> _new_conn", "egress"
        )
    assert issubclass(egress._HTTPPool.ConnectionCls, urllib3.connection.HTTPConnection)
    assert urllib3.HTTPSConnectionPool.ConnectionCls is not None, moved("ConnectionCls", "egress pools")
    manager = urllib3.PoolManager()
    assert set(manager.pool_classes_by_scheme) == {"http", "https"}, moved("pool_classes_by_scheme", "egress")


def test_urllib3_pools_lend_connections_that_send_and_answer_apart():
    """`egress.post_each` takes several connections of one pool, writes on each one's socket (connecting
    the ones without), then reads each answer from it."""
    for name in ("_get_conn", "_put_conn"):
        assert callable(getattr(urllib3.HTTPConnectionPool, name, None)), moved(f"pool.{name}", "egress")
    assert urllib3.connection.HTTPConnection("example.test").sock is None, moved(
        "HTTPConnection.sock", "egress"
    )


def test_requests_adapter_asks_for_the_pool_of_each_request():
    send = inspect.getsource(requests.adapters.HTTPAdapter.send)
    assert "get_connection_with_tls_context" in send, moved("HTTPAdapter.send's pool lookup", "egress")
    assert "cert_verify" in send, moved("HTTPAdapter.cert_verify", "egress (certificates checked by `_tls`)")


def test_ssl_context_makes_the_socket_class_it_is_given():
    context = upstream.tls_context()
    assert context.sslsocket_class is upstream.TLSSocket, moved("SSLContext.sslsocket_class", "upstream")
    for name in ("do_handshake", "recv_into", "send", "sendall"):
        assert callable(getattr(ssl.SSLSocket, name, None)), moved(f"SSLSocket.{name}", "upstream deadlines")


# DRF internals in the serializer bases and the encoder (iam/http/serializers.py, iam/http/encoder.py)


class _Pinned(serializers.Serializer):
    name = serializers.CharField(source="title")


def test_drf_serializer_internals():
    assert "name" in _Pinned._declared_fields, moved("Serializer._declared_fields", "UpdateRequest")
    serializer = _Pinned()
    readable = list(serializer._readable_fields)
    assert [field.field_name for field in readable] == ["name"], moved(
        "_readable_fields", "ResourceSerializer"
    )
    assert readable[0].source_attrs == ["title"], moved("Field.source_attrs", "ResourceSerializer")
    assert PKOnlyObject(pk=1).pk == 1, moved("rest_framework.relations.PKOnlyObject", "ResourceSerializer")
    encoder = encoders.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert encoder.encode({"a": 1}) == '{"a":1}', moved(
        "rest_framework.utils.encoders.JSONEncoder", "to_json"
    )


# python3-saml under the SAML connections (sso/saml.py)


def test_python3_saml_request_id_hook_and_clock():
    from onelogin.saml2 import response as saml_response
    from onelogin.saml2.authn_request import OneLogin_Saml2_Authn_Request
    from onelogin.saml2.constants import OneLogin_Saml2_Constants
    from onelogin.saml2.utils import OneLogin_Saml2_Utils

    from sso import saml

    assert "self._generate_request_id()" in inspect.getsource(OneLogin_Saml2_Authn_Request.__init__), moved(
        "OneLogin_Saml2_Authn_Request._generate_request_id", "saml._AuthnRequest (the request id of a login)"
    )
    # Every time condition is read against `OneLogin_Saml2_Utils.now`, which sso/saml.py answers with the
    # instant it chose, and Conditions get ALLOWED_CLOCK_DRIFT on top, which it sets to zero.
    source = inspect.getsource(saml_response.OneLogin_Saml2_Response)
    assert source.count("OneLogin_Saml2_Utils.now()") >= 5, moved("the response's clock", "saml._now")
    assert "ALLOWED_CLOCK_DRIFT" in source, moved("ALLOWED_CLOCK_DRIFT", "saml (skew)")
    assert OneLogin_Saml2_Utils.now is saml._now and OneLogin_Saml2_Constants.ALLOWED_CLOCK_DRIFT == 0
