from django.apps import AppConfig


class OidcConfig(AppConfig):
    name = "oidc"
    verbose_name = "OpenID Provider"
