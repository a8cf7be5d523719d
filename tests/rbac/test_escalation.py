"""The docs/api.md#authorization no-escalation rule: nobody grants a permission it does not hold. A member
with `roles:update` added `*` to its own role; one with `memberships:update` gave itself the owner role;
one with `permissions:update` renamed its permission to `*:*`."""

import pytest

from rbac.policy import covers
from rbac.services.workspaces import OWNER_ROLE, ensure_owner
from tests.conftest import client_for, err, ok
from tests.factories import (
    AccountFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}
CANNOT = "cannot grant permissions you do not hold"


@pytest.mark.parametrize(
    ("held", "wanted", "covered"),
    [
        ("*", "*", True),
        ("*", "projects:create", True),
        ("*:*", "*", True),
        ("projects:*", "projects:create", True),
        ("projects:*", "projects:*", True),
        ("projects:*", "*", False),
        ("projects:*", "*:create", False),
        ("projects:create", "projects:create", True),
        ("projects:create", "projects:*", False),
        ("*:create", "projects:create", True),
        ("*:create", "*:create", True),
        ("*:create", "projects:*", False),
        ("*:create", "*", False),
        ("roles:update", "*:*", False),
        ("projects:create", "roles:create", False),
    ],
)
def test_what_covers_what(held, wanted, covered):
    assert covers(held, wanted) is covered


@pytest.fixture
def workspaces(db):
    """The owner's workspace A (where the attacker is a member) and someone else's B."""
    a, b = WorkspaceFactory(), WorkspaceFactory()
    ensure_owner(a, AccountFactory())
    ensure_owner(b, AccountFactory())
    return a, b


def member(workspace, *names):
    account = AccountFactory()
    role = RoleFactory(workspace=workspace, permissions=list(names))
    membership = MembershipFactory(account=account, workspace=workspace, roles=[role])
    return account, role, membership, client_for(account, workspace)


def test_roles_update_cannot_add_star_to_its_own_role(workspaces):
    a, _ = workspaces
    _, role, _, api = member(a, "roles:update", "roles:describe")
    star = a.permissions.get(name="*")
    err(api.call("/roles/update", {"id": str(role.pk), "permission_ids": [str(star.pk)]}), 403, CANNOT)
    assert set(role.permissions.values_list("name", flat=True)) == {"roles:update", "roles:describe"}
    # what it holds it may grant
    own = [str(pk) for pk in role.permissions.values_list("pk", flat=True)]
    ok(api.call("/roles/update", {"id": str(role.pk), "permission_ids": own[:1]}))
    err(
        api.call(
            "/roles/create", {"name": "mine", "permission_ids": [str(star.pk)], "tags": [], "meta": META}
        ),
        403,
        "missing permission roles:create",
    )


def test_roles_create_cannot_bundle_what_it_lacks(workspaces):
    a, _ = workspaces
    _, _, _, api = member(a, "roles:create", "projects:list")
    wider = PermissionFactory(workspace=a, name="projects:*")
    narrow = a.permissions.get(name="projects:list")
    body = {"name": "r", "tags": [], "meta": META}
    err(api.call("/roles/create", {**body, "permission_ids": [str(wider.pk)]}), 403, CANNOT)
    ok(api.call("/roles/create", {**body, "permission_ids": [str(narrow.pk)]}))


def test_memberships_update_cannot_give_itself_the_owner_role(workspaces):
    a, _ = workspaces
    _, _, membership, api = member(a, "memberships:update")
    owner = a.roles.get(name=OWNER_ROLE)
    err(api.call("/memberships/update", {"id": str(membership.pk), "role_ids": [str(owner.pk)]}), 403, CANNOT)
    assert owner not in membership.roles.all()


def test_memberships_create_cannot_hand_out_more_than_it_holds(workspaces):
    a, _ = workspaces
    _, _, _, api = member(a, "memberships:create", "projects:list")
    owner = a.roles.get(name=OWNER_ROLE)
    viewer = RoleFactory(workspace=a, permissions=["projects:list"])
    other = AccountFactory()
    body = {"account_id": str(other.pk), "scope": "workspace", "status": "active", "tags": [], "meta": META}
    err(api.call("/memberships/create", {**body, "role_ids": [str(owner.pk)]}), 403, CANNOT)
    ok(api.call("/memberships/create", {**body, "role_ids": [str(viewer.pk)]}))


def test_permissions_update_cannot_rename_to_a_wildcard(workspaces):
    a, _ = workspaces
    _, role, _, api = member(a, "permissions:update")
    own = role.permissions.get()
    for name in ("*:*", "*", "permissions:*", "roles:update"):
        err(api.call("/permissions/update", {"id": str(own.pk), "name": name}), 403, CANNOT)
    ok(api.call("/permissions/update", {"id": str(own.pk), "description": "no new grant"}))
    err(
        api.call("/permissions/create", {"name": "*", "tags": [], "meta": META}),
        403,
        "missing permission permissions:create",
    )


def test_permissions_create_needs_what_it_names(workspaces):
    a, _ = workspaces
    _, _, _, api = member(a, "permissions:create", "projects:*")
    for name in ("projects:create", "projects:delete"):
        ok(api.call("/permissions/create", {"name": name, "code": None, "tags": [], "meta": META}))
    for name in ("*", "*:create", "roles:create"):
        err(api.call("/permissions/create", {"name": name, "tags": [], "meta": META}), 403, CANNOT)


def test_a_project_scope_grant_covers_its_project_only(workspaces):
    a, _ = workspaces
    project, other_project = ProjectFactory(workspace=a), ProjectFactory(workspace=a)
    account = AccountFactory()
    role = RoleFactory(workspace=a, permissions=["memberships:create", "projects:update"])
    MembershipFactory(account=account, workspace=a, scope="project", project=project, roles=[role])
    api = client_for(account, a)
    editor = RoleFactory(workspace=a, permissions=["projects:update"])
    body = {"scope": "project", "status": "active", "role_ids": [str(editor.pk)], "tags": [], "meta": META}
    ok(
        api.call(
            "/memberships/create",
            {**body, "account_id": str(AccountFactory().pk), "project_id": str(project.pk)},
        )
    )
    err(
        api.call(
            "/memberships/create",
            {**body, "account_id": str(AccountFactory().pk), "project_id": str(other_project.pk)},
        ),
        403,
        "missing permission memberships:create",
    )


def test_holders_of_star_and_operators_are_exempt(workspaces, operator):
    a, b = workspaces
    _, _, _, owner_api = member(a, "*")
    star_b = b.permissions.get(name="*")
    star_a = a.permissions.get(name="*")
    body = {"tags": [], "meta": META}
    role = ok(owner_api.call("/roles/create", {**body, "name": "all", "permission_ids": [str(star_a.pk)]}))
    assert role["permissions"][0]["name"] == "*"
    # a permission of workspace B is not reachable from A, whatever one holds
    err(
        owner_api.call("/roles/create", {**body, "name": "b", "permission_ids": [str(star_b.pk)]}),
        400,
        "permission_ids must name permissions of this workspace",
    )
    ok(client_for(operator, b).call("/permissions/create", {"name": "*:*", "tags": [], "meta": META}))
