import os

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class OidcConfig(AppConfig):
    name = "oidc"
    verbose_name = "OpenID Provider"

    def ready(self) -> None:
        from authlib.common.security import is_secure_transport

        from . import application_cache  # noqa: F401  registers the workspace purge

        # OAuth 2.0 needs TLS (RFC 6749 3.1): the issuer is https, or http on a loopback address
        # (development). DEBUG (`make run`) may also use another http address, as Authlib allows it.
        if not is_secure_transport(settings.IAM_PUBLIC_URL):
            if not settings.DEBUG:
                raise ImproperlyConfigured(
                    "IAM_PUBLIC_URL must be https (or http on 127.0.0.1, [::1] or localhost): it is the "
                    "OpenID Provider's issuer, and OAuth 2.0 needs TLS"
                )
            os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")
