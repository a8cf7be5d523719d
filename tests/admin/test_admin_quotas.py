"""The workspace's page shows its use against its quotas (docs/api.md#quotas-and-budgets), read-only."""

from django.urls import reverse

from tests.factories import (
    AccountFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)


def test_the_workspace_page_shows_its_use_against_its_quotas(admin_web, settings):
    settings.IAM_QUOTA_PROJECTS = 2
    creator = AccountFactory(email="creator@example.com")
    workspace = WorkspaceFactory(created_by=creator)
    WorkspaceFactory(created_by=creator)
    ProjectFactory.create_batch(2, workspace=workspace)
    ProjectFactory.create_batch(3)  # another workspace's
    permissions = PermissionFactory.create_batch(3, workspace=workspace)
    role = RoleFactory(workspace=workspace)
    role.permissions.set(permissions)
    MembershipFactory(workspace=workspace, roles=[role, RoleFactory(workspace=workspace)])
    page = admin_web.get(reverse("admin:tenancy_workspace_change", args=[workspace.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "Use against quotas" in html
    assert '<th scope="row">projects</th><td>2 / 2</td><td>quota reached</td>' in html
    assert '<th scope="row">roles</th><td>2 / 1000</td><td></td>' in html
    assert '<th scope="row">permissions</th><td>3 / 5000</td>' in html
    assert '<th scope="row">clients</th><td>0 / 100</td>' in html
    assert '<th scope="row">permissions per role</th><td>3 / 500</td>' in html
    assert '<th scope="row">roles per membership</th><td>2 / 50</td>' in html
    assert '<th scope="row">workspaces of creator@example.com</th><td>2 / 20</td>' in html
    # Shown, never a form field: the add page has no such row.
    assert "Use against quotas" not in admin_web.get(reverse("admin:tenancy_workspace_add")).content.decode()
