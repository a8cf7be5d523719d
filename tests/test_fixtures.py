"""The shared fixtures (tests/conftest.py) and factories (tests/factories.py) are what the suite builds
on: each holds what its docstring promises."""

from datetime import timedelta

import pytest
from django.utils import timezone

from clients.models import Client
from iam.platform import crypto
from rbac.models import Membership
from tests.conftest import ApiClient, err, ok, token_for
from tests.factories import (
    PASSWORD,
    ClientFactory,
    DeliveryAttemptFactory,
    DeliveryFactory,
    MembershipFactory,
)


def grants(account, workspace) -> list[str]:
    membership = Membership.objects.get(account=account, workspace=workspace)
    return sorted(permission.name for role in membership.roles.all() for permission in role.permissions.all())


def test_admin_holds_every_permission_in_its_own_workspace_by_default(admin, admin_account, workspace, root):
    assert workspace != root
    assert grants(admin_account, workspace) == ["*"]
    assert admin.workspace == str(workspace.pk)
    ok(admin.call("/projects/list"))


@pytest.mark.admin("clients:*", "memberships:list")
def test_a_mark_narrows_the_admins_grants(admin, admin_account, workspace):
    assert grants(admin_account, workspace) == ["clients:*", "memberships:list"]
    ok(admin.call("/clients/list"))
    err(admin.call("/projects/list"), 403)


@pytest.mark.admin(operator=True)
def test_a_mark_makes_the_admin_the_operator(admin, admin_account, operator, workspace):
    assert admin_account == operator and admin_account.is_superuser
    assert not Membership.objects.filter(account=operator).exists()
    assert admin.workspace == str(workspace.pk)


def test_member_logs_in_with_the_factory_password(api, member):
    ok(api.call("/auth/login", {"email": member.email, "password": PASSWORD}))


def test_a_factory_client_is_stored_as_the_service_stores_it(workspace, member):
    client = ClientFactory(workspace=workspace)
    stored = Client.objects.get(pk=client.pk)
    assert client.secret not in {stored.secret_encrypted, stored.secret_digest}
    assert crypto.decrypt(stored.secret_encrypted) == client.secret
    assert crypto.digest_matches(client.secret, stored.secret_digest)
    MembershipFactory(account=member, workspace=workspace)
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token_for(member)}
    assert ok(ApiClient().call("/clients/validate", body))["authorized"] is True
    chosen = ClientFactory(secret="a chosen secret")
    assert (
        crypto.digest_matches("a chosen secret", chosen.secret_digest) and chosen.secret == "a chosen secret"
    )


def test_a_factory_delivery_copies_its_client_and_backdates(db):
    client = ClientFactory(endpoint="https://hooks.example.com/x")
    week_ago = timezone.now() - timedelta(days=7)
    attempt = DeliveryAttemptFactory(
        delivery=DeliveryFactory(client=client, created_at=week_ago), attempted_at=week_ago
    )
    attempt.refresh_from_db()
    delivery = attempt.delivery
    delivery.refresh_from_db()
    assert (delivery.workspace_id, delivery.endpoint) == (client.workspace_id, "https://hooks.example.com/x")
    assert crypto.decrypt(delivery.secret_encrypted) == client.secret
    assert (delivery.status, delivery.payload["type"]) == ("pending", delivery.event_type)
    assert delivery.created_at == week_ago and attempt.attempted_at == week_ago
