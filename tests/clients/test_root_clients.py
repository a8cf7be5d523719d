"""One backend for many workspaces (docs/integration.md#one-backend-for-many-workspaces): a client of the
root workspace validates tokens and keys for any workspace it names with `workspace_id`, as that
workspace's own client would answer; any other client naming one is refused; root clients hear every
workspace's push events and read them from `clients/events`."""

import pytest

from clients.models import Delivery
from tenancy.workspace_cache import root_workspace
from tests.clients.test_events import pull_until
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import AccountFactory, ClientFactory, MembershipFactory, RoleFactory, WorkspaceFactory

ROOT_ONLY = "workspace_id is for clients of the root workspace"
META = {"schema_version": "1"}


@pytest.fixture
def root_client(root):
    return ClientFactory(workspace=root, endpoint="https://backend.example.com/iam-events")


@pytest.fixture
def tenants(db):
    """Two workspaces; Ada is an editor of the first only."""
    first, second = WorkspaceFactory(), WorkspaceFactory()
    ada = AccountFactory()
    role = RoleFactory(workspace=first, name="editor", permissions=["projects:*"])
    MembershipFactory(account=ada, workspace=first, roles=[role])
    return first, second, ada


def validate(client, token, **extra):
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token, **extra}
    return ApiClient().call("/clients/validate", body)


def test_a_root_client_answers_for_the_workspace_it_names(root_client, tenants):
    first, second, ada = tenants
    token = client_for(ada).token
    data = ok(validate(root_client, token, workspace_id=str(first.pk), permission="projects:update"))
    assert (data["authorized"], data["workspace_id"], data["roles"], data["allowed"]) == (
        True,
        str(first.pk),
        ["editor"],
        True,
    )
    assert data == ok(validate(ClientFactory(workspace=first), token, permission="projects:update"))
    data = ok(validate(root_client, token, workspace_id=str(second.pk)))
    assert (data["authorized"], data["reason"], data["workspace_id"]) == (
        False,
        "not_a_member",
        str(second.pk),
    )
    # without workspace_id: its own workspace, where Ada is no member
    assert ok(validate(root_client, token))["reason"] == "not_a_member"


def test_an_unknown_workspace_is_not_a_member(root_client, tenants):
    _, _, ada = tenants
    unknown = "0d8f2b6a-4c1e-4a3b-8f5d-9e7c1a3b5d24"
    data = ok(validate(root_client, client_for(ada).token, workspace_id=unknown))
    assert (data["authorized"], data["reason"]) == (False, "not_a_member")


def test_the_named_workspaces_mfa_policy_applies(root_client, tenants):
    first, _, ada = tenants
    first.mfa_required = True
    first.save()
    data = ok(validate(root_client, client_for(ada).token, workspace_id=str(first.pk)))
    assert (data["authorized"], data["reason"]) == (False, "mfa_required")


def test_another_workspaces_client_may_not_name_a_workspace(tenants):
    first, second, ada = tenants
    token = client_for(ada).token
    tenant_client = ClientFactory(workspace=second)
    body = err(validate(tenant_client, token, workspace_id=str(first.pk)), 400, ROOT_ONLY)
    assert body["field"] == "workspace_id"
    # the full endpoint (a body the fast path leaves to it) says the same
    body = err(
        validate(tenant_client, token, workspace_id=str(first.pk), explain=True, extra="x"), 400, ROOT_ONLY
    )
    # a client that does not prove itself learns nothing of where it stands
    wrong = {"client_id": str(tenant_client.pk), "client_secret": "whsec_wrong", "token": token}
    data = ok(ApiClient().call("/clients/validate", {**wrong, "workspace_id": str(first.pk)}))
    assert data["reason"] == "invalid_client"


def test_a_root_client_validates_any_workspaces_keys(root_client, tenants, member_of):
    first, second, _ = tenants
    _, owner = member_of(first, "*")
    machine = ok(
        owner.call("/service-accounts/create", {"name": "ci", "role_ids": [], "tags": [], "meta": META})
    )
    key = ok(owner.call("/service-accounts/create-key", {"id": machine["id"], "name": "k"}))["key"]
    data = ok(validate(root_client, key, workspace_id=str(first.pk)))
    assert data["authorized"] is True and data["service_account"]["id"] == machine["id"]
    assert ok(validate(root_client, key, workspace_id=str(second.pk)))["reason"] == "not_a_member"
    err(validate(ClientFactory(workspace=second), key, workspace_id=str(first.pk)), 400, ROOT_ONLY)


def test_a_warm_root_validation_costs_no_query(root_client, tenants, django_assert_num_queries):
    first, _, ada = tenants
    token = client_for(ada).token
    ok(validate(root_client, token, workspace_id=str(first.pk)))
    with django_assert_num_queries(0):
        assert ok(validate(root_client, token, workspace_id=str(first.pk)))["authorized"] is True


def test_root_clients_hear_every_workspaces_events(root_client, tenants, member_of):
    first, second, _ = tenants
    _, first_admin = member_of(first, "*")
    tenant_client = ClientFactory(workspace=second, endpoint="https://second.example.com/events")
    body = {"name": "new-role", "permission_ids": [], "tags": [], "meta": META}
    role = ok(first_admin.call("/roles/create", body))
    ok(first_admin.call("/roles/delete", {"id": role["id"]}))
    heard = Delivery.objects.filter(client=root_client, event_type="role.deleted")
    assert [delivery.payload["workspace_id"] for delivery in heard] == [str(first.pk)]
    assert not Delivery.objects.filter(client=tenant_client).exists()  # another tenant's hears nothing


@pytest.mark.django_db(transaction=True)
def test_a_root_client_reads_every_workspaces_events(member_of):
    root = root_workspace()
    _, root_admin = member_of(root, "*")
    listener = ok(root_admin.call("/clients/create", {"name": "backend", "tags": [], "meta": META}))
    first, second = WorkspaceFactory(), WorkspaceFactory()
    _, first_admin = member_of(first, "*")
    _, second_admin = member_of(second, "*")
    tenant = ok(second_admin.call("/clients/create", {"name": "svc", "tags": [], "meta": META}))
    body = {"name": "r", "permission_ids": [], "tags": [], "meta": META}
    role = ok(first_admin.call("/roles/create", body))
    ok(first_admin.call("/roles/delete", {"id": role["id"]}))
    heard = pull_until(listener, 1)["events"]
    assert [(event["type"], event["workspace_id"]) for event in heard] == [("role.deleted", str(first.pk))]
    assert (
        ok(
            ApiClient().call(
                "/clients/events", {"client_id": tenant["id"], "client_secret": tenant["secret"]}
            )
        )["events"]
        == []
    )
