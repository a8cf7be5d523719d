"""The operators' admin (CONTRACT 14). Every change made here goes through the service functions the API
uses: the same validation (the API's request serializers check the changed fields), the same events and
the same cache purges. Secrets (password hashes, tokens, client secrets) are never rendered."""

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html
from rest_framework import serializers

from iam import outbox
from iam.api import validation_error
from iam.errors import ApiError
from iam.models import AuditEntry, OutboxMessage

RESOURCE_READONLY = ("id", "created_at", "updated_at")


def check_with(
    form: forms.BaseForm,
    serializer_class: type[serializers.Serializer],
    data: dict[str, Any],
    *,
    partial: bool = True,
) -> None:
    """Runs the API's request serializer over `data` and puts its message (CONTRACT 12's wording) on the
    form field it names, so the admin refuses exactly what the API refuses."""
    serializer = serializer_class(data=data, partial=partial)
    if serializer.is_valid():
        return
    error = validation_error(serializer)
    field = error.field.split(".")[0] if error.field else None
    field = {"permission_ids": "permissions", "role_ids": "roles", "project_id": "project"}.get(field, field)
    form.add_error(field if field in form.fields else None, error.message)


def changed(form: forms.ModelForm, names: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The fields the operator changed, as keyword arguments of an update service (`**changed(...)`)."""
    return {name: form.cleaned_data[name] for name in form.changed_data if name in names}


class ServiceForm(forms.ModelForm):
    """The base of every model form here: `clean()` validates the form's values with the API's request
    serializer (`create_request` on the add form, `update_request` with the record's id and only the
    changed `request_fields` on the change form) and shows its message as a form error, so the admin
    refuses exactly what the API refuses, in the API's words. A form whose request needs other keys
    overrides `request_data`; checks the serializer cannot make (a relation from another workspace) go in
    `clean_relations`, which runs first."""

    create_request: type[serializers.Serializer] | None = None
    update_request: type[serializers.Serializer] | None = None
    request_fields: tuple[str, ...] = ()
    # A create request may omit what the form checks by itself (an account's password).
    create_partial = False
    # Form field -> the update request's key, where the API renames (a project's `code` -> `new_code`).
    renamed_on_update: dict[str, str] = {}

    @property
    def adding(self) -> bool:
        return self.instance._state.adding

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.clean_relations(cleaned)
        request = self.create_request if self.adding else self.update_request
        if request is None:
            return cleaned
        data = self.request_data(cleaned)
        if self.adding:
            check_with(self, request, data, partial=self.create_partial)
        elif data:
            check_with(self, request, {"id": str(self.instance.pk), **data})
        return cleaned

    def clean_relations(self, cleaned: dict[str, Any]) -> None:
        """Checks before the serializer's; none by default."""

    def request_data(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        """The request's keys: on the add form every given field, on the change form the changed ones
        (a field that failed its own validation is left out: its error is already shown)."""
        if self.adding:
            return {name: cleaned[name] for name in self.request_fields if cleaned.get(name) is not None}
        return {
            self.renamed_on_update.get(name, name): cleaned[name]
            for name in self.request_fields
            if name in self.changed_data and name in cleaned
        }


def adopt(obj: models.Model, created: models.Model) -> None:
    """The admin goes on with the instance its form built (log entry, redirect, inlines): make it the row
    the service created."""
    obj.__dict__.update(created.__dict__)


class ServiceAdmin(admin.ModelAdmin):
    """The base of every model admin here. Writes go through three hooks that call the domain's services:
    `create(request, form)` returns the new row, `update(request, current, form)` gets a fresh copy of the
    row (the form has already written its values onto the admin's instance, so the service could not see
    what changed) and `remove(request, obj)`. The form's many-to-many fields are passed to the services
    by those hooks, never saved by the form itself, so a role's permissions change with the same events
    and cache purges as over the API.

    A service's refusal (`ApiError`, say a conflict the form could not foresee) becomes an error message
    instead of a 500; the admin runs each view in a transaction, so nothing of the refused change stays.
    JSON fields start with CONTRACT 12's `schema_version` on the add form."""

    json_initial: dict[str, Any] = {}

    def create(self, request: HttpRequest, form: forms.ModelForm) -> models.Model:
        raise NotImplementedError

    def update(self, request: HttpRequest, current: models.Model, form: forms.ModelForm) -> models.Model:
        raise NotImplementedError

    def remove(self, request: HttpRequest, obj: models.Model) -> None:
        raise NotImplementedError

    def save_model(
        self, request: HttpRequest, obj: models.Model, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            if not form.has_changed():
                return
            self.update(request, type(obj)._default_manager.get(pk=obj.pk), form)
            obj.refresh_from_db()
        else:
            adopt(obj, self.create(request, form))

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets, change: bool) -> None:
        # Not `form.save_m2m()`: the create and update hooks have passed the relations to the services.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        self.remove(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        for obj in queryset:
            self.remove(request, obj)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {**self.json_initial, **super().get_changeform_initial_data(request)}

    def changeform_view(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return super().changeform_view(request, *args, **kwargs)
        except ApiError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return super().delete_view(request, *args, **kwargs)
        except ApiError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def changelist_view(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except ApiError as exc:  # raised by an action
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class ReadOnlyInline(admin.TabularInline):
    """A related list on a parent's page; each row links to its own page, where changes go through the
    services."""

    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


# Payload keys shown as they are; every other value of a non-event message (an e-mail's link carries a
# one-time token) is hidden.
SAFE_PAYLOAD_KEYS = frozenset(
    {"id", "type", "kind", "template", "to", "subject", "workspace_id", "client_id"}
)


def visible_payload(message: OutboxMessage) -> dict:
    if message.topic == "push.event":  # CONTRACT 8's event body: ids only
        return message.payload
    if not isinstance(message.payload, dict):
        return {}
    return {key: value if key in SAFE_PAYLOAD_KEYS else "(hidden)" for key, value in message.payload.items()}


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ServiceAdmin):
    list_display = ("topic", "status", "attempts", "created_at", "next_attempt_at", "processed_at", "id")
    list_filter = ("status", "topic")
    search_fields = ("=id", "topic")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    fields = (
        "id",
        "topic",
        "status",
        "attempts",
        "created_at",
        "next_attempt_at",
        "deadline",
        "processed_at",
        "last_error",
        "payload_shown",
    )
    readonly_fields = fields
    actions = ("retry_messages",)

    @admin.display(description="payload")
    def payload_shown(self, message: OutboxMessage) -> str:
        return format_html("<pre>{}</pre>", json.dumps(visible_payload(message), indent=2, sort_keys=True))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # read-only; the retry action is the one change

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # `manage.py cleanup` drops processed messages after IAM_OUTBOX_RETENTION_DAYS

    @admin.action(description="Retry the selected failed messages")
    def retry_messages(self, request: HttpRequest, queryset) -> None:
        failed = list(queryset.filter(status=OutboxMessage.Status.FAILED))
        with transaction.atomic():
            for message in failed:
                outbox.retry(message)
        self.message_user(request, f"{len(failed)} message(s) queued again.", messages.SUCCESS)


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only (issue 16): entries are append-only; `manage.py cleanup` drops them after
    IAM_AUDIT_RETENTION_DAYS. Filters as `POST /audit/list`'s: exact ids in the search box."""

    list_display = ("occurred_at", "action", "actor_kind", "actor_id", "resource_type", "resource_id", "ip")
    list_filter = ("action", "resource_type", "actor_kind")
    search_fields = ("=actor_id", "=resource_id", "=workspace_id", "=request_id")
    date_hierarchy = "occurred_at"
    ordering = ("-occurred_at",)
    fields = (
        "id",
        "occurred_at",
        "actor_kind",
        "actor_id",
        "action",
        "workspace_id",
        "resource_type",
        "resource_id",
        "changes_shown",
        "ip",
        "user_agent",
        "request_id",
    )
    readonly_fields = fields

    @admin.display(description="changes")
    def changes_shown(self, entry: AuditEntry) -> str:
        return format_html("<pre>{}</pre>", json.dumps(entry.changes, indent=2, sort_keys=True))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
