"""Push events to client endpoints (CONTRACT 8). `iam.events.emit` records a `push.event` outbox message
in the change's transaction and runs its handler at once: the handler fans the event out into one
`Delivery` per client with an endpoint, each with an outbox message of its own (`push.delivery`) carrying
its retries, so a client that is down delays nobody else. Every attempt is recorded as a
`DeliveryAttempt` row (Saleor)."""

import base64
import functools
import hashlib
import hmac
import http.client
import json
import logging
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from iam import crypto, metrics, outbox
from iam.models import OutboxMessage

from . import egress
from .models import Client, Delivery, DeliveryAttempt

logger = logging.getLogger(__name__)


# The secret of each client in clear, per worker process: decrypting it for every delivery is a cost that
# buys nothing (a rotated secret has another ciphertext, so it is never served from here).
_decrypt = functools.lru_cache(maxsize=1024)(crypto.decrypt)


def sign(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks `v1` signature, keyed with the UTF-8 bytes of the client secret."""
    signed = f"{event_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return f"v1,{base64.b64encode(mac).decode()}"


def _enqueue(delivery: Delivery) -> OutboxMessage:
    return outbox.enqueue(
        "push.delivery",
        {"delivery_id": delivery.pk},
        within=timedelta(hours=settings.IAM_WEBHOOK_RETRY_HOURS),
    )


@outbox.handler("push.event")
def fan_out(message: OutboxMessage) -> None:
    """One delivery and one outbox message per client, each set written in one statement: the fan-out
    runs inside the change's transaction, so its round trips are the change's."""
    event = message.payload
    clients = list(
        Client.objects.filter(workspace_id=event["workspace_id"], endpoint__isnull=False)
        .exclude(endpoint="")
        .exclude(deliveries__event_id=event["id"])  # a fan-out run again makes no second delivery
    )
    if not clients:
        return
    deliveries = Delivery.objects.bulk_create(
        Delivery(
            event_id=event["id"],
            client=client,
            event_type=event["type"],
            workspace_id=client.workspace_id,
            payload=event,
            endpoint=client.endpoint,
            secret_encrypted=client.secret_encrypted,
            message_id=uuid.uuid4(),
        )
        for client in clients
    )
    outbox.enqueue_many(
        "push.delivery",
        [{"delivery_id": delivery.pk} for delivery in deliveries],
        ids=[delivery.message_id for delivery in deliveries],
        within=timedelta(hours=settings.IAM_WEBHOOK_RETRY_HOURS),
    )


@outbox.handler("push.delivery")
def deliver(message: OutboxMessage) -> None:
    delivery = Delivery.objects.select_related("client").filter(pk=message.payload.get("delivery_id")).first()
    if delivery is None or delivery.status != Delivery.Status.PENDING:
        return  # the client was deleted, or a duplicate publish
    # The client as it is now (a rotated secret signs), or as it was when its workspace was deleted.
    client = delivery.client or Client(endpoint=delivery.endpoint, secret_encrypted=delivery.secret_encrypted)
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    headers = {
        "webhook-id": str(delivery.event_id),
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(_decrypt(client.secret_encrypted), str(delivery.event_id), timestamp, body),
    }
    delivery.attempts += 1
    started = time.monotonic()
    status_code, error, permanent = None, "", False
    if not client.endpoint:
        error, permanent = "client has no endpoint", True
    else:
        try:
            status_code = egress.post(
                client.endpoint, body, headers, timeout=settings.IAM_WEBHOOK_TIMEOUT_SECONDS
            )
        except egress.EndpointRefused as exc:
            error, permanent = f"endpoint not allowed: {exc}", True
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"[:2000]
    DeliveryAttempt.objects.create(
        delivery=delivery,
        status_code=status_code,
        error=error,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    delivered = status_code is not None and 200 <= status_code < 300
    metrics.PUSH_ATTEMPTS.labels("delivered" if delivered else "failed").inc()
    if delivered:
        delivery.status, delivery.delivered_at = Delivery.Status.DELIVERED, timezone.now()
        delivery.save(update_fields=["attempts", "status", "delivered_at"])
        return
    reason = error or f"status {status_code}"
    # The outbox gives up when the next retry would pass the deadline: record that on the delivery too.
    last = timezone.now() + outbox.backoff(message.attempts) > message.deadline
    if permanent or last:
        delivery.status = Delivery.Status.FAILED
    delivery.save(update_fields=["attempts", "status"])
    if permanent:
        raise outbox.Undeliverable(reason)
    raise outbox.RetryLater(reason)


def retry_delivery(delivery: Delivery) -> None:
    """Sends a failed delivery again (the admin's action), with a fresh retry window."""
    with transaction.atomic():
        Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.PENDING, delivered_at=None)
        delivery.status, delivery.delivered_at = Delivery.Status.PENDING, None
        message = OutboxMessage.objects.filter(pk=delivery.message_id).first()
        if message is None:
            message = _enqueue(delivery)
            Delivery.objects.filter(pk=delivery.pk).update(message_id=message.pk)
            delivery.message_id = message.pk
        else:
            outbox.retry(message)
