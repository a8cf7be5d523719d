from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"

    def ready(self) -> None:
        from . import push  # noqa: F401  registers the outbox handlers
