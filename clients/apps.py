from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"

    def ready(self) -> None:
        from . import client_cache, push  # noqa: F401  register the outbox handlers and the workspace purge
