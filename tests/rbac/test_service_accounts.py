"""`service-accounts/create|describe|list|update|delete` (docs/api.md#service-accounts): the answers, the
escalation rule, the quota, the audit entries and push events, and another workspace's service accounts
out of reach."""

import pytest

from iam.models import AuditEntry, Event
from rbac.models import ServiceAccount
from tests.conftest import err, ok
from tests.factories import RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.admin("service-accounts:*", "projects:*", "roles:list")

FIELDS = {
    "id",
    "workspace_id",
    "name",
    "roles",
    "enabled",
    "created_at",
    "updated_at",
    "last_used_at",
    "keys",
    "tags",
    "meta",
}


@pytest.fixture
def role(workspace):
    return RoleFactory(workspace=workspace, name="deployer", permissions=["projects:*"])


def create(api, **body):
    body = {
        "name": "billing-sync",
        "role_ids": [],
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
        **body,
    }
    return api.call("/service-accounts/create", body)


def test_create_answers_the_service_account_with_its_roles_whole(admin, workspace, role):
    data = ok(create(admin, role_ids=[str(role.pk)]))
    assert set(data) == FIELDS
    assert data["workspace_id"] == str(workspace.pk)
    assert data["name"] == "billing-sync"
    assert data["enabled"] is True
    assert data["keys"] == []
    assert data["last_used_at"] is None
    assert [r["name"] for r in data["roles"]] == ["deployer"]
    assert [p["name"] for p in data["roles"][0]["permissions"]] == ["projects:*"]
    entry = AuditEntry.objects.get(action="service_account.create")
    assert entry.workspace_id == workspace.pk
    assert entry.changes["role_ids"] == {"before": None, "after": [str(role.pk)]}


def test_create_validates_its_body(admin, role):
    err(create(admin, name=""), 400, "name required")
    other_role = RoleFactory(workspace=WorkspaceFactory(), permissions=["projects:*"])
    body = err(
        create(admin, role_ids=[str(other_role.pk)]), 400, "role_ids must name roles of this workspace"
    )
    assert body["field"] == "role_ids"


def test_roles_follow_the_escalation_rule(member_of, workspace):
    _, caller = member_of(workspace, "service-accounts:*", "projects:read")
    wider = RoleFactory(workspace=workspace, permissions=["projects:*"])
    err(create(caller, role_ids=[str(wider.pk)]), 403, "cannot grant permissions you do not hold")
    narrow = RoleFactory(workspace=workspace, permissions=["projects:read"])
    created = ok(create(caller, role_ids=[str(narrow.pk)]))
    body = {"id": created["id"], "role_ids": [str(wider.pk)]}
    err(caller.call("/service-accounts/update", body), 403, "cannot grant permissions you do not hold")


def test_quota_of_service_accounts_per_workspace(admin, settings):
    settings.IAM_QUOTA_SERVICE_ACCOUNTS = 2
    ok(create(admin))
    ok(create(admin, name="second"))
    err(create(admin, name="third"), 403, "quota reached: service accounts (2)")
    assert ServiceAccount.objects.count() == 2


def test_describe_list_and_another_workspaces_are_out_of_reach(admin, workspace, member_of):
    mine = ok(create(admin))
    other_workspace = WorkspaceFactory()
    _, other_admin = member_of(other_workspace, "service-accounts:*")
    theirs = ok(create(other_admin, name="theirs"))
    assert ok(admin.call("/service-accounts/describe", {"id": mine["id"]}))["id"] == mine["id"]
    listed = ok(admin.call("/service-accounts/list", {}))
    assert [item["id"] for item in listed["service_accounts"]] == [mine["id"]]
    assert set(listed["service_accounts"][0]) == FIELDS
    for path, body in [
        ("/service-accounts/describe", {"id": theirs["id"]}),
        ("/service-accounts/update", {"id": theirs["id"], "enabled": False}),
        ("/service-accounts/delete", {"id": theirs["id"]}),
    ]:
        err(admin.call(path, body), 404, "service account not found")
    assert ServiceAccount.objects.get(pk=theirs["id"]).enabled is True


def test_list_filters(admin):
    ok(create(admin))
    disabled = ok(create(admin, name="off", enabled=False))
    listed = ok(admin.call("/service-accounts/list", {"filter": {"fields": {"enabled": False}}}))
    assert [item["id"] for item in listed["service_accounts"]] == [disabled["id"]]
    err(
        admin.call("/service-accounts/list", {"filter": {"fields": {"secret": "x"}}}),
        400,
        "unknown filter field: secret",
    )


def test_a_member_without_the_permission_is_refused(member_of, workspace):
    _, reader = member_of(workspace, "service-accounts:list")
    err(create(reader), 403, "missing permission service-accounts:create")


def test_update_of_roles_or_enabled_is_pushed_and_audited(admin, workspace, role):
    created = ok(create(admin))
    Event.objects.all().delete()
    data = ok(admin.call("/service-accounts/update", {"id": created["id"], "role_ids": [str(role.pk)]}))
    assert [r["id"] for r in data["roles"]] == [str(role.pk)]
    data = ok(admin.call("/service-accounts/update", {"id": created["id"], "enabled": False}))
    assert data["enabled"] is False
    events = [event.payload for event in Event.objects.order_by("id")]
    assert [event["type"] for event in events] == ["service_account.updated", "service_account.updated"]
    assert all(event["data"]["service_account_ids"] == [created["id"]] for event in events)
    assert all(event["workspace_id"] == str(workspace.pk) for event in events)
    ok(admin.call("/service-accounts/update", {"id": created["id"], "tags": ["other"]}))
    assert Event.objects.count() == 2  # tags change nobody's grants
    actions = list(AuditEntry.objects.filter(resource_id=created["id"]).values_list("action", flat=True))
    assert actions.count("service_account.update") == 3


def test_delete_is_pushed(admin, workspace):
    created = ok(create(admin))
    assert ok(admin.call("/service-accounts/delete", {"id": created["id"]})) == {"id": created["id"]}
    event = Event.objects.get(payload__type="service_account.deleted").payload
    assert event["data"]["service_account_ids"] == [created["id"]]
    assert AuditEntry.objects.filter(action="service_account.delete", resource_id=created["id"]).exists()
    err(admin.call("/service-accounts/describe", {"id": created["id"]}), 404, "service account not found")


def test_events_about_a_role_or_permission_name_the_service_accounts_holding_it(member_of, workspace, role):
    _, owner = member_of(workspace, "*")
    created = ok(create(owner, role_ids=[str(role.pk)]))
    Event.objects.all().delete()
    ok(owner.call("/roles/update", {"id": str(role.pk), "permission_ids": []}))
    permission = role.workspace.permissions.get(name="projects:*")
    ok(owner.call("/roles/update", {"id": str(role.pk), "permission_ids": [str(permission.pk)]}))
    ok(owner.call("/permissions/update", {"id": str(permission.pk), "name": "projects:read"}))
    payloads = [event.payload for event in Event.objects.order_by("id")]
    assert [payload["type"] for payload in payloads] == ["role.updated", "role.updated", "permission.updated"]
    assert all(payload["data"]["service_account_ids"] == [created["id"]] for payload in payloads)
    other = RoleFactory(workspace=workspace, permissions=["roles:list"])
    ok(owner.call("/roles/update", {"id": str(other.pk), "permission_ids": []}))
    last = Event.objects.order_by("id").last().payload
    assert last["data"]["resource"]["id"] == str(other.pk)
    assert "service_account_ids" not in last["data"]
