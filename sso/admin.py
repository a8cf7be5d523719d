"""Admin for SSO connections (docs/api.md#sso): each workspace's connections with their domains, the
domains' verification state and the last login through each connection. Connections are changed by
their workspace's admins through the API (the issuer's discovery, the default roles' escalation rule);
here an operator reads them, and vouches for a domain with the "Verify domain" action, as
`manage.py verify_domain` does. The client secret is never shown."""

from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest
from django.utils.html import format_html_join

from iam.admin import audit_subject
from iam.http.admin import ReadOnlyInline, ServiceAdmin, ViewOnly
from iam.http.errors import ApiError

from . import services
from .models import SsoConnection, SsoDomain


class SsoDomainInline(ReadOnlyInline):
    model = SsoDomain
    fields = ("domain", "verified", "verified_by", "verified_at", "verification_token")
    readonly_fields = fields

    @admin.display(boolean=True, description="verified")
    def verified(self, row: SsoDomain) -> bool:
        return row.verified


def _verify(admin_: admin.ModelAdmin, request: HttpRequest, rows: list[SsoDomain]) -> None:
    done, refused = 0, []
    for row in rows:
        if row.verified:
            continue
        try:
            with transaction.atomic():
                services.verify_domain(
                    row.connection, row.domain, actor=request.user, by=services.BY_OPERATOR
                )
            done += 1
        except ApiError as exc:
            refused.append(f"{exc.message}: {row.domain}")
    admin_.message_user(request, f"{done} domain(s) verified.", messages.SUCCESS)
    for message in refused:
        admin_.message_user(request, message, messages.ERROR)


@admin.register(SsoConnection)
class SsoConnectionAdmin(ViewOnly, ServiceAdmin):
    list_display = ("name", "workspace", "issuer", "enabled", "domains_shown", "last_login_at", "created_at")
    list_filter = ("enabled", "workspace")
    search_fields = ("name", "issuer", "domain_rows__domain", "=id")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    fields = (
        "id",
        "workspace",
        "name",
        "issuer",
        "client_id",
        "enabled",
        "trust_provider_mfa",
        "roles_shown",
        "authorization_endpoint",
        "token_endpoint",
        "userinfo_endpoint",
        "jwks_uri",
        "last_login_at",
        "created_by",
        "created_at",
        "updated_at",
        "tags",
        "meta",
    )
    readonly_fields = fields
    inlines = (SsoDomainInline,)
    actions = ("verify_domains",)

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("domain_rows", "default_roles")

    @admin.display(description="domains")
    def domains_shown(self, connection: SsoConnection) -> str:
        return format_html_join(
            ", ",
            "{} ({})",
            ((row.domain, "verified" if row.verified else "pending") for row in connection.domain_rows.all()),
        )

    @admin.display(description="default roles")
    def roles_shown(self, connection: SsoConnection) -> str:
        return ", ".join(role.name for role in connection.default_roles.all()) or "-"

    @admin.action(description="Verify every pending domain (operator)")
    def verify_domains(self, request: HttpRequest, queryset) -> None:
        rows = SsoDomain.objects.filter(connection__in=queryset).select_related("connection")
        _verify(self, request, list(rows))


@admin.register(SsoDomain)
class SsoDomainAdmin(ViewOnly, ServiceAdmin):
    list_display = (
        "domain",
        "workspace",
        "connection",
        "verified",
        "verified_by",
        "verified_at",
        "last_login",
    )
    list_filter = ("verified_by", "workspace")
    search_fields = ("domain",)
    list_select_related = ("workspace", "connection")
    ordering = ("domain",)
    fields = (
        "domain",
        "workspace",
        "connection",
        "verified_by",
        "verified_at",
        "verification_token",
        "created_at",
    )
    readonly_fields = fields
    actions = ("verify_domains",)

    @admin.display(boolean=True, description="verified")
    def verified(self, row: SsoDomain) -> bool:
        return row.verified

    @admin.display(description="last login through the connection")
    def last_login(self, row: SsoDomain):
        return row.connection.last_login_at

    @admin.action(description="Verify domain (operator)")
    def verify_domains(self, request: HttpRequest, queryset) -> None:
        _verify(self, request, list(queryset.select_related("connection")))


audit_subject("ssoconnection", SsoConnection.objects.select_related("workspace"), search=("name", "issuer"))
