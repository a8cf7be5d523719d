"""The web process's worker class, by the name the Procfile gives gunicorn (`-k iam.web.Worker`); the
server itself is the `iam.server` package."""

from iam.server.worker import Worker

__all__ = ["Worker"]
