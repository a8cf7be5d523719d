import pytest

from iam.models import Event
from tenancy.models import Project
from tests.conftest import client_for, err, ok
from tests.factories import MembershipFactory, ProjectFactory, RoleFactory

NEW = {
    "name": "Billing",
    "code": "bill",
    "config": {"schema_version": "1"},
    "tags": [],
    "meta": {"schema_version": "1"},
}


pytestmark = pytest.mark.admin("projects:*")


def test_create_describe_by_id_and_code(workspace, admin, admin_account):
    data = ok(admin.call("/projects/create", NEW))
    assert (data["name"], data["code"], data["workspace_id"]) == ("Billing", "bill", str(workspace.pk))
    assert data["created_by"] == str(admin_account.pk) and data["updated_at"] is None
    assert ok(admin.call("/projects/describe", {"id": data["id"]})) == data
    assert ok(admin.call("/projects/describe", {"code": "bill"})) == data
    err(admin.call("/projects/describe", {}), 400, "id or code required")
    err(admin.call("/projects/describe", {"code": "nope"}), 404, "project not found")


def test_name_and_code_unique_per_workspace(workspace, admin):
    ProjectFactory(workspace=workspace, name="Billing", code="other")
    err(admin.call("/projects/create", NEW), 409, "name already exists")
    ProjectFactory(workspace=workspace, name="Other", code="bill2")
    err(
        admin.call("/projects/create", {**NEW, "name": "New", "code": "bill2"}),
        409,
        "code already exists",
    )
    ProjectFactory(name="Billing", code="bill")  # another workspace: no conflict
    ok(admin.call("/projects/create", {**NEW, "name": "Fresh", "code": "fresh"}))


def test_update_renames_code_and_replaces_tags(workspace, admin):
    ProjectFactory(workspace=workspace, code="old", tags=["a"])
    data = ok(admin.call("/projects/update", {"code": "old", "new_code": "new", "tags": ["b"]}))
    assert (data["code"], data["tags"]) == ("new", ["b"]) and data["updated_at"] is not None
    err(admin.call("/projects/describe", {"code": "old"}), 404, "project not found")
    ProjectFactory(workspace=workspace, code="taken")
    err(admin.call("/projects/update", {"code": "new", "new_code": "taken"}), 409, "code already exists")


def test_delete_takes_project_memberships_and_emits(workspace, admin):
    project = ProjectFactory(workspace=workspace, code="gone")
    membership = MembershipFactory(workspace=workspace, project=project, scope="project")
    data = ok(admin.call("/projects/delete", {"code": "gone"}))
    assert data == {"id": str(project.pk), "name": project.name, "code": "gone"}
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not type(membership).objects.filter(pk=membership.pk).exists()
    event = Event.objects.get(payload__type="project.deleted")
    assert event.payload["data"]["account_ids"] == [str(membership.account_id)]


def test_permissions_are_checked_per_action(workspace, member_of):
    _, reader_api = member_of(workspace, "projects:describe", "projects:list")
    project = ProjectFactory(workspace=workspace)
    ok(reader_api.call("/projects/describe", {"id": str(project.pk)}))
    err(reader_api.call("/projects/create", NEW), 403, "missing permission projects:create")
    err(
        reader_api.call("/projects/update", {"id": str(project.pk), "name": "x"}),
        403,
        "missing permission projects:update",
    )
    err(
        reader_api.call("/projects/delete", {"id": str(project.pk)}),
        403,
        "missing permission projects:delete",
    )


def test_project_scope_membership_reaches_its_project_only(workspace):
    mine, other = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["projects:*"])
    membership = MembershipFactory(workspace=workspace, project=mine, scope="project", roles=[role])
    member_api = client_for(membership.account, workspace)
    ok(member_api.call("/projects/update", {"id": str(mine.pk), "description": "mine"}))
    err(
        member_api.call("/projects/describe", {"id": str(other.pk)}),
        403,
        "missing permission projects:describe",
    )
    err(member_api.call("/projects/create", NEW), 403, "missing permission projects:create")
    listed = ok(member_api.call("/projects/list"))["projects"]
    assert [item["id"] for item in listed] == [str(mine.pk)]


def test_list_filters(workspace, admin, admin_account):
    ProjectFactory(workspace=workspace, name="A", code="a", created_by=admin_account, tags=["x", "y"])
    ProjectFactory(workspace=workspace, name="B", code="b", tags=["x"])
    data = ok(admin.call("/projects/list", {"filter": {"tags": ["x", "y"]}}))
    assert [item["code"] for item in data["projects"]] == ["a"]
    data = ok(admin.call("/projects/list", {"filter": {"fields": {"created_by": str(admin_account.pk)}}}))
    assert [item["code"] for item in data["projects"]] == ["a"]
    data = ok(admin.call("/projects/list", {"options": {"order_bys": "code"}}))
    assert [item["code"] for item in data["projects"]] == ["a", "b"]
    err(
        admin.call("/projects/list", {"filter": {"fields": {"slug": "a"}}}),
        400,
        "unknown filter field: slug",
    )
