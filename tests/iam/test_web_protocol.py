"""iam/server/protocol.py: what a connection is answered before Django runs (httptools' own 400s, the
connections of one address)."""

import json
import time

import pytest

from iam.server.app import ReadWhole
from iam.server.protocol import HttpProtocol
from tests.iam.web_servers import connect, read_answer, serving

ERROR_400 = {"success": False, "status": 400, "message": "bad request"}
ERROR_503 = {"success": False, "status": 503, "message": "service unavailable"}


def echo(environ, start_response):
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body) + 2))])
    return [b"[", body, b"]"]


@pytest.fixture
def port():
    with serving(ReadWhole(echo, threads=1, max_body=1024 * 1024, buffer_bytes=64 * 1024 * 1024)) as bound:
        yield bound


def answer(port: int, data: bytes, source: str = "127.0.0.1") -> tuple[int, dict, bytes]:
    sock = connect(port, source=source)
    try:
        sock.sendall(data)
        return read_answer(sock, timeout=5)
    finally:
        sock.close()


REFUSED_BY_THE_PARSER = {
    "content-length and chunked": (
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "content-length twice": b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
    "bare LF": b"GET / HTTP/1.1\nHost: a\n\n",
    "obs-fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\n\r\n",
    "NUL in a header": b"GET / HTTP/1.1\r\nHost: a\r\nX-Nul: a\x00b\r\n\r\n",
    "space before the colon": b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
    "bad chunk size": b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n",
    "not HTTP": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
}


@pytest.mark.parametrize("request_bytes", REFUSED_BY_THE_PARSER.values(), ids=REFUSED_BY_THE_PARSER.keys())
def test_a_request_the_parser_refuses_gets_the_error_body_and_headers(port, request_bytes):
    """uvicorn answered these `text/plain` `Invalid HTTP request received.` without the security headers."""
    status, headers, body = answer(port, request_bytes)
    assert status == 400 and json.loads(body) == ERROR_400
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin"


def test_a_refused_request_after_one_still_answering_does_not_cut_into_its_answer(port):
    """Pipelined: a valid request, then a malformed one. The first is answered whole; the connection then
    closes (no 400 written into the middle of the first answer)."""
    sock = connect(port)
    try:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\nHost: a\n\n")
        status, _, body = read_answer(sock, timeout=5)
        assert status == 200 and body == b"[{}]"
        sock.settimeout(5)
        rest = sock.recv(65536)
    finally:
        sock.close()
    assert rest == b""  # then closed: no 400 cut into the first answer


def test_one_address_holds_at_most_its_share_of_the_connections(port, monkeypatch):
    """Past its limit, an address's new connections are answered 503 and closed; another address still
    gets in; a connection closed gives the first its room back."""
    monkeypatch.setattr(HttpProtocol, "limit_per_address", 3)
    held = [connect(port) for _ in range(3)]
    try:
        time.sleep(0.1)  # the three are accepted
        status, headers, body = answer(port, b"")
        assert status == 503 and json.loads(body) == ERROR_503 and headers["x-frame-options"] == "DENY"
        request = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        assert answer(port, request, source="127.0.0.2")[0] == 200
        held.pop().close()
        time.sleep(0.1)
        assert answer(port, request)[0] == 200  # room again
    finally:
        for sock in held:
            sock.close()


def test_without_a_per_address_limit_only_the_workers_applies(port, monkeypatch):
    """Behind proxies (IAM_NUM_PROXIES) every connection comes from a proxy: the worker sets no
    per-address limit."""
    monkeypatch.setattr(HttpProtocol, "limit_per_address", None)
    monkeypatch.setattr(HttpProtocol, "limit_connections", 5)
    held = [connect(port) for _ in range(4)]
    try:
        time.sleep(0.1)
        request = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        assert answer(port, request)[0] == 200
    finally:
        for sock in held:
            sock.close()
