"""Push events to client endpoints (docs/integration.md#push-events). `iam.platform.events.emit` writes each
event in the change's transaction and sends it to `fan_out` at once (the `iam.platform.events.emitted`
signal), which writes one `Delivery` per client with an endpoint. The delivery row is the whole retry state
(due time, attempts, deadline); every attempt is recorded as a `DeliveryAttempt` row (Saleor).

After commit each client with new deliveries gets one `clients.deliver_push` task (a task already queued
for it and not yet started takes the new ones too). The task locks the client's due deliveries, oldest
first, up to `BATCH` (`SELECT ... FOR UPDATE SKIP LOCKED`: two workers never send the same one), sends
them one after the other over one kept-alive connection, and writes their attempts and outcomes in a few
statements. A batch holds one client's deliveries only, so a slow or down client delays nobody else; an
endpoint that does not answer at all postpones the rest of its batch with the delivery it failed. Beat's
`clients.sweep_push` hands over due deliveries that no task took (a broker or worker outage)."""

import base64
import functools
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Min, Q
from django.utils import timezone

from iam.models import OutboxMessage
from iam.platform import audit, crypto, egress, metrics, outbox

from .client_cache import root_workspace_id
from .models import Client, Delivery, DeliveryAttempt

logger = logging.getLogger(__name__)

BATCH = 100  # deliveries of one client per task: a full batch hands the client's next one to the queue
BATCH_SECONDS = 2.0  # and a slow one stops taking more after this long: the worker serves other clients
IN_FLIGHT = 8  # requests of a batch sent at once, each on a kept-alive connection of its own
KICK_SECONDS = 60  # how long a queued task stands for its client's new deliveries; the sweep covers more


@functools.lru_cache(maxsize=1024)
def _signing_key(secret_encrypted: str) -> bytes:
    """The signing key of each client's secret, per worker process: decrypting and decoding it for every
    delivery is a cost that buys nothing (a rotated secret has another ciphertext, so it is never served
    from here)."""
    return crypto.webhook_signing_key(crypto.decrypt(secret_encrypted))


def sign(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks `v1` signature, keyed with the client secret's signing key (the decoded bytes of a
    `whsec_` secret)."""
    return _signature(crypto.webhook_signing_key(secret), event_id, timestamp, body)


def _signature(key: bytes, event_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{event_id}.{timestamp}.".encode() + body
    return f"v1,{base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()}"


def fan_out(sender: object, *, event: dict, **kwargs: object) -> None:
    """The receiver of `iam.platform.events.emitted`, connected in `ClientsConfig.ready` (clients/apps.py):
    one delivery per client, written in one statement. The fan-out runs inside the change's transaction, so
    its round trips are the change's. Each delivery is due at once."""
    clients = list(
        receivers(event["workspace_id"])
        .exclude(deliveries__event_id=event["id"])  # a fan-out run again makes no second delivery
        .distinct()
    )
    if clients:
        owe(event, clients)


def fan_out_each(sender: object, *, events: list[dict], **kwargs: object) -> None:
    """The receiver of `iam.platform.events.emitted_each`, connected in `ClientsConfig.ready`: `fan_out` of
    many events of one workspace (`emit_each`), its clients read once, every delivery written in a few
    statements."""
    if not events:
        return
    clients = list(receivers(events[0]["workspace_id"]))
    for client in clients:
        owe_each(events, client)


def receivers(workspace_id: str):
    """The clients with an endpoint that hear a workspace's events: its own, and those of the root
    workspace, which hear every workspace's (docs/integration.md#one-backend-for-many-workspaces)."""
    workspaces = {str(workspace_id), root_workspace_id()} - {None}
    return Client.objects.filter(workspace_id__in=workspaces, endpoint__isnull=False).exclude(endpoint="")


@outbox.handler("push.event")
def fan_out_message(message: OutboxMessage) -> None:
    """A `push.event` outbox message written before events went straight to `fan_out` (one an earlier
    version left pending, or failed and retried from the admin): fanned out the same way. Nothing writes
    such a message any more."""
    fan_out(None, event=message.payload)


def owe(event: dict, clients: list[Client]) -> list[Delivery]:
    """Writes one delivery of `event` per client, in the caller's transaction (the change's), each due at
    once, and hands them to a worker after commit: from then on the delivery row carries its retries."""
    deliveries = Delivery.objects.bulk_create(_delivery(event, client) for client in clients)
    for delivery in deliveries:
        transaction.on_commit(lambda delivery=delivery: kick(delivery.client_id, delivery.pk))
    return deliveries


def owe_each(events: list[dict], client: Client) -> None:
    """`owe` of many events to one client: one kick after commit stands for them all."""
    deliveries = Delivery.objects.bulk_create((_delivery(event, client) for event in events), batch_size=1000)
    first = deliveries[0].pk
    transaction.on_commit(lambda: kick(client.pk, first))


def _delivery(event: dict, client: Client) -> Delivery:
    return Delivery(
        event_id=event["id"],
        client=client,
        event_type=event["type"],
        workspace_id=client.workspace_id,
        payload=event,
        endpoint=client.endpoint,
        secret_encrypted=client.secret_encrypted,
    )


def _kick_key(client_id) -> str:
    return f"push-kick:{client_id}"


def kick(client_id, delivery_id: int, *, countdown: float | None = None) -> None:
    """Hands the client's due deliveries to a worker (`delivery_id` stands for a client-less one). At once,
    unless a task for the client is already queued and not yet started: it will take these too."""
    key = _kick_key(client_id) if client_id is not None and not countdown else None
    if key is not None:
        try:
            if not cache.add(key, 1, KICK_SECONDS):
                return
        except Exception:  # a cache outage costs a task more, never a delivery
            key = None
    args = (str(client_id) if client_id is not None else None, delivery_id)
    if not outbox.dispatch(_task(), *args, countdown=countdown) and key is not None:
        cache.delete(key)  # nothing is queued: the next change kicks again (the sweep covers this one)


def deliver_due(client_id: str | None, delivery_id: int) -> int:
    """Sends a batch of the client's due deliveries (or the one client-less delivery); returns how many
    it dealt with."""
    if client_id is not None:
        try:
            cache.delete(_kick_key(client_id))  # before the select: a change committed after it kicks anew
        except Exception:
            logger.warning("push: cache unavailable", exc_info=True)
    with transaction.atomic():
        due = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .annotate(client_endpoint=F("client__endpoint"), client_secret=F("client__secret_encrypted"))
            .defer("event_type", "created_at", "delivered_at")  # not read by a send: columns not decoded
            .filter(status=Delivery.Status.PENDING, next_attempt_at__lte=timezone.now())
        )
        # The client's deliveries, and the one named (its client may be gone since: a workspace delete).
        due = due.filter(
            Q(client_id=client_id) | Q(pk=delivery_id) if client_id is not None else Q(pk=delivery_id)
        )
        batch = list(due.order_by("id")[:BATCH])
        if not batch:
            return 0
        retry_at, finished = _send(batch)
    if client_id is not None or finished < len(batch):
        # Whatever is left, behind other clients: a batch that did work is always followed by a task that
        # starts after its commit, so rows it left (or another task of the client held locked, or a change
        # committed meanwhile) never wait for the sweep. It finds nothing, and ends the chain, when none is.
        transaction.on_commit(lambda: kick(client_id, delivery_id))
    if retry_at is not None:
        delay = max(0.0, (retry_at - timezone.now()).total_seconds())
        transaction.on_commit(lambda: kick(client_id, delivery_id, countdown=delay))
    return finished


class _Verdict:
    DELIVERED, FAILED, REFUSED, NO_ANSWER = "delivered", "failed", "refused", "no answer"


def _endpoint_and_secret(delivery: Delivery) -> tuple[str, str]:
    # The client as it is now (a rotated secret signs), or as it was when its workspace was deleted.
    if delivery.client_id is None:
        return delivery.endpoint, delivery.secret_encrypted
    return delivery.client_endpoint or "", delivery.client_secret


def _signed(delivery: Delivery, secret_encrypted: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    event_id = str(delivery.event_id)
    return body, {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": _signature(_signing_key(secret_encrypted), event_id, timestamp, body),
    }


def _attempt_each(group: list[Delivery], endpoint: str) -> list[tuple[DeliveryAttempt, str]]:
    """Sends a group of deliveries to one endpoint at once (`egress.post_each`): each one's attempt, not
    yet saved, and its verdict."""
    attempted_at = timezone.now()  # the group's attempts begin together
    started = time.monotonic()
    if not endpoint:
        results = [egress.EndpointRefused("client has no endpoint")] * len(group)
    else:
        requests = [_signed(delivery, _endpoint_and_secret(delivery)[1]) for delivery in group]
        results = egress.post_each(endpoint, requests, timeout=settings.IAM_WEBHOOK_TIMEOUT_SECONDS)
    duration_ms = int((time.monotonic() - started) * 1000)
    verdicts = []
    for delivery, result in zip(group, results, strict=True):
        status_code, error, verdict = None, "", _Verdict.FAILED
        if isinstance(result, egress.EndpointRefused):
            error = f"endpoint not allowed: {result}" if endpoint else str(result)
            verdict = _Verdict.REFUSED
        elif isinstance(result, Exception):
            error, verdict = f"{type(result).__name__}: {result}"[:2000], _Verdict.NO_ANSWER
        else:
            status_code = result
            if 200 <= result < 300:
                verdict = _Verdict.DELIVERED
        attempt = DeliveryAttempt(
            delivery=delivery,
            attempted_at=attempted_at,
            status_code=status_code,
            error=error,
            duration_ms=duration_ms,
        )
        verdicts.append((attempt, verdict))
    delivered = sum(verdict == _Verdict.DELIVERED for _, verdict in verdicts)
    for result, count in (("delivered", delivered), ("failed", len(verdicts) - delivered)):
        if count:
            metrics.PUSH_ATTEMPTS.labels(result).inc(count)
    return verdicts


def _groups(batch: list[Delivery]) -> Iterator[tuple[int, list[Delivery], str]]:
    """The batch in groups sent at once: the first delivery alone (an endpoint that is down costs the
    batch one attempt), then up to `IN_FLIGHT` at a time to the same endpoint."""
    index = 0
    while index < len(batch):
        endpoint = _endpoint_and_secret(batch[index])[0]
        end = index + 1
        while index and end < min(index + IN_FLIGHT, len(batch)):
            if _endpoint_and_secret(batch[end])[0] != endpoint:
                break
            end += 1
        yield index, batch[index:end], endpoint
        index = end


def _send(batch: list[Delivery]) -> tuple:
    """Attempts the batch in order, a group at a time, and records it: the attempts in one INSERT, the
    delivered in one UPDATE, the others (each with its own next attempt, or given up) in one more. Returns
    the earliest next attempt, if any is left pending, and how many of the batch it dealt with (the rest,
    past `BATCH_SECONDS`, stay due as they were)."""
    attempts, delivered, unfinished = [], [], []
    started, finished = time.monotonic(), len(batch)
    for index, group, endpoint in _groups(batch):
        if index and time.monotonic() - started > BATCH_SECONDS:
            finished = index
            break
        try:
            verdicts = _attempt_each(group, endpoint)
        except Exception as exc:  # a bug, not the endpoint: recorded, and retried with backoff like one
            logger.exception("push: deliveries %s failed", [delivery.pk for delivery in group])
            error = f"{type(exc).__name__}: {exc}"[:2000]
            verdicts = [
                (DeliveryAttempt(delivery=delivery, error=error), _Verdict.FAILED) for delivery in group
            ]
        no_answer = None
        for delivery, (attempt, verdict) in zip(group, verdicts, strict=True):
            attempts.append(attempt)
            if verdict == _Verdict.DELIVERED:
                delivered.append(delivery)
                continue
            delivery.attempts += 1
            delivery.last_error = (attempt.error or f"status {attempt.status_code}")[:2000]
            unfinished.append(delivery)
            if verdict == _Verdict.REFUSED:
                _give_up(delivery, f"permanent: {delivery.last_error}")
                continue
            retry_at = timezone.now() + outbox.backoff(delivery.attempts)
            _postpone(delivery, retry_at)
            if verdict == _Verdict.NO_ANSWER and no_answer is None:
                no_answer = retry_at
        if no_answer is not None:
            # No answer at all: the endpoint is down, and the rest of its batch would only wait on it too.
            # They wait with this group, unattempted (nothing to record), and keep their own deadlines.
            for rest in batch[index + len(group) :]:
                _postpone(rest, no_answer)
                unfinished.append(rest)
            break
    DeliveryAttempt.objects.bulk_create(attempts)
    if delivered:
        Delivery.objects.filter(pk__in=[delivery.pk for delivery in delivered]).update(
            status=Delivery.Status.DELIVERED, delivered_at=timezone.now(), attempts=F("attempts") + 1
        )
    if unfinished:
        Delivery.objects.bulk_update(unfinished, ["status", "attempts", "next_attempt_at", "last_error"])
    pending = [
        delivery.next_attempt_at for delivery in unfinished if delivery.status == Delivery.Status.PENDING
    ]
    return min(pending, default=None), finished


def _postpone(delivery: Delivery, retry_at) -> None:
    """Retries with backoff until the deadline: one whose next attempt would fall after it gives up."""
    if retry_at > delivery.deadline:
        _give_up(delivery, f"gave up: {delivery.last_error or 'the endpoint did not answer'}")
    else:
        delivery.next_attempt_at = retry_at


def _give_up(delivery: Delivery, reason: str) -> None:
    delivery.status, delivery.last_error = Delivery.Status.FAILED, reason[:2000]
    _record(delivery, "delivery.fail", Delivery.Status.PENDING, Delivery.Status.FAILED)


def _record(delivery: Delivery, action: str, before: str, after: str) -> None:
    audit.record(
        action,
        resource=("client", delivery.client_id),
        workspace_id=delivery.workspace_id,
        changes={
            "delivery": delivery.pk,
            "event_id": delivery.event_id,
            "status": {"before": before, "after": after},
        },
    )


def retry_delivery(delivery: Delivery) -> None:
    """Sends a failed delivery again (the admin's action), due now, with a fresh retry window."""
    now = timezone.now()
    _record(delivery, "delivery.retry", delivery.status, Delivery.Status.PENDING)
    delivery.status, delivery.delivered_at, delivery.next_attempt_at = Delivery.Status.PENDING, None, now
    delivery.deadline = max(delivery.deadline, now + timedelta(hours=settings.IAM_WEBHOOK_RETRY_HOURS))
    delivery.save(update_fields=["status", "delivered_at", "next_attempt_at", "deadline"])
    transaction.on_commit(lambda: kick(delivery.client_id, delivery.pk))


def sweep(limit: int = outbox.SWEEP_BATCH, *, grace: float | None = None) -> int:
    """Hands over the due deliveries no task took: a kick lost to a broker outage, a worker that died, a
    retry whose delayed kick was lost. One task per client (it takes the client's batch), one per
    client-less delivery. Returns how many tasks it handed over.

    Beat's sweep leaves a delivery `IAM_OUTBOX_SWEEP_GRACE_SECONDS` after it fell due (its own task may
    still be queued). A worker that starts sweeps with no grace (`grace=0`, `clients.tasks`): it may be
    the one a supervisor started in place of a worker that died, whose tasks, running or taken from the
    queue, died with it (the broker keeps no unacknowledged copy: iam/settings.py). A task handed over
    twice costs nothing but its select: the rows it takes are locked (`SKIP LOCKED`) and still pending."""
    grace = settings.IAM_OUTBOX_SWEEP_GRACE_SECONDS if grace is None else grace
    cutoff = timezone.now() - timedelta(seconds=grace)
    due = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=cutoff)
    clients = list(
        due.filter(client__isnull=False)
        .values("client_id")
        .annotate(oldest=Min("id"))
        .order_by("client_id")
        .values_list("client_id", "oldest")[:limit]
    )
    orphans = list(due.filter(client__isnull=True).order_by("id").values_list("client_id", "id")[:limit])
    for client_id, delivery_id in clients + orphans:
        outbox.dispatch(_task(), str(client_id) if client_id is not None else None, delivery_id)
    return len(clients) + len(orphans)


def _task():
    from .tasks import deliver_push

    return deliver_push
