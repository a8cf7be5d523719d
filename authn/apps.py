from django.apps import AppConfig


class AuthnConfig(AppConfig):
    name = "authn"
    verbose_name = "Authentication"

    def ready(self) -> None:
        from . import emails  # noqa: F401  registers the outbox handler for e-mails
