"""iam/server/static.py: static files are served on the event loop, never on a pool thread (8 clients
fetching the 3.9 MB redoc `.js.map` and reading nothing held every thread), answering what Django's
WhiteNoise middleware answers."""

import gzip
import threading

import pytest
from django.test import Client

from iam.server.app import ReadWhole
from iam.server.static import StaticFiles
from tests.iam.web_servers import connect, read_answer, serving

SCRIPT = b"console.log('static');\n" * 2000


@pytest.fixture
def static_root(tmp_path, settings):
    settings.STATIC_ROOT = tmp_path
    settings.STATIC_URL = "static/"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "script.js").write_bytes(SCRIPT)
    (tmp_path / "app" / "script.js.gz").write_bytes(gzip.compress(SCRIPT))
    return tmp_path


class Blocked:
    """A WSGI application whose requests wait until `release` is set: the pool's thread stays busy."""

    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Event()

    def __call__(self, environ, start_response):
        self.started.set()
        self.release.wait(10)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


@pytest.fixture
def busy_server(static_root):
    """A worker of one thread, that thread held by a request that does not end."""
    app = Blocked()
    server = ReadWhole(app, threads=1, max_body=1024 * 1024, buffer_bytes=1024 * 1024, static=StaticFiles())
    with serving(server) as port:
        holder = connect(port)
        holder.sendall(b"POST /hold HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
        assert app.started.wait(5)
        yield port
        app.release.set()
        holder.close()


def fetch(port: int, head: str) -> tuple[int, dict, bytes]:
    sock = connect(port)
    try:
        sock.sendall(f"{head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        return read_answer(sock, timeout=5)
    finally:
        sock.close()


REQUESTS = {
    "GET": ("GET", {}),
    "HEAD": ("HEAD", {}),
    "gzip": ("GET", {"Accept-Encoding": "gzip"}),
    "range": ("GET", {"Range": "bytes=10-99"}),
}


@pytest.mark.parametrize(("method", "headers"), REQUESTS.values(), ids=REQUESTS.keys())
def test_a_static_file_is_served_on_the_loop_as_django_serves_it(busy_server, method, headers):
    """The pool's only thread is busy, and the file is served all the same, with Django's status, headers
    (the request id aside) and body."""
    lines = "".join(f"\r\n{name}: {value}" for name, value in headers.items())
    status, served, body = fetch(busy_server, f"{method} /static/app/script.js HTTP/1.1{lines}")
    meta = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
    django = Client().generic(method, "/static/app/script.js", **meta)
    expected = {name.lower(): value for name, value in django.headers.items()}
    assert status == django.status_code
    assert served.pop("x-request-id") and expected.pop("x-request-id")
    served.pop("connection"), served.pop("date")  # uvicorn's, on every answer
    assert served == expected
    assert body == (b"" if method == "HEAD" else b"".join(django.streaming_content))


def test_a_not_modified_file_answers_304_on_the_loop(busy_server):
    _, headers, _ = fetch(busy_server, "GET /static/app/script.js HTTP/1.1")
    head = f"GET /static/app/script.js HTTP/1.1\r\nIf-None-Match: {headers['etag']}"
    status, served, body = fetch(busy_server, head)
    assert status == 304 and body == b"" and served["etag"] == headers["etag"]


def test_other_paths_and_methods_go_to_the_application(static_root):
    files = StaticFiles()
    assert files.find("GET", "/static/app/script.js") is not None
    assert files.find("HEAD", "/static/app/script.js") is not None
    assert files.find("POST", "/static/app/script.js") is None  # Django answers WhiteNoise's 405
    assert files.find("GET", "/static/app/missing.js") is None
    assert files.find("GET", "/roles/list") is None
