from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class IamConfig(AppConfig):
    name = "iam"
    verbose_name = "IAM platform"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from iam.platform import cache, outbox, timeouts

        outbox.handler(cache.PURGE_TOPIC)(cache.purge_later)
        connection_created.connect(timeouts.limit_request_connection, dispatch_uid="iam.statement_timeout")


class IamAdminConfig(admin_apps.AdminConfig):
    """Django's admin with the operators' site (`iam.http.admin_site.IamAdminSite`)."""

    default = False  # `iam` itself is IamConfig
    default_site = "iam.http.admin_site.IamAdminSite"
