"""The authorization model (docs/api.md#authorization): wildcards, membership scope and status, caching."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from rbac import policy
from tests.conftest import client_for, err, ok
from tests.factories import AccountFactory, MembershipFactory, ProjectFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db

WILDCARDS = [
    # granted, wanted, allowed
    ("projects:create", "projects:create", True),
    ("projects:create", "projects:delete", False),
    ("projects:create", "roles:create", False),
    ("projects:*", "projects:create", True),
    ("projects:*", "projects:regenerate-secret", True),
    ("projects:*", "roles:create", False),
    ("*:create", "projects:create", True),
    ("*:create", "roles:create", True),
    ("*:create", "roles:delete", False),
    ("*", "projects:create", True),
    ("*", "clients:regenerate-secret", True),
    ("*:*", "memberships:update", True),
    ("project:create", "projects:create", False),
    ("projects:creat", "projects:create", False),
    ("projects", "projects:create", False),
    ("projects:create", "projects:*", False),
    ("projects:create", "*", False),
]


@pytest.mark.parametrize(("granted", "wanted", "allowed"), WILDCARDS)
def test_wildcard_table(granted, wanted, allowed):
    assert policy.matches(granted, wanted) is allowed


@pytest.mark.parametrize(
    ("granted", "wanted", "allowed"), [row for row in WILDCARDS if row[1].endswith((":create", ":delete"))]
)
def test_wildcard_table_through_the_api(member_of, granted, wanted, allowed):
    """The same rules decide real requests: an endpoint's declared permission against a role's grants."""
    workspace = WorkspaceFactory()
    _, member_api = member_of(workspace, granted)
    resource, action = wanted.split(":")
    response = member_api.call(f"/{resource}/{action}", {})
    if allowed:
        assert response.status_code in (200, 400, 404), response.json()
    else:
        err(response, 403, f"missing permission {wanted}")


@pytest.mark.parametrize("status", ["invited", "suspended"])
def test_inactive_memberships_grant_nothing(status):
    workspace = WorkspaceFactory()
    role = RoleFactory(workspace=workspace, permissions=["*"])
    membership = MembershipFactory(workspace=workspace, status=status, roles=[role])
    err(
        client_for(membership.account, workspace).call("/projects/list"),
        403,
        "not a member of this workspace",
    )
    assert not policy.has_permission(membership.account, workspace, "projects:list")


def test_project_scope_grants_only_for_its_project():
    workspace = WorkspaceFactory()
    mine, other = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["*"])
    membership = MembershipFactory(workspace=workspace, project=mine, scope="project", roles=[role])
    account = membership.account
    assert policy.has_permission(account, workspace, "projects:update", project_id=mine.pk)
    assert not policy.has_permission(account, workspace, "projects:update", project_id=other.pk)
    assert not policy.has_permission(account, workspace, "projects:update")


def test_operators_pass_every_check():
    operator = AccountFactory(is_superuser=True)
    assert policy.has_permission(operator, WorkspaceFactory(), "anything:at-all")


def test_a_cached_permission_check_costs_no_query():
    workspace = WorkspaceFactory()
    account = AccountFactory()
    MembershipFactory(
        account=account, workspace=workspace, roles=[RoleFactory(workspace=workspace, permissions=["a:*"])]
    )
    assert policy.has_permission(account, workspace, "a:b")
    with CaptureQueriesContext(connection) as queries:
        assert policy.has_permission(account, workspace, "a:c")
        assert not policy.has_permission(account, workspace, "b:c")
    assert len(queries) == 0


def test_an_authenticated_workspace_call_costs_only_its_own_queries(member_of, django_assert_max_num_queries):
    workspace = WorkspaceFactory()
    _, member_api = member_of(workspace, "projects:describe")
    project = ProjectFactory(workspace=workspace)
    ok(member_api.call("/projects/describe", {"id": str(project.pk)}))
    with django_assert_max_num_queries(1):  # the project itself; account, workspace and grants are cached
        ok(member_api.call("/projects/describe", {"id": str(project.pk)}))


def test_every_rbac_change_reaches_a_warm_cache_at_once(member_of, operator_api):
    """Role, permission and membership changes through the API drop the cached answer."""
    workspace = WorkspaceFactory()
    account, member_api = member_of(workspace, "projects:list")
    admin_api = operator_api.in_workspace(workspace)
    ok(member_api.call("/projects/list"))
    role = account.memberships.get().roles.get()
    permission = role.permissions.get()

    ok(admin_api.call("/permissions/update", {"id": str(permission.pk), "name": "projects:describe"}))
    err(member_api.call("/projects/list"), 403, "missing permission projects:list")
    ok(admin_api.call("/permissions/update", {"id": str(permission.pk), "name": "projects:*"}))
    ok(member_api.call("/projects/list"))
    ok(admin_api.call("/roles/update", {"id": str(role.pk), "permission_ids": []}))
    err(member_api.call("/projects/list"), 403, "missing permission projects:list")
    ok(admin_api.call("/roles/update", {"id": str(role.pk), "permission_ids": [str(permission.pk)]}))
    ok(member_api.call("/projects/list"))
    membership = account.memberships.get()
    ok(admin_api.call("/memberships/update", {"id": str(membership.pk), "status": "suspended"}))
    err(member_api.call("/projects/list"), 403, "not a member of this workspace")
