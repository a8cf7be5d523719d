"""The clients admin's "Send test event": a signed `client.test` event to the selected client's endpoint
alone, delivered by the path real events take (a delivery row written with the audit entry, every attempt
recorded, retries), refused with a clear message for a client without an endpoint, and only ever by an
operator's POST with its CSRF token."""

import json

import pytest
from django.test import Client as WebClient
from django.urls import reverse

from clients import services
from clients.models import Client, Delivery, DeliveryAttempt
from clients.services import create_client
from iam.http.errors import ApiError
from iam.models import AuditEntry, Event
from iam.platform import crypto, egress
from tests.clients.test_push import Receiver, run_due_retry, verify
from tests.factories import AccountFactory, WorkspaceFactory

CHANGELIST = reverse("admin:clients_client_changelist")


@pytest.fixture(autouse=True)
def _no_idle_connections():
    yield
    egress._adapter.poolmanager.clear()  # closes the connections kept alive


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def workspace(db):
    return WorkspaceFactory()


def make_client(workspace, name: str, endpoint: str | None) -> tuple[Client, str]:
    return create_client(
        workspace, name=name, endpoint=endpoint, tags=[], meta={"schema_version": "1"}, actor=None
    )


def send_test_event(web, *clients: Client, capture):
    with capture(execute=True):
        return web.post(
            CHANGELIST,
            {"action": "send_test_events", "_selected_action": [str(client.pk) for client in clients]},
            follow=True,
        )


def shown_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_endpoint_receives_a_signed_test_event(
    admin_web, operator, workspace, receiver, django_capture_on_commit_callbacks
):
    client, secret = make_client(workspace, "billing", receiver.url)
    response = send_test_event(admin_web, client, capture=django_capture_on_commit_callbacks)

    assert response.status_code == 200
    [(headers, body)] = receiver.requests
    event = json.loads(body)
    assert set(event) == {"id", "type", "workspace_id", "occurred_at", "data"}
    assert (event["type"], event["workspace_id"]) == ("client.test", str(workspace.pk))
    assert event["data"] == {"account_ids": [], "resource": {"type": "client", "id": str(client.pk)}}
    assert headers["webhook-id"] == event["id"]
    assert secret.startswith("whsec_")  # verified by the official library with the secret as given
    assert verify(secret, headers, body)
    assert not verify(crypto.new_client_secret(), headers, body)
    delivery = Delivery.objects.get()
    assert (delivery.client, delivery.event_type, str(delivery.event_id)) == (
        client,
        "client.test",
        event["id"],
    )
    assert (delivery.status, delivery.attempts) == ("delivered", 1)
    assert DeliveryAttempt.objects.get(delivery=delivery).status_code == 204
    [entry] = AuditEntry.objects.filter(action="client.send_test_event")
    assert (entry.actor_id, entry.actor_kind, entry.resource_id, entry.workspace_id) == (
        operator.pk,
        "operator",
        client.pk,
        workspace.pk,
    )
    assert entry.changes == {"event_id": event["id"], "endpoint": receiver.url}
    url = reverse("admin:clients_delivery_change", args=[delivery.pk])
    assert shown_messages(response) == [f'Test event sent to 1 client(s): <a href="{url}">billing</a>.']
    assert secret not in response.content.decode()
    # it is the client's own test: not written to the event log every client of the workspace reads
    assert not Event.objects.filter(payload__type="client.test").exists()


def test_a_failed_attempt_is_retried_like_any_delivery(
    admin_web, workspace, receiver, django_capture_on_commit_callbacks
):
    receiver.fail_first = 1
    client, secret = make_client(workspace, "billing", receiver.url)
    send_test_event(admin_web, client, capture=django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 1, "status 500")

    assert run_due_retry(delivery, django_capture_on_commit_callbacks) == 1

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert [attempt.status_code for attempt in delivery.attempt_rows.all()] == [500, 204]
    assert len({headers["webhook-id"] for headers, _ in receiver.requests}) == 1
    assert all(verify(secret, headers, body) for headers, body in receiver.requests)


def test_only_the_selected_client_gets_it(admin_web, workspace, receiver, django_capture_on_commit_callbacks):
    client, _ = make_client(workspace, "billing", receiver.url)
    neighbour = Receiver()
    elsewhere = Receiver()
    try:
        make_client(workspace, "crm", neighbour.url)
        make_client(WorkspaceFactory(), "billing", elsewhere.url)
        send_test_event(admin_web, client, capture=django_capture_on_commit_callbacks)
        assert neighbour.requests == [] and elsewhere.requests == []
    finally:
        neighbour.close()
        elsewhere.close()
    assert len(receiver.requests) == 1
    assert list(Delivery.objects.values_list("client", flat=True)) == [client.pk]


def test_a_client_without_an_endpoint_gets_a_clear_message(
    admin_web, workspace, receiver, django_capture_on_commit_callbacks
):
    quiet, _ = make_client(workspace, "quiet", None)
    response = send_test_event(admin_web, quiet, capture=django_capture_on_commit_callbacks)
    assert shown_messages(response) == [
        "No test event for 1 client(s) without an endpoint: quiet. Set the client's endpoint first."
    ]
    assert not Delivery.objects.exists()
    assert not AuditEntry.objects.filter(action="client.send_test_event").exists()

    # with others selected, those with an endpoint get theirs
    billing, _ = make_client(workspace, "billing", receiver.url)
    response = send_test_event(admin_web, quiet, billing, capture=django_capture_on_commit_callbacks)
    url = reverse("admin:clients_delivery_change", args=[Delivery.objects.get().pk])
    assert shown_messages(response) == [
        f'Test event sent to 1 client(s): <a href="{url}">billing</a>.',
        "No test event for 1 client(s) without an endpoint: quiet. Set the client's endpoint first.",
    ]
    assert len(receiver.requests) == 1


def test_only_an_operator_sends_one(workspace, receiver, django_capture_on_commit_callbacks):
    client, _ = make_client(workspace, "billing", receiver.url)
    body = {"action": "send_test_events", "_selected_action": [str(client.pk)]}
    web = WebClient()
    web.force_login(AccountFactory())  # an account, not an operator
    with django_capture_on_commit_callbacks(execute=True):
        response = web.post(CHANGELIST, body)
        anonymous = WebClient().post(CHANGELIST, body)
    assert response.status_code == anonymous.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert receiver.requests == [] and not Delivery.objects.exists()


def test_the_action_needs_the_csrf_token(operator, workspace, receiver, django_capture_on_commit_callbacks):
    client, _ = make_client(workspace, "billing", receiver.url)
    web = WebClient(enforce_csrf_checks=True)
    web.force_login(operator)
    body = {"action": "send_test_events", "_selected_action": [str(client.pk)]}
    with django_capture_on_commit_callbacks(execute=True):
        assert web.post(CHANGELIST, body).status_code == 403
    assert receiver.requests == [] and not Delivery.objects.exists()
    token = web.get(CHANGELIST).context["csrf_token"]
    with django_capture_on_commit_callbacks(execute=True):
        assert web.post(CHANGELIST, {**body, "csrfmiddlewaretoken": str(token)}).status_code == 302
    assert len(receiver.requests) == 1


def test_the_service_refuses_a_client_without_an_endpoint(workspace, operator):
    quiet, _ = make_client(workspace, "quiet", None)
    with pytest.raises(ApiError) as refused:
        services.send_test_event(quiet, actor=operator)
    assert (refused.value.status, refused.value.message) == (400, "client has no endpoint")
    assert not Delivery.objects.exists()
