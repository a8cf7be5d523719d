"""Admin for permissions, roles and memberships, written through the request serializers and services
their API endpoints use, each named on its admin: a role's permissions or a membership's roles changed here
purge the workspace's cached grants and record the push event, exactly as over the API. (The workspace
admin, with its roles, permissions and invitations, is tenancy/admin.py's.)"""

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest

from iam.admin import audit_subject
from iam.http.admin import RESOURCE_READONLY, ViewOnly, api_fields
from iam.http.errors import ApiError
from tenancy.admin import InWorkspaceAdmin, InWorkspaceForm

from . import serializers
from .models import Invitation, Membership, Permission, Role, ServiceAccount
from .services import invitations, memberships, permissions, roles, service_accounts


class PermissionForm(InWorkspaceForm):
    create_request = serializers.PermissionCreateRequest
    update_request = serializers.PermissionUpdateRequest


@admin.register(Permission)
class PermissionAdmin(InWorkspaceAdmin):
    form = PermissionForm
    list_display = ("name", "code", "workspace", "created_at", "id")
    search_fields = ("name", "code", "=id", "workspace__slug")
    fields = api_fields(serializers.PermissionSerializer)
    create_service = staticmethod(permissions.create_permission)
    update_service = staticmethod(permissions.update_permission)
    delete_service = staticmethod(permissions.delete_permission)


def names_column(relation: str) -> Callable[[Any, Any], str]:
    """A column of a role's permissions, a membership's roles, by name (prefetched by `InWorkspaceAdmin`
    and the account page's inline)."""

    @admin.display(description=relation)
    def column(model_admin: Any, record: Any) -> str:
        return ", ".join(sorted(related.name for related in getattr(record, relation).all()))

    return column


class RoleForm(InWorkspaceForm):
    create_request = serializers.RoleCreateRequest
    update_request = serializers.RoleUpdateRequest


@admin.register(Role)
class RoleAdmin(InWorkspaceAdmin):
    form = RoleForm
    list_display = ("name", "workspace", "permission_names", "created_at", "id")
    permission_names = names_column("permissions")
    search_fields = ("name", "=id", "workspace__slug")
    fields = api_fields(serializers.RoleSerializer)
    create_service = staticmethod(roles.create_role)
    update_service = staticmethod(roles.update_role)
    delete_service = staticmethod(roles.delete_role)


# What a membership's title reads (`Membership.__str__`), in one query and one for the roles.
TITLED_MEMBERSHIPS = ("account", "workspace", "project")


class MembershipForm(InWorkspaceForm):
    create_request = serializers.MembershipCreateRequest
    update_request = serializers.MembershipUpdateRequest


@admin.register(Membership)
class MembershipAdmin(InWorkspaceAdmin):
    """Each membership is titled `alice@example.com in Acme (admin, owner)`."""

    form = MembershipForm

    list_display = ("__str__", "account", "workspace", "project", "scope", "status", "created_at")
    list_filter = ("status", "scope", "workspace")
    search_fields = ("account__email", "account__name", "workspace__slug", "workspace__name", "=id")
    list_select_related = TITLED_MEMBERSHIPS
    ordering = ("workspace__slug", "account__email")
    raw_id_fields = ("account", "workspace", "project")
    fields = api_fields(serializers.MembershipSerializer)
    readonly_fields = (*RESOURCE_READONLY, "accepted_at")
    fixed_on_change = ("account", "workspace")
    create_service = staticmethod(memberships.create_membership)
    update_service = staticmethod(memberships.update_membership)
    delete_service = staticmethod(memberships.delete_membership)


audit_subject("permission", Permission.objects.all())
audit_subject("role", Role.objects.all())
audit_subject(
    "membership",
    Membership.objects.select_related(*TITLED_MEMBERSHIPS).prefetch_related("roles"),
    search=("account__email",),  # an entry about a membership is about its account
)
audit_subject("invitation", Invitation.objects.select_related("workspace"), search=("email",))


@admin.register(Invitation)
class InvitationAdmin(ViewOnly, admin.ModelAdmin):
    """Invitations by e-mail, per workspace (filter by workspace and status, search by address). Resend
    and revoke call the services the API calls: each is recorded with the operator as the actor."""

    list_display = ("email", "workspace", "scope", "project", "status_shown", "invited_by", "expires_at")
    list_filter = ("status", "scope", "workspace")
    search_fields = ("email", "workspace__slug", "=id")
    list_select_related = ("workspace", "project", "invited_by")
    ordering = ("-created_at",)
    fields = (
        "id",
        "workspace",
        "email",
        "scope",
        "project",
        "role_names",
        "status_shown",
        "invited_by",
        "membership",
        "created_at",
        "expires_at",
        "accepted_at",
    )
    readonly_fields = fields
    role_names = names_column("roles")
    actions = ("resend_invitations", "revoke_invitations")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("roles")

    @admin.display(description="status")
    def status_shown(self, invitation: Invitation) -> str:
        return invitation.current_status

    @admin.action(description="Resend (valid 7 more days)")
    def resend_invitations(self, request: HttpRequest, queryset) -> None:
        self._each(request, queryset, invitations.resend_invitation, "resent")

    @admin.action(description="Revoke")
    def revoke_invitations(self, request: HttpRequest, queryset) -> None:
        self._each(request, queryset, invitations.revoke_invitation, "revoked")

    def _each(self, request: HttpRequest, queryset, service: Callable[..., Any], done: str) -> None:
        changed = skipped = 0
        for invitation in queryset:
            try:
                with transaction.atomic():
                    service(invitation, actor=request.user)
            except ApiError:
                skipped += 1
                continue
            changed += 1
            self.log_change(request, invitation, done)
        self.message_user(request, f"{changed} invitation(s) {done}.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request, f"{skipped} invitation(s) skipped: only pending ones are {done}.", messages.WARNING
            )


class ServiceAccountForm(InWorkspaceForm):
    create_request = serializers.ServiceAccountCreateRequest
    update_request = serializers.ServiceAccountUpdateRequest


@admin.register(ServiceAccount)
class ServiceAccountAdmin(InWorkspaceAdmin):
    """A workspace's service accounts (docs/api.md#service-accounts), written through the services the API
    calls; "Revoke every key" revokes each live key as `service-accounts/revoke-key` does."""

    form = ServiceAccountForm
    list_display = ("name", "workspace", "enabled", "role_names", "last_used_at", "created_at", "id")
    list_filter = ("enabled",)
    role_names = names_column("roles")
    search_fields = ("name", "=id", "workspace__slug")
    fields = (
        *(name for name in api_fields(serializers.ServiceAccountSerializer) if name != "keys"),
        "keys_shown",
    )
    readonly_fields = (*RESOURCE_READONLY, "last_used_at", "keys_shown")
    create_service = staticmethod(service_accounts.create_service_account)
    update_service = staticmethod(service_accounts.update_service_account)
    delete_service = staticmethod(service_accounts.delete_service_account)
    actions = ("revoke_every_key",)

    @admin.display(description="keys")
    def keys_shown(self, service_account: ServiceAccount) -> str:
        """Its keys, never a key itself: made through the API, which answers each once
        (docs/api.md#api-keys)."""
        if service_account.pk is None:
            return "-"
        keys = service_account.keys.order_by("created_at")
        return "; ".join(f"{key} {'revoked' if key.revoked_at else 'live'}" for key in keys) or "-"

    @admin.action(description="Revoke every key")
    def revoke_every_key(self, request: HttpRequest, queryset) -> None:
        revoked = 0
        for service_account in queryset:
            with transaction.atomic():
                live = service_account.keys.filter(revoked_at__isnull=True)
                for key_id in live.values_list("pk", flat=True):
                    service_accounts.revoke_key(service_account, key_id, actor=request.user)
                    revoked += 1
        self.message_user(request, f"{revoked} key(s) revoked.", messages.SUCCESS)


audit_subject("service_account", ServiceAccount.objects.select_related("workspace"))
