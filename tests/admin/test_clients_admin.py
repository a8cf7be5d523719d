"""The clients admin: a client's secret is shown once and stored only encrypted and digested, changes go
through `clients.services` (the API's validation and SSRF check), and deliveries are read-only with a
retry action."""

import re
import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from clients import services
from clients.models import Client, Delivery, DeliveryAttempt
from iam.models import Event
from iam.platform import crypto
from tests.admin.conftest import form_data
from tests.conftest import ApiClient, ok, token_for
from tests.factories import WorkspaceFactory

META = '{"schema_version": "1"}'


@pytest.fixture
def workspace(db):
    return WorkspaceFactory()


def add_client(admin_web, workspace, **fields):
    data = {"workspace": str(workspace.pk), "name": "svc", "tags": "[]", "meta": META, **fields}
    return admin_web.post(reverse("admin:clients_client_add"), data)


def shown_secrets(response) -> list[str]:
    return re.findall(r'<code class="client-secret">([^<]+)</code>', response.content.decode())


def validate(client_id, secret: str, token: str) -> dict:
    body = {"client_id": str(client_id), "client_secret": secret, "token": token}
    return ok(ApiClient().call("/clients/validate", body))


def make_client(workspace, operator, **fields) -> tuple[Client, str]:
    return services.create_client(
        workspace,
        name=fields.pop("name", "svc"),
        tags=[],
        meta={"schema_version": "1"},
        actor=operator,
        **fields,
    )


def make_delivery(client: Client, status: str, **fields) -> Delivery:
    return Delivery.objects.create(
        event_id=uuid.uuid4(),
        event_type="role.updated",
        client=client,
        workspace=client.workspace,
        endpoint=client.endpoint or "",
        secret_encrypted=client.secret_encrypted,
        payload={"type": "role.updated", "workspace_id": str(client.workspace_id)},
        status=status,
        **fields,
    )


def test_creating_a_client_shows_its_secret_once_and_stores_only_its_encrypted_form(
    admin_web, workspace, member_of
):
    response = add_client(admin_web, workspace, endpoint="https://hooks.example.com/iam")
    assert response.status_code == 200, response.context["adminform"].form.errors
    [secret] = shown_secrets(response)
    assert response["Cache-Control"] == "no-store" or "no-store" in response["Cache-Control"]
    client = Client.objects.get(workspace=workspace, name="svc")
    assert client.endpoint == "https://hooks.example.com/iam"
    assert secret not in (client.secret_encrypted, client.secret_digest)
    assert crypto.decrypt(client.secret_encrypted) == secret
    assert client.secret_digest == crypto.digest(secret)
    # the secret works over the API, and is not kept in a message for the next page
    account, _ = member_of(workspace)
    assert validate(client.pk, secret, token_for(account))["reason"] != "invalid_client"
    for url in (reverse("admin:clients_client_change", args=[client.pk]), reverse("admin:index")):
        assert secret not in admin_web.get(url).content.decode()


def test_an_endpoint_the_ssrf_check_refuses_is_a_form_error(admin_web, workspace):
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        response = add_client(admin_web, workspace, endpoint="http://127.0.0.1/")
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"endpoint": ["endpoint not allowed"]}
    assert not Client.objects.exists()


def test_changing_the_endpoint_to_a_private_address_is_a_form_error(admin_web, workspace, operator):
    client, _ = make_client(workspace, operator, endpoint="https://hooks.example.com/")
    url = reverse("admin:clients_client_change", args=[client.pk])
    data = form_data(admin_web.get(url))
    data["endpoint"] = "http://127.0.0.1/"
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        response = admin_web.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"endpoint": ["endpoint not allowed"]}
    client.refresh_from_db()
    assert client.endpoint == "https://hooks.example.com/"


def test_the_admin_refuses_what_the_api_refuses(admin_web, workspace, operator):
    make_client(workspace, operator, name="taken")
    response = add_client(admin_web, workspace, name="taken")
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"name": ["name already exists"]}
    assert Client.objects.filter(name="taken").count() == 1
    response = add_client(admin_web, workspace, meta="{}")
    assert response.context["adminform"].form.errors == {"meta": ["meta.schema_version required"]}
    client, _ = make_client(workspace, operator)
    url = reverse("admin:clients_client_change", args=[client.pk])
    data = form_data(admin_web.get(url))
    data["name"] = "taken"
    response = admin_web.post(url, data)
    assert response.context["adminform"].form.errors == {"name": ["name already exists"]}


def test_updating_and_deleting_a_client_go_through_the_services(admin_web, workspace, operator):
    client, _ = make_client(workspace, operator)
    url = reverse("admin:clients_client_change", args=[client.pk])
    data = form_data(admin_web.get(url))
    data.update(name="renamed", description="about")
    assert admin_web.post(url, data).status_code == 302
    client.refresh_from_db()
    assert (client.name, client.description) == ("renamed", "about")
    pending = make_delivery(client, "pending")
    response = admin_web.post(reverse("admin:clients_client_delete", args=[client.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Client.objects.filter(pk=client.pk).exists()
    pending.refresh_from_db()
    assert pending.status == "failed"  # delete_client drops the pending pushes


def test_regenerating_a_secret_invalidates_the_old_one_at_once(admin_web, workspace, operator, member_of):
    client, old = make_client(workspace, operator)
    other, other_old = make_client(workspace, operator, name="other")
    account, _ = member_of(workspace)
    token = token_for(account)
    assert validate(client.pk, old, token)["reason"] != "invalid_client"  # warms the cache

    response = admin_web.post(
        reverse("admin:clients_client_changelist"),
        {"action": "regenerate_secrets", "_selected_action": [str(client.pk), str(other.pk)]},
    )

    assert response.status_code == 200
    secrets = shown_secrets(response)
    assert len(secrets) == 2 and old not in secrets and other_old not in secrets
    client.refresh_from_db()
    assert client.secret_version == 2
    assert validate(client.pk, old, token)["reason"] == "invalid_client"
    new = next(secret for secret in secrets if crypto.digest(secret) == client.secret_digest)
    assert validate(client.pk, new, token)["reason"] != "invalid_client"
    rotated = [
        message.payload
        for message in Event.objects.all()
        if message.payload["type"] == "client.secret_rotated"
    ]
    assert {event["data"]["resource"]["id"] for event in rotated} == {str(client.pk), str(other.pk)}
    # shown once: the change list afterwards carries no secret
    page = admin_web.get(reverse("admin:clients_client_changelist")).content.decode()
    assert not any(secret in page for secret in secrets)


def test_retrying_failed_deliveries(
    admin_web, workspace, operator, monkeypatch, django_capture_on_commit_callbacks
):
    kicked = []
    monkeypatch.setattr(
        "clients.push.kick", lambda client_id, delivery_id, **kwargs: kicked.append(delivery_id)
    )
    client, _ = make_client(workspace, operator, endpoint="https://hooks.example.com/")
    now = timezone.now()
    gone = now - timedelta(hours=1)
    failed = make_delivery(client, "failed", attempts=9, deadline=gone, next_attempt_at=gone)
    other = make_delivery(client, "failed", attempts=3)
    delivered = make_delivery(client, "delivered", delivered_at=now)

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(
            reverse("admin:clients_delivery_changelist"),
            {
                "action": "retry_deliveries",
                "_selected_action": [str(failed.pk), str(other.pk), str(delivered.pk)],
            },
            follow=True,
        )

    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert "2 delivery(ies) queued again." in shown
    assert any("1 delivery(ies) skipped" in text for text in shown)
    for delivery in (failed, other, delivered):
        delivery.refresh_from_db()
    assert failed.status == "pending" and other.status == "pending"
    assert delivered.status == "delivered"
    # the delivery is its own retry state: due now, with a fresh window
    assert failed.deadline > now + timedelta(hours=23) and failed.next_attempt_at <= timezone.now()
    assert set(kicked) == {failed.pk, other.pk}


def test_a_delivery_page_lists_its_attempts_and_is_read_only(admin_web, workspace, operator):
    client, _ = make_client(workspace, operator, endpoint="https://hooks.example.com/")
    delivery = make_delivery(client, "failed", attempts=2)
    DeliveryAttempt.objects.create(delivery=delivery, status_code=503, duration_ms=12)
    DeliveryAttempt.objects.create(delivery=delivery, error="ConnectionRefusedError: refused", duration_ms=3)

    page = admin_web.get(reverse("admin:clients_delivery_change", args=[delivery.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "503" in html and "ConnectionRefusedError: refused" in html
    assert "&quot;type&quot;: &quot;role.updated&quot;" in html  # the payload, pretty-printed
    assert 'name="_save"' not in html
    assert admin_web.get(reverse("admin:clients_delivery_add")).status_code == 403
    # the client's page links to it
    client_page = admin_web.get(reverse("admin:clients_client_change", args=[client.pk])).content.decode()
    assert reverse("admin:clients_delivery_change", args=[delivery.pk]) in client_page
    listed = admin_web.get(reverse("admin:clients_delivery_changelist"), {"client": str(client.pk)})
    assert listed.status_code == 200 and str(delivery.event_id) in listed.content.decode()
