"""Access-log lines in gunicorn's format, without the secrets a request line can carry: an OAuth or SSO
callback's `code` and `state`, a token sent in a query string. Query values whose name says what they are
(CONCEALED) are written `[redacted]`, in the request line, the query string and the `Referer`; the
`Authorization` and `Cookie` headers and `Set-Cookie` are never written."""

import urllib.parse

CONCEALED = (
    *("code", "state", "token", "secret", "password", "nonce"),
    *("assertion", "saml", "signature", "ticket"),
)
REDACTED = "[redacted]"
SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "set-cookie"}
SECRET_ENVIRON = {"HTTP_AUTHORIZATION", "HTTP_PROXY_AUTHORIZATION", "HTTP_COOKIE"}


def redact_query(query: str) -> str:
    """`query` with the value of each parameter whose name holds a CONCEALED word replaced."""
    parts = []
    for part in query.split("&"):
        name, sep, _ = part.partition("=")
        key = urllib.parse.unquote_plus(name).lower()
        parts.append(f"{name}={REDACTED}" if sep and any(word in key for word in CONCEALED) else part)
    return "&".join(parts)


def redact_url(url: str) -> str:
    base, sep, query = url.partition("?")
    return base + sep + redact_query(query) if sep else url


def logged_environ(environ: dict) -> dict:
    """What the access log reads of a request's environ."""
    logged = {key: value for key, value in environ.items() if key not in SECRET_ENVIRON}
    logged["RAW_URI"] = redact_url(environ.get("RAW_URI", ""))
    logged["QUERY_STRING"] = redact_query(environ.get("QUERY_STRING", ""))
    if "HTTP_REFERER" in environ:
        logged["HTTP_REFERER"] = redact_url(environ["HTTP_REFERER"])
    return logged


def logged_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    logged = []
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        if name.lower() in SECRET_HEADERS:
            value = REDACTED
        elif name.lower() == "referer":
            value = redact_url(value)
        logged.append((name, value))
    return logged


class Sent:
    """What gunicorn's access log reads of a response."""

    def __init__(self, status: str, headers: list[tuple[bytes, bytes]], sent: int):
        self.status = status
        self.sent = sent
        self.headers = logged_headers(headers)
