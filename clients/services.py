"""Every write to clients (SPEC 4 Clients, CONTRACT 7): the API and the admin call these."""

import uuid
from typing import NotRequired, Unpack
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from iam import audit, crypto, events
from iam.errors import ApiError
from iam.service_helpers import Described, NewResource, apply_changes, save_changes, save_new, strict
from tenancy.models import Workspace
from tenancy.quotas import check_quota

from . import egress, push
from .client_cache import forget_client
from .models import Client, Delivery

NAME_CONFLICT = "name already exists"  # CONTRACT 12, as `unique=("name",)` answers it
NO_ENDPOINT = "client has no endpoint"
UPDATABLE = ("name", "endpoint", "description", "tags")  # what the audit log shows of a client


class NewClient(NewResource):
    endpoint: NotRequired[str | None]


class ClientChanges(Described, total=False):
    endpoint: str | None


def get_client(workspace: Workspace, *, id: UUID) -> Client:
    """CONTRACT 2: a client of another workspace is not found."""
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


@strict
def create_client(
    workspace: Workspace, *, actor: Account | None, **fields: Unpack[NewClient]
) -> tuple[Client, str]:
    """Returns the client and its plaintext secret, shown this once (SPEC 4 Clients rule 1)."""
    endpoint = fields.pop("endpoint", None) or None
    check_endpoint(endpoint)
    with transaction.atomic():
        check_quota(
            "clients",
            settings.IAM_QUOTA_CLIENTS,
            actor=actor,
            records=Client.objects.in_workspace(workspace),
            owner=workspace,
        )
        client = Client(workspace=workspace, endpoint=endpoint, created_by=actor, **fields)
        secret = _set_secret(client)
        save_new(client, audited=UPDATABLE, actor=actor, unique=("name",))
        forget_client(client.pk)  # drops a cached "unknown client" for this id
    return client, secret


@strict
def update_client(client: Client, *, actor: Account | None, **changes: Unpack[ClientChanges]) -> Client:
    if "endpoint" in changes:
        check_endpoint(changes["endpoint"])
        changes = {**changes, "endpoint": changes["endpoint"] or None}
    with transaction.atomic():
        save_changes(
            client, changes, fields=(*UPDATABLE, "meta"), audited=UPDATABLE, actor=actor, unique=("name",)
        )
        forget_client(client.pk)
    return client


def delete_client(client: Client, *, actor: Account | None) -> dict:
    """Destructive (SPEC 4): the client stops validating at once and its pending pushes are dropped."""
    summary = {"id": str(client.pk)}
    with transaction.atomic():
        audit.record_for(client, "delete", changes=audit.removed(client, ("name", "endpoint")), actor=actor)
        forget_client(client.pk)
        client.deliveries.filter(status=Delivery.Status.PENDING).update(status=Delivery.Status.FAILED)
        client.delete()
    return summary


def regenerate_secret(client: Client, *, actor: Account | None) -> str:
    """The old secret stops working when this commits (SPEC 4 Clients rule 2)."""
    with transaction.atomic():
        secret = _set_secret(client)
        client.secret_version += 1
        fields = apply_changes(client, {}, fields=[])
        client.save(update_fields=["secret_encrypted", "secret_digest", "secret_version", *fields])
        forget_client(client.pk)
        audit.record_for(client, "regenerate_secret", actor=actor)
        events.emit_for(client, "secret_rotated", account_ids=[])
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
        audit.record_for(
            client,
            "send_test_event",
            changes={"event_id": event["id"], "endpoint": client.endpoint},
            actor=actor,
        )
    return delivery
