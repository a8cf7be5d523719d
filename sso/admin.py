"""Admin for SSO connections (docs/api.md#sso): each workspace's connections with their domains, the
domains' verification state and the last login through each connection; for a SAML connection, its IdP
(entity id, single sign-on URL, signing certificates), the service's side (entity id, ACS, the metadata
link) and its recent failed logins from the audit log (docs/saml.md). Connections are changed by their
workspace's admins through the API (the issuer's discovery, the default roles' escalation rule); here an
operator reads them, and vouches for a domain with the "Verify domain" action, as
`manage.py verify_domain` does. The client secret is never shown."""

import base64

from cryptography import x509
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from iam.admin import audit_subject
from iam.http.admin import ReadOnlyInline, ServiceAdmin, ViewOnly
from iam.http.errors import ApiError
from iam.models import AuditEntry

from . import services
from .models import SsoConnection, SsoDomain

RECENT_FAILURES = 20
OIDC_FIELDS = (
    "issuer",
    "client_id",
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "jwks_uri",
)
SAML_FIELDS = (
    "idp_entity_id",
    "idp_sso_url",
    "certificates_shown",
    "sp_entity_id",
    "acs_url",
    "metadata_link",
    "recent_failures",
)


def _certificate_line(body: str) -> tuple[str, str]:
    try:
        certificate = x509.load_der_x509_certificate(base64.b64decode(body))
    except ValueError:
        return ("unreadable certificate", "")
    return (certificate.subject.rfc4514_string(), certificate.not_valid_after_utc.date().isoformat())


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
    list_display = (
        "name",
        "workspace",
        "protocol",
        "provider",
        "enabled",
        "domains_shown",
        "last_login_at",
        "created_at",
    )
    list_filter = ("protocol", "enabled", "workspace")
    search_fields = ("name", "issuer", "idp_entity_id", "domain_rows__domain", "=id")
    list_select_related = ("workspace",)
    ordering = ("workspace__slug", "name")
    head = ("id", "workspace", "name", "protocol", "enabled", "trust_provider_mfa", "roles_shown")
    tail = ("last_login_at", "created_by", "created_at", "updated_at", "tags", "meta")
    fields = (*head, *OIDC_FIELDS, *tail)
    readonly_fields = (*head, *OIDC_FIELDS, *SAML_FIELDS, *tail)
    inlines = (SsoDomainInline,)
    actions = ("verify_domains",)

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("domain_rows", "default_roles")

    def get_fields(self, request: HttpRequest, obj: SsoConnection | None = None) -> tuple[str, ...]:
        saml = obj is not None and obj.protocol == SsoConnection.Protocol.SAML
        return (*self.head, *(SAML_FIELDS if saml else OIDC_FIELDS), *self.tail)

    @admin.display(description="provider")
    def provider(self, connection: SsoConnection) -> str:
        return connection.idp_entity_id or connection.issuer

    @admin.display(description="signing certificates (subject, valid until)")
    def certificates_shown(self, connection: SsoConnection) -> str:
        lines = (_certificate_line(body) for body in connection.idp_certificates)
        return format_html_join(mark_safe("<br>"), "{} ({})", lines) or "-"

    @admin.display(description="SP entity ID")
    def sp_entity_id(self, connection: SsoConnection) -> str:
        return connection.sp_entity_id

    @admin.display(description="ACS URL")
    def acs_url(self, connection: SsoConnection) -> str:
        return connection.acs_url

    @admin.display(description="SP metadata")
    def metadata_link(self, connection: SsoConnection) -> str:
        return format_html('<a href="{}">{}</a>', connection.metadata_url, connection.metadata_url)

    @admin.display(description="recent failed logins")
    def recent_failures(self, connection: SsoConnection) -> str:
        """The latest `sso.login_failed` entries of the connection: when, from where, why."""
        entries = AuditEntry.objects.filter(
            action="sso.login_failed", resource_type="ssoconnection", resource_id=connection.pk
        ).order_by("-occurred_at")[:RECENT_FAILURES]
        lines = (
            (
                entry.occurred_at.isoformat(timespec="seconds"),
                entry.ip or "-",
                entry.changes.get("reason", ""),
            )
            for entry in entries
        )
        return format_html_join(mark_safe("<br>"), "{} from {}: {}", lines) or "none"

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
