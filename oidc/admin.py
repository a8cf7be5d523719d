"""Admin for the OpenID Provider (docs/oidc.md): each workspace's applications (deleting one stops its
tokens at once) and the consents people gave other workspaces' applications (deleting one revokes it, as
the account's own `Revoke access` does). Applications are registered through the API, which shows a web
application's secret once."""

from django.contrib import admin

from iam.admin import audit_subject
from iam.http.admin import DeleteOnly, ServiceAdmin

from . import services
from .models import Application, Consent


@admin.register(Application)
class ApplicationAdmin(DeleteOnly, ServiceAdmin):
    # Not added here: the API answers a web application's secret once; the admin has nowhere safe to
    # show it.
    list_display = ("name", "workspace", "type", "first_party", "created_at")
    list_filter = ("type", "first_party", "workspace")
    search_fields = ("name", "=id")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    fields = (
        "id",
        "workspace",
        "name",
        "type",
        "first_party",
        "redirect_uris",
        "post_logout_redirect_uris",
        "grant_types",
        "created_by",
        "created_at",
        "updated_at",
        "tags",
        "meta",
    )
    readonly_fields = fields
    delete_service = staticmethod(services.delete_application)


@admin.register(Consent)
class ConsentAdmin(DeleteOnly, ServiceAdmin):  # only the account gives its consent, on the consent page
    list_display = ("account", "application", "application_workspace", "scopes", "created_at", "updated_at")
    list_filter = ("application__workspace",)
    search_fields = ("account__email", "application__name")
    list_select_related = ("account", "application__workspace")
    ordering = ("-created_at",)
    fields = ("id", "account", "application", "scopes", "created_at", "updated_at")
    readonly_fields = fields
    delete_service = staticmethod(services.revoke_consent)

    @admin.display(description="workspace")
    def application_workspace(self, consent: Consent) -> str:
        return str(consent.application.workspace)


# Audit entries name these as the resources of `application.*` and `consent.*`.
audit_subject(
    "application", Application.objects.all(), title=lambda app: f"application {app.name}", search=("name",)
)
audit_subject(
    "consent",
    Consent.objects.select_related("account", "application"),
    title=lambda consent: f"consent of {consent.account} to {consent.application}",
    search=("application__name",),
)
