from django.apps import AppConfig


class SsoConfig(AppConfig):
    name = "sso"
    verbose_name = "Enterprise SSO"

    def ready(self) -> None:
        from . import dns_proof

        dns_proof.resolver()  # a malformed IAM_DNS_NAMESERVERS stops the start, not a request
