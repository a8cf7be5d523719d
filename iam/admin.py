"""The operators' admin (CONTRACT 14). Every change made here goes through the service functions the API
uses: the same validation (the API's request serializers check the changed fields), the same events and
the same cache purges. Secrets (password hashes, tokens, client secrets) are never rendered."""

import functools
import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from rest_framework import serializers

from iam import context, outbox
from iam.api import validation_error
from iam.errors import ApiError
from iam.models import AuditEntry, OutboxMessage

RESOURCE_READONLY = ("id", "created_at", "updated_at")
# Form field -> the API request's key, where they differ: a relation is sent by its id.
REQUEST_KEYS = {
    "account": "account_id",
    "project": "project_id",
    "permissions": "permission_ids",
    "roles": "role_ids",
}
FORM_FIELDS = {key: name for name, key in REQUEST_KEYS.items()}


def api_fields(serializer: type[serializers.ModelSerializer]) -> tuple[str, ...]:
    """The fields an API serializer shows, as the admin names them (`workspace_id` is the `workspace`
    relation): the admin lists what the API lists, from one source."""
    opts = serializer.Meta.model._meta
    return tuple(dict.fromkeys(opts.get_field(name).name for name in serializer.Meta.fields))


def request_value(value: Any) -> Any:
    """A form's cleaned value as the API receives it: a record by its id."""
    if isinstance(value, models.Model):
        return str(value.pk)
    if isinstance(value, models.QuerySet):
        return [str(record.pk) for record in value]
    return value


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
    field = FORM_FIELDS.get(field, field)
    if field in form.errors:
        return  # the form's own message stands (a field left out as failed is not "required" again)
    form.add_error(field if field in form.fields else None, error.message)


class ServiceForm(forms.ModelForm):
    """The base of every model form here: its fields are the admin's (derived from the API serializer).
    Each admin's form is a subclass that names the API requests it checks (`ProjectForm.create_request`,
    ...), so the admin refuses what the API refuses.

    `clean()` validates the form's values with the API's request serializer (`create_request` on the add
    form, `update_request` with the record's id and only the changed fields on the change form) and shows
    its message as a form error, so the admin refuses exactly what the API refuses, in the API's words.
    A form field goes to the request when the request takes it (under its `REQUEST_KEYS` name). Checks the
    serializer cannot make (a relation from another workspace) go in `clean_relations`, which runs first.
    `values()` and `changes()` are then the keyword arguments of the create and update services."""

    create_request: type[serializers.Serializer] | None = None
    update_request: type[serializers.Serializer] | None = None
    # A create request may omit what the form checks by itself (an account's password).
    create_partial = False
    # Form field -> the update request's and service's key, where the API renames (`code` -> `new_code`).
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

    def request_keys(self) -> dict[str, str]:
        """The form's fields that the request (create or update) takes: form field -> request key."""
        request = self.create_request if self.adding else self.update_request
        taken = request().fields if request else {}
        renamed = {} if self.adding else self.renamed_on_update
        keys = {name: renamed.get(name, REQUEST_KEYS.get(name, name)) for name in self.fields}
        return {name: key for name, key in keys.items() if key in taken}

    def sent(self, cleaned: dict[str, Any]) -> list[str]:
        """The fields the request carries: on the add form every given one, on the change form the changed
        ones (a field that failed its own validation is left out: its error is already shown)."""
        if self.adding:
            return [name for name in self.request_keys() if cleaned.get(name) not in (None, "")]
        return [name for name in self.request_keys() if name in self.changed_data and name in cleaned]

    def request_data(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        keys = self.request_keys()
        return {keys[name]: request_value(cleaned[name]) for name in self.sent(cleaned)}

    def service_arguments(self, names: list[str]) -> dict[str, Any]:
        renamed = {} if self.adding else self.renamed_on_update
        arguments = {}
        for name in names:
            value = self.cleaned_data[name]
            arguments[renamed.get(name, name)] = list(value) if isinstance(value, models.QuerySet) else value
        return arguments

    def values(self) -> dict[str, Any]:
        """The create service's keyword arguments: every field of the create request."""
        return self.service_arguments(list(self.request_keys()))

    def changes(self) -> dict[str, Any]:
        """The update service's keyword arguments: the changed fields of the update request (a relation
        that did not change is not passed, so the service leaves it)."""
        return self.service_arguments(self.sent(self.cleaned_data))


def adopt(obj: models.Model, created: models.Model) -> None:
    """The admin goes on with the instance its form built (log entry, redirect, inlines): make it the row
    the service created."""
    obj.__dict__.update(created.__dict__)


def refusal_shown(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A service's refusal (`ApiError`, say a conflict the form could not foresee, or one raised by an
    action) becomes an error message instead of a 500; the admin runs each view in a transaction, so
    nothing of the refused change stays."""

    @functools.wraps(view)
    def shown(admin_: "ServiceAdmin", request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(admin_, request, *args, **kwargs)
        except ApiError as exc:
            admin_.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    return shown


class ServiceAdmin(admin.ModelAdmin):
    """The base of every model admin here. Writes go through three hooks that call the domain's services:
    `create(request, form)` returns the new row, `update(request, current, form)` gets a fresh copy of the
    row (the form has already written its values onto the admin's instance, so the service could not see
    what changed) and `remove(request, obj)`. The form's many-to-many fields are passed to the services
    by those hooks, never saved by the form itself, so a role's permissions change with the same events
    and cache purges as over the API. A service's refusal is a message (`refusal_shown`).

    Its `form` is a `ServiceForm` subclass that names the API requests it checks (`create_request`,
    `update_request`); `add_form` is the add page's form where it differs (as in Django's `UserAdmin`);
    the add page shows no inlines (they list a saved record's relations). `fixed_on_change` are fields
    set on creation and read-only after. JSON fields start with CONTRACT 12's `schema_version` on the add
    form."""

    form = ServiceForm
    add_form: type[forms.ModelForm] | None = None
    fixed_on_change: tuple[str, ...] = ()
    json_initial: dict[str, Any] = {}
    # The services the hooks call by default (`staticmethod(services.update_project)`): the update
    # service with the form's `changes()`, the delete service with the record, each with the operator.
    update_service: Callable[..., models.Model] | None = None
    delete_service: Callable[..., Any] | None = None

    def create(self, request: HttpRequest, form: ServiceForm) -> models.Model:
        raise NotImplementedError

    def update(self, request: HttpRequest, current: models.Model, form: ServiceForm) -> models.Model:
        assert self.update_service is not None, f"{type(self).__name__} changes nothing"
        return self.update_service(current, **form.changes(), actor=request.user)

    def remove(self, request: HttpRequest, obj: models.Model) -> None:
        assert self.delete_service is not None, f"{type(self).__name__} deletes nothing"
        self.delete_service(obj, actor=request.user)

    def get_form(self, request: HttpRequest, obj=None, **kwargs):
        if obj is None and self.add_form is not None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if obj is None else (*readonly, *self.fixed_on_change)

    def get_inlines(self, request: HttpRequest, obj=None):
        return () if obj is None else super().get_inlines(request, obj)

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

    changeform_view = refusal_shown(admin.ModelAdmin.changeform_view)
    delete_view = refusal_shown(admin.ModelAdmin.delete_view)
    changelist_view = refusal_shown(admin.ModelAdmin.changelist_view)


class ViewOnly:
    """An admin of records the service keeps by itself: listed and shown, never added, changed or deleted
    here (an action may be the one change)."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ReadOnlyInline(ViewOnly, admin.TabularInline):
    """A related list on a parent's page; each row links to its own page, where changes go through the
    services."""

    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.fields  # every one: nothing is edited here


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
class OutboxMessageAdmin(ViewOnly, ServiceAdmin):
    """Read-only: the retry action is the one change; `manage.py cleanup` drops processed messages after
    IAM_OUTBOX_RETENTION_DAYS."""

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

    @admin.action(description="Retry the selected failed messages")
    def retry_messages(self, request: HttpRequest, queryset) -> None:
        failed = list(queryset.filter(status=OutboxMessage.Status.FAILED))
        with transaction.atomic():
            for message in failed:
                outbox.retry(message)
        self.message_user(request, f"{len(failed)} message(s) queued again.", messages.SUCCESS)


class AuditSubject(NamedTuple):
    """How the audit admin names the records of one `resource_type`: `records` selects (and prefetches)
    what `title` reads; `search` are the lookups the search box matches (`icontains`)."""

    records: models.QuerySet
    title: Callable[[Any], str]
    search: tuple[str, ...]
    choices: models.QuerySet | None


# resource_type -> its subject. Entries hold plain UUIDs and `iam` imports no app, so each app's admin
# names its own records (`audit_subject("project", ...)`): the set is open (a new resource type names
# itself where its admin is). "account" also names the actors, "workspace" the workspaces.
AUDIT_SUBJECTS: dict[str, AuditSubject] = {}
FILTER_CHOICES = 50  # a filter lists this many at most; each cell's link filters by any value


def audit_subject(
    resource_type: str,
    records: models.QuerySet,
    *,
    title: Callable[[Any], str] = str,
    search: tuple[str, ...] = (),
    choices: models.QuerySet | None = None,
) -> None:
    """Registers how audit entries name a record of `resource_type`; `choices` (for "account" and
    "workspace") are what the actor and workspace filters list."""
    AUDIT_SUBJECTS[resource_type] = AuditSubject(records, title, search, choices)


Named = dict[tuple[str, Any], Any]


def name_subjects(entries: Iterable[AuditEntry]) -> None:
    """Loads the actors, workspaces and resources of `entries` with one query per resource type present
    (a fixed number, whatever the number of entries) and hands each entry the records found
    (`entry.named`); a record deleted since is not found, and its entry shows the id."""
    entries = list(entries)
    wanted: dict[str, set] = defaultdict(set)
    for entry in entries:
        for resource_type, pk in subjects_of(entry):
            wanted[resource_type].add(pk)
    named: Named = {}
    for resource_type, pks in wanted.items():
        subject = AUDIT_SUBJECTS.get(resource_type)
        if subject is None:
            continue
        for record in subject.records.filter(pk__in=pks):
            named[resource_type, record.pk] = record
    for entry in entries:
        entry.named = named


def actor_type(entry: AuditEntry) -> str:
    """What an entry's actor id names: an account, or a SCIM token (a directory acts as no account)."""
    return "scimtoken" if entry.actor_kind == context.SCIM else "account"


def subjects_of(entry: AuditEntry) -> list[tuple[str, Any]]:
    found = [(actor_type(entry), entry.actor_id), ("workspace", entry.workspace_id)]
    found.append((entry.resource_type, entry.resource_id))
    return [(resource_type, pk) for resource_type, pk in found if pk is not None]


def subject_of(entry: AuditEntry, resource_type: str, pk: Any) -> Any:
    if not hasattr(entry, "named"):  # the change page: one entry, named on demand
        name_subjects([entry])
    return entry.named.get((resource_type, pk))


def subject_title(resource_type: str, record: Any) -> str:
    return AUDIT_SUBJECTS[resource_type].title(record)


def change_url(record: models.Model) -> str | None:
    opts = record._meta
    try:
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[record.pk])
    except NoReverseMatch:
        return None


def subject_cell(
    entry: AuditEntry, resource_type: str, pk: Any, *, filter_by: str | None, with_id: bool = False
) -> str:
    """The record's title (`with_id`: and its id beneath), or its id when it is gone, linked to its admin
    page (the change page) or to the list of entries filtered by it (`filter_by`, the changelist)."""
    if pk is None:
        return "-"
    if resource_type not in AUDIT_SUBJECTS:  # a type no admin names: its id
        return str(pk)
    record = subject_of(entry, resource_type, pk)
    text = subject_title(resource_type, record) if record is not None else f"{pk} (gone)"
    if filter_by is not None:
        return format_html('<a href="?{}">{}</a>', urlencode({filter_by: str(pk)}), text)
    url = change_url(record) if record is not None else None
    cell = format_html('<a href="{}">{}</a>', url, text) if url else text
    return format_html("{}<br><small>{}</small>", cell, pk) if with_id and record is not None else cell


def as_uuid(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value).strip())
    except ValueError:
        return None


class SubjectFilter(admin.SimpleListFilter):
    """Entries of one actor or workspace, chosen from the subject's `choices` or by any id (each cell of
    the list links to its filter); an id that is not one selects nothing."""

    field: str
    resource_type: str

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        subject = AUDIT_SUBJECTS.get(self.resource_type)
        if subject is None:
            return []
        records = list(subject.choices[:FILTER_CHOICES]) if subject.choices is not None else []
        selected = as_uuid(self.value())
        if selected is not None and selected not in {record.pk for record in records}:
            records += list(subject.records.filter(pk=selected))  # the one a cell's link chose
        return [(str(record.pk), subject.title(record)) for record in records]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        if self.value() is None:
            return queryset
        selected = as_uuid(self.value())
        return queryset.filter(**{self.field: selected}) if selected is not None else queryset.none()


class ActorFilter(SubjectFilter):
    title = "actor"
    parameter_name = "actor"
    field = "actor_id"
    resource_type = "account"


class WorkspaceFilter(SubjectFilter):
    title = "workspace"
    parameter_name = "workspace"
    field = "workspace_id"
    resource_type = "workspace"


class AuditChangeList(ChangeList):
    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        name_subjects(self.result_list)  # evaluates the page's queryset, which keeps its rows


@admin.register(AuditEntry)
class AuditEntryAdmin(ViewOnly, admin.ModelAdmin):
    """Read-only: entries are append-only; `manage.py cleanup` drops them after IAM_AUDIT_RETENTION_DAYS.
    Actors, workspaces and resources are shown by e-mail, name and title (`AUDIT_SUBJECTS`, one query per
    resource type on a page), the record changed with its id too. The search box matches an entry's ids,
    an actor's e-mail, the e-mail of the account an entry is about, a workspace's name or slug."""

    list_display = (
        "occurred_at",
        "action",
        "actor_shown",
        "actor_kind",
        "workspace_shown",
        "resource_type",
        "resource_shown",
        "ip",
    )
    list_filter = (WorkspaceFilter, ActorFilter, "action", "resource_type", "actor_kind")
    # Shows the search box; `get_search_results` matches these ids and the subjects' names.
    search_fields = ("=id", "=actor_id", "=resource_id", "=workspace_id", "=request_id")
    search_help_text = "An e-mail, a workspace's name or slug, or an id."
    date_hierarchy = "occurred_at"
    ordering = ("-occurred_at",)
    show_full_result_count = False  # a count of the whole log on every page is a scan of it
    fields = (
        "id",
        "occurred_at",
        "actor_kind",
        "actor_id",
        "actor_title",
        "action",
        "workspace_id",
        "workspace_title",
        "resource_type",
        "resource_id",
        "resource_title",
        "changes_shown",
        "ip",
        "user_agent",
        "request_id",
    )
    readonly_fields = fields

    def get_changelist(self, request: HttpRequest, **kwargs) -> type[ChangeList]:
        return AuditChangeList

    def get_search_results(self, request: HttpRequest, queryset: models.QuerySet, search_term: str):
        term = search_term.strip()
        if not term:
            return queryset, False
        matches = models.Q(request_id=term)
        pk = as_uuid(term)
        if pk is not None:
            matches |= models.Q(id=pk) | models.Q(actor_id=pk) | models.Q(resource_id=pk)
            matches |= models.Q(workspace_id=pk)
        for resource_type, subject in AUDIT_SUBJECTS.items():
            if not subject.search:
                continue
            found = models.Q()
            for lookup in subject.search:
                found |= models.Q(**{f"{lookup}__icontains": term})
            pks = subject.records.model._default_manager.filter(found).values("pk")
            matches |= models.Q(resource_type=resource_type, resource_id__in=pks)
            if resource_type == "account":
                matches |= models.Q(actor_id__in=pks)
            elif resource_type == "workspace":
                matches |= models.Q(workspace_id__in=pks)
        return queryset.filter(matches), False

    @admin.display(description="actor", ordering="actor_id")
    def actor_shown(self, entry: AuditEntry) -> str:
        return subject_cell(entry, actor_type(entry), entry.actor_id, filter_by="actor")

    @admin.display(description="workspace", ordering="workspace_id")
    def workspace_shown(self, entry: AuditEntry) -> str:
        return subject_cell(entry, "workspace", entry.workspace_id, filter_by="workspace")

    @admin.display(description="resource")
    def resource_shown(self, entry: AuditEntry) -> str:
        return subject_cell(entry, entry.resource_type, entry.resource_id, filter_by=None, with_id=True)

    @admin.display(description="actor")
    def actor_title(self, entry: AuditEntry) -> str:
        return subject_cell(entry, actor_type(entry), entry.actor_id, filter_by=None)

    @admin.display(description="workspace")
    def workspace_title(self, entry: AuditEntry) -> str:
        return subject_cell(entry, "workspace", entry.workspace_id, filter_by=None)

    @admin.display(description="resource")
    def resource_title(self, entry: AuditEntry) -> str:
        return subject_cell(entry, entry.resource_type, entry.resource_id, filter_by=None)

    @admin.display(description="changes")
    def changes_shown(self, entry: AuditEntry) -> str:
        return format_html("<pre>{}</pre>", json.dumps(entry.changes, indent=2, sort_keys=True))


audit_subject("outbox_message", OutboxMessage.objects.all())
