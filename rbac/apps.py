from django.apps import AppConfig


class RbacConfig(AppConfig):
    name = "rbac"
    verbose_name = "Roles and permissions"

    def ready(self) -> None:
        from iam import events

        from .policy import workspaces_of

        events.account_workspaces = workspaces_of
