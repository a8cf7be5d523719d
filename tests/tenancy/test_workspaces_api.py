import pytest
from django.test import override_settings

from authn.sessions import issue_session
from iam.models import Event
from rbac.models import Membership, Permission, Role
from tenancy.models import Project, Workspace
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

NEW = {
    "name": "Acme",
    "slug": "acme",
    "config": {"schema_version": "1", "theme": "dark"},
    "tags": ["prod"],
    "meta": {"schema_version": "1"},
}


def test_any_account_creates_a_workspace_and_becomes_its_owner(account, account_api):
    data = ok(account_api.call("/workspace/create", NEW))
    assert {key: data[key] for key in NEW} == NEW
    assert data["description"] is None and data["updated_at"] is None
    membership = Membership.objects.get(workspace_id=data["id"], account=account)
    assert (membership.scope, membership.status) == ("workspace", "active")
    (role,) = membership.roles.all()
    assert role.name == "owner"
    assert list(role.permissions.values_list("name", flat=True)) == ["*"]
    # the owner may now act in it
    ok(client_for(account, Workspace.objects.get(pk=data["id"])).call("/projects/list"))


@pytest.mark.parametrize(
    ("change", "message", "field"),
    [
        ({"name": ""}, "name required", "name"),
        ({"name": None}, "name required", "name"),
        ({"slug": "Not A Slug"}, "invalid slug", "slug"),
        ({"slug": "-edge"}, "invalid slug", "slug"),
        ({"slug": "acme\n"}, "invalid slug", "slug"),
        ({"slug": "x" * 64}, "invalid slug", "slug"),
        ({"config": {}}, "config.schema_version required", "config"),
        ({"config": []}, "config must be an object", "config"),
        ({"meta": {"schema_version": 1}}, "meta.schema_version must be a string", "meta"),
        ({"tags": "prod"}, "tags must be an array", "tags"),
        ({"tags": [""]}, "tags must be strings of 1 to 64 characters", "tags"),
        ({"tags": [f"t{n}" for n in range(51)]}, "tags must have at most 50 items", "tags"),
    ],
)
def test_create_validation(account_api, change, message, field):
    body = err(account_api.call("/workspace/create", {**NEW, **change}), 400, message)
    assert body["field"] == field


@pytest.mark.parametrize("missing", ["name", "slug", "config", "tags", "meta"])
def test_create_requires_every_spec_field(account_api, missing):
    body = {key: value for key, value in NEW.items() if key != missing}
    err(account_api.call("/workspace/create", body), 400, f"{missing} required")


def test_slug_conflict_is_409(account_api):
    WorkspaceFactory(slug="acme")
    err(account_api.call("/workspace/create", NEW), 409, "slug already exists")


def test_create_needs_a_token(api):
    err(api.call("/workspace/create", NEW), 401, "Authentication required or invalid credentials.")


def test_describe_by_id_or_slug(member_of):
    workspace = WorkspaceFactory(slug="team")
    _, member_api = member_of(workspace, "workspaces:describe")
    assert ok(member_api.call("/workspace/describe", {"id": str(workspace.pk)}))["slug"] == "team"
    assert ok(member_api.call("/workspace/describe", {"slug": "team"}))["id"] == str(workspace.pk)
    err(member_api.call("/workspace/describe", {}), 400, "id or slug required")
    err(member_api.call("/workspace/describe", {"id": "nope"}), 400, "invalid id")


def test_another_workspace_does_not_exist_for_a_non_member(member_of):
    mine, other = WorkspaceFactory(), WorkspaceFactory()
    _, member_api = member_of(mine, "*")
    for action in ("describe", "update", "delete"):
        err(member_api.call(f"/workspace/{action}", {"id": str(other.pk)}), 404, "workspace not found")
        err(member_api.call(f"/workspace/{action}", {"slug": other.slug}), 404, "workspace not found")
    assert Workspace.objects.filter(pk=other.pk).exists()


def test_a_member_without_the_permission_is_forbidden(member_of):
    workspace = WorkspaceFactory()
    _, member_api = member_of(workspace, "projects:*")
    err(
        member_api.call("/workspace/update", {"id": str(workspace.pk), "name": "x"}),
        403,
        "missing permission workspaces:update",
    )


def test_root_workspace_permission_reaches_every_workspace(root, member_of):
    other = WorkspaceFactory()
    _, root_api = member_of(root, "workspaces:*")
    assert ok(root_api.call("/workspace/describe", {"id": str(other.pk)}))["id"] == str(other.pk)


def test_update_changes_only_what_is_sent_and_emits(member_of):
    workspace = WorkspaceFactory(tags=["a", "b"], description="kept")
    _, member_api = member_of(workspace, "workspaces:update")
    data = ok(
        member_api.call("/workspace/update", {"slug": workspace.slug, "name": "Renamed", "tags": ["c"]})
    )
    assert (data["name"], data["tags"], data["description"]) == ("Renamed", ["c"], "kept")
    assert data["updated_at"] is not None
    event = Event.objects.get()
    assert event.payload["type"] == "workspace.updated" and event.payload["workspace_id"] == str(workspace.pk)


def test_a_change_of_who_is_authorized_names_every_active_member(db, django_capture_on_commit_callbacks):
    """docs/integration.md#push-events: turning `mfa_required` on or off changes who is authorized in
    the workspace, so its `workspace.updated` lists every account with an active membership there (a
    receiver drops what it cached for them); a rename changes nobody's access and lists nobody."""
    acme, globex = WorkspaceFactory(), WorkspaceFactory()
    owner = AccountFactory()
    MembershipFactory(account=owner, workspace=acme, roles=[RoleFactory(workspace=acme, permissions=["*"])])
    in_a_project = MembershipFactory(
        workspace=acme, scope=Membership.Scope.PROJECT, project=ProjectFactory(workspace=acme)
    ).account
    MembershipFactory(workspace=acme, status=Membership.Status.SUSPENDED)
    MembershipFactory(workspace=acme, status=Membership.Status.INVITED)
    MembershipFactory(workspace=globex)
    two_factors = ApiClient(issue_session(owner, amr=["pwd", "otp", "mfa"])["access_token"])
    active = sorted([str(owner.pk), str(in_a_project.pk)])

    def pushed(body: dict) -> list[str]:
        Event.objects.all().delete()
        with django_capture_on_commit_callbacks(execute=True):
            ok(two_factors.call("/workspace/update", {"id": str(acme.pk), **body}))
        [event] = Event.objects.all()
        assert (event.payload["type"], event.workspace_id) == ("workspace.updated", acme.pk)
        return event.payload["data"]["account_ids"]

    assert pushed({"mfa_required": True}) == active
    assert pushed({"name": "Acme Corp"}) == []
    assert pushed({"mfa_required": True}) == []  # sent, but unchanged
    assert pushed({"mfa_required": False, "name": "Acme"}) == active


def test_list_returns_my_active_workspaces_only(account, account_api):
    mine, suspended, _foreign = WorkspaceFactory(), WorkspaceFactory(), WorkspaceFactory()
    MembershipFactory(account=account, workspace=mine)
    MembershipFactory(account=account, workspace=suspended, status="suspended")
    data = ok(account_api.call("/workspace/list"))
    assert [item["id"] for item in data["workspaces"]] == [str(mine.pk)]
    assert data["metadata"]["total"] == 1


def test_list_everything_with_root_permission(root, member_of):
    WorkspaceFactory.create_batch(3)
    _, root_api = member_of(root, "workspaces:list")
    data = ok(root_api.call("/workspace/list", {"filter": {"fields": {"slug": root.slug}}}))
    assert [item["slug"] for item in data["workspaces"]] == [root.slug]
    assert ok(root_api.call("/workspace/list"))["metadata"]["total"] == Workspace.objects.count()


def test_delete_answers_id_slug_name(member_of):
    workspace = WorkspaceFactory(slug="gone", name="Gone")
    _, member_api = member_of(workspace, "workspaces:delete")
    data = ok(member_api.call("/workspace/delete", {"id": str(workspace.pk)}))
    assert data == {"id": str(workspace.pk), "slug": "gone", "name": "Gone"}
    # the header now names nothing
    err(member_api.call("/projects/list"), 404, "workspace not found")


def test_root_workspace_cannot_be_deleted(operator_api, root):
    err(
        operator_api.call("/workspace/delete", {"slug": root.slug}),
        400,
        "the root workspace cannot be deleted",
    )


def test_deleting_a_workspace_with_1000_memberships_leaves_nothing(
    operator_api, django_assert_max_num_queries
):
    workspace = WorkspaceFactory()
    role = RoleFactory(workspace=workspace, permissions=["a:b", "c:*"])
    ProjectFactory.create_batch(3, workspace=workspace)
    accounts = AccountFactory.create_batch(1000)
    memberships = Membership.objects.bulk_create(
        Membership(account=account, workspace=workspace, scope="workspace", status="active")
        for account in accounts
    )
    Membership.roles.through.objects.bulk_create(
        Membership.roles.through(membership_id=membership.pk, role_id=role.pk) for membership in memberships
    )
    CredentialFactory(workspace=workspace, account=accounts[0])
    data = ok(operator_api.call("/workspace/delete", {"id": str(workspace.pk)}))
    assert data["id"] == str(workspace.pk)
    for model in (Workspace, Project, Role, Permission, Membership):
        assert not model.objects.filter(
            **({"pk": workspace.pk} if model is Workspace else {"workspace": workspace.pk})
        ).exists()
    assert not Membership.roles.through.objects.filter(role_id=role.pk).exists()
    event = Event.objects.get(payload__type="workspace.deleted")
    assert len(event.payload["data"]["account_ids"]) == 1000


@override_settings(IAM_ROOT_WORKSPACE="root")
def test_workspace_list_costs_fixed_queries(account, account_api, django_assert_max_num_queries):
    for workspace in WorkspaceFactory.create_batch(30):
        MembershipFactory(account=account, workspace=workspace)
    ok(account_api.call("/workspace/list"))
    with django_assert_max_num_queries(3):
        assert len(ok(account_api.call("/workspace/list"))["workspaces"]) == 30
