"""gunicorn's worker class for the web process (the Procfile's `-k iam.server.worker.Worker`)."""

import sys

from gunicorn.arbiter import Arbiter
from uvicorn_worker import UvicornWorker

from iam.server import turns
from iam.server.app import ReadWhole
from iam.server.protocol import CONNECTIONS_PER_ADDRESS, HttpProtocol


class Worker(UvicornWorker):
    """uvicorn's loop with `HttpProtocol`, serving the WSGI application through `ReadWhole`. Client
    addresses are the connection's (no `X-Forwarded-*` rewriting here: `IAM_NUM_PROXIES` decides), and
    access lines keep gunicorn's format.

    gunicorn's master kills a worker that has not notified it for `timeout` seconds. uvicorn's loop
    notifies as long as it turns, whatever its threads do; this worker notifies each second unless a
    request has run in its pool for longer than `timeout`: so, as under gunicorn's sync workers, a request
    stuck in Python gets its worker killed (SIGABRT) and replaced. Requests end long before: the request
    deadline (`IAM_REQUEST_SECONDS`, iam/platform/timeouts.py) must stay below `timeout`, or the worker
    refuses to start."""

    CONFIG_KWARGS = {
        "loop": "uvloop",
        "http": HttpProtocol,
        "ws": "none",
        "interface": "asgi3",
        "lifespan": "off",
        "proxy_headers": False,
        "server_header": False,
        "access_log": False,
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        HttpProtocol.limit_request_line = self.cfg.limit_request_line or sys.maxsize
        HttpProtocol.limit_request_fields = self.cfg.limit_request_fields or sys.maxsize
        HttpProtocol.limit_request_field_size = self.cfg.limit_request_field_size or sys.maxsize
        HttpProtocol.limit_connections = self.cfg.worker_connections
        self.config.timeout_notify = 0.5  # uvicorn checks each second: a notification each second
        self.stuck_reported = False

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        from iam.platform.addresses import address_of
        from iam.server.static import StaticFiles

        if self.cfg.timeout and self.cfg.timeout <= settings.IAM_REQUEST_SECONDS:
            raise ImproperlyConfigured(
                f"gunicorn's timeout ({self.cfg.timeout} s) must be above IAM_REQUEST_SECONDS "
                f"({settings.IAM_REQUEST_SECONDS:g} s): a request must end before its worker is killed"
            )
        # Behind proxies every connection comes from one of them: a per-address cap would cap the proxies.
        HttpProtocol.limit_per_address = None if settings.IAM_NUM_PROXIES else CONNECTIONS_PER_ADDRESS
        self.wsgi = ReadWhole(
            self.wsgi,
            threads=self.cfg.threads,
            max_body=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
            buffer_bytes=settings.IAM_WEB_BUFFER_BYTES,
            log=self.log,
            static=StaticFiles(),
            address_of=address_of,
        )

    async def callback_notify(self) -> None:
        running = self.wsgi.longest_running()
        if self.cfg.timeout and running > self.cfg.timeout:
            if not self.stuck_reported:
                self.stuck_reported = True
                self.log.critical(
                    "a request has run %.0f s, past the timeout (%s s): no more notifications, the master "
                    "replaces this worker (pid %s)",
                    running,
                    self.cfg.timeout,
                    self.pid,
                )
            return
        self.stuck_reported = False  # it ended before the master acted: the next one is said again
        self.notify()

    async def _serve(self) -> None:
        """`UvicornWorker._serve`, with the server whose workers take turns at the listening socket."""
        self.config.app = self.wsgi
        turns.own_slot = getattr(self, "turn_slot", None)  # given by the master (`turns.give_slot`)
        server = turns.TurnTakingServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
