from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Count, Exists, Min, OuterRef, Q
from django.utils import timezone

from iam.models import Resource
from iam.platform import metrics, retention
from tenancy.models import WorkspaceScopedQuerySet


class Client(Resource):
    """An external service of a workspace (docs/api.md#answers): validates tokens and receives push events.
    The secret is stored encrypted (to sign pushes) and as a keyed digest (to compare in validate), never in
    plaintext (docs/security.md#secrets-at-rest)."""

    workspace = models.ForeignKey("tenancy.Workspace", on_delete=models.CASCADE, related_name="clients")
    name = models.CharField(max_length=255)
    endpoint = models.URLField(max_length=2048, null=True, blank=True)
    description = models.TextField(null=True, blank=True)
    secret_encrypted = models.TextField(editable=False)
    secret_digest = models.CharField(max_length=64, editable=False)
    secret_version = models.PositiveIntegerField(default=1, editable=False)
    created_by = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = WorkspaceScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="client_unique_name")]
        indexes = [models.Index(fields=["workspace", "created_at", "id"], name="client_created")]

    def __str__(self) -> str:
        return self.name


def retry_deadline():
    return timezone.now() + timedelta(hours=settings.IAM_WEBHOOK_RETRY_HOURS)


class Delivery(models.Model):
    """One event owed to one client (Saleor's EventDelivery), and its whole retry state: a pending delivery
    is due at `next_attempt_at`, and gives up (failed) when its next attempt would fall after `deadline`.
    Workers take the due deliveries of one client in batches (clients/push.py)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    event_id = models.UUIDField("event ID")
    event_type = models.CharField(max_length=64)
    # A workspace's delete takes its clients, yet owes them `workspace.deleted`: a delivery outlives both,
    # keeping the endpoint and the (encrypted) secret it had when the event happened.
    client = models.ForeignKey(Client, null=True, on_delete=models.SET_NULL, related_name="deliveries")
    workspace = models.ForeignKey("tenancy.Workspace", null=True, on_delete=models.SET_NULL, related_name="+")
    endpoint = models.TextField(blank=True, default="")
    secret_encrypted = models.TextField(blank=True, default="")
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    deadline = models.DateTimeField(default=retry_deadline)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["event_id", "client"], name="delivery_unique_event_client")
        ]
        indexes = [
            models.Index(fields=["client", "created_at"], name="delivery_client_created"),
            # A worker's batch (one client's pending deliveries in order) and the sweep (the due ones).
            models.Index(fields=["client", "id"], condition=Q(status="pending"), name="delivery_pending"),
            models.Index(fields=["next_attempt_at"], condition=Q(status="pending"), name="delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} -> {self.client_id} ({self.status})"


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_rows")
    attempted_at = models.DateTimeField(default=timezone.now)  # set by the batch, when each attempt began
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["attempted_at", "id"]

    def __str__(self) -> str:
        return f"{self.delivery_id} {self.status_code or self.error[:40]}"


@retention.sweep("deliveries")
def sweep_deliveries(now, kept_since) -> int:
    """Finished deliveries: a delivered one ages from its delivery, a failed one from its last attempt (an
    operator may have retried it lately); pending ones stay. The attempts go by cascade."""
    tried_lately = DeliveryAttempt.objects.filter(delivery=OuterRef("pk"), attempted_at__gte=kept_since)
    finished = Q(status=Delivery.Status.DELIVERED, delivered_at__lt=kept_since) | (
        Q(status=Delivery.Status.FAILED, created_at__lt=kept_since) & ~Exists(tried_lately)
    )
    return Delivery.objects.filter(finished).delete()[1].get(Delivery._meta.label, 0)


@metrics.backlog("push.delivery")
def pending_deliveries() -> dict:
    """Push deliveries not yet delivered nor given up (the `iam_outbox_*` gauges, topic `push.delivery`)."""
    return Delivery.objects.filter(status=Delivery.Status.PENDING).aggregate(
        count=Count("pk"), first=Min("created_at")
    )
