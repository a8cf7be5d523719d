"""docs/api.md#quotas-and-budgets: per-workspace quotas, workspaces per account, operators exempt, one
tenant's use never counted against another's. Small limits through `settings`; the race at the edge is in
tests/live/test_quotas_live.py."""

import pytest

from tests.conftest import client_for, err, ok
from tests.factories import (
    AccountFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}


def project(n: int) -> dict:
    return {"name": f"p{n}", "code": f"p{n}", "config": META, "tags": [], "meta": META}


def permission(n: int) -> dict:
    return {"name": f"thing{n}:read", "tags": [], "meta": META}


def role(n: int, permission_ids=()) -> dict:
    return {"name": f"r{n}", "permission_ids": [str(pk) for pk in permission_ids], "tags": [], "meta": META}


def client(n: int) -> dict:
    return {"name": f"c{n}", "tags": [], "meta": META}


def workspace_body(n: int) -> dict:
    return {"name": f"w{n}", "slug": f"quota-w{n}", "config": META, "tags": [], "meta": META}


def membership(account, role_ids=()) -> dict:
    body = {"account_id": str(account.pk), "scope": "workspace", "status": "invited"}
    return {**body, "role_ids": [str(pk) for pk in role_ids], "tags": [], "meta": META}


# (setting, path, body of the n-th create, what) for the quotas on a workspace's records.
RECORDS = {
    "projects": ("IAM_QUOTA_PROJECTS", "/projects/create", project),
    "roles": ("IAM_QUOTA_ROLES", "/roles/create", role),
    "permissions": ("IAM_QUOTA_PERMISSIONS", "/permissions/create", permission),
    "clients": ("IAM_QUOTA_CLIENTS", "/clients/create", client),
}


def test_defaults(settings):
    from iam import settings as defaults

    assert (defaults.IAM_QUOTA_PROJECTS, defaults.IAM_QUOTA_ROLES, defaults.IAM_QUOTA_PERMISSIONS) == (
        1000,
        1000,
        5000,
    )
    assert (defaults.IAM_QUOTA_CLIENTS, defaults.IAM_QUOTA_SSO_CONNECTIONS) == (100, 10)
    assert defaults.IAM_QUOTA_PENDING_INVITATIONS == 1000
    assert (defaults.IAM_QUOTA_PERMISSIONS_PER_ROLE, defaults.IAM_QUOTA_ROLES_PER_MEMBERSHIP) == (500, 50)
    assert defaults.IAM_QUOTA_WORKSPACES == 20


@pytest.mark.parametrize("what", RECORDS)
def test_a_workspace_holds_at_most_its_quota(what, settings, member_of):
    setting, path, body = RECORDS[what]
    # The owner role's `*` permission counts among the workspace's permissions, the owner role among its
    # roles: a workspace made through the API starts with one of each.
    setattr(settings, setting, 3)
    mine, other = WorkspaceFactory(), WorkspaceFactory()
    _, tenant = member_of(mine, "*")
    _, neighbour = member_of(other, "*")
    used = {"roles": 1, "permissions": 1}.get(what, 0)  # member_of's own role and its `*` permission
    for n in range(3 - used):
        ok(tenant.call(path, body(n)))
    err(tenant.call(path, body(99)), 403, f"quota reached: {what} (3)")
    # The other workspace's use is its own: it still has its whole quota.
    for n in range(3 - used):
        ok(neighbour.call(path, body(n)))
    err(neighbour.call(path, body(99)), 403, f"quota reached: {what} (3)")
    # A deleted record frees its place.
    listed = ok(tenant.call(path.replace("create", "list"), {"options": {"order_bys": "!created_at"}}))
    newest = listed[next(key for key in listed if key != "metadata")][0]
    ok(tenant.call(path.replace("create", "delete"), {"id": newest["id"]}))
    ok(tenant.call(path, body(99)))


@pytest.mark.parametrize("what", RECORDS)
def test_operators_are_exempt(what, settings, operator_api):
    setting, path, body = RECORDS[what]
    setattr(settings, setting, 1)
    workspace = WorkspaceFactory()
    api = operator_api.in_workspace(workspace)
    for n in range(3):
        ok(api.call(path, body(n)))


def test_records_made_otherwise_count_too(settings, member_of):
    """The quota counts the workspace's records, however they came (the admin, a command, a factory)."""
    settings.IAM_QUOTA_PROJECTS = 2
    workspace = WorkspaceFactory()
    _, tenant = member_of(workspace, "projects:*")
    ProjectFactory.create_batch(2, workspace=workspace)
    ProjectFactory.create_batch(5)  # elsewhere
    err(tenant.call("/projects/create", project(1)), 403, "quota reached: projects (2)")


def test_permissions_per_role(settings, member_of):
    settings.IAM_QUOTA_PERMISSIONS_PER_ROLE = 2
    workspace = WorkspaceFactory()
    _, tenant = member_of(workspace, "*")
    ids = [permission.pk for permission in PermissionFactory.create_batch(3, workspace=workspace)]
    body = err(tenant.call("/roles/create", role(1, ids)), 403, "quota reached: permissions per role (2)")
    assert body["field"] == "permission_ids"
    made = ok(tenant.call("/roles/create", role(1, ids[:2] + ids[:1])))  # repeated ids count once
    assert len(made["permissions"]) == 2
    body = err(
        tenant.call("/roles/update", {"id": made["id"], "permission_ids": [str(pk) for pk in ids]}),
        403,
        "quota reached: permissions per role (2)",
    )
    assert body["field"] == "permission_ids"
    ok(tenant.call("/roles/update", {"id": made["id"], "permission_ids": [str(ids[2])]}))
    ok(tenant.call("/roles/update", {"id": made["id"], "name": "renamed"}))  # not sent: not weighed


def test_roles_per_membership(settings, member_of):
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 2
    workspace = WorkspaceFactory()
    _, tenant = member_of(workspace, "*")
    ids = [role.pk for role in RoleFactory.create_batch(3, workspace=workspace)]
    invitee = AccountFactory()
    body = err(
        tenant.call("/memberships/create", membership(invitee, ids)),
        403,
        "quota reached: roles per membership (2)",
    )
    assert body["field"] == "role_ids"
    made = ok(tenant.call("/memberships/create", membership(invitee, ids[:2])))
    body = err(
        tenant.call("/memberships/update", {"id": made["id"], "role_ids": [str(pk) for pk in ids]}),
        403,
        "quota reached: roles per membership (2)",
    )
    assert body["field"] == "role_ids"
    ok(tenant.call("/memberships/update", {"id": made["id"], "role_ids": [str(ids[2])]}))


def test_relation_quotas_spare_operators(settings, operator_api):
    settings.IAM_QUOTA_PERMISSIONS_PER_ROLE = 1
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 1
    workspace = WorkspaceFactory()
    api = operator_api.in_workspace(workspace)
    permission_ids = [permission.pk for permission in PermissionFactory.create_batch(2, workspace=workspace)]
    made = ok(api.call("/roles/create", role(1, permission_ids)))
    other = RoleFactory(workspace=workspace)
    ok(api.call("/memberships/create", membership(AccountFactory(), [made["id"], other.pk])))


def test_workspaces_per_account(settings, member):
    settings.IAM_QUOTA_WORKSPACES = 2
    api, neighbour = client_for(member), client_for(AccountFactory())
    first = ok(api.call("/workspace/create", workspace_body(1)))
    ok(api.call("/workspace/create", workspace_body(2)))
    err(api.call("/workspace/create", workspace_body(3)), 403, "quota reached: workspaces (2)")
    # Another account's quota is its own; a workspace the account joined but did not create is not its.
    ok(neighbour.call("/workspace/create", workspace_body(4)))
    ok(neighbour.call("/workspace/create", workspace_body(5)))
    # Deleting one frees its place.
    ok(api.call("/workspace/delete", {"id": first["id"]}))
    ok(api.call("/workspace/create", workspace_body(3)))


def test_operators_create_workspaces_past_the_quota(settings, operator_api):
    settings.IAM_QUOTA_WORKSPACES = 1
    for n in range(3):
        ok(operator_api.call("/workspace/create", workspace_body(n)))


def test_the_quota_refusal_writes_nothing(settings, member_of):
    from iam.models import AuditEntry
    from tenancy.models import Project

    settings.IAM_QUOTA_PROJECTS = 1
    workspace = WorkspaceFactory()
    _, tenant = member_of(workspace, "projects:*")
    ok(tenant.call("/projects/create", project(1)))
    entries = AuditEntry.objects.count()
    err(tenant.call("/projects/create", project(2)), 403, "quota reached: projects (1)")
    assert Project.objects.filter(workspace=workspace).count() == 1
    assert AuditEntry.objects.count() == entries


def test_an_invitation_holds_no_more_roles_than_a_membership_may(settings, member_of):
    """The invitation's roles become the membership's: the quota is weighed when it is made."""
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 2
    workspace = WorkspaceFactory()
    _, tenant = member_of(workspace, "*")
    ids = [str(role.pk) for role in RoleFactory.create_batch(3, workspace=workspace)]
    invite = {"email": "grace@example.com", "scope": "workspace", "role_ids": ids}
    body = err(tenant.call("/invitations/create", invite), 403, "quota reached: roles per membership (2)")
    assert body["field"] == "role_ids"
    ok(tenant.call("/invitations/create", {**invite, "role_ids": ids[:2]}))
