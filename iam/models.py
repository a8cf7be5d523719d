import uuid

from django.db import models
from django.utils import timezone


class Resource(models.Model):
    """What every API resource has: a UUID, tags, meta and timestamps."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tags = models.JSONField(default=list, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class OutboxMessage(models.Model):
    """Work owed by a committed change (an e-mail, a push delivery), written in the change's transaction
    and carried out after commit by a Celery worker; the beat sweeper re-dispatches what a broker or worker
    outage left behind (see iam/platform/outbox.py)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    topic = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    deadline = models.DateTimeField()
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="outbox_due"),
            models.Index(fields=["topic", "created_at"], name="outbox_topic"),
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.id} ({self.status})"


class Event(models.Model):
    """The event log that `POST /clients/events` reads: every push event (docs/integration.md#push-events)
    once per workspace, written by `iam.platform.events.emit` in the change's transaction, kept
    `IAM_EVENT_RETENTION_DAYS`.

    `xid` is the writing transaction's id on PostgreSQL (`pg_current_xact_id()`), 0 elsewhere. A reader
    is served only rows whose `xid` is below the oldest transaction still running, in (`xid`, `id`)
    order: every transaction that could still add a row before such a position has finished, so a cursor
    never skips an event that commits late (see clients/catchup.py). On SQLite the single writer makes
    `id` order the commit order."""

    id = models.BigAutoField(primary_key=True)
    event_id = models.UUIDField()
    workspace_id = models.UUIDField()  # no foreign key: `workspace.deleted` outlives its workspace
    payload = models.JSONField()
    xid = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["workspace_id", "xid", "id"], name="event_position"),
            # a client of the root workspace reads every workspace's events (clients/catchup.py)
            models.Index(fields=["xid", "id"], name="event_position_all"),
            models.Index(fields=["created_at"], name="event_created"),
        ]

    def __str__(self) -> str:
        return f"{self.payload.get('type')} {self.event_id} in {self.workspace_id}"


class AuditEntry(models.Model):
    """One change, recorded in the change's transaction by `iam.platform.audit.record`. Append-only: nothing
    updates or deletes an entry but `manage.py cleanup` after IAM_AUDIT_RETENTION_DAYS. Actor, workspace
    and resource are plain UUIDs, not foreign keys: the entry outlives them, and `iam` imports no app."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    occurred_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_id = models.UUIDField("actor ID", null=True, blank=True)
    actor_kind = models.CharField(max_length=16)
    # A service account's act: the API key or the application it authenticated with (docs/api.md#audit)
    via = models.JSONField(null=True, blank=True)
    action = models.CharField(max_length=64)
    workspace_id = models.UUIDField("workspace ID", null=True, blank=True)
    resource_type = models.CharField(max_length=64)
    resource_id = models.UUIDField("resource ID", null=True, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField("IP address", null=True, blank=True)
    user_agent = models.CharField(max_length=512, blank=True, default="")
    request_id = models.CharField("request ID", max_length=128, blank=True, default="")

    class Meta:
        verbose_name = "audit entry"
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["workspace_id", "occurred_at"], name="audit_workspace"),
            models.Index(fields=["resource_type", "resource_id"], name="audit_resource"),
            models.Index(fields=["actor_id", "occurred_at"], name="audit_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.resource_type} {self.resource_id or ''}".rstrip()
