"""`POST /permissions/check` and `clients/validate` with `"explain": true` over HTTP: every grant path
behind a decision, or the reason there is none, from the same policy data as the decision itself."""

import uuid

import pytest

from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    AccountFactory,
    ClientFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)
from tests.rbac.test_policy import WILDCARDS

PERMISSION_FORM = "permission must have the form resource:action (each side a name or *), or *"

pytestmark = pytest.mark.django_db
VALIDATE_FIELDS = {
    "authorized",
    "reason",
    "account",
    "service_account",
    "workspace_id",
    "roles",
    "permissions",
    "allowed",
}


@pytest.fixture
def checker(workspace, member_of):
    """A second account that may ask, in the workspace."""
    return member_of(workspace, "permissions:check")[1]


def check(api, account, permission, **extra):
    return api.call("/permissions/check", {"account_id": str(account.pk), "permission": permission, **extra})


def path(membership, role, pattern, project=None):
    return {
        "membership_id": str(membership.pk),
        "scope": "project" if project else "workspace",
        "project_id": str(project.pk) if project else None,
        "role_id": str(role.pk),
        "role": role.name,
        "pattern": pattern,
    }


def test_every_grant_path_is_listed(workspace, checker):
    account = AccountFactory()
    project, other_project = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    editor = RoleFactory(workspace=workspace, name="editor", permissions=["projects:*", "roles:list"])
    admin = RoleFactory(workspace=workspace, name="admin", permissions=["*:update"])
    lead = RoleFactory(workspace=workspace, name="lead", permissions=["projects:update"])
    ws_membership = MembershipFactory(account=account, workspace=workspace, roles=[editor, admin])
    project_membership = MembershipFactory(
        account=account, workspace=workspace, scope="project", project=project, roles=[lead]
    )
    assert ok(check(checker, account, "projects:update")) == {
        "allowed": True,
        "reason": None,
        "matched": [path(ws_membership, admin, "*:update"), path(ws_membership, editor, "projects:*")],
    }
    data = ok(check(checker, account, "projects:update", project_id=str(project.pk)))
    assert data["matched"][-1] == path(project_membership, lead, "projects:update", project)
    assert len(data["matched"]) == 3
    assert (
        len(ok(check(checker, account, "projects:update", project_id=str(other_project.pk)))["matched"]) == 2
    )
    assert ok(check(checker, account, "roles:delete")) == {
        "allowed": False,
        "matched": [],
        "reason": "no_matching_permission",
    }


def test_a_project_scope_grant_counts_for_its_project_only(workspace, checker):
    account = AccountFactory()
    project, other = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["*"])
    MembershipFactory(account=account, workspace=workspace, scope="project", project=project, roles=[role])
    assert ok(check(checker, account, "projects:update", project_id=str(project.pk)))["allowed"] is True
    for extra in ({"project_id": str(other.pk)}, {}, {"project_id": None}):
        data = ok(check(checker, account, "projects:update", **extra))
        assert data == {"allowed": False, "matched": [], "reason": "no_matching_permission"}


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        # An account only invited is no member, whatever its flags (docs/api.md#invitations).
        ({"status": "invited"}, "not_a_member"),
        ({"status": "invited", "enabled": False}, "not_a_member"),
        ({"status": "suspended"}, "not_active"),
        ({"enabled": False}, "account_disabled"),
        ({"member": False}, "not_a_member"),
        ({"member": False, "enabled": False}, "not_a_member"),  # not told to another workspace
    ],
)
def test_reasons(workspace, checker, setup, reason):
    account = AccountFactory(enabled=setup.get("enabled", True))
    role = RoleFactory(workspace=workspace, permissions=["*"])
    if setup.get("member", True):
        MembershipFactory(
            account=account, workspace=workspace, status=setup.get("status", "active"), roles=[role]
        )
    else:  # a member of another workspace only
        elsewhere = WorkspaceFactory()
        MembershipFactory(
            account=account, workspace=elsewhere, roles=[RoleFactory(workspace=elsewhere, permissions=["*"])]
        )
    assert ok(check(checker, account, "projects:list")) == {"allowed": False, "matched": [], "reason": reason}


def test_permission_denied_and_cross_tenant(workspace, checker, member_of):
    account = AccountFactory()
    MembershipFactory(
        account=account, workspace=workspace, roles=[RoleFactory(workspace=workspace, permissions=["*"])]
    )
    _, reader = member_of(workspace, "permissions:list", "permissions:describe")
    err(check(reader, account, "projects:list"), 403, "missing permission permissions:check")
    _, wildcard = member_of(workspace, "permissions:*")
    assert ok(check(wildcard, account, "projects:list"))["allowed"] is True
    # The checker of another workspace: not in this one, and there the account is nobody.
    other_workspace = WorkspaceFactory()
    outsider, other_checker = member_of(other_workspace, "permissions:check")
    err(
        check(other_checker.in_workspace(workspace), account, "projects:list"),
        403,
        "not a member of this workspace",
    )
    assert ok(check(other_checker, account, "projects:list"))["reason"] == "not_a_member"
    # A project of the other workspace is not a project of this one.
    foreign_project = ProjectFactory(workspace=other_workspace)
    err(
        check(checker, account, "projects:list", project_id=str(foreign_project.pk)),
        400,
        "project_id must name a project of this workspace",
    )
    err(
        ApiClient(None, str(workspace.pk)).call("/permissions/check", {}),
        401,
        "Authentication required or invalid credentials.",
    )
    err(ApiClient(client_for(outsider).token).call("/permissions/check", {}), 400, "workspace required")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"permission": "projects:list"}, "account_id required"),
        ({"account_id": "x", "permission": "projects:list"}, "invalid account_id"),
        (
            {"account_id": str(uuid.uuid4()), "permission": "projects:list"},
            "account_id must name an existing account",
        ),
        ({"account_id": "ACCOUNT"}, "permission required"),
        ({"account_id": "ACCOUNT", "permission": "not a permission"}, PERMISSION_FORM),
        (
            {"account_id": "ACCOUNT", "permission": "projects:list", "project_id": 5},
            "project_id must be a UUID string",
        ),
    ],
)
def test_validation(checker, body, message):
    account = AccountFactory()
    body = {key: str(account.pk) if value == "ACCOUNT" else value for key, value in body.items()}
    err(checker.call("/permissions/check", body), 400, message)


def test_query_budget(workspace, checker, django_assert_max_num_queries):
    account = AccountFactory()
    roles = [RoleFactory(workspace=workspace, permissions=["*", "projects:*", "*:list"]) for _ in range(5)]
    MembershipFactory(account=account, workspace=workspace, roles=roles)
    # Cold caches: the caller (account, session, workspace, grants), the account, its memberships, its
    # grants and one query for the paths, however many roles and permissions.
    with django_assert_max_num_queries(10):
        assert len(ok(check(checker, account, "projects:list"))["matched"]) == 15


# clients/validate with "explain": true


@pytest.fixture
def client(workspace):
    return ClientFactory(workspace=workspace)


def validate(client, account, **extra):
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": client_for(account).token}
    return ok(ApiClient().call("/clients/validate", {**body, **extra}))


def test_validate_without_explain_is_unchanged(client, workspace):
    account = AccountFactory()
    MembershipFactory(
        account=account, workspace=workspace, roles=[RoleFactory(workspace=workspace, permissions=["*"])]
    )
    for extra in ({}, {"explain": False}, {"explain": None}):
        data = validate(client, account, permission="projects:list", **extra)
        assert set(data) == {*VALIDATE_FIELDS, "expires_at"} and data["allowed"] is True


def test_validate_explains_like_permissions_check(client, workspace, checker):
    account = AccountFactory()
    project = ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, name="editor", permissions=["projects:*"])
    membership = MembershipFactory(account=account, workspace=workspace, roles=[role])
    data = validate(client, account, permission="projects:update", explain=True)
    assert data["matched"] == [path(membership, role, "projects:*")]
    assert data["matched"] == ok(check(checker, account, "projects:update"))["matched"]
    extra = {"project_id": str(project.pk)}
    assert validate(client, account, permission="roles:list", explain=True, **extra)["matched"] == []
    assert validate(client, account, explain=True)["matched"] == []  # nothing asked
    outsider = AccountFactory()
    assert validate(client, outsider, permission="projects:list", explain=True)["matched"] == []
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": "x", "explain": "yes"}
    err(ApiClient().call("/clients/validate", body), 400, "explain must be true or false")


@pytest.mark.parametrize(("granted", "wanted", "allowed"), WILDCARDS)
@pytest.mark.parametrize("scope", ["workspace", "project"])
def test_check_agrees_with_validate_on_the_wildcard_table(
    client, workspace, checker, granted, wanted, allowed, scope
):
    account = AccountFactory()
    project = ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=[granted])
    extra = {"scope": "project", "project": project} if scope == "project" else {}
    MembershipFactory(account=account, workspace=workspace, roles=[role], **extra)
    asked = {"permission": wanted, "project_id": str(project.pk)}
    validated = validate(client, account, explain=True, **asked)
    checked = ok(check(checker, account, **asked))
    assert validated["allowed"] is checked["allowed"] is allowed
    assert validated["matched"] == checked["matched"]
    assert bool(checked["matched"]) is allowed
    assert checked["reason"] == (None if allowed else "no_matching_permission")
