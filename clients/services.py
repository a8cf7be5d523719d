"""Every write to clients (SPEC 4 Clients, CONTRACT 7): the API and the admin call these."""

from typing import Any
from uuid import UUID

from django.db import transaction

from accounts.models import Account
from iam import audit, crypto, events
from iam.errors import ApiError
from iam.service_helpers import UNSET, Unset, apply_changes, check_unique, save_unique, sent
from tenancy.models import Workspace

from . import egress
from .client_cache import forget_client
from .models import Client, Delivery

NAME_CONFLICT = "name already exists"
UPDATABLE = ("name", "endpoint", "description", "tags")  # what the audit log shows of a client


def get_client(workspace: Workspace, *, id: UUID) -> Client:
    """CONTRACT 2: a client of another workspace is not found."""
    client = Client.objects.in_workspace(workspace).select_related("workspace").filter(pk=id).first()
    if client is None:
        raise ApiError(404, "client not found", "id")
    return client


def check_endpoint(endpoint: str | None) -> None:
    if endpoint and not egress.is_allowed(endpoint):
        raise ApiError(400, "endpoint not allowed", "endpoint")


def _check_name(workspace: Workspace, name: str, *, exclude: UUID | None = None) -> None:
    check_unique(Client.objects.in_workspace(workspace), exclude=exclude, name=name)


def _set_secret(client: Client) -> str:
    secret = crypto.new_secret()
    client.secret_encrypted = crypto.encrypt(secret)
    client.secret_digest = crypto.digest(secret)
    return secret


def create_client(
    workspace: Workspace,
    *,
    name: str,
    endpoint: str | None = None,
    description: str | None = None,
    tags: list[str],
    meta: dict[str, Any],
    actor: Account | None,
) -> tuple[Client, str]:
    """Returns the client and its plaintext secret, shown this once (SPEC 4 Clients rule 1)."""
    check_endpoint(endpoint)
    with transaction.atomic():
        _check_name(workspace, name)
        client = Client(
            workspace=workspace,
            name=name,
            endpoint=endpoint or None,
            description=description,
            tags=tags,
            meta=meta,
            created_by=actor,
        )
        secret = _set_secret(client)
        save_unique(client, conflict=NAME_CONFLICT, field="name")
        audit.record(
            "client.create",
            resource=("client", client.pk),
            workspace_id=workspace.pk,
            changes=audit.created(client, UPDATABLE),
            actor=actor,
        )
        forget_client(client.pk)  # drops a cached "unknown client" for this id
    return client, secret


def update_client(
    client: Client,
    *,
    name: str | Unset = UNSET,
    endpoint: str | Unset | None = UNSET,
    description: str | Unset | None = UNSET,
    tags: list[str] | Unset = UNSET,
    meta: dict[str, Any] | Unset = UNSET,
    actor: Account | None,
) -> Client:
    changes = sent(name=name, endpoint=endpoint, description=description, tags=tags, meta=meta)
    if "endpoint" in changes:
        check_endpoint(changes["endpoint"])
        changes = {**changes, "endpoint": changes["endpoint"] or None}
    with transaction.atomic():
        if "name" in changes and changes["name"] != client.name:
            _check_name(client.workspace, changes["name"], exclude=client.pk)
        audit.record_update(
            "client.update",
            resource=("client", client.pk),
            workspace_id=client.workspace_id,
            changes=audit.diff(client, changes, UPDATABLE),
            actor=actor,
        )
        fields = apply_changes(client, changes, fields=["name", "endpoint", "description", "tags", "meta"])
        save_unique(client, conflict=NAME_CONFLICT, field="name", update_fields=fields)
        forget_client(client.pk)
    return client


def delete_client(client: Client, *, actor: Account | None) -> dict:
    """Destructive (SPEC 4): the client stops validating at once and its pending pushes are dropped."""
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
    """The old secret stops working when this commits (SPEC 4 Clients rule 2)."""
    with transaction.atomic():
        secret = _set_secret(client)
        client.secret_version += 1
        fields = apply_changes(client, {}, fields=[])
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
