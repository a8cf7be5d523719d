from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from iam.models import AuditEntry, Event, OutboxMessage
from iam.platform import counts as row_counts
from iam.platform import retention


class Command(BaseCommand):
    help = (
        "Deletes rows nobody needs any more and prints how many: delivered (done) outbox messages "
        "processed more than IAM_OUTBOX_RETENTION_DAYS ago (failed ones stay for the admin's retry), "
        "finished push deliveries (delivered or failed, with their attempts) older than that (pending ones "
        "stay), expired refresh-token rows, expired OAuth states and audit entries older than "
        "IAM_AUDIT_RETENTION_DAYS. Used refresh-token rows stay until they expire: reuse detection needs "
        "them. Events (POST /clients/events) go an hour after IAM_EVENT_RETENTION_DAYS. It also folds the "
        "row counts' delta rows, as beat does every minute (iam/platform/counts.py). Safe to run at any "
        "time, e.g. "
        "daily from cron."
    )

    def handle(self, *args, **options):
        now = timezone.now()
        kept_since = now - timedelta(days=settings.IAM_OUTBOX_RETENTION_DAYS)
        counts = {
            "outbox messages": OutboxMessage.objects.filter(
                status=OutboxMessage.Status.DONE,
                processed_at__lt=kept_since,
            ).delete()[0],
            **{name: sweep(now, kept_since) for name, sweep in retention.sweeps().items()},
            # An hour past IAM_EVENT_RETENTION_DAYS: a transaction still running may hold an earlier
            # position than a cursor that is not yet expired (see clients/catchup.py).
            "events": Event.objects.filter(
                created_at__lt=now - timedelta(days=settings.IAM_EVENT_RETENTION_DAYS, hours=1)
            ).delete()[0],
            "audit entries": AuditEntry.objects.filter(
                occurred_at__lt=now - timedelta(days=settings.IAM_AUDIT_RETENTION_DAYS)
            ).delete()[0],
            "row count rows (folded)": row_counts.compact() or 0,  # None: another compaction runs
        }
        for name, count in counts.items():
            self.stdout.write(f"deleted {count} {name}")
