from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"

    def ready(self) -> None:
        # Importing connects `push.fan_out` to `iam.platform.events.emitted` and registers the workspace
        # purge.
        from . import client_cache, push  # noqa: F401
