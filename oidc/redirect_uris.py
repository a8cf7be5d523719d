"""Redirect URIs (RFC 9700 2.1, RFC 8252 7.3): the rules a registered URI follows, and the one way a
presented URI matches a registered one: character for character, except that a `native` application's
loopback URI matches on any port."""

from urllib.parse import SplitResult, urlsplit

from django.conf import settings

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_LENGTH = 2048


class Refused(ValueError):
    """The reason a URI cannot be registered, as `redirect_uri not allowed: <reason>` says it."""


def _split(uri: str) -> SplitResult:
    if not isinstance(uri, str) or not uri:
        raise Refused("must be a non-empty string")
    if len(uri) > MAX_LENGTH:
        raise Refused(f"must have at most {MAX_LENGTH} characters")
    if any(ord(char) <= 0x20 or ord(char) >= 0x7F for char in uri):
        raise Refused("must not contain spaces, control or non-ASCII characters")
    if "*" in uri:
        raise Refused("must not contain a wildcard")
    if "#" in uri:
        raise Refused("must not contain a fragment")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise Refused("must be a valid URL") from exc
    if not parts.scheme or not parts.hostname:
        raise Refused("must be an absolute URL")
    if parts.username is not None or parts.password is not None:
        raise Refused("must not contain a user name or password")
    return parts


def check(uri: str, *, application_type: str) -> None:
    """Raises `Refused` unless `uri` may be registered for an application of that type: `https`, or
    `http` on a loopback host; with DEBUG off, `web` and `spa` applications take only `https`."""
    parts = _split(uri)
    if parts.scheme == "https":
        return
    if parts.scheme != "http":
        raise Refused("must use https")
    if parts.hostname not in LOOPBACK_HOSTS:
        raise Refused("http is only for 127.0.0.1, [::1] or localhost")
    if application_type != "native" and not settings.DEBUG:
        raise Refused(f"{application_type} applications must use https")


def matches(presented: str, registered: list[str], *, application_type: str) -> bool:
    if presented in registered:
        return True
    if application_type != "native":
        return False
    # RFC 8252 7.3: the operating system gives a native app's loopback listener any free port.
    bare = _loopback_without_port(presented)
    return bare is not None and any(_loopback_without_port(uri) == bare for uri in registered)


def _loopback_without_port(uri: str) -> str | None:
    """An `http` loopback URI exactly as written, its port left out; None for any other URI."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except (TypeError, ValueError):
        return None
    prefix = f"http://{parts.netloc}"
    if parts.hostname not in LOOPBACK_HOSTS or not uri.startswith(prefix):
        return None
    netloc = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    return f"http://{netloc}{uri[len(prefix) :]}"
