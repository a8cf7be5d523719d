"""Waiting on the network inside a request (docs/api.md#waiting-on-the-network).

A request that calls another service (a DNS lookup, an OpenID provider's discovery, token, JWKS or
user-info endpoint) waits `IAM_NETWORK_BUDGET_SECONDS` (5) at most in all: `budget()` opens the request's
budget at its first wait, and every `call()` gets what is left of it as its timeout. `waiting(workspace)`
also takes one of the workspace's `IAM_NETWORK_REQUESTS_PER_WORKSPACE` (2) slots, kept in the shared cache
so that they count across every web process, each expiring by itself so that a killed process leaks
none, and one of the process's `IAM_NETWORK_REQUESTS_PER_PROCESS` (its threads less one), so that a
worker always keeps a thread for requests that wait on nothing; with no slot free, 429 (`Busy`). Outside a
budget (the worker's push deliveries) a call keeps the timeout it asks for.

A socket timeout bounds one operation only, and a peer that drips bytes would hold the thread as long as
it likes: the sockets of a call (`Socket`, `TLSSocket`, and `DeadlineAdapter` for requests' sessions) cut
their timeout before each operation to what is left of the call. The system resolver cannot be
interrupted: `getaddrinfo` runs on a few threads of its own, and a lookup past the call's end is left to
finish there while the request goes on."""

import contextlib
import logging
import math
import os
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any
from uuid import UUID

import requests
import urllib3
from django.conf import settings
from django.core.cache import cache

from iam.http.errors import ApiError
from iam.platform import context, metrics

logger = logging.getLogger(__name__)

WORKSPACE_BUSY = "too many requests waiting on the network for this workspace"
PROCESS_BUSY = "too many requests waiting on the network"

# The request's budget: the monotonic time its waiting must end by (None: no budget, outside a request's
# wait). A request keeps it on itself, so a second wait of the same request continues the first one's.
_budget: ContextVar[float | None] = ContextVar("iam_network_budget", default=None)


@contextlib.contextmanager
def budget() -> Iterator[None]:
    """The request's budget for the time of the block: opened now, or continued when the request (or an
    outer block) opened it already."""
    request = context.current().request
    deadline = _budget.get() or getattr(request, "network_deadline", None)
    if deadline is None:
        deadline = time.monotonic() + settings.IAM_NETWORK_BUDGET_SECONDS
        if request is not None:
            request.network_deadline = deadline
    token = _budget.set(deadline)
    try:
        yield
    finally:
        _budget.reset(token)


def remaining(timeout: float) -> float:
    """`timeout`, or less: what is left of the budget. Raises TimeoutError when it is spent."""
    deadline = _budget.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("network budget spent")
    return min(timeout, left)


class Busy(ApiError):
    def __init__(self, message: str = WORKSPACE_BUSY):
        retry_after = math.ceil(settings.IAM_NETWORK_BUDGET_SECONDS)  # a slot's holder is done by then
        super().__init__(429, message, headers={"Retry-After": str(retry_after)})


class _ProcessSlots:
    """The requests of this process waiting on the network."""

    def __init__(self):
        self.lock = threading.Lock()
        self.taken = 0

    def take(self) -> None:
        with self.lock:
            if self.taken >= settings.IAM_NETWORK_REQUESTS_PER_PROCESS:
                raise Busy(PROCESS_BUSY)
            self.taken += 1

    def give_back(self) -> None:
        with self.lock:
            self.taken -= 1

    def forget(self) -> None:  # a forked child waits on nothing of its parent's
        self.lock = threading.Lock()
        self.taken = 0


_process_slots = _ProcessSlots()
os.register_at_fork(after_in_child=_process_slots.forget)


def _slot_key(workspace_id: UUID | str, index: int) -> str:
    return f"network-wait:{workspace_id}:{index}"


def _take_slot(workspace_id: UUID | str) -> tuple[str, str] | None:
    """A free slot of the workspace (its key and our mark), None when the cache is down (the limit fails
    open, as the throttles do), or `Busy`. A slot expires twice the budget after it was taken: whoever
    holds it is done by then, or was killed."""
    mark = secrets.token_hex(8)
    expires = math.ceil(settings.IAM_NETWORK_BUDGET_SECONDS * 2)
    try:
        for index in range(settings.IAM_NETWORK_REQUESTS_PER_WORKSPACE):
            key = _slot_key(workspace_id, index)
            if cache.add(key, mark, expires):
                return key, mark
    except Exception:
        logger.warning("cache unavailable: network slots not counted", exc_info=True)
        metrics.CACHE_ERRORS.labels("add").inc()
        return None
    raise Busy()


def _give_back(slot: tuple[str, str] | None) -> None:
    if slot is None:
        return
    key, mark = slot
    try:
        if cache.get(key) == mark:  # not a slot taken by another request after ours expired
            cache.delete(key)
    except Exception:
        logger.warning("cache unavailable: a network slot left to expire", exc_info=True)
        metrics.CACHE_ERRORS.labels("delete").inc()


@contextlib.contextmanager
def waiting(workspace_id: UUID | str) -> Iterator[None]:
    """A request of the workspace that waits on the network: one of the process's slots and one of the
    workspace's (else `Busy`), and the request's budget, for the time of the block."""
    _process_slots.take()
    try:
        slot = _take_slot(workspace_id)
        try:
            with budget():
                yield
        finally:
            _give_back(slot)
    finally:
        _process_slots.give_back()


# One call: its end, and the sockets that keep to it

_call = threading.local()  # `deadline`: the monotonic time the call under way in this thread must end by


@contextlib.contextmanager
def call(timeout: float) -> Iterator[float]:
    """One call to another service, which must end within `timeout` or what is left of the budget: yields
    the seconds it may take."""
    seconds = remaining(timeout)
    _call.deadline = time.monotonic() + seconds
    try:
        yield seconds
    finally:
        _call.deadline = None


def call_ended() -> bool:
    deadline = getattr(_call, "deadline", None)
    return deadline is not None and time.monotonic() >= deadline


class _Deadline:
    """Socket operations that first cut the socket's timeout to what is left of the call under way."""

    def _cut(self) -> None:
        deadline = getattr(_call, "deadline", None)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline passed")
            self.settimeout(left)

    def recv_into(self, *args, **kwargs):
        self._cut()
        return super().recv_into(*args, **kwargs)

    def send(self, *args, **kwargs):
        self._cut()
        return super().send(*args, **kwargs)

    def sendall(self, *args, **kwargs):
        self._cut()
        return super().sendall(*args, **kwargs)

    def do_handshake(self, *args, **kwargs):  # TLS
        self._cut()
        return super().do_handshake(*args, **kwargs)


class Socket(_Deadline, socket.socket):
    pass


class TLSSocket(_Deadline, ssl.SSLSocket):
    pass


def tls_context(cafile: str | None = None) -> ssl.SSLContext:
    """A client context (the certificate checked for the host name) whose sockets keep to the call."""
    tls = ssl.create_default_context(cafile=cafile)
    tls.sslsocket_class = TLSSocket
    return tls


def keeping_to_the_call(sock: socket.socket) -> Socket:
    """`sock` as a `Socket`, with the timeout it had."""
    timeout = sock.gettimeout()
    kept = Socket(fileno=sock.detach())
    kept.settimeout(timeout)
    return kept


_resolver: ThreadPoolExecutor | None = None
_resolver_lock = threading.Lock()
RESOLVER_THREADS = 16


def _forget_resolver() -> None:
    global _resolver
    _resolver = None  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_resolver)


def getaddrinfo(host: str, port: int) -> list[Any]:
    """`socket.getaddrinfo` for a stream connection, within the call under way (TimeoutError past it)."""
    deadline = getattr(_call, "deadline", None)
    if deadline is None:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    global _resolver
    with _resolver_lock:
        if _resolver is None:
            _resolver = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="resolve")
        lookup = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        return lookup.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        lookup.cancel()
        raise TimeoutError(f"resolving {host} took too long") from None


class _HTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return keeping_to_the_call(super()._new_conn())


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return keeping_to_the_call(super()._new_conn())


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class DeadlineAdapter(requests.adapters.HTTPAdapter):
    """requests' transport on sockets that keep to the call under way (`call()`), for a session of
    requests' (idp_a's, through requests-oauthlib), checking certificates against requests' own bundle
    (loaded once: 30 ms). A forked child calls `init_poolmanager` again: no connection is shared."""

    def __init__(self, **kwargs):
        self.tls = tls_context(requests.utils.DEFAULT_CA_BUNDLE_PATH)
        super().__init__(**kwargs)
        os.register_at_fork(
            after_in_child=lambda: self.init_poolmanager(self._pool_connections, self._pool_maxsize)
        )

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, ssl_context=self.tls, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def cert_verify(self, conn, url, verify, cert) -> None:
        conn.cert_reqs = "CERT_REQUIRED"  # the context holds the bundle: not loaded again per connection
