"""Static files (the admin's, the API reference's) served on the event loop, never on a pool thread.

WhiteNoise's index of the collected files (`STATIC_ROOT`, what `collectstatic` gathered) answers as it
does inside Django (its headers, `ETag` and `If-None-Match`, ranges, the compressed copies the client
accepts), with the headers Django's middleware adds to it (the security headers, `X-Request-ID`,
`Cross-Origin-Opener-Policy`). The loop reads the file a slice at a time, each when the client has taken
the one before (uvicorn's flow control): a client that reads nothing holds a connection and about a
slice of memory, until the read-rate rule drops it, and no thread at all. A `GET` or `HEAD` of any other
path, and any other method on these, go to Django as before."""

from iam.server.answers import SLICE


class StaticFiles:
    def __init__(self) -> None:
        from whitenoise.middleware import WhiteNoiseMiddleware

        self.whitenoise = WhiteNoiseMiddleware(get_response=None)  # the same settings as Django's own

    def find(self, method: str, path: str):
        """The file `path` names, for a `GET` or `HEAD`; None for anything else."""
        whitenoise = self.whitenoise
        if method not in ("GET", "HEAD") or not path.startswith(whitenoise.static_prefix):
            return None
        return whitenoise.find_file(path) if whitenoise.autorefresh else whitenoise.files.get(path)

    @staticmethod
    def headers() -> list[tuple[str, str]]:
        """What Django's middleware adds to WhiteNoise's answer (iam.http.middleware, Django's
        SecurityMiddleware), X-Request-ID's value a fresh id (a static file changes nothing to trace)."""
        from django.conf import settings

        from iam.http.middleware import security_headers
        from iam.platform.context import new_request_id

        headers = [*security_headers().items(), ("X-Request-ID", new_request_id())]
        if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
            headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
        return headers

    async def serve(
        self, static_file, environ: dict, send, connection=None
    ) -> tuple[str, list[tuple[bytes, bytes]], int]:
        """Sends the file's answer; its status line, headers and the bytes of body sent. `connection`
        (the HttpProtocol): the file is read no further once it closes."""
        response = static_file.get_response(environ["REQUEST_METHOD"], environ)
        status = f"{response.status.value} {response.status.phrase}"
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in [*response.headers, *self.headers()]
        ]
        sent = 0
        await send({"type": "http.response.start", "status": response.status.value, "headers": headers})
        if response.file is None:  # HEAD, 304, 416
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return status, headers, sent
        with response.file as file:
            while chunk := file.read(SLICE):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if connection is not None and connection.transport.is_closing():
                    return status, headers, sent  # dropped, or gone
                sent += len(chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return status, headers, sent
