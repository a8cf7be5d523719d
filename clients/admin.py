"""Admin for clients and their push deliveries (docs/operations.md#the-admin-and-management-commands), through
`clients.services` and `clients.push`: the same validation as the API (its request serializers, the endpoint's
SSRF check), the same events and cache purges.

A client's secret is never rendered from the database (neither `secret_encrypted` nor `secret_digest`).
A new secret (on add, or from the "Regenerate secret" action) is shown once, in the response to the POST
that made it: not in a message, which the message storage would keep in a cookie or the session."""

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from iam.admin import audit_subject
from iam.http.admin import RESOURCE_READONLY, ReadOnlyInline, ServiceAdmin, ServiceForm, ViewOnly, api_fields
from iam.http.errors import ApiError
from tenancy.admin import InWorkspaceAdmin

from . import push, serializers, services
from .models import Client, Delivery, DeliveryAttempt

RECENT_DELIVERIES = 20

SECRETS_PAGE = engines["django"].from_string(
    """{% extends "admin/base_site.html" %}
{% block content %}<div id="content-main">
<p>Copy each secret now: it is shown this once and cannot be read again.</p>
<table id="client-secrets">
<thead><tr><th>client</th><th>workspace</th><th>secret</th></tr></thead>
<tbody>{% for client, secret in secrets %}
<tr><td><a href="{% url 'admin:clients_client_change' client.pk %}">{{ client.name }}</a></td>
<td>{{ client.workspace.slug }}</td><td><code class="client-secret">{{ secret }}</code></td></tr>
{% endfor %}</tbody></table>
<p><a href="{{ next_url }}">Continue</a></p>
</div>{% endblock %}"""
)


class ClientForm(ServiceForm):
    create_request = serializers.ClientCreateRequest  # `ClientAdmin.create` calls `services.create_client`
    update_request = serializers.ClientUpdateRequest
    endpoint = forms.URLField(required=False, max_length=2048, assume_scheme="https", empty_value=None)

    def validate_unique(self) -> None:
        """`clean` says a name is taken in the API's words; the service checks again when it saves."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()  # the API's request serializer first
        workspace = cleaned.get("workspace") or getattr(self.instance, "workspace", None)
        name = cleaned.get("name")
        if workspace is not None and name and not self.has_error("name"):
            taken = Client.objects.in_workspace(workspace).filter(name=name).exclude(pk=self.instance.pk)
            if taken.exists():
                self.add_error("name", services.NAME_CONFLICT)
        if "endpoint" in self.changed_data and not self.has_error("endpoint"):
            try:
                services.check_endpoint(cleaned.get("endpoint"))
            except ApiError as exc:
                self.add_error("endpoint", exc.message)
        return cleaned


def secrets_page(
    admin_site: admin.AdminSite, request: HttpRequest, secrets: list[tuple[Client, str]], next_url: str
) -> HttpResponse:
    context = {
        **admin_site.each_context(request),
        "title": "New client secret" if len(secrets) == 1 else "New client secrets",
        "secrets": secrets,
        "next_url": next_url,
    }
    request.current_app = admin_site.name
    response = TemplateResponse(request, SECRETS_PAGE, context)
    response["Cache-Control"] = "no-store"
    return response


@admin.register(Client)
class ClientAdmin(InWorkspaceAdmin):
    form = ClientForm
    list_display = ("name", "workspace", "endpoint", "created_at")
    search_fields = ("name", "=id")
    fields = (*api_fields(serializers.ClientSerializer), "secret_version", "created_by", "recent_deliveries")
    readonly_fields = (*RESOURCE_READONLY, "secret_version", "created_by", "recent_deliveries")
    actions = ("regenerate_secrets", "send_test_events")
    update_service = staticmethod(services.update_client)
    delete_service = staticmethod(services.delete_client)

    def get_fields(self, request: HttpRequest, obj=None):
        # The add page: what the create request takes, in the workspace chosen by id.
        if obj is None:
            return (
                "workspace",
                *(name for name in self.fields if name in serializers.ClientCreateRequest().fields),
            )
        return self.fields

    @admin.display(description="recent deliveries")
    def recent_deliveries(self, client: Client) -> SafeString | str:
        if client.pk is None:
            return "-"
        rows = client.deliveries.only(
            "id", "event_type", "event_id", "status", "attempts", "created_at", "delivered_at", "client_id"
        ).order_by("-created_at")[:RECENT_DELIVERIES]
        if not rows:
            return "none"
        body = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:clients_delivery_change", args=[row.pk]),
                    row.event_type,
                    row.event_id,
                    row.status,
                    row.attempts,
                    row.created_at.isoformat(timespec="seconds"),
                    row.delivered_at.isoformat(timespec="seconds") if row.delivered_at else "-",
                )
                for row in rows
            ),
        )
        return format_html(
            '<table class="client-deliveries"><thead><tr><th>event</th><th>event id</th><th>status</th>'
            "<th>attempts</th><th>created</th><th>delivered</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}?client={}">all deliveries of this client</a></p>',
            body,
            reverse("admin:clients_delivery_changelist"),
            client.pk,
        )

    def create(self, request: HttpRequest, form: ServiceForm) -> Client:
        client, secret = services.create_client(
            form.cleaned_data["workspace"], **form.values(), actor=request.user
        )
        request._new_client_secret = secret  # for response_add, the one page that shows it
        return client

    def response_add(self, request: HttpRequest, obj: Client, post_url_continue=None) -> HttpResponse:
        secret = getattr(request, "_new_client_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        del request._new_client_secret
        return secrets_page(
            self.admin_site, request, [(obj, secret)], reverse("admin:clients_client_change", args=[obj.pk])
        )

    @admin.action(description="Regenerate secret")
    def regenerate_secrets(self, request: HttpRequest, queryset) -> HttpResponse:
        with transaction.atomic():
            secrets = [
                (client, services.regenerate_secret(client, actor=request.user))
                for client in queryset.select_related("workspace")
            ]
        for client, _ in secrets:
            self.log_change(request, client, [{"changed": {"fields": ["secret"]}}])
        return secrets_page(self.admin_site, request, secrets, reverse("admin:clients_client_changelist"))

    @admin.action(description="Send test event")
    def send_test_events(self, request: HttpRequest, queryset) -> None:
        """A signed `client.test` event to each selected client's endpoint, delivered (and retried) as
        real events are; its delivery appears under the client's recent deliveries."""
        selected = list(queryset.select_related("workspace").order_by("name", "id"))
        reachable = [client for client in selected if client.endpoint]
        with transaction.atomic():
            sent = [(client, services.send_test_event(client, actor=request.user)) for client in reachable]
        for client, delivery in sent:
            self.log_change(request, client, f"Sent test event {delivery.event_id}.")
        if sent:
            links = format_html_join(
                ", ",
                '<a href="{}">{}</a>',
                (
                    (reverse("admin:clients_delivery_change", args=[delivery.pk]), client.name)
                    for client, delivery in sent
                ),
            )
            self.message_user(
                request,
                format_html("Test event sent to {} client(s): {}.", len(sent), links),
                messages.SUCCESS,
            )
        skipped = [client.name for client in selected if not client.endpoint]
        if skipped:
            self.message_user(
                request,
                f"No test event for {len(skipped)} client(s) without an endpoint: {', '.join(skipped)}. "
                "Set the client's endpoint first.",
                messages.ERROR,
            )


class DeliveryAttemptInline(ReadOnlyInline):
    model = DeliveryAttempt
    fields = ("attempted_at", "status_code", "error", "duration_ms")
    show_change_link = False  # attempts have no page of their own


@admin.register(Delivery)
class DeliveryAdmin(ViewOnly, ServiceAdmin):
    """Read-only: the retry action is the one change; `manage.py cleanup` drops finished deliveries after
    IAM_OUTBOX_RETENTION_DAYS."""

    list_display = (
        "event_type",
        "event_id",
        "client",
        "workspace",
        "status",
        "attempts",
        "created_at",
        "delivered_at",
    )
    list_filter = ("status", "event_type", "workspace")
    search_fields = ("=event_id",)
    list_select_related = ("client", "workspace")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    # Not `secret_encrypted`: the secret the delivery was signed with when its client is gone.
    fields = (
        "id",
        "event_type",
        "event_id",
        "client",
        "workspace",
        "endpoint",
        "status",
        "attempts",
        "next_attempt_at",
        "deadline",
        "last_error",
        "created_at",
        "delivered_at",
        "payload_shown",
    )
    readonly_fields = fields
    inlines = (DeliveryAttemptInline,)
    actions = ("retry_deliveries",)

    @admin.display(description="payload")
    def payload_shown(self, delivery: Delivery) -> str:
        return format_html("<pre>{}</pre>", json.dumps(delivery.payload, indent=2, sort_keys=True))

    @admin.action(description="Retry failed deliveries")
    def retry_deliveries(self, request: HttpRequest, queryset) -> None:
        selected = list(queryset)
        failed = [delivery for delivery in selected if delivery.status == Delivery.Status.FAILED]
        with transaction.atomic():
            for delivery in failed:
                push.retry_delivery(delivery)
        self.message_user(request, f"{len(failed)} delivery(ies) queued again.", messages.SUCCESS)
        skipped = len(selected) - len(failed)
        if skipped:
            self.message_user(
                request, f"{skipped} delivery(ies) skipped: only failed ones are retried.", messages.WARNING
            )


audit_subject("client", Client.objects.select_related("workspace"))
