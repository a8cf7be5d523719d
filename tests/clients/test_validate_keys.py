"""`clients/validate` of a service account's API key (docs/api.md#api-keys): the answer, each refusal
(two workspaces: the key of another workspace's service account is `not_a_member`), and the warm call's
budget of zero queries."""

import datetime as dt

import pytest
from django.utils import timezone

from rbac.machine_cache import forget_keys
from rbac.models import ServiceAccountKey
from tests.conftest import ApiClient, ok
from tests.factories import ClientFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.admin("service-accounts:*", "projects:*")


@pytest.fixture
def client(workspace):
    return ClientFactory(workspace=workspace)


@pytest.fixture
def service_account(admin, workspace):
    role = RoleFactory(workspace=workspace, name="deployer", permissions=["projects:*"])
    body = {"name": "ci", "role_ids": [str(role.pk)], "tags": [], "meta": {"schema_version": "1"}}
    return ok(admin.call("/service-accounts/create", body))


def new_key(admin, service_account, **body):
    return ok(admin.call("/service-accounts/create-key", {"id": service_account["id"], "name": "k", **body}))


def validate(client, token, **extra):
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token, **extra}
    return ok(ApiClient().call("/clients/validate", body))


def test_a_key_of_the_clients_workspace_is_authorized(client, workspace, admin, service_account):
    expires = (timezone.now() + dt.timedelta(days=3)).replace(microsecond=0)
    key = new_key(admin, service_account, expires_at=expires.isoformat())
    data = validate(client, key["key"], permission="projects:update")
    assert data == {
        "authorized": True,
        "reason": None,
        "account": None,
        "service_account": {"id": service_account["id"], "name": "ci"},
        "workspace_id": str(workspace.pk),
        "roles": ["deployer"],
        "permissions": ["projects:*"],
        "allowed": True,
        "expires_at": expires.isoformat().replace("+00:00", "Z"),
    }
    assert validate(client, key["key"], permission="roles:create")["allowed"] is False
    never = new_key(admin, service_account)
    assert validate(client, never["key"])["expires_at"] is None


def test_refusals(client, admin, service_account, member_of):
    key = new_key(admin, service_account)
    assert validate(client, "iam_sk_" + "A" * 43)["reason"] == "invalid_token"
    assert validate(client, key["key"])["authorized"] is True

    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": False}))
    data = validate(client, key["key"])
    assert (data["authorized"], data["reason"], data["service_account"]) == (False, "account_disabled", None)
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": True}))
    assert validate(client, key["key"])["authorized"] is True

    expiring = new_key(
        admin, service_account, expires_at=(timezone.now() + dt.timedelta(minutes=1)).isoformat()
    )
    assert validate(client, expiring["key"])["authorized"] is True
    ServiceAccountKey.objects.filter(pk=expiring["id"]).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    forget_keys([ServiceAccountKey.objects.get(pk=expiring["id"]).digest])
    assert validate(client, expiring["key"])["reason"] == "token_expired"

    ok(admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": key["id"]}))
    assert validate(client, key["key"])["reason"] == "invalid_token"

    other_workspace = WorkspaceFactory()
    _, other_admin = member_of(other_workspace, "*")
    body = {"name": "theirs", "role_ids": [], "tags": [], "meta": {"schema_version": "1"}}
    theirs = ok(other_admin.call("/service-accounts/create", body))
    their_key = new_key(other_admin, theirs)
    data = validate(client, their_key["key"], permission="projects:list")
    assert (data["authorized"], data["reason"], data["allowed"]) == (False, "not_a_member", False)
    assert validate(ClientFactory(workspace=other_workspace), their_key["key"])["authorized"] is True


def test_a_wrong_client_secret_is_invalid_client(client, admin, service_account):
    key = new_key(admin, service_account)
    body = {"client_id": str(client.pk), "client_secret": "whsec_not-it", "token": key["key"]}
    assert ok(ApiClient().call("/clients/validate", body))["reason"] == "invalid_client"


def test_explain_of_a_key_matches_no_membership(client, admin, service_account):
    key = new_key(admin, service_account)
    data = validate(client, key["key"], permission="projects:list", explain=True)
    assert data["allowed"] is True and data["matched"] == []


def test_a_warm_validation_of_a_key_costs_no_query(client, admin, service_account, django_assert_num_queries):
    key = new_key(admin, service_account)
    validate(client, key["key"], permission="projects:list")
    with django_assert_num_queries(0):
        assert validate(client, key["key"], permission="projects:list")["authorized"] is True
