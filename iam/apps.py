from django.apps import AppConfig
from django.contrib import admin
from django.contrib.admin import apps as admin_apps
from django.contrib.admin import checks as admin_checks
from django.core import checks


class IamConfig(AppConfig):
    name = "iam"
    verbose_name = "IAM platform"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from iam.platform import cache, outbox, timeouts

        outbox.handler(cache.PURGE_TOPIC)(cache.purge_later)
        connection_created.connect(timeouts.limit_request_connection, dispatch_uid="iam.statement_timeout")


class IamAdminConfig(admin_apps.SimpleAdminConfig):
    """Django's admin with the operators' site (`iam.http.admin_site.IamAdminSite`). Its modules (each app's
    `admin`) are imported with the URLconf (iam/urls.py), not in `django.setup()`: the worker and beat
    serve no page, and importing them was 0.6 s of a worker's 1.5 s start, which a worker replaced after a
    crash waits before it delivers again (docs/performance.md#what-keeps-the-hot-paths-fast)."""

    default = False  # `iam` itself is IamConfig
    default_site = "iam.http.admin_site.IamAdminSite"

    def ready(self) -> None:
        checks.register(admin_checks.check_dependencies, checks.Tags.admin)
        checks.register(check_admin_modules, checks.Tags.admin)


def check_admin_modules(app_configs=None, **kwargs: object) -> list[checks.CheckMessage]:
    """Django's admin checks over every admin module: `manage.py check` may run them before anything has
    loaded the URLconf."""
    admin.autodiscover()
    return admin_checks.check_admin_app(app_configs, **kwargs)
