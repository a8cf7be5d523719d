"""What the outbound transport (`iam.platform.egress`, requests with a pinned adapter) guarantees besides the
address rules, against real servers on loopback: the connection goes to the address the check vetted
(a DNS answer that changes afterwards reaches nothing), TLS names the URL's host and checks the
certificate for it on that connection, the timeout bounds the whole request however the peer drips its
answer, the answer read is bounded, no redirect is followed and no proxy taken."""

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from iam.platform import egress, upstream
from tests.clients.test_push import kept_connections

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"


class Server:
    """An HTTP/1.1 server on 127.0.0.1 that writes `answer` (bytes, or a function given the handler) to
    every request, and keeps the Host header, the connection and the TLS server name of each."""

    def __init__(self, answer=OK, tls: ssl.SSLContext | None = None):
        self.answer = answer
        self.hosts: list[str] = []
        self.peers: list[tuple] = []
        self.server_names: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                server.hosts.append(self.headers["Host"])
                server.peers.append(self.client_address)
                with contextlib.suppress(OSError):  # the client gave up: expected here
                    if callable(server.answer):
                        server.answer(self)
                    else:
                        self.wfile.write(server.answer)

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.do_GET()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.block_on_close = False
        if tls is not None:
            tls.sni_callback = lambda sock, name, context: self.server_names.append(name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*args, **kwargs) -> Server:
        servers.append(Server(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()
    egress._adapter.poolmanager.clear()


@pytest.fixture
def dns(monkeypatch):
    """`socket.getaddrinfo` answering `names` (a name -> a list of addresses, one per lookup, the last
    kept), every other host as the system does; `asked` lists the names looked up."""
    names: dict[str, list[str]] = {}
    asked: list[str] = []
    system = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host not in names:
            return system(host, port, *args, **kwargs)
        asked.append(host)
        address = names[host].pop(0) if len(names[host]) > 1 else names[host][0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return names, asked


def test_the_connection_goes_to_the_address_the_check_vetted(serve, dns, monkeypatch, settings):
    """A rebinding DNS answers a public address to the check and loopback afterwards: the one answer is
    the address connected to (the public host is stood in for by a server on loopback)."""
    settings.IAM_WEBHOOK_ALLOW_PRIVATE = False
    server = serve()
    names, asked = dns
    names["hooks.example.com"] = ["93.184.216.34", "127.0.0.1"]
    connected = []
    connect = egress._connect

    def to_stand_in(address, port, timeout):
        connected.append((address, port))
        return connect("127.0.0.1", server.port, timeout)

    monkeypatch.setattr(egress, "_connect", to_stand_in)
    assert egress.fetch("GET", "http://hooks.example.com:8080/keys", timeout=5) == (200, b"{}")
    assert connected == [("93.184.216.34", 8080)] and asked == ["hooks.example.com"]
    assert server.hosts == ["hooks.example.com:8080"]  # the URL's host, not the address
    # deliveries sent at once: the group is vetted once, each connection goes to that address
    names["hooks.example.com"] = ["93.184.216.34"]
    assert egress.post_each("http://hooks.example.com:8080/", [(b"{}", {})] * 3, timeout=5) == [200] * 3
    assert set(connected) == {("93.184.216.34", 8080)} and len(connected) == 3
    assert server.hosts[1:] == ["hooks.example.com:8080"] * 3


def test_a_delivery_is_one_write_of_the_bytes_http_client_writes(serve, monkeypatch):
    """Head and body go in one write (http.client writes them in two: two segments, two wake-ups of the
    receiver), and the bytes are the ones `http.client.HTTPConnection.request` writes, header for header."""
    server = serve()
    writes = []
    sendall = upstream.Socket.sendall

    def recording(sock, data, *args):
        writes.append(bytes(data))
        return sendall(sock, data, *args)

    monkeypatch.setattr(upstream.Socket, "sendall", recording)
    body = b'{"type":"x"}'
    headers = {"webhook-id": "e1", "webhook-timestamp": "1700000000", "webhook-signature": "v1,c2ln"}
    url = f"{server.url}hook/1?to=%7Ea"
    assert egress.post_each(url, [(body, headers)] * 2, timeout=5) == [200, 200]
    head = (
        "POST /hook/1?to=~a HTTP/1.1\r\n"  # requoted as requests writes it
        "Accept-Encoding: identity\r\n"
        f"User-Agent: python-urllib3/{urllib3.__version__}\r\n"
        f"Host: 127.0.0.1:{server.port}\r\n"
        "Content-Type: application/json\r\n"
        "webhook-id: e1\r\n"
        "webhook-timestamp: 1700000000\r\n"
        "webhook-signature: v1,c2ln\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    assert writes == [head.encode() + body] * 2


def test_a_line_break_in_a_header_is_refused_before_anything_is_sent(serve):
    server = serve()
    injected = {"webhook-id": "e1\r\nX-Injected: 1"}
    refused, sent = egress.post_each(server.url, [(b"{}", injected), (b"{}", {})], timeout=5)
    assert isinstance(refused, ValueError) and sent == 200
    assert server.hosts == [f"127.0.0.1:{server.port}"]  # the other one only


def test_a_kept_connection_serves_one_host(serve, dns):
    server = serve()
    names, _ = dns
    names["a.example.test"] = names["b.example.test"] = ["127.0.0.1"]
    for name in ("a.example.test", "a.example.test", "b.example.test"):
        assert egress.fetch("GET", f"http://{name}:{server.port}/", timeout=5) == (200, b"{}")
    assert server.peers[0] == server.peers[1] != server.peers[2]
    port = server.port
    assert server.hosts == [f"a.example.test:{port}", f"a.example.test:{port}", f"b.example.test:{port}"]


def certificate_for(*names: str) -> tuple[bytes, bytes]:
    """A self-signed certificate (PEM) for `names`, and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name) for name in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def test_tls_names_and_checks_the_urls_host_on_the_connection_to_the_address(
    serve, dns, monkeypatch, tmp_path
):
    certificate, key = certificate_for("hooks.example.test", "alias.example.test")
    (tmp_path / "cert.pem").write_bytes(certificate)
    (tmp_path / "key.pem").write_bytes(key)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = serve(tls=server_tls)
    trusting = ssl.create_default_context(cadata=certificate.decode())
    trusting.sslsocket_class = upstream.TLSSocket
    monkeypatch.setattr(egress, "_tls", trusting)
    names, _ = dns
    for name in ("hooks.example.test", "alias.example.test", "other.example.test"):
        names[name] = ["127.0.0.1"]

    for _ in range(2):
        assert egress.fetch("GET", f"https://hooks.example.test:{server.port}/", timeout=5)[0] == 200
    assert egress.fetch("GET", f"https://alias.example.test:{server.port}/", timeout=5)[0] == 200
    assert server.server_names == ["hooks.example.test", "alias.example.test"]
    # kept alive per host: the second request to a host reuses its connection, another host has its own
    assert server.peers[0] == server.peers[1] != server.peers[2]
    with pytest.raises(OSError, match="certificate verify failed"):  # not a name the certificate holds
        egress.fetch("GET", f"https://other.example.test:{server.port}/", timeout=5)
    assert len(server.hosts) == 3
    # deliveries sent at once: the same names and checks on each of their connections
    hooks = f"https://hooks.example.test:{server.port}/"
    assert egress.post_each(hooks, [(b"{}", {})] * 3, timeout=5) == [200] * 3
    [refused] = egress.post_each(f"https://other.example.test:{server.port}/", [(b"{}", {})], timeout=5)
    assert isinstance(refused, ssl.SSLCertVerificationError)
    assert set(server.server_names[3:-1]) == {"hooks.example.test"}  # a new connection or a kept one
    assert server.server_names[-1] == "other.example.test"


def dripping_headers(handler):
    handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
    for _ in range(40):  # each line well within the timeout, the whole far beyond it
        handler.wfile.write(b"X-Slow: 1\r\n")
        handler.wfile.flush()
        time.sleep(0.05)


def dripping_body(handler):
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
    for _ in range(40):
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(0.05)


@pytest.mark.parametrize("answer", [dripping_headers, dripping_body], ids=["headers", "body"])
def test_the_timeout_bounds_the_whole_request_however_the_answer_drips(serve, answer):
    server = serve(answer)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"timed out after 0.3s"):
        egress.fetch("GET", server.url, timeout=0.3)
    assert time.monotonic() - started < 0.8  # the drip lasts 2 s
    assert egress.fetch("GET", serve().url, timeout=5) == (200, b"{}")  # the thread is free again
    started = time.monotonic()  # deliveries sent at once: one deadline for them all
    results = egress.post_each(server.url, [(b"{}", {})] * 3, timeout=0.3)
    assert [str(result) for result in results] == ["timed out after 0.3s"] * 3
    assert time.monotonic() - started < 0.8


def endless(handler):
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    for _ in range(10_000):  # 640 MB if read to the end
        handler.wfile.write(b"x" * 65536)


def test_the_answer_read_is_bounded(serve):
    exact = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n" + b"x" * 1024)
    assert egress.fetch("GET", exact.url, timeout=5, limit=1024) == (200, b"x" * 1024)
    over = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n" + b"x" * 1025)
    with pytest.raises(ValueError, match="answer over 1024 bytes"):
        egress.fetch("GET", over.url, timeout=5, limit=1024)
    started, unending = time.monotonic(), serve(endless)
    with pytest.raises(ValueError, match="answer over 1048576 bytes"):
        egress.fetch("GET", unending.url, timeout=5)
    # a delivery reads at most 64 KiB of the answer, and does not keep that connection
    assert egress.post(unending.url, b"{}", {}, timeout=5) == 200
    assert time.monotonic() - started < 3
    assert {kept.port for kept in kept_connections()} == {exact.port, over.port}  # answered in full


def closing(answer: bytes):
    """An answer written, then the connection closed, as a server that ends a body by closing does."""

    def write(handler):
        handler.close_connection = True
        handler.wfile.write(answer)

    return write


@pytest.mark.parametrize(
    ("answer", "status", "kept"),
    [
        (b"HTTP/1.1 204 No Content\r\n\r\n", 204, True),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 200, True),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}", 202, True),
        (b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}", 200, True),  # bare LFs, as http.client reads them
        (b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 500, False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, False),
        (b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 204, False),  # one too many
        (closing(b"HTTP/1.1 200 OK\r\n\r\nthe body ends with the connection"), 200, False),
        (closing(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"), 200, False),  # the status stands
        (closing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}"), 200, False),
        (closing(b"HTTP/1.1 100 Continue\r\n\r\n"), "RemoteDisconnected", False),
        (closing(b""), "RemoteDisconnected", False),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "BadAnswer", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 200, False),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            "BadAnswer",
            False,
        ),
    ],
    ids=[
        "no-content",
        "chunked",
        "interim-then-final",
        "bare-lf",
        "closing",
        "http-1.0",
        "two-answers",
        "body-until-close",
        "short-of-its-length",
        "chunks-cut-short",
        "interim-only",
        "nothing",
        "not-http",
        "two-lengths",
        "upgrade",
    ],
)
def test_a_deliverys_answer_is_read_whole_and_its_connection_kept_only_when_it_can_carry_the_next(
    serve, answer, status, kept
):
    """Each delivery's answer: its status, or what it failed with (a delivery retried later), and the
    connection kept for the next delivery only when the answer was read in full and nothing else came."""
    server = serve(answer)
    [result] = egress.post_each(server.url, [(b"{}", {})], timeout=5)
    assert (result if isinstance(status, int) else type(result).__name__) == status
    assert [kept.port for kept in kept_connections()] == ([server.port] if kept else [])
    if kept:  # the next delivery goes on it
        assert egress.post_each(server.url, [(b"{}", {})], timeout=5) == [status]
        assert server.peers[0] == server.peers[1]


def test_no_redirect_is_followed(serve):
    elsewhere = serve()
    redirect = f"HTTP/1.1 302 Found\r\nLocation: {elsewhere.url}\r\nContent-Length: 0\r\n\r\n"
    assert egress.fetch("GET", serve(redirect.encode()).url, timeout=5) == (302, b"")
    assert elsewhere.hosts == []


def test_no_proxy_is_taken_from_the_environment(serve, monkeypatch):
    """A proxy would make the connection, and resolve the name, itself."""
    for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server = serve()
    assert egress.fetch("GET", server.url, timeout=5) == (200, b"{}")
    assert server.hosts == [f"127.0.0.1:{server.port}"]


def test_an_ipv6_literal_is_connected_to_as_written(serve, monkeypatch, settings):
    """The Host header keeps the brackets; the connection goes to the address, unresolved."""
    settings.IAM_WEBHOOK_ALLOW_PRIVATE = False
    server = serve()
    connected = []
    connect = egress._connect

    def to_stand_in(address, port, timeout):
        connected.append((address, port))
        return connect("127.0.0.1", server.port, timeout)

    monkeypatch.setattr(egress, "_connect", to_stand_in)
    public = ipaddress.IPv6Address("2001:4860:4860::8888")
    assert egress.fetch("GET", f"http://[{public}]:8080/", timeout=5)[0] == 200
    assert connected == [(str(public), 8080)] and server.hosts == [f"[{public}]:8080"]
