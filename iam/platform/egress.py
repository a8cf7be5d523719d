"""Outbound requests to client endpoints and SSO providers, guarded against SSRF (docs/security.md#the-edges):
the host is resolved, every address is vetted, and the connection goes to a vetted address, so a DNS answer
that changes between the check and the connection (rebinding) cannot reach an internal service. The transport
is requests' `HTTPAdapter` and urllib3's pools, handed the vetted address, on sockets that keep to the
request's deadline."""

import functools
import http.client
import ipaddress
import os
import re
import socket
import time
from urllib.parse import urlsplit

import ada_url
import httptools
import requests
import urllib3
from django.conf import settings

from iam.platform import upstream


class EndpointRefused(Exception):
    """The endpoint is not a public http(s) URL: retrying cannot help."""


# One reading only: an endpoint that two URL parsers read as different hosts is refused, at
# create, update and delivery. `http://127.0.0.1:8197\@203.0.113.5/` was accepted: urllib (and so the
# address check and the connection) read the host 203.0.113.5, a WHATWG parser (browsers, Node, most
# receivers' proxies and logs) reads 127.0.0.1:8197. The rules below keep URLs to the form every parser
# reads alike; then the reading of `ada_url` (the WHATWG parser Node uses) must equal urllib's.

_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_SCHEME = re.compile(r"(?i)(https?)://")
_NAME = re.compile(r"(?i)[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
# WHATWG reads a host whose last label is a number (decimal, or 0x hex) as an IPv4 address, in any of
# inet_aton's forms (`2130706433`, `0x7f.1`, `127.1`, `0177.0.0.1`); urllib keeps the text.
_NUMERIC_LABEL = re.compile(r"(?i)(?:0x[0-9a-f]*|[0-9]+)")
ONE_READING = "is read differently by different URL parsers"
BAD_HOST = "host must be a DNS name or an IP address"


def check_form(url: str) -> None:
    """Raises EndpointRefused, its message completing "endpoint ...", unless `url` is an http(s) URL that
    urllib and a WHATWG parser read as the same scheme, host and port."""
    if "\\" in url:
        raise EndpointRefused("must not contain a backslash")
    if _SPACE_OR_CONTROL.search(url):
        raise EndpointRefused("must not contain spaces or control characters")
    if not url.isascii():
        raise EndpointRefused(
            "must be ASCII: write an international host name in its xn-- form and percent-encode the rest"
        )
    scheme = _SCHEME.match(url)
    if scheme is None:
        raise EndpointRefused("must start with http:// or https://")
    try:
        netloc = urlsplit(url).netloc
    except ValueError as exc:  # an unclosed "[" (or a "]" alone)
        raise EndpointRefused(BAD_HOST) from exc
    if "@" in netloc:
        raise EndpointRefused("must not contain a user name or password")
    host, port = _host_and_port(netloc)
    scheme_name = scheme.group(1).lower()
    port = port or (443 if scheme_name == "https" else 80)
    try:
        parts = urlsplit(url)
        urllib_host = parts.hostname or ""
        if host.startswith("["):  # urllib keeps an IPv6 address as written, without its brackets
            urllib_host = f"[{ipaddress.IPv6Address(urllib_host).compressed}]"
        urllib_reading = (parts.scheme.lower(), urllib_host, parts.port or port)
        whatwg = ada_url.URL(url)
        whatwg_reading = (whatwg.protocol.rstrip(":"), whatwg.hostname, int(whatwg.port or port))
    except ValueError as exc:
        raise EndpointRefused(ONE_READING) from exc
    if not urllib_reading == whatwg_reading == (scheme_name, host, port):
        raise EndpointRefused(ONE_READING)


def _host_and_port(netloc: str) -> tuple[str, int | None]:
    """The host as a WHATWG parser writes it (lower case; an IPv6 address compressed, in brackets) and the
    port given, if any."""
    if netloc.startswith("["):
        literal, bracket, rest = netloc[1:].partition("]")
        if not bracket or "%" in literal or (rest and not rest.startswith(":")):
            raise EndpointRefused(BAD_HOST)
        try:
            host = f"[{ipaddress.IPv6Address(literal).compressed}]"
        except ValueError as exc:
            raise EndpointRefused(BAD_HOST) from exc
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text = netloc.partition(":")
        if not colon:
            port_text = None
        if not _NAME.fullmatch(host):
            raise EndpointRefused(BAD_HOST)
        host = host.lower()
        if _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
            try:
                host = str(ipaddress.IPv4Address(host))
            except ValueError as exc:
                raise EndpointRefused(
                    "host must be written as four decimal numbers (a.b.c.d) when it is an IPv4 address"
                ) from exc
    if not port_text:
        return host, None  # `host:` is the default port to both parsers
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise EndpointRefused("port must be a number from 1 to 65535")
    return host, int(port_text)


# IPv6 forms that carry an IPv4 address, which a host, a relay or a translator may reach on our behalf.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use prefix: never public
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291 (deprecated): the last 32 bits
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 SIIT: the last 32 bits


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = [address.ipv4_mapped, address.sixtofour]  # ::ffff:0:0/96, 2002::/16 (6to4)
    if address.teredo is not None:  # 2001::/32: the relay and the client behind it
        found.extend(address.teredo)
    if any(address in network for network in (_NAT64, _IPV4_COMPATIBLE, _IPV4_TRANSLATED)):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [ipv4 for ipv4 in found if ipv4 is not None]


def _refused(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL or any(_refused(ipv4) for ipv4 in _embedded_ipv4(address)):
            return True
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


class _Resolved:
    """Answers of `getaddrinfo` per process for a few seconds, for deliveries only: a burst to one
    endpoint resolves it once, not once per request. The address rules still run on every answer at every
    delivery, and the connection still goes to the address they vetted (pinned), so a cached answer can
    only be a few seconds stale, never unchecked."""

    SECONDS = 5.0
    LIMIT = 1024

    def __init__(self):
        self.answers: dict[tuple[str, int], tuple[float, list[str]]] = {}

    def get(self, host: str, port: int) -> list[str]:
        now = time.monotonic()
        found = self.answers.get((host, port))
        if found is not None and found[0] > now:
            return found[1]
        addresses = _resolve(host, port)
        if len(self.answers) >= self.LIMIT:
            self.answers.clear()
        self.answers[(host, port)] = (now + self.SECONDS, addresses)
        return addresses


_resolved = _Resolved()


def _resolve(host: str, port: int) -> list[str]:
    """The host's addresses, within the call under way (a lookup that does not end in time: TimeoutError,
    worth retrying)."""
    try:
        infos = upstream.getaddrinfo(host, port)
    except TimeoutError:
        raise
    except (OSError, UnicodeError) as exc:
        raise EndpointRefused(f"cannot resolve {host}") from exc
    return [info[4][0] for info in infos]


def vet(url: str, *, cached: bool = False) -> tuple[str, str, int, str]:
    """Returns (scheme, host, port, address to connect to) or raises EndpointRefused. `cached` takes
    the host's addresses from the last few seconds' answer (deliveries); the rules run on them anyway."""
    check_form(url)  # an endpoint stored before the rule is refused at delivery
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused("malformed url") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("not an http(s) url")
    host = parts.hostname
    port = port or (443 if parts.scheme == "https" else 80)
    addresses = _resolved.get(host, port) if cached else _resolve(host, port)
    if not addresses:
        raise EndpointRefused(f"cannot resolve {host}")
    if not settings.IAM_WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if _refused(ipaddress.ip_address(address.split("%", 1)[0])):
                raise EndpointRefused(f"{host} resolves to a non-public address")
    return parts.scheme, host, port, addresses[0]


def is_allowed(url: str) -> bool:
    """The create/update check of the address. Development (private endpoints allowed) skips DNS: hosts
    there may only resolve later, and delivery checks again anyway. `check_form` runs before this."""
    if settings.IAM_WEBHOOK_ALLOW_PRIVATE:
        return True
    try:
        vet(url)
    except EndpointRefused:
        return False
    return True


_tls = upstream.tls_context()  # the system's trust store, the certificate checked for the host name


def _connect(address: str, port: int, timeout: float) -> socket.socket:
    """A connection to the vetted address, no name resolved, with Nagle off as urllib3 has it: with it on,
    a request on a kept-alive connection waits for the receiver's delayed ACK (40 ms on Linux)."""
    sock = socket.create_connection((address, port), timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return upstream.keeping_to_the_call(sock)


class _OneWrite:
    """http.client sends a request's head, then its body, in two writes (`_send_output`): two TCP segments
    with Nagle off, two wake-ups of the receiver, two system calls here. A body given whole as bytes goes
    with the head in one write; the bytes are the same."""

    def _send_output(self, message_body=None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            return super()._send_output(message_body, encode_chunked)
        self._buffer.extend((b"", message_body))
        request = b"\r\n".join(self._buffer)
        del self._buffer[:]
        self.send(request)


class _HTTPConnection(_OneWrite, urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _connect(self.host, self.port, self.timeout)


class _HTTPSConnection(_OneWrite, urllib3.connection.HTTPSConnection):
    _new_conn = _HTTPConnection._new_conn


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _PinnedAdapter(requests.adapters.HTTPAdapter):
    """requests' transport, whose pool for a request is the one to the address the guard vetted
    (`request.pinned`): connections are kept alive per (host, address, port), and TLS sends and checks
    the URL's host name on a connection to that address. No redirect is followed (only a Session
    follows them)."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
        scheme, host, port, address = request.pinned
        # Part of the pool's key for http too (a connection serves one host), used there for nothing else.
        tls = {"ssl_context": _tls, "server_hostname": host}
        return self.poolmanager.connection_from_host(address, port, scheme, pool_kwargs=tls)

    def cert_verify(self, conn, url, verify, cert) -> None:
        pass  # `_tls` verifies, instead of requests' certifi bundle


_adapter = _PinnedAdapter(pool_connections=64)
os.register_at_fork(after_in_child=lambda: _adapter.init_poolmanager(64, 10))  # no socket shared


def _host_header(scheme: str, host: str, port: int) -> str:
    """The Host header urllib3 would write for the URL."""
    name = f"[{host}]" if ":" in host else host
    return name if port == (443 if scheme == "https" else 80) else f"{name}:{port}"


def _exchange(method: str, url: str, body, headers: dict, timeout: float, limit: int):
    """One request to the address `vet` answers, ended by `timeout` (or by what is left of the request's
    network budget, `iam.platform.upstream`) whatever the resolver and the peer do: the status and at most
    `limit` + 1 bytes of the body (the connection is kept for the next request only when the whole body
    was read)."""
    with upstream.call(timeout) as seconds:
        try:
            scheme, host, port, address = vet(url)
            headers = {"Host": _host_header(scheme, host, port), **headers}
            request = requests.Request(method, url, data=body, headers=headers).prepare()
            request.pinned = (scheme, host, port, address)
            with _adapter.send(request, stream=True, timeout=seconds) as response:
                content = bytearray()
                for chunk in response.iter_content(16 * 1024):
                    content += chunk
                    if len(content) > limit:
                        break
        except OSError as exc:  # requests' exceptions are OSErrors
            if isinstance(exc, requests.Timeout) or upstream.call_ended():
                raise TimeoutError(f"timed out after {seconds:.1f}s") from None
            raise
    return response.status_code, bytes(content)


_ANSWER_LIMIT = 64 * 1024  # of a delivery's answer, read to keep the connection; a longer one closes it


def post_each(url: str, requests_: list[tuple[bytes, dict[str, str]]], *, timeout: float) -> list:
    """POSTs each (body, headers) to `url` at once, each on a kept-alive connection of its own to the
    address the guard vetted (checked once for them all, on a DNS answer at most a few seconds old), then
    reads the answers: a receiver serves them side by side, and no answer waits on the one before it.
    (HTTP/1.1 pipelining would need one connection only, but is not safe with every receiver: RFC 9112
    9.3.2.) Follows no redirect. Answers, in order, the status of each, or the exception it failed with:
    EndpointRefused for all, or an OSError / http.client.HTTPException worth retrying (TimeoutError past
    `timeout`, which bounds the whole exchange, not each socket operation, so a receiver that drips bytes
    cannot hold the worker), or a ValueError for a head with a line break (`_request`). A connection is
    kept for the next delivery only when its answer was read in full (urllib3's pool replaces one the
    receiver closed meanwhile).

    The connections are urllib3's, from the pool of the vetted address (pinned, TLS checked for the URL's
    host). On them each request goes in one write of the bytes http.client's `request` writes (`_request`),
    and its answer is read by httptools' parser (`_Answer`): urllib3's `request` wraps each answer in one
    more object, http.client's parses every answer's headers with the e-mail package, and both write the
    body in a second send (a second TCP segment and receiver wake-up per delivery)
    (docs/performance.md#latest-figures)."""
    results: list = []
    with upstream.call(timeout) as seconds:
        deadline = time.monotonic() + seconds
        try:
            scheme, host, port, address = vet(url, cached=True)
        except (EndpointRefused, OSError) as exc:  # OSError: a lookup that did not end in time
            return [exc] * len(requests_)
        tls = {"ssl_context": _tls, "server_hostname": host}
        pool = _adapter.poolmanager.connection_from_host(address, port, scheme, pool_kwargs=tls)
        target = _target(url)
        common = {"User-Agent": _USER_AGENT, "Host": _host_header(scheme, host, port)}
        common["Content-Type"] = "application/json"
        sent = []
        for body, headers in requests_:
            conn = pool._get_conn()
            conn.timeout = max(deadline - time.monotonic(), 0.001)  # to connect, if it must
            try:
                headers = {**common, **headers, "Content-Length": str(len(body))}
                _request(conn, target, body, headers)
            except (*_BROKEN, ValueError) as exc:  # ValueError: a line break in the head
                conn.close()
                pool._put_conn(conn)
                conn = _failure(exc, seconds)
            sent.append(conn)
        for conn in sent:
            if isinstance(conn, Exception):
                results.append(conn)
                continue
            kept = False
            try:
                status, kept = _Answer.read(conn.sock, _ANSWER_LIMIT)
                results.append(status)
            except _BROKEN as exc:
                results.append(_failure(exc, seconds))
            if not kept:
                conn.close()
            pool._put_conn(conn)
    return results


_USER_AGENT = f"python-urllib3/{urllib3.__version__}"  # the one urllib3 writes, as before


@functools.lru_cache(maxsize=1024)
def _target(url: str) -> str:
    """The request target of a POST to `url`, requoted as requests writes it."""
    return requests.Request("POST", url).prepare().path_url


def _request(
    conn: urllib3.connection.HTTPConnection, target: str, body: bytes, headers: dict[str, str]
) -> None:
    """Writes a POST of `body` to `target` on `conn`, connecting it first if it must, in the one write of
    the bytes http.client's `request(conn, "POST", target, body, headers)` writes for a `headers` that holds
    Host and Content-Length: Accept-Encoding: identity, then `headers` in order. Every name and value is
    the service's own (the target and Host come from an endpoint `check_form` accepted); a line break in
    one is refused all the same, as http.client refuses it."""
    head = [f"POST {target} HTTP/1.1", "Accept-Encoding: identity"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    if any(map(_LINE_BREAK.search, head)):
        raise ValueError("a line break in the head of a request")
    if conn.sock is None:
        conn.connect()
    conn.sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)


_LINE_BREAK = re.compile(r"[\r\n\0]")


class BadAnswer(http.client.HTTPException):
    """An answer that is not HTTP/1.x."""


class _Answer:
    """The answer to a request just written, read from `sock` by httptools' parser (llhttp, the parser of
    the web process's requests) within `limit` bytes of body: `read` returns its status and whether the
    connection can carry the next request (the answer read in full, nothing after it, not closing). As
    http.client reads one: an interim answer (1xx) is skipped, lines may end in a bare LF, and once the
    status line has come the status stands however the rest ends (cut short, malformed, or past `limit`:
    then the connection is not kept)."""

    @classmethod
    def read(cls, sock: socket.socket, limit: int) -> tuple[int, bool]:
        answer, buffer = cls(), bytearray(16 * 1024)
        parser = answer.parser = httptools.HttpResponseParser(answer)
        parser.set_dangerous_leniencies(lenient_optional_cr_before_lf=True)
        try:
            while not answer.done and answer.size <= limit:
                received = sock.recv_into(buffer)  # within the call's deadline (`upstream.Socket`)
                if not received:
                    break
                try:
                    parser.feed_data(memoryview(buffer)[:received])
                except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
                    if not answer.status:
                        raise BadAnswer(f"not an HTTP/1.1 answer: {exc}") from None
                    break
        finally:
            answer.parser = None  # no cycle left for the collector
        if not answer.status:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        return answer.status, answer.done and answer.keep and not answer.after

    def __init__(self) -> None:
        self.status = self.size = 0
        self.done = self.keep = self.after = False

    def on_message_begin(self) -> None:
        self.after = self.done  # a second answer to one request: the connection is not kept

    def on_status(self, reason: bytes) -> None:
        status = self.parser.get_status_code()
        if not 100 <= status < 200:  # an interim answer: the final one comes next
            self.status = status

    def on_body(self, body: bytes) -> None:
        self.size += len(body)

    def on_message_complete(self) -> None:
        if self.status:
            self.done = True
            self.keep = self.parser.should_keep_alive()  # read now: the parser forgets it for the next


_BROKEN = (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError)


def _failure(exc: Exception, seconds: float) -> Exception:
    if upstream.call_ended():
        return TimeoutError(f"timed out after {seconds:.1f}s")
    if isinstance(exc, urllib3.exceptions.HTTPError):  # a broken answer: as requests raises it
        return ConnectionError(f"{type(exc).__name__}: {exc}")
    return exc


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> int:
    """`post_each` of one request: returns the status, or raises what it failed with."""
    [result] = post_each(url, [(body, headers)], timeout=timeout)
    if isinstance(result, Exception):
        raise result
    return result


def fetch(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float,
    limit: int = 1024 * 1024,
) -> tuple[int, bytes]:
    """One request to an outside service through the same guard as a delivery (the address rules, a
    connection pinned to the vetted address, `timeout` for the whole attempt, no redirect followed):
    answers the status and at most `limit` bytes of the body (more is an error: ValueError). Raises
    EndpointRefused, or OSError / http.client.HTTPException when the service cannot be reached. For the
    OpenID providers of SSO connections (discovery, JWKS, token and user-info)."""
    headers = {"Accept": "application/json", **(headers or {})}
    status, content = _exchange(method, url, body, headers, timeout, limit)
    if len(content) > limit:
        raise ValueError(f"answer over {limit} bytes")
    return status, content
