"""Every write to clients (docs/api.md#clients, docs/integration.md#validate-each-token-clientsvalidate): the
API and the admin call these."""

import uuid
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, account_of
from iam.http.errors import ApiError
from iam.platform import audit, crypto, egress, events
from iam.platform.service_helpers import UNSET, apply_changes, save_unique, sent
from tenancy.models import Workspace
from tenancy.quotas import check_quota

from . import push
from .client_cache import forget_client
from .models import Client, Delivery

NAME_CONFLICT = "name already exists"  # docs/api.md#validation, as `save_unique` answers it
NO_ENDPOINT = "client has no endpoint"
AUDITED = ("name", "endpoint", "description", "tags")  # what the audit log shows of a client


def get_client(workspace: Workspace, *, id: UUID) -> Client:
    """docs/api.md#x-workspace: a client of another workspace is not found."""
    client = Client.objects.in_workspace(workspace).select_related("workspace").filter(pk=id).first()
    if client is None:
        raise ApiError(404, "client not found", "id")
    return client


def check_endpoint(endpoint: str | None) -> None:
    if not endpoint:
        return
    try:
        egress.check_form(endpoint)
    except egress.EndpointRefused as exc:
        raise ApiError(400, f"endpoint {exc}", "endpoint") from exc
    if not egress.is_allowed(endpoint):
        raise ApiError(400, "endpoint not allowed", "endpoint")


def _set_secret(client: Client) -> str:
    secret = crypto.new_client_secret()
    client.secret_encrypted = crypto.encrypt(secret)
    client.secret_digest = crypto.digest(secret)
    return secret


def create_client(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    tags: list[str],
    meta: dict[str, Any],
    description: str | None = None,
    endpoint: str | None = None,
) -> tuple[Client, str]:
    """Returns the client and its plaintext secret, shown this once (docs/api.md#clients)."""
    endpoint = endpoint or None
    check_endpoint(endpoint)
    with transaction.atomic():
        peers = Client.objects.in_workspace(workspace)
        check_quota("clients", settings.IAM_QUOTA_CLIENTS, actor=actor, records=peers, owner=workspace)
        client = Client(
            workspace=workspace,
            endpoint=endpoint,
            created_by=account_of(actor),
            name=name,
            description=description,
            tags=tags,
            meta=meta,
        )
        secret = _set_secret(client)
        save_unique(client, peers, {"name": name}, force_insert=True)
        audit.record(
            "client.create",
            resource=("client", client.pk),
            workspace_id=workspace.pk,
            changes=audit.created(client, AUDITED),
            actor=actor,
        )
        forget_client(client.pk)  # drops a cached "unknown client" for this id
    return client, secret


def update_client(
    client: Client,
    *,
    actor: Account | None,
    name: str = UNSET,
    description: str | None = UNSET,
    endpoint: str | None = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Client:
    if endpoint is not UNSET:
        check_endpoint(endpoint)
        endpoint = endpoint or None
    changes = sent(name=name, description=description, endpoint=endpoint, tags=tags, meta=meta)
    with transaction.atomic():
        entry = audit.diff(client, changes, AUDITED)
        fields = apply_changes(client, changes)
        peers = Client.objects.in_workspace(client.workspace_id)
        save_unique(client, peers, {"name": changes.get("name")}, update_fields=fields)
        if entry:
            audit.record(
                "client.update",
                resource=("client", client.pk),
                workspace_id=client.workspace_id,
                changes=entry,
                actor=actor,
            )
        forget_client(client.pk)
    return client


def delete_client(client: Client, *, actor: Account | None) -> dict:
    """Destructive (docs/api.md#clients): the client stops validating at once and its pending pushes are
    dropped."""
    summary = {"id": str(client.pk)}
    with transaction.atomic():
        audit.record(
            "client.delete",
            resource=("client", client.pk),
            workspace_id=client.workspace_id,
            changes=audit.removed(client, ("name", "endpoint")),
            actor=actor,
        )
        forget_client(client.pk)
        client.deliveries.filter(status=Delivery.Status.PENDING).update(status=Delivery.Status.FAILED)
        client.delete()
    return summary


def regenerate_secret(client: Client, *, actor: Account | None) -> str:
    """The old secret stops working when this commits (docs/api.md#clients)."""
    with transaction.atomic():
        secret = _set_secret(client)
        client.secret_version += 1
        fields = apply_changes(client, {})
        client.save(update_fields=["secret_encrypted", "secret_digest", "secret_version", *fields])
        forget_client(client.pk)
        audit.record(
            "client.regenerate_secret",
            resource=("client", client.pk),
            workspace_id=client.workspace_id,
            actor=actor,
        )
        events.emit(
            "client.secret_rotated",
            resource=("client", client.pk),
            account_ids=[],
            workspace_ids=[client.workspace_id],
        )
    return secret


def send_test_event(client: Client, *, actor: Account | None) -> Delivery:
    """A `client.test` event for this client alone (the admin's "Send test event"), signed and delivered
    as every event is: its delivery is written with the audit entry, retried, every attempt recorded.
    It names no account and the client itself as its resource; it is not written to the workspace's
    event log (`clients/events`), which every client of the workspace reads."""
    if not client.endpoint:
        raise ApiError(400, NO_ENDPOINT, "endpoint")
    event = {
        "id": str(uuid.uuid4()),
        "type": "client.test",
        "workspace_id": str(client.workspace_id),
        "occurred_at": timezone.now().isoformat().replace("+00:00", "Z"),
        "data": {"account_ids": [], "resource": {"type": "client", "id": str(client.pk)}},
    }
    with transaction.atomic():
        [delivery] = push.owe(event, [client])
        audit.record(
            "client.send_test_event",
            resource=("client", client.pk),
            workspace_id=client.workspace_id,
            changes={"event_id": event["id"], "endpoint": client.endpoint},
            actor=actor,
        )
    return delivery
