"""A workspace's `branding` (docs/pages.md#branding) through `workspace/create|update|describe`: its
shape and messages, who may change it, and that another workspace's stays its own."""

import pytest

from iam.models import AuditEntry
from tests.conftest import err, ok
from tests.factories import WorkspaceFactory

from .test_workspaces_api import NEW

BRANDING = {
    "display_name": "Acme Cloud",
    "logo_url": "https://acme.example/logo.png",
    "primary_color": "#1A6FD0",
}


def test_a_new_workspace_has_none_and_may_be_created_with_it(account_api):
    plain = ok(account_api.call("/workspace/create", NEW))
    assert plain["branding"] == {}
    branded = ok(account_api.call("/workspace/create", {**NEW, "slug": "acme-2", "branding": BRANDING}))
    assert branded["branding"] == {**BRANDING, "primary_color": "#1a6fd0"}
    described = ok(account_api.call("/workspace/describe", {"slug": "acme-2"}))
    assert described["branding"] == branded["branding"]


def test_update_replaces_it_and_is_audited(member_of):
    workspace = WorkspaceFactory()
    other = WorkspaceFactory(branding={"display_name": "Globex"})
    _, owner_api = member_of(workspace, "*")
    data = ok(owner_api.call("/workspace/update", {"id": str(workspace.pk), "branding": BRANDING}))
    assert data["branding"]["display_name"] == "Acme Cloud"
    data = ok(
        owner_api.call(
            "/workspace/update", {"id": str(workspace.pk), "branding": {"primary_color": "#000000"}}
        )
    )
    assert data["branding"] == {"primary_color": "#000000"}
    entry = AuditEntry.objects.filter(action="workspace.update", resource_id=workspace.pk).latest(
        "occurred_at"
    )
    assert entry.changes["branding"]["after"] == {"primary_color": "#000000"}
    cleared = ok(owner_api.call("/workspace/update", {"id": str(workspace.pk), "branding": {}}))
    assert cleared["branding"] == {}
    other.refresh_from_db()
    assert other.branding == {"display_name": "Globex"}


def test_only_holders_of_workspaces_update_change_it_and_others_do_not_see_it(member_of):
    workspace = WorkspaceFactory(branding={"display_name": "Acme"})
    other = WorkspaceFactory()
    _, reader_api = member_of(workspace, "projects:list")
    err(reader_api.call("/workspace/update", {"id": str(workspace.pk), "branding": BRANDING}), 403)
    _, stranger_api = member_of(other, "*")
    err(stranger_api.call("/workspace/update", {"id": str(workspace.pk), "branding": BRANDING}), 404)
    workspace.refresh_from_db()
    assert workspace.branding == {"display_name": "Acme"}


@pytest.mark.parametrize(
    ("branding", "message"),
    [
        ([], "branding must be an object"),
        ("#fff", "branding must be an object"),
        ({"colour": "#ffffff"}, "unknown branding field: colour"),
        ({"display_name": ""}, "branding.display_name must be a string of 1 to 255 characters"),
        ({"display_name": "x" * 256}, "branding.display_name must be a string of 1 to 255 characters"),
        ({"display_name": 7}, "branding.display_name must be a string of 1 to 255 characters"),
        (
            {"logo_url": "http://acme.example/logo.png"},
            "branding.logo_url must be an https URL of at most 2048 characters",
        ),
        (
            {"logo_url": "javascript:alert(1)"},
            "branding.logo_url must be an https URL of at most 2048 characters",
        ),
        ({"logo_url": "https://"}, "branding.logo_url must be an https URL of at most 2048 characters"),
        (
            {"logo_url": "https://a.example/" + "x" * 2048},
            "branding.logo_url must be an https URL of at most 2048 characters",
        ),
        ({"primary_color": "#fff"}, "branding.primary_color must be a color like #1a6fd0"),
        ({"primary_color": "red"}, "branding.primary_color must be a color like #1a6fd0"),
        (
            {"primary_color": "#1a6fd0;}body{display:none"},
            "branding.primary_color must be a color like #1a6fd0",
        ),
        ({"primary_color": "#1a6fd0\n"}, "branding.primary_color must be a color like #1a6fd0"),
    ],
)
def test_validation_names_the_rule(account_api, branding, message):
    body = err(account_api.call("/workspace/create", {**NEW, "branding": branding}), 400, message)
    assert body["field"] == "branding"


def test_the_admin_takes_branding_with_the_apis_rules(admin_web):
    from tests.admin.test_admin import post_change, saved

    workspace = WorkspaceFactory()
    refused = post_change(admin_web, workspace, branding='{"logo_url": "http://acme.example/logo.png"}')
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["branding"] == [
        "branding.logo_url must be an https URL of at most 2048 characters"
    ]
    workspace.refresh_from_db()
    assert workspace.branding == {}
    saved(post_change(admin_web, workspace, branding='{"primary_color": "#ABCDEF"}'))
    workspace.refresh_from_db()
    assert workspace.branding == {"primary_color": "#abcdef"}
