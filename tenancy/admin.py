"""Admin for workspaces and projects, through `tenancy.services`. Creating a workspace is registered by
`rbac/admin.py` (the owner set-up is RBAC's business), which also adds the roles to a workspace's page."""

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Field, ManyToManyField, QuerySet
from django.http import HttpRequest

from iam.admin import (
    REQUEST_KEYS,
    RESOURCE_READONLY,
    ReadOnlyInline,
    ServiceAdmin,
    ServiceForm,
    api_fields,
    audit_subject,
)

from . import services
from .models import Project, Workspace
from .serializers import (
    ProjectCreateRequest,
    ProjectSerializer,
    ProjectUpdateRequest,
    WorkspaceSerializer,
    WorkspaceUpdateRequest,
)

SCHEMA = {"schema_version": "1"}


class InWorkspaceChoices(forms.ModelMultipleChoiceField):
    """A role's permissions, a membership's roles: each labelled with its workspace (names repeat across
    workspaces)."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.workspace.slug}: {obj.name}"


class InWorkspaceForm(ServiceForm):
    """The form of a workspace's record whose relations must be of the same workspace (CONTRACT 6). On the
    change form the choice lists hold the workspace's own records; on the add form, where the workspace is
    chosen with them, `clean_relations` refuses another's, in the API's words."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.adding:
            for field in self.fields.values():
                if isinstance(field, InWorkspaceChoices):
                    field.queryset = field.queryset.filter(workspace=self.instance.workspace)

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        workspace = cleaned.get("workspace") or (None if self.adding else self.instance.workspace)
        if workspace is None:
            return
        for name, key in REQUEST_KEYS.items():
            value = cleaned.get(name)
            many = isinstance(value, QuerySet)
            records = list(value) if many else [] if value is None else [value]
            # An account belongs to no workspace: only records that carry one are checked.
            if any(getattr(record, "workspace_id", workspace.pk) != workspace.pk for record in records):
                noun = self.fields[name].queryset.model._meta
                what = noun.verbose_name_plural if many else f"a {noun.verbose_name}"
                self.add_error(name, f"{key} must name {what} of this workspace")


class ProjectInline(ReadOnlyInline):
    model = Project
    fields = ("name", "code", "created_at")


class WorkspaceAdmin(ServiceAdmin):
    """Registered by rbac/admin.py, which adds creation and the roles inline."""

    list_display = ("slug", "name", "created_at", "id")
    search_fields = ("name", "slug", "=id")
    ordering = ("slug",)
    fields = api_fields(WorkspaceSerializer)
    readonly_fields = RESOURCE_READONLY
    # The slug names the workspace in X-Workspace headers; the API does not change it either.
    fixed_on_change = ("slug",)
    inlines: tuple = (ProjectInline,)
    json_initial = {"config": SCHEMA, "meta": SCHEMA}
    update_request = WorkspaceUpdateRequest
    update_service = staticmethod(services.update_workspace)
    delete_service = staticmethod(services.delete_workspace)


class InWorkspaceAdmin(ServiceAdmin):
    """A record of one workspace: chosen by id on the add form, fixed after (the API never moves one); its
    relations are the workspace's records (`InWorkspaceForm`), many-to-many ones picked in two lists.
    `create_service` takes the workspace, then the form's `values()` and the operator."""

    form = InWorkspaceForm
    list_filter = ("workspace",)
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    raw_id_fields = ("workspace",)
    readonly_fields = RESOURCE_READONLY
    fixed_on_change = ("workspace",)
    json_initial = {"meta": SCHEMA}
    create_service: Callable[..., Any] | None = None

    def create(self, request: HttpRequest, form: ServiceForm) -> Any:
        assert self.create_service is not None, f"{type(self).__name__} creates nothing"
        return self.create_service(form.cleaned_data["workspace"], **form.values(), actor=request.user)

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs):
        if isinstance(db_field, ManyToManyField):  # no add-another link: a relation is picked, not made
            return InWorkspaceChoices(
                queryset=db_field.related_model.objects.select_related("workspace"),
                required=False,
                widget=admin.widgets.FilteredSelectMultiple(db_field.verbose_name, is_stacked=False),
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_queryset(self, request: HttpRequest):
        many = [field.name for field in self.model._meta.many_to_many if field.name in self.fields]
        return super().get_queryset(request).prefetch_related(*many)  # for the list's names columns


@admin.register(Project)
class ProjectAdmin(InWorkspaceAdmin):
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(ProjectSerializer)
    readonly_fields = (*RESOURCE_READONLY, "created_by")
    json_initial = {"config": SCHEMA, "meta": SCHEMA}
    create_request = ProjectCreateRequest
    update_request = ProjectUpdateRequest
    renamed_on_update = {"code": "new_code"}
    create_service = staticmethod(services.create_project)
    update_service = staticmethod(services.update_project)
    delete_service = staticmethod(services.delete_project)


def workspace_title(workspace: Workspace) -> str:
    return f"{workspace.name} ({workspace.slug})"


audit_subject(
    "workspace",
    Workspace.objects.all(),
    title=workspace_title,
    search=("name", "slug"),
    choices=Workspace.objects.order_by("slug"),
)
audit_subject("project", Project.objects.select_related("workspace"))
