from django.db import models
from django.db.models import Q

from iam.models import Resource


class Workspace(Resource):
    name = models.CharField(max_length=255)
    slug = models.SlugField(max_length=63, unique=True)
    description = models.TextField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)
    # A policy: every call naming the workspace needs a session that used two factors (or came through
    # one of the workspace's own SSO connections); see rbac.policy.require_mfa.
    mfa_required = models.BooleanField(
        "MFA required", default=False, db_default=False
    )  # old processes insert without it
    # The account whose request created it (docs/api.md#quotas-and-budgets: the workspaces an account created
    # count against its quota); null for one an operator's command made, or when that account is gone.
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # docs/pages.md#branding: `display_name`, `logo_url` (https) and `primary_color` (`#rrggbb`), each
    # optional, shown on the hosted pages shown for this workspace.
    branding = models.JSONField(default=dict, blank=True, db_default={})  # old processes insert without it

    class Meta:
        indexes = [models.Index(fields=["created_at", "id"], name="workspace_created")]

    def __str__(self) -> str:
        return self.slug

    @staticmethod
    def normalized_branding(branding: dict[str, str] | None) -> dict[str, str]:
        """`branding` as stored and answered, whoever writes it (the API, the admin): its colour in lower
        case."""
        branding = dict(branding or {})
        if isinstance(branding.get("primary_color"), str):
            branding["primary_color"] = branding["primary_color"].lower()
        return branding


class WorkspaceScopedQuerySet(models.QuerySet):
    """A workspace-scoped record is only reached through a queryset that names the workspace."""

    def in_workspace(self, workspace: Workspace) -> "WorkspaceScopedQuerySet":
        return self.filter(workspace=workspace)


class InWorkspace(Resource):
    """A record of one workspace (deleted with it, docs/api.md#validation), reached through `in_workspace`;
    the workspace's reverse relation is the model's name in the plural (`workspace.projects`)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="%(class)ss")

    objects = WorkspaceScopedQuerySet.as_manager()

    class Meta:
        abstract = True


class AccountInWorkspace(InWorkspace):
    """An account's standing in a workspace (a membership, a credential): it goes with either."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="%(class)ss")

    class Meta:
        abstract = True


def created_index(model: str) -> models.Index:
    """The index a workspace's list in its default order reads."""
    return models.Index(fields=["workspace", "created_at", "id"], name=f"{model}_created")


def unique_name_and_code(model: str) -> list[models.UniqueConstraint]:
    """docs/api.md#validation: a name unique in the workspace, and a code unique there when there is one."""
    return [
        models.UniqueConstraint(fields=["workspace", "name"], name=f"{model}_unique_name"),
        models.UniqueConstraint(
            fields=["workspace", "code"], condition=Q(code__isnull=False), name=f"{model}_unique_code"
        ),
    ]


class Project(InWorkspace):
    name = models.CharField(max_length=255)
    code = models.CharField(max_length=64, null=True, blank=True)
    description = models.TextField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = unique_name_and_code("project")
        indexes = [created_index("project")]

    def __str__(self) -> str:
        return self.name
