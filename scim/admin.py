"""Admin for SCIM provisioning: each workspace's SCIM tokens (when each was last used; deleting one
refuses its directory at once) and the last requests of the workspaces' directories with their outcome,
so an operator can see why a directory's sync fails (the status, RFC 7644's `scimType` and the error's
detail; never a body or a token). Tokens are created by the workspace's admins through the API, which
shows the token once."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from iam.admin import audit_subject
from iam.http.admin import DeleteOnly, ServiceAdmin, ViewOnly

from . import services
from .models import ScimRequest, ScimToken


@admin.register(ScimToken)
class ScimTokenAdmin(DeleteOnly, ServiceAdmin):
    # Not added here: the API answers the token once; the admin would have nowhere safe to show it.
    list_display = ("name", "workspace", "created_by", "created_at", "last_used_at", "requests")
    list_filter = ("workspace",)
    search_fields = ("name", "=id")
    list_select_related = ("workspace", "created_by")
    ordering = ("workspace__slug", "name")
    fields = ("id", "workspace", "name", "created_by", "created_at", "last_used_at")
    readonly_fields = fields
    delete_service = staticmethod(services.delete_token)

    @admin.display(description="requests")
    def requests(self, token: ScimToken) -> str:
        url = reverse("admin:scim_scimrequest_changelist") + f"?token__id__exact={token.pk}"
        return format_html('<a href="{}">last requests</a>', url)


# Audit entries name a token as the resource of `scimtoken.*` and as the actor of a directory's changes.
audit_subject(
    "scimtoken", ScimToken.objects.all(), title=lambda token: f"SCIM token {token.name}", search=("name",)
)


class OutcomeFilter(admin.SimpleListFilter):
    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request, model_admin):
        return (("ok", "succeeded"), ("refused", "refused (4xx)"), ("failed", "failed (5xx)"))

    def queryset(self, request, queryset):
        ranges = {"ok": (0, 399), "refused": (400, 499), "failed": (500, 599)}
        if self.value() in ranges:
            low, high = ranges[self.value()]
            return queryset.filter(status__gte=low, status__lte=high)
        return queryset


@admin.register(ScimRequest)
class ScimRequestAdmin(ViewOnly, ServiceAdmin):
    list_display = ("occurred_at", "workspace", "token", "method", "path", "status", "scim_type", "detail")
    list_filter = (OutcomeFilter, "method", "scim_type", "workspace")
    search_fields = ("path", "detail")
    list_select_related = ("workspace", "token")
    ordering = ("-occurred_at",)
    fields = (
        "occurred_at",
        "workspace",
        "token",
        "method",
        "path",
        "status",
        "scim_type",
        "detail",
        "duration_ms",
    )
    readonly_fields = fields
    show_full_result_count = False  # the log may be long: no count(*) of all of it
