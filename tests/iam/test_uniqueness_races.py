"""Uniqueness races end as the answer the check would have given (docs/api.md#errors, #validation).

Each test lets the service's pre-check pass once while a concurrent request inserts the conflicting row
between that check and the save, as happens when two requests race; the unique constraint then refuses
the save, and the answer must be the check's 400/409 with its exact message, never an IntegrityError 500.
Here the "concurrent" row is written on the request's own connection, so the request's rollback takes it
too; the live layer races real concurrent requests, this proves the code path on both databases."""

import pytest

from iam.platform import service_helpers
from tests.conftest import err, ok
from tests.factories import (
    AccountFactory,
    ClientFactory,
    CredentialFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

META = {"schema_version": "1"}


@pytest.fixture
def race(monkeypatch):
    """`race(module, "check_name", insert)`: the first call of the check runs `insert` (the concurrent
    request's row, committed just after the check looked) and passes; later calls run the real check."""

    def arm(module, name: str, insert) -> None:
        real = getattr(module, name)
        calls = []

        def check(*args, **kwargs):
            if not calls:
                calls.append(True)
                insert()
                return False  # `email_taken`/`_membership_exists` answer False; the others return None
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, check)

    return arm


pytestmark = pytest.mark.admin(operator=True)


def no_field(body: dict) -> None:
    assert "field" not in body, body


def field(body: dict, name: str) -> None:
    assert body.get("field") == name, body


# Accounts: register keeps the API's 400, accounts/create answers 409 (docs/api.md#errors)


def test_register_race_is_400_email_already_exists(api, race):
    from authn import services

    race(services, "email_taken", lambda: AccountFactory(email="racer@example.com"))
    body = {"email": "racer@example.com", "password": "a-long-passphrase"}
    field(err(api.call("/auth/register", body), 400, "email already exists"), "email")


def test_account_create_race_is_409(operator_api, race, root):
    from authn import services

    race(services, "email_taken", lambda: AccountFactory(email="racer@example.com"))
    body = {"email": "racer@example.com", "password": "a-long-passphrase", "name": "Racer"}
    field(err(operator_api.call("/accounts/create", body), 409, "email already exists"), "email")


# Workspaces


def test_workspace_create_race_is_409(account_api, race):

    race(service_helpers, "check_unique", lambda: WorkspaceFactory(slug="taken"))
    body = {"name": "W", "slug": "taken", "config": META, "tags": [], "meta": META}
    field(err(account_api.call("/workspace/create", body), 409, "slug already exists"), "slug")


# Projects: the re-check names the very field that conflicts


@pytest.mark.parametrize(("name", "code", "conflict"), [("taken", "new", "name"), ("new", "taken", "code")])
def test_project_create_race_is_409_naming_the_field(admin, workspace, race, name, code, conflict):

    race(
        service_helpers,
        "check_unique",
        lambda: ProjectFactory(workspace=workspace, name="taken", code="taken"),
    )
    body = {"name": name, "code": code, "config": META, "tags": [], "meta": META}
    field(err(admin.call("/projects/create", body), 409, f"{conflict} already exists"), conflict)


@pytest.mark.parametrize(
    ("change", "conflict"), [({"name": "taken"}, "name"), ({"new_code": "taken"}, "code")]
)
def test_project_update_race_is_409_naming_the_field(admin, workspace, race, change, conflict):

    project = ProjectFactory(workspace=workspace)
    race(
        service_helpers,
        "check_unique",
        lambda: ProjectFactory(workspace=workspace, name="taken", code="taken"),
    )
    body = {"id": str(project.pk), **change}
    field(err(admin.call("/projects/update", body), 409, f"{conflict} already exists"), conflict)
    project.refresh_from_db()
    assert "taken" not in (project.name, project.code)


def test_a_project_in_another_workspace_is_no_conflict(admin, workspace, race):

    race(service_helpers, "check_unique", lambda: ProjectFactory(name="taken", code="taken"))
    body = {"name": "taken", "code": "taken", "config": META, "tags": [], "meta": META}
    assert ok(admin.call("/projects/create", body))["name"] == "taken"


# Permissions


@pytest.mark.parametrize(
    ("name", "code", "conflict"), [("a:taken", "x:new", "name"), ("a:new", "x:taken", "code")]
)
def test_permission_create_race_is_409_naming_the_field(admin, workspace, race, name, code, conflict):

    race(
        service_helpers,
        "check_unique",
        lambda: PermissionFactory(workspace=workspace, name="a:taken", code="x:taken"),
    )
    body = {"name": name, "code": code, "tags": [], "meta": META}
    field(err(admin.call("/permissions/create", body), 409, f"{conflict} already exists"), conflict)


@pytest.mark.parametrize(
    ("change", "conflict"), [({"name": "a:taken"}, "name"), ({"code": "x:taken"}, "code")]
)
def test_permission_update_race_is_409_naming_the_field(admin, workspace, race, change, conflict):

    permission = PermissionFactory(workspace=workspace)
    race(
        service_helpers,
        "check_unique",
        lambda: PermissionFactory(workspace=workspace, name="a:taken", code="x:taken"),
    )
    body = {"id": str(permission.pk), **change}
    field(err(admin.call("/permissions/update", body), 409, f"{conflict} already exists"), conflict)


# Roles


def test_role_create_race_is_409(admin, workspace, race):

    race(service_helpers, "check_unique", lambda: RoleFactory(workspace=workspace, name="taken"))
    body = {"name": "taken", "permission_ids": [], "tags": [], "meta": META}
    field(err(admin.call("/roles/create", body), 409, "name already exists"), "name")


def test_role_update_race_is_409(admin, workspace, race):

    role = RoleFactory(workspace=workspace)
    race(service_helpers, "check_unique", lambda: RoleFactory(workspace=workspace, name="taken"))
    field(
        err(admin.call("/roles/update", {"id": str(role.pk), "name": "taken"}), 409, "name already exists"),
        "name",
    )


# Memberships: the check answers without a field, and so does the race


def test_membership_create_race_is_409(admin, workspace, race):
    from rbac.services import memberships

    account = AccountFactory()
    race(memberships, "_membership_exists", lambda: MembershipFactory(account=account, workspace=workspace))
    body = {
        "account_id": str(account.pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [],
        "tags": [],
        "meta": META,
    }
    no_field(err(admin.call("/memberships/create", body), 409, "membership already exists"))


def test_membership_update_race_is_409(admin, workspace, race):
    from rbac.services import memberships

    account = AccountFactory()
    project = ProjectFactory(workspace=workspace)
    membership = MembershipFactory(account=account, workspace=workspace, scope="project", project=project)
    race(memberships, "_membership_exists", lambda: MembershipFactory(account=account, workspace=workspace))
    body = {"id": str(membership.pk), "scope": "workspace"}
    no_field(err(admin.call("/memberships/update", body), 409, "membership already exists"))
    membership.refresh_from_db()
    assert membership.scope == "project"


# Clients


def test_client_create_race_is_409(admin, workspace, race):

    race(service_helpers, "check_unique", lambda: ClientFactory(workspace=workspace, name="taken"))
    body = {"name": "taken", "tags": [], "meta": META}
    field(err(admin.call("/clients/create", body), 409, "name already exists"), "name")


def test_client_update_race_is_409(admin, workspace, race):

    client = ok(admin.call("/clients/create", {"name": "mine", "tags": [], "meta": META}))

    race(service_helpers, "check_unique", lambda: ClientFactory(workspace=workspace, name="taken"))
    field(
        err(admin.call("/clients/update", {"id": client["id"], "name": "taken"}), 409, "name already exists"),
        "name",
    )


# Credentials: a provider id, and the one password credential of an account


def test_credential_provider_id_race_is_409(admin, workspace, race):
    from authn import credentials

    credential = CredentialFactory(workspace=workspace, kind="oauth", provider="idp_a", provider_id="mine")
    race(
        credentials,
        "_check_credential_conflicts",
        lambda: CredentialFactory(workspace=workspace, kind="oauth", provider="idp_a", provider_id="taken"),
    )
    body = {"id": str(credential.pk), "account_id": str(credential.account_id), "new_provider_id": "taken"}
    field(err(admin.call("/credentials/update", body), 409, "provider_id already exists"), "new_provider_id")


def test_credential_second_password_race_is_409(admin, workspace, race):
    from authn import credentials

    account = AccountFactory()
    credential = CredentialFactory(
        account=account, workspace=workspace, kind="oauth", provider="idp_a", provider_id="p"
    )
    race(
        credentials,
        "_check_credential_conflicts",
        lambda: CredentialFactory(account=account, workspace=workspace),
    )
    body = {"id": str(credential.pk), "account_id": str(account.pk), "kind": "password", "provider": "local"}
    field(err(admin.call("/credentials/update", body), 409, "password credential already exists"), "kind")
    credential.refresh_from_db()
    assert credential.kind == "oauth"
