from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from iam.models import AuditEntry, Event, OutboxMessage


class Command(BaseCommand):
    help = (
        "Deletes rows nobody needs any more and prints how many: delivered (done) outbox messages "
        "processed more than IAM_OUTBOX_RETENTION_DAYS ago (failed ones stay for the admin's retry), "
        "finished push deliveries (delivered or failed, with their attempts) older than that (pending ones "
        "stay), expired refresh-token rows, expired OAuth states and audit entries older than "
        "IAM_AUDIT_RETENTION_DAYS. Used refresh-token rows stay until they expire: reuse detection needs "
        "them. Events (POST /clients/events) go an hour after IAM_EVENT_RETENTION_DAYS. Safe to run at "
        "any time, e.g. daily from cron."
    )

    def handle(self, *args, **options):
        now = timezone.now()
        kept_since = now - timedelta(days=settings.IAM_OUTBOX_RETENTION_DAYS)
        counts = {
            "outbox messages": OutboxMessage.objects.filter(
                status=OutboxMessage.Status.DONE,
                processed_at__lt=kept_since,
            ).delete()[0],
            "deliveries": self._finished_deliveries(kept_since),
            "refresh tokens": self._expired("authn", "RefreshToken", now),
            "oauth states": self._expired("authn", "OAuthState", now),
            # An hour past IAM_EVENT_RETENTION_DAYS: a transaction still running may hold an earlier
            # position than a cursor that is not yet expired (see clients/catchup.py).
            "events": Event.objects.filter(
                created_at__lt=now - timedelta(days=settings.IAM_EVENT_RETENTION_DAYS, hours=1)
            ).delete()[0],
            "audit entries": AuditEntry.objects.filter(
                occurred_at__lt=now - timedelta(days=settings.IAM_AUDIT_RETENTION_DAYS)
            ).delete()[0],
        }
        for name, count in counts.items():
            self.stdout.write(f"deleted {count} {name}")

    @staticmethod
    def _expired(app_label: str, model_name: str, now) -> int:
        if not apps.is_installed(app_label):
            return 0
        try:
            model = apps.get_model(app_label, model_name)
        except LookupError:  # a model another release adds
            return 0
        return model.objects.filter(expires_at__lt=now).delete()[0]

    @staticmethod
    def _finished_deliveries(kept_since) -> int:
        """Deliveries of `clients` (looked up by name: iam does not import the apps above it). A delivered
        one ages from its delivery, a failed one from its last attempt (an operator may have retried it
        lately); the attempts go by cascade."""
        if not apps.is_installed("clients"):
            return 0
        model = apps.get_model("clients", "Delivery")
        attempt = apps.get_model("clients", "DeliveryAttempt")
        tried_lately = attempt.objects.filter(delivery=OuterRef("pk"), attempted_at__gte=kept_since)
        finished = Q(status="delivered", delivered_at__lt=kept_since) | (
            Q(status="failed", created_at__lt=kept_since) & ~Exists(tried_lately)
        )
        return model.objects.filter(finished).delete()[1].get(model._meta.label, 0)
