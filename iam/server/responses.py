"""What the server answers by itself, before Django runs (a request the HTTP parser refuses, 400; a
request not received in time, 408; a connection, a body or an answer past a limit, 503): the flat error
body every error has (docs/api.md) with the headers every answer carries (docs/security.md, "Headers"),
then the connection closes."""

REASONS = {400: b"Bad Request", 408: b"Request Timeout", 503: b"Service Unavailable"}


def security_headers() -> list[tuple[bytes, bytes]]:
    from iam.http.middleware import security_headers as headers

    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers().items()]


def error_head_and_body(status: int) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and body of an error answer made outside Django; the connection closes after it (the
    rest of the request is not read)."""
    from iam.http.errors import STATUS_MESSAGES

    body = b'{"success":false,"status":%d,"message":"%s"}' % (status, STATUS_MESSAGES[status].encode("ascii"))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"connection", b"close"),
        *security_headers(),
    ]
    return headers, body


def error_bytes(status: int) -> bytes:
    """The whole HTTP/1.1 answer, written straight to a connection."""
    headers, body = error_head_and_body(status)
    head = b"".join(b"%s: %s\r\n" % header for header in headers)
    return b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, REASONS[status], head, body)
