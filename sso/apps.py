from django.apps import AppConfig


class SsoConfig(AppConfig):
    name = "sso"
    verbose_name = "Enterprise SSO"

    def ready(self) -> None:
        from . import nameservers

        nameservers.configured()  # a malformed IAM_DNS_NAMESERVERS stops the start, not a request
