"""The operators' admin (docs/operations.md#the-admin-and-management-commands). Every change made here goes
through the service functions the API uses: the same validation (the API's request serializers check the
changed fields), the same events and the same cache purges. Secrets (password hashes, tokens, client secrets)
are never rendered."""

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db import models, transaction
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from iam.http.admin import ServiceAdmin, ViewOnly
from iam.models import AuditEntry, OutboxMessage
from iam.platform import context, outbox

# Payload keys shown as they are; every other value of a non-event message (an e-mail's link carries a
# one-time token) is hidden.
SAFE_PAYLOAD_KEYS = frozenset(
    {"id", "type", "kind", "template", "to", "subject", "workspace_id", "client_id"}
)


def visible_payload(message: OutboxMessage) -> dict:
    if message.topic == "push.event":  # The docs/integration.md#push-events event body: ids only
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
    """What an entry's actor id names: an account, a SCIM token (a directory acts as no account) or a
    service account."""
    if entry.actor_kind == context.SCIM:
        return "scimtoken"
    return "service_account" if entry.actor_kind == context.SERVICE_ACCOUNT else "account"


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
        "via",
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
