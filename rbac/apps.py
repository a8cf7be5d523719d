from django.apps import AppConfig


class RbacConfig(AppConfig):
    name = "rbac"
    verbose_name = "Roles and permissions"

    def ready(self) -> None:
        from . import policy  # noqa: F401  registers where account events go (`workspaces_of`)
