"""permissions/, roles/ and memberships/ over HTTP. The `admin` fixture holds `*`: granting needs the grants
(docs/api.md#authorization, see test_escalation)."""

import pytest

from iam.models import Event
from rbac.models import Membership, Permission, Role
from tests.conftest import client_for, err, ok
from tests.factories import (
    AccountFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
)

META = {"schema_version": "1"}
NAME_FORM = "name must have the form resource:action (each side a name or *), or *"


def events(kind: str) -> list[dict]:
    return [message.payload for message in Event.objects.filter(payload__type=kind)]


# Permissions


def test_permission_create_describe_update_delete(admin):
    data = ok(
        admin.call(
            "/permissions/create", {"name": "invoices:read", "code": "inv:r", "tags": [], "meta": META}
        )
    )
    assert (data["name"], data["code"], data["description"]) == ("invoices:read", "inv:r", None)
    assert ok(admin.call("/permissions/describe", {"code": "inv:r"}))["id"] == data["id"]
    data = ok(admin.call("/permissions/update", {"id": data["id"], "name": "invoices:*", "code": None}))
    assert (data["name"], data["code"]) == ("invoices:*", None)
    assert ok(admin.call("/permissions/delete", {"id": data["id"]})) == {"id": data["id"]}
    err(admin.call("/permissions/describe", {"id": data["id"]}), 404, "permission not found")


@pytest.mark.parametrize("name", ["invoices", "a:b:c", ":read", "a:", "a b:c", "*:", "**", "a:b\n", "*\n"])
def test_permission_name_format(admin, name):
    err(admin.call("/permissions/create", {"name": name, "tags": [], "meta": META}), 400, NAME_FORM)


def test_permission_name_length(admin):
    body = {"name": "x" * 120 + ":" + "y" * 10, "tags": [], "meta": META}
    err(admin.call("/permissions/create", body), 400, "name must have at most 128 characters")


@pytest.mark.parametrize("name", ["*", "a:*", "*:b", "a.b-c_d:e", "*:*"])
def test_permission_name_wildcards_accepted(operator_api, workspace, name):
    api = operator_api.in_workspace(workspace)
    assert ok(api.call("/permissions/create", {"name": name, "tags": [], "meta": META}))["name"] == name


def test_permission_conflicts(workspace, admin):
    PermissionFactory(workspace=workspace, name="a:b", code="c:d")
    err(
        admin.call("/permissions/create", {"name": "a:b", "tags": [], "meta": META}),
        409,
        "name already exists",
    )
    err(
        admin.call("/permissions/create", {"name": "x:y", "code": "c:d", "tags": [], "meta": META}),
        409,
        "code already exists",
    )


def test_permission_rename_and_delete_emit_to_active_holders(workspace, admin):
    role = RoleFactory(workspace=workspace, permissions=["a:b"])
    holder = MembershipFactory(workspace=workspace, roles=[role])
    MembershipFactory(workspace=workspace, roles=[role], status="invited")
    permission = Permission.objects.get(workspace=workspace, name="a:b")
    ok(admin.call("/permissions/update", {"id": str(permission.pk), "name": "a:c"}))
    (event,) = events("permission.updated")
    assert event["data"] == {
        "account_ids": [str(holder.account_id)],
        "resource": {"type": "permission", "id": str(permission.pk)},
    }
    ok(admin.call("/permissions/delete", {"id": str(permission.pk)}))
    assert events("permission.deleted")[0]["data"]["account_ids"] == [str(holder.account_id)]
    assert list(role.permissions.all()) == []


# Roles


def test_role_create_carries_whole_permissions(workspace, admin):
    first, second = PermissionFactory(workspace=workspace), PermissionFactory(workspace=workspace)
    data = ok(
        admin.call(
            "/roles/create",
            {
                "name": "editor",
                "permission_ids": [str(first.pk), str(second.pk)],
                "tags": ["t"],
                "meta": META,
            },
        )
    )
    assert data["name"] == "editor" and data["tags"] == ["t"]
    assert sorted(item["name"] for item in data["permissions"]) == sorted([first.name, second.name])
    assert set(data["permissions"][0]) == {
        "id",
        "workspace_id",
        "name",
        "code",
        "description",
        "tags",
        "meta",
        "created_at",
        "updated_at",
    }
    assert ok(admin.call("/roles/describe", {"id": data["id"]})) == data


def test_role_update_replaces_permissions_and_emits(workspace, admin):
    old, new = PermissionFactory(workspace=workspace), PermissionFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace)
    role.permissions.add(old)
    holder = MembershipFactory(workspace=workspace, roles=[role])
    data = ok(admin.call("/roles/update", {"id": str(role.pk), "permission_ids": [str(new.pk)]}))
    assert [item["id"] for item in data["permissions"]] == [str(new.pk)]
    assert events("role.updated")[0]["data"]["account_ids"] == [str(holder.account_id)]
    ok(admin.call("/roles/update", {"id": str(role.pk), "description": "only text"}))
    assert len(events("role.updated")) == 1  # nothing about authorization changed


def test_role_references_must_be_of_this_workspace(workspace, admin):
    foreign = PermissionFactory()
    body = {"name": "r", "permission_ids": [str(foreign.pk)], "tags": [], "meta": META}
    response = err(
        admin.call("/roles/create", body), 400, "permission_ids must name permissions of this workspace"
    )
    assert response["field"] == "permission_ids"
    err(
        admin.call("/roles/create", {**body, "permission_ids": ["not-a-uuid"]}),
        400,
        "permission_ids must be an array of UUIDs",
    )
    assert not Role.objects.filter(name="r").exists()


def test_role_name_conflict_and_delete(workspace, admin):
    role = RoleFactory(workspace=workspace, name="dup")
    holder = MembershipFactory(workspace=workspace, roles=[role])
    err(
        admin.call("/roles/create", {"name": "dup", "permission_ids": [], "tags": [], "meta": META}),
        409,
        "name already exists",
    )
    assert ok(admin.call("/roles/delete", {"id": str(role.pk)})) == {"id": str(role.pk)}
    assert list(Membership.objects.get(pk=holder.pk).roles.all()) == []
    assert events("role.deleted")[0]["data"]["account_ids"] == [str(holder.account_id)]


def test_roles_list_of_100_costs_at_most_4_queries(workspace, admin, django_assert_max_num_queries):
    permissions = PermissionFactory.create_batch(5, workspace=workspace)
    for role in RoleFactory.create_batch(100, workspace=workspace):
        role.permissions.set(permissions)
    ok(admin.call("/roles/list"))
    with django_assert_max_num_queries(3):  # count, the roles with their permission ids, the permissions
        data = ok(admin.call("/roles/list", {"options": {"limit": 100}}))
    assert data["metadata"]["count"] == 100
    # Past 100 records a page reads the rest in a second read (docs/api.md#quotas-and-budgets: what a worker
    # holds at once stays bounded): the ids of the rest, then their rows and their permissions.
    with django_assert_max_num_queries(6):
        data = ok(admin.call("/roles/list", {"options": {"limit": 1000}}))
    assert data["metadata"]["total"] == 101 and all(
        len(item["permissions"]) in (5, 1) for item in data["roles"]
    )


# Memberships


def membership_body(account, roles=(), **extra) -> dict:
    return {
        "account_id": str(account.pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(role.pk) for role in roles],
        "tags": [],
        "meta": META,
        **extra,
    }


def test_membership_create_nests_roles_with_permissions_and_emits(workspace, admin):
    account = AccountFactory()
    role = RoleFactory(workspace=workspace, permissions=["projects:list"])
    data = ok(admin.call("/memberships/create", membership_body(account, [role])))
    # docs/api.md#invitations: another account's membership starts invited, whatever `status` says.
    assert (data["account_id"], data["scope"], data["status"], data["project_id"], data["accepted_at"]) == (
        str(account.pk),
        "workspace",
        "invited",
        None,
        None,
    )
    assert data["roles"][0]["name"] == role.name
    assert data["roles"][0]["permissions"][0]["name"] == "projects:list"
    (event,) = events("membership.created")
    assert event["workspace_id"] == str(workspace.pk) and event["data"]["account_ids"] == [str(account.pk)]
    err(client_for(account, workspace).call("/projects/list"), 403, "not a member of this workspace")
    ok(client_for(account).call("/memberships/accept", {"id": data["id"]}))
    ok(client_for(account, workspace).call("/projects/list"))


@pytest.mark.parametrize(
    ("change", "status", "message", "field"),
    [
        ({"scope": "team"}, 400, "invalid scope", "scope"),
        ({"status": "gone"}, 400, "invalid status", "status"),
        ({"scope": "project"}, 400, "project_id required", "project_id"),
        (
            {"account_id": "00000000-0000-0000-0000-000000000000"},
            400,
            "account_id must name an existing account",
            "account_id",
        ),
        ({"meta": {}}, 400, "meta.schema_version required", "meta"),
        ({"role_ids": None}, 400, "role_ids required", "role_ids"),
    ],
)
def test_membership_validation(admin, change, status, message, field):
    body = err(
        admin.call("/memberships/create", {**membership_body(AccountFactory()), **change}),
        status,
        message,
    )
    assert body["field"] == field


def test_membership_unique_per_account_scope_and_project(workspace, admin):
    account = AccountFactory()
    project = ProjectFactory(workspace=workspace)
    ok(admin.call("/memberships/create", membership_body(account)))
    err(admin.call("/memberships/create", membership_body(account)), 409, "membership already exists")
    body = membership_body(account, scope="project", project_id=str(project.pk))
    ok(admin.call("/memberships/create", body))
    err(admin.call("/memberships/create", body), 409, "membership already exists")


def test_membership_update_status_roles_scope(workspace, admin):
    project = ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace)
    membership = MembershipFactory(workspace=workspace, status="suspended")
    data = ok(
        admin.call(
            "/memberships/update",
            {
                "id": str(membership.pk),
                "status": "active",
                "role_ids": [str(role.pk)],
                "meta": {"note": "no version needed"},
            },
        )
    )
    assert data["status"] == "active" and [item["id"] for item in data["roles"]] == [str(role.pk)]
    assert data["meta"] == {"note": "no version needed"} and data["updated_at"]
    data = ok(
        admin.call(
            "/memberships/update",
            {"id": str(membership.pk), "scope": "project", "project_id": str(project.pk)},
        )
    )
    assert (data["scope"], data["project_id"]) == ("project", str(project.pk))
    data = ok(admin.call("/memberships/update", {"id": str(membership.pk), "scope": "workspace"}))
    assert (data["scope"], data["project_id"]) == ("workspace", None)
    assert len(events("membership.updated")) == 3


def test_membership_delete_ends_access_at_once(workspace, admin):
    account, member_api = AccountFactory(), None
    membership = MembershipFactory(
        workspace=workspace,
        account=account,
        roles=[RoleFactory(workspace=workspace, permissions=["projects:list"])],
    )
    member_api = client_for(account, workspace)
    ok(member_api.call("/projects/list"))  # grants now cached
    assert ok(admin.call("/memberships/delete", {"id": str(membership.pk)})) == {"id": str(membership.pk)}
    err(member_api.call("/projects/list"), 403, "not a member of this workspace")
    assert events("membership.deleted")[0]["data"]["account_ids"] == [str(account.pk)]


def test_membership_list_filters(workspace, admin):
    first = MembershipFactory(workspace=workspace, status="invited")
    MembershipFactory(workspace=workspace, status="suspended")
    data = ok(admin.call("/memberships/list", {"filter": {"fields": {"status": "invited"}}}))
    assert [item["id"] for item in data["memberships"]] == [str(first.pk)]
    data = ok(admin.call("/memberships/list", {"filter": {"fields": {"account_id": str(first.account_id)}}}))
    assert data["metadata"]["total"] == 1


def test_memberships_list_of_100_costs_at_most_5_queries(workspace, admin, django_assert_max_num_queries):
    roles = RoleFactory.create_batch(3, workspace=workspace, permissions=["a:b", "c:d"])
    for account in AccountFactory.create_batch(100):
        MembershipFactory(workspace=workspace, account=account, roles=roles)
    ok(admin.call("/memberships/list"))
    with django_assert_max_num_queries(4):  # count, memberships, their roles, the roles' permissions
        assert ok(admin.call("/memberships/list"))["metadata"]["count"] == 100
    with django_assert_max_num_queries(8):  # past 100 records: a second read (see the roles' list)
        data = ok(admin.call("/memberships/list", {"options": {"limit": 1000}}))
    assert data["metadata"]["count"] == 101
    assert any(
        len(item["roles"]) == 3 and len(item["roles"][0]["permissions"]) == 2 for item in data["memberships"]
    )


def test_a_deep_page_of_memberships_matches_the_shallow_one_and_stays_in_the_workspace(
    workspace, admin, monkeypatch, django_assert_max_num_queries
):
    for account in AccountFactory.create_batch(20):
        MembershipFactory(workspace=workspace, account=account, status="invited")
        MembershipFactory(account=account, status="invited")  # another workspace's, never listed
    body = {"filter": {"fields": {"status": "invited"}}, "options": {"offset": 8, "limit": 5}}
    shallow = ok(admin.call("/memberships/list", body))
    monkeypatch.setattr("iam.http.list_endpoint.DEEP_OFFSET", 1)
    with django_assert_max_num_queries(5):
        deep = ok(admin.call("/memberships/list", body))
    assert deep == shallow
    assert deep["metadata"]["total"] == 20 and deep["metadata"]["count"] == 5
    assert {item["workspace_id"] for item in deep["memberships"]} == {str(workspace.pk)}


def test_project_scope_member_manages_memberships_of_its_project_only(workspace):
    mine, other = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["memberships:*"])
    lead = MembershipFactory(workspace=workspace, project=mine, scope="project", roles=[role])
    lead_api = client_for(lead.account, workspace)
    newcomer = AccountFactory()
    ok(
        lead_api.call(
            "/memberships/create", membership_body(newcomer, scope="project", project_id=str(mine.pk))
        )
    )
    err(
        lead_api.call(
            "/memberships/create", membership_body(newcomer, scope="project", project_id=str(other.pk))
        ),
        403,
        "missing permission memberships:create",
    )
    err(
        lead_api.call("/memberships/create", membership_body(newcomer)),
        403,
        "missing permission memberships:create",
    )
    outside = MembershipFactory(workspace=workspace)
    err(
        lead_api.call("/memberships/describe", {"id": str(outside.pk)}),
        403,
        "missing permission memberships:describe",
    )
    listed = ok(lead_api.call("/memberships/list"))["memberships"]
    assert {item["project_id"] for item in listed} == {str(mine.pk)}
