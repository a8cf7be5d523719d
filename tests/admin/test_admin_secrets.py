"""Every admin page renders, and none shows a secret: password hashes, access or refresh tokens, one-time
e-mail tokens in outbox payloads, client secrets."""

import uuid
from datetime import timedelta

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from authn import tokens
from authn.sessions import issue_session
from clients.models import Client, Delivery, DeliveryAttempt
from clients.services import create_client, regenerate_secret
from iam.admin import AUDIT_SUBJECTS
from iam.models import AuditEntry, OutboxMessage
from iam.platform import crypto
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)


@pytest.fixture
def secrets(operator) -> list[str]:
    """One sample row of every model, and the secrets that must never appear in the admin's HTML."""
    workspace = WorkspaceFactory()
    account = AccountFactory()
    project = ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["projects:*"])
    MembershipFactory(account=account, workspace=workspace, roles=[role])
    MembershipFactory(account=account, workspace=workspace, project=project, scope="project", roles=[role])
    CredentialFactory(account=account, workspace=workspace)
    found = ["$argon2id$", account.password, operator.password]
    for who in (account, operator):
        session = issue_session(who, amr=["pwd"])
        found += [session["access_token"], session["refresh_token"]]
    reset, _ = tokens.issue(
        account.pk, type=tokens.PASSWORD_RESET, session_version=1, lifetime=timedelta(hours=1)
    )
    found.append(reset)
    now = timezone.now()
    OutboxMessage.objects.create(
        topic="email.send",
        payload={"to": account.email, "template": "password_reset", "link": f"https://x/reset?token={reset}"},
        deadline=now,
    )
    OutboxMessage.objects.create(
        topic="push.event",
        payload={"type": "role.updated", "data": {"account_ids": [str(account.pk)]}},
        status="failed",
        deadline=now,
        processed_at=now,
        last_error="gave up",
    )
    found += client_rows(workspace, operator)
    return found


def client_rows(workspace, operator) -> list[str]:
    """A client with deliveries and attempts, one without an endpoint, one whose secret was rotated: the
    plaintext secrets and their stored forms."""
    client, secret = create_client(
        workspace,
        name="svc",
        endpoint="https://hooks.example.com/iam",
        tags=[],
        meta={"schema_version": "1"},
        actor=operator,
    )
    _, quiet_secret = create_client(
        workspace, name="quiet", tags=[], meta={"schema_version": "1"}, actor=operator
    )
    rotated, first_secret = create_client(
        workspace, name="rotated", tags=[], meta={"schema_version": "1"}, actor=operator
    )
    second_secret = regenerate_secret(rotated, actor=operator)
    now = timezone.now()
    for status in ("pending", "delivered", "failed"):
        delivery = Delivery.objects.create(
            event_id=uuid.uuid4(),
            event_type="client.secret_rotated",
            client=client,
            workspace=workspace,
            endpoint=client.endpoint,
            secret_encrypted=client.secret_encrypted,
            payload={"type": "client.secret_rotated", "workspace_id": str(workspace.pk)},
            status=status,
            attempts=1,
            delivered_at=now if status == "delivered" else None,
        )
        DeliveryAttempt.objects.create(delivery=delivery, status_code=200 if status == "delivered" else 503)
    Delivery.objects.create(  # its client is gone: the delivery keeps the secret it was made with
        event_id=uuid.uuid4(),
        event_type="workspace.deleted",
        client=None,
        workspace=None,
        endpoint="https://gone.example.com/",
        secret_encrypted=crypto.encrypt(quiet_secret),
        payload={"type": "workspace.deleted"},
        status="failed",
    )
    found = [secret, quiet_secret, first_secret, second_secret]
    for row in Client.objects.all():
        found += [row.secret_encrypted, row.secret_digest]
    found += list(Delivery.objects.exclude(secret_encrypted="").values_list("secret_encrypted", flat=True))
    return found


def pages(operator) -> list[str]:
    request = RequestFactory().get("/admin/")
    request.user = operator
    urls = [reverse("admin:index"), reverse("admin:password_change")]
    for model, model_admin in admin.site._registry.items():
        info = model._meta.app_label, model._meta.model_name
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
        if model_admin.has_add_permission(request):
            urls.append(reverse("admin:{}_{}_add".format(*info)))
        for pk in model._default_manager.values_list("pk", flat=True):
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[pk]))
            urls.append(reverse("admin:{}_{}_history".format(*info), args=[pk]))
            if info == ("accounts", "account"):
                urls.append(reverse("admin:accounts_account_password", args=[pk]))
    return urls


def test_no_admin_page_shows_a_secret(admin_web, operator, secrets):
    urls = pages(operator)
    assert len(urls) > 20
    for url in urls:
        response = admin_web.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        for secret in secrets:
            assert secret not in html, f"{url} shows a secret"


def test_every_changelist_search_and_filter_renders(admin_web, secrets):
    for model, model_admin in admin.site._registry.items():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        if model_admin.search_fields:
            assert admin_web.get(url, {"q": "example"}).status_code == 200, url
        assert admin_web.get(url, {"o": "1"}).status_code == 200, url


def test_changelists_do_not_query_per_row(admin_web, secrets, django_assert_max_num_queries):
    for _ in range(5):
        MembershipFactory(roles=[RoleFactory(permissions=["a:b"])])
        CredentialFactory()
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        # The audit log names its actors, workspaces and resources with one query per resource type on
        # the page, and its two filters list theirs (tests/admin/test_audit_admin.py holds it fixed).
        budget = 12 + len(AUDIT_SUBJECTS) if model is AuditEntry else 12
        with django_assert_max_num_queries(budget):
            assert admin_web.get(url).status_code == 200
