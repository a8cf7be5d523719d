from django.db import models
from django.db.models import Q

from iam.models import Resource


class Workspace(Resource):
    name = models.CharField(max_length=255)
    slug = models.SlugField(max_length=63, unique=True)
    description = models.TextField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_at", "id"], name="workspace_created")]

    def __str__(self) -> str:
        return self.slug


class WorkspaceScopedQuerySet(models.QuerySet):
    """STYLE: a workspace-scoped record is only reached through a queryset that names the workspace."""

    def in_workspace(self, workspace: Workspace) -> "WorkspaceScopedQuerySet":
        return self.filter(workspace=workspace)


class Project(Resource):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=255)
    code = models.CharField(max_length=64, null=True, blank=True)
    description = models.TextField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = WorkspaceScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="project_unique_name"),
            models.UniqueConstraint(
                fields=["workspace", "code"], condition=Q(code__isnull=False), name="project_unique_code"
            ),
        ]
        indexes = [models.Index(fields=["workspace", "created_at", "id"], name="project_created")]

    def __str__(self) -> str:
        return self.name
