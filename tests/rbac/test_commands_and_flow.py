import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account
from authn.models import Credential
from rbac.models import Membership, Role
from tenancy.models import Workspace
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory

META = {"schema_version": "1"}
PASSWORD = "operator-passphrase"


def bootstrap(capsys) -> str:
    call_command("bootstrap", email="Ops@Example.com", password=PASSWORD, name="Ops")
    return capsys.readouterr().out


def test_bootstrap_is_idempotent(db, capsys, settings):
    first = bootstrap(capsys)
    assert "created operator ops@example.com" in first
    second = bootstrap(capsys)
    assert "found account ops@example.com" in second
    operator = Account.objects.get(email="ops@example.com")
    assert operator.is_superuser and operator.verified and operator.enabled
    root = Workspace.objects.get(slug=settings.IAM_ROOT_WORKSPACE)
    membership = Membership.objects.get(account=operator, workspace=root)
    assert membership.status == "active" and [role.name for role in membership.roles.all()] == ["owner"]
    assert Role.objects.filter(workspace=root).count() == 1
    assert Credential.objects.get(account=operator).status == "active"


def test_bootstrap_refuses_a_weak_password(db):
    with pytest.raises(CommandError, match="password must have at least 8 characters"):
        call_command("bootstrap", email="ops@example.com", password="short")


def test_create_workspace_is_idempotent(db, capsys):
    owner = AccountFactory(email="owner@example.com")
    call_command("create_workspace", slug="acme", name="Acme", owner_email="owner@example.com")
    call_command("create_workspace", slug="acme", name="Acme", owner_email="owner@example.com")
    out = capsys.readouterr().out
    assert "created workspace acme" in out and "found workspace acme" in out
    membership = Membership.objects.get(account=owner, workspace__slug="acme")
    assert [role.name for role in membership.roles.all()] == ["owner"]
    with pytest.raises(CommandError, match=r"no account with e-mail nobody@example\.com"):
        call_command("create_workspace", slug="other", name="O", owner_email="nobody@example.com")
    with pytest.raises(CommandError, match="invalid slug"):
        call_command("create_workspace", slug="Bad Slug", name="O", owner_email="owner@example.com")


def test_operator_sets_up_a_workspace_and_a_member_can_do_exactly_what_its_roles_allow(db, capsys):
    bootstrap(capsys)
    api = ApiClient()
    login = ok(api.call("/auth/login", {"email": "ops@example.com", "password": PASSWORD}))
    operator = ApiClient(login["access_token"])
    workspace = ok(
        operator.call(
            "/workspace/create", {"name": "Acme", "slug": "acme", "config": META, "tags": [], "meta": META}
        )
    )
    admin = operator.in_workspace(workspace["slug"])
    project = ok(
        admin.call(
            "/projects/create", {"name": "Web", "code": "web", "config": META, "tags": [], "meta": META}
        )
    )
    read_any = ok(admin.call("/permissions/create", {"name": "*:describe", "tags": [], "meta": META}))
    manage_projects = ok(admin.call("/permissions/create", {"name": "projects:*", "tags": [], "meta": META}))
    viewer = ok(
        admin.call(
            "/roles/create", {"name": "viewer", "permission_ids": [read_any["id"]], "tags": [], "meta": META}
        )
    )
    maintainer = ok(
        admin.call(
            "/roles/create",
            {"name": "maintainer", "permission_ids": [manage_projects["id"]], "tags": [], "meta": META},
        )
    )

    member_session = ok(
        api.call("/auth/register", {"email": "dev@example.com", "password": "dev-passphrase-1"})
    )
    member_id = member_session["account"]["id"]
    ok(
        admin.call(
            "/memberships/create",
            {
                "account_id": member_id,
                "scope": "workspace",
                "status": "active",
                "role_ids": [viewer["id"]],
                "tags": [],
                "meta": META,
            },
        )
    )
    ok(
        admin.call(
            "/memberships/create",
            {
                "account_id": member_id,
                "scope": "project",
                "project_id": project["id"],
                "status": "active",
                "role_ids": [maintainer["id"]],
                "tags": [],
                "meta": META,
            },
        )
    )

    member = ApiClient(member_session["access_token"], "acme")
    assert ok(member.call("/projects/describe", {"code": "web"}))["id"] == project["id"]
    assert ok(member.call("/roles/describe", {"id": viewer["id"]}))["name"] == "viewer"
    ok(member.call("/projects/update", {"code": "web", "description": "by the maintainer"}))
    err(
        member.call("/projects/create", {"name": "New", "config": META, "tags": [], "meta": META}),
        403,
        "missing permission projects:create",
    )
    err(member.call("/roles/list"), 403, "missing permission roles:list")
    err(
        member.call("/workspace/update", {"slug": "acme", "name": "x"}),
        403,
        "missing permission workspaces:update",
    )
    assert [item["slug"] for item in ok(member.call("/workspace/list"))["workspaces"]] == ["acme"]
