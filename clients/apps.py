from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "clients"

    def ready(self) -> None:
        from iam.platform import events

        from . import client_cache, push  # noqa: F401  client_cache: registers the workspace purge

        # Every event `events.emit` writes goes to the workspace's client endpoints, in the change's
        # transaction. A signal, because iam may not import clients; connected here, where Django runs it.
        events.emitted.connect(push.fan_out, dispatch_uid="clients.push.fan_out")
        events.emitted_each.connect(push.fan_out_each, dispatch_uid="clients.push.fan_out_each")
