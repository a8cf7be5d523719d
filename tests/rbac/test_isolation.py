"""The isolation matrix: a member of workspace A, even with `*` there, reaches nothing of workspace B."""

import pytest

from tests.conftest import err, ok
from tests.factories import (
    AccountFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}

RESOURCES = {
    "projects": lambda workspace: ProjectFactory(workspace=workspace),
    "permissions": lambda workspace: PermissionFactory(workspace=workspace),
    "roles": lambda workspace: RoleFactory(workspace=workspace, permissions=["x:y"]),
    "memberships": lambda workspace: MembershipFactory(workspace=workspace),
}
UPDATES = {
    "projects": {"name": "taken"},
    "permissions": {"name": "a:b"},
    "roles": {"name": "r"},
    "memberships": {"status": "suspended"},
}


@pytest.fixture
def a_and_b(member_of):
    a, b = WorkspaceFactory(), WorkspaceFactory()
    _, a_api = member_of(a, "*")
    return a, b, a_api


@pytest.mark.parametrize("resource", RESOURCES)
def test_records_of_another_workspace_are_not_found(a_and_b, resource):
    _, b, a_api = a_and_b
    record = RESOURCES[resource](b)
    ref = {"id": str(record.pk)}
    noun = type(record)._meta.verbose_name
    err(a_api.call(f"/{resource}/describe", ref), 404, f"{noun} not found")
    err(a_api.call(f"/{resource}/update", {**ref, **UPDATES[resource]}), 404, f"{noun} not found")
    err(a_api.call(f"/{resource}/delete", ref), 404, f"{noun} not found")
    assert type(record).objects.filter(pk=record.pk).exists()
    listed = ok(a_api.call(f"/{resource}/list", {"options": {"limit": 1000}}))[resource]
    assert str(record.pk) not in {item["id"] for item in listed}
    filtered = ok(a_api.call(f"/{resource}/list", {"filter": {"fields": {"id": str(record.pk)}}}))
    assert filtered["metadata"]["total"] == 0


@pytest.mark.parametrize("key", ["code"])
@pytest.mark.parametrize("resource", ["projects", "permissions"])
def test_alternative_keys_do_not_cross_workspaces(a_and_b, resource, key):
    _, b, a_api = a_and_b
    record = (
        ProjectFactory(workspace=b, code="shared")
        if resource == "projects"
        else PermissionFactory(workspace=b, code="s:c")
    )
    err(a_api.call(f"/{resource}/describe", {key: record.code}), 404)


def test_cannot_attach_another_workspaces_records(a_and_b):
    a, b, a_api = a_and_b
    foreign_permission, foreign_role, foreign_project = (
        PermissionFactory(workspace=b),
        RoleFactory(workspace=b),
        ProjectFactory(workspace=b),
    )
    err(
        a_api.call(
            "/roles/create",
            {"name": "r", "permission_ids": [str(foreign_permission.pk)], "tags": [], "meta": META},
        ),
        400,
        "permission_ids must name permissions of this workspace",
    )
    own_role = RoleFactory(workspace=a)
    err(
        a_api.call("/roles/update", {"id": str(own_role.pk), "permission_ids": [str(foreign_permission.pk)]}),
        400,
        "permission_ids must name permissions of this workspace",
    )
    body = {
        "account_id": str(AccountFactory().pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(foreign_role.pk)],
        "tags": [],
        "meta": META,
    }
    err(a_api.call("/memberships/create", body), 400, "role_ids must name roles of this workspace")
    body = {**body, "role_ids": [], "scope": "project", "project_id": str(foreign_project.pk)}
    err(a_api.call("/memberships/create", body), 400, "project_id must name a project of this workspace")
    membership = MembershipFactory(workspace=a)
    err(
        a_api.call("/memberships/update", {"id": str(membership.pk), "role_ids": [str(foreign_role.pk)]}),
        400,
        "role_ids must name roles of this workspace",
    )
    err(
        a_api.call(
            "/memberships/update",
            {"id": str(membership.pk), "scope": "project", "project_id": str(foreign_project.pk)},
        ),
        400,
        "project_id must name a project of this workspace",
    )
    assert list(own_role.permissions.all()) == [] and list(membership.roles.all()) == []


@pytest.mark.parametrize("resource", RESOURCES)
def test_the_header_cannot_name_a_workspace_of_which_the_caller_is_not_a_member(a_and_b, resource):
    _, b, a_api = a_and_b
    for ref in (str(b.pk), b.slug):
        err(
            a_api.call(f"/{resource}/list", headers={"X-Workspace": ref}),
            403,
            "not a member of this workspace",
        )


@pytest.mark.parametrize("resource", RESOURCES)
def test_the_header_is_required_and_must_exist(account_api, resource):
    err(account_api.call(f"/{resource}/list"), 400, "workspace required")
    err(account_api.call(f"/{resource}/list", headers={"X-Workspace": "no-such"}), 404, "workspace not found")
