"""`manage.py cleanup` drops finished push deliveries (with their attempts) past the retention."""

from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from clients.models import Delivery, DeliveryAttempt
from tests.factories import ClientFactory, DeliveryAttemptFactory, DeliveryFactory


def delivery(client, status: str, created_days_ago: float, delivered_days_ago: float | None = None):
    now = timezone.now()
    row = DeliveryFactory(
        client=client,
        status=status,
        created_at=now - timedelta(days=created_days_ago),
        delivered_at=None if delivered_days_ago is None else now - timedelta(days=delivered_days_ago),
    )
    tried_days_ago = created_days_ago if delivered_days_ago is None else delivered_days_ago
    DeliveryAttemptFactory(delivery=row, status_code=500, attempted_at=now - timedelta(days=tried_days_ago))
    return row


def test_deletes_finished_deliveries_past_the_retention_and_keeps_pending_ones(db, settings):
    settings.IAM_OUTBOX_RETENTION_DAYS = 7
    client = ClientFactory()
    old_delivered = delivery(client, "delivered", 10, delivered_days_ago=9)
    old_failed = delivery(client, "failed", 10)
    kept = [
        delivery(client, "pending", 30),  # still owed
        delivery(client, "delivered", 10, delivered_days_ago=1),  # delivered on a recent retry
        delivery(client, "failed", 2),
    ]
    retried = delivery(client, "failed", 20)  # failed again on an operator's retry yesterday
    DeliveryAttemptFactory(delivery=retried, status_code=503)
    kept.append(retried)
    orphan = delivery(client, "failed", 30)
    Delivery.objects.filter(pk=orphan.pk).update(client=None)  # its client was deleted since

    out = StringIO()
    call_command("cleanup", stdout=out)

    assert "deleted 3 deliveries" in out.getvalue()
    assert set(Delivery.objects.values_list("pk", flat=True)) == {row.pk for row in kept}
    assert not DeliveryAttempt.objects.filter(delivery_id__in=[old_delivered.pk, old_failed.pk]).exists()
    assert DeliveryAttempt.objects.count() == len(kept) + 1  # the retried one has two
