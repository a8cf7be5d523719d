"""Admin for workspaces and projects, through their services. A workspace created here gets its owner set
up as over the API (`rbac.services.workspaces.create_workspace`: the `*` permission, the `owner` role and the
operator's membership), and its page shows its projects, roles, permissions and invitations and what it
uses against each quota. The admin is the HTTP tier: it may use the domain tier of any app."""

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin
from django.db.models import Count, Field, ManyToManyField, Max, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from iam.admin import audit_subject
from iam.http.admin import (
    REQUEST_KEYS,
    RESOURCE_READONLY,
    ReadOnlyInline,
    ServiceAdmin,
    ServiceForm,
    api_fields,
)
from rbac.models import Invitation, Membership, Permission, Role
from rbac.services.workspaces import create_workspace

from . import serializers, services
from .models import Project, Workspace

SCHEMA = {"schema_version": "1"}


class InWorkspaceChoices(forms.ModelMultipleChoiceField):
    """A role's permissions, a membership's roles: each labelled with its workspace (names repeat across
    workspaces)."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.workspace.slug}: {obj.name}"


class InWorkspaceForm(ServiceForm):
    """The form of a workspace's record whose relations must be of the same workspace (docs/api.md#answers).
    On the change form the choice lists hold the workspace's own records; on the add form, where the workspace
    is chosen with them, `clean_relations` refuses another's, in the API's words."""

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


class WorkspaceForm(ServiceForm):
    create_request = serializers.WorkspaceCreateRequest
    update_request = serializers.WorkspaceUpdateRequest


class ProjectForm(InWorkspaceForm):
    create_request = serializers.ProjectCreateRequest
    update_request = serializers.ProjectUpdateRequest
    renamed_on_update = {"code": "new_code"}


class ProjectInline(ReadOnlyInline):
    model = Project
    fields = ("name", "code", "created_at")


class RoleInline(ReadOnlyInline):
    model = Role
    fields = ("name", "description", "created_at")


class PermissionInline(ReadOnlyInline):
    model = Permission
    fields = ("name", "code", "description", "created_at")


class InvitationInline(ReadOnlyInline):
    """A workspace's invitations by e-mail, newest first; resend and revoke from the invitations list."""

    model = Invitation
    fields = ("email", "scope", "project", "status", "invited_by", "expires_at", "created_at")
    ordering = ("-created_at",)


# (label, admin changelist, the workspace's reverse relation): the workspace page links to each list,
# filtered to the workspace; by their URL names, so this admin imports none of those apps.
RELATED_LISTS = (
    ("Members", "rbac_membership_changelist", "memberships"),
    ("Clients", "clients_client_changelist", "clients"),
    ("SSO connections", "sso_ssoconnection_changelist", "ssoconnections"),
    ("SCIM tokens", "scim_scimtoken_changelist", "scimtokens"),
)


@admin.register(Workspace)
class WorkspaceAdmin(ServiceAdmin):
    form = WorkspaceForm
    list_display = ("slug", "name", "created_at", "id")
    search_fields = ("name", "slug", "=id")
    ordering = ("slug",)
    fields = api_fields(serializers.WorkspaceSerializer)
    readonly_fields = RESOURCE_READONLY
    # The slug names the workspace in X-Workspace headers; the API does not change it either.
    fixed_on_change = ("slug",)
    inlines = (ProjectInline, RoleInline, PermissionInline, InvitationInline)
    json_initial = {"config": SCHEMA, "meta": SCHEMA}
    update_service = staticmethod(services.update_workspace)
    delete_service = staticmethod(services.delete_workspace)

    def get_fields(self, request: HttpRequest, obj=None):
        fields = super().get_fields(request, obj)
        return fields if obj is None else ("related_lists", *fields, "quota_use")

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if obj is None else (*readonly, "related_lists", "quota_use")

    @admin.display(description="in this workspace")
    def related_lists(self, workspace: Workspace) -> str:
        """Links to the lists of its members, clients, SSO connections and SCIM tokens, each filtered to
        this workspace, with how many each holds."""
        query = urlencode({"workspace__id__exact": workspace.pk})
        return format_html_join(
            " · ",
            '<a href="{}?{}">{} ({})</a>',
            (
                (reverse(f"admin:{changelist}"), query, label, getattr(workspace, related).count())
                for label, changelist, related in RELATED_LISTS
            ),
        )

    def create(self, request: HttpRequest, form: ServiceForm) -> Workspace:
        # docs/api.md#authorization: the creator becomes the owner
        return create_workspace(**form.values(), owner=request.user, actor=request.user)

    @admin.display(description="use against quotas")
    def quota_use(self, workspace: Workspace) -> str:
        """What the workspace holds beside each quota it counts against (docs/api.md#quotas-and-budgets), and
        the largest role and membership beside theirs; operators pass the quotas, so a figure may stand past
        its limit."""
        rows = use_against_quotas(workspace)
        return format_html(
            "<table><tbody>{}</tbody></table>",
            format_html_join(
                "",
                '<tr><th scope="row">{}</th><td>{} / {}</td><td>{}</td></tr>',
                ((what, used, limit, "quota reached" if used >= limit else "") for what, used, limit in rows),
            ),
        )


def use_against_quotas(workspace: Workspace) -> list[tuple[str, int, int]]:
    """(quota, use, limit) of each quota a workspace counts against: its records, its largest role's
    permissions and its largest membership's roles, and the workspaces its creator has made."""
    largest_role = Role.objects.in_workspace(workspace).annotate(n=Count("permissions")).aggregate(m=Max("n"))
    largest_membership = (
        Membership.objects.in_workspace(workspace).annotate(n=Count("roles")).aggregate(m=Max("n"))
    )
    rows = [
        ("projects", Project.objects.in_workspace(workspace).count(), settings.IAM_QUOTA_PROJECTS),
        ("roles", Role.objects.in_workspace(workspace).count(), settings.IAM_QUOTA_ROLES),
        ("permissions", Permission.objects.in_workspace(workspace).count(), settings.IAM_QUOTA_PERMISSIONS),
        ("clients", workspace.clients.count(), settings.IAM_QUOTA_CLIENTS),  # clients/ builds on rbac
        ("permissions per role", largest_role["m"] or 0, settings.IAM_QUOTA_PERMISSIONS_PER_ROLE),
        ("roles per membership", largest_membership["m"] or 0, settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP),
    ]
    if workspace.created_by_id is not None and not workspace.created_by.is_superuser:
        made = Workspace.objects.filter(created_by=workspace.created_by_id).count()
        rows.append((f"workspaces of {workspace.created_by.email}", made, settings.IAM_QUOTA_WORKSPACES))
    return rows


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
    form = ProjectForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(serializers.ProjectSerializer)
    readonly_fields = (*RESOURCE_READONLY, "created_by")
    json_initial = {"config": SCHEMA, "meta": SCHEMA}
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
