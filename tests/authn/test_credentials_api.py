"""Credentials describe/list/update/delete (docs/api.md#credentials, #x-workspace, #authorization,
#validation) over HTTP."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Account
from authn.models import Credential
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

AUTH = "Authentication required or invalid credentials."
NEW_PASSWORD = "a brand new passphrase"


# Only operators change a credential's secret, status or identity (docs/api.md#credentials): `admin` is the
# operator here, the member case is in tests/authn/test_takeover.py.
pytestmark = pytest.mark.admin(operator=True)


@pytest.fixture
def workspace(root):
    return root  # docs/api.md#the-root-workspace: every credential lives in the root workspace


@pytest.fixture
def credential(workspace):
    return CredentialFactory(workspace=workspace)


def ref(credential, **extra) -> dict:
    return {"id": str(credential.pk), "account_id": str(credential.account_id), **extra}


def login(account, password=PASSWORD):
    return ApiClient().call("/auth/login", {"email": account.email, "password": password})


# describe


def test_describe(admin, credential):
    data = ok(admin.call("/credentials/describe", ref(credential)))
    assert data == {
        "id": str(credential.pk),
        "account_id": str(credential.account_id),
        "workspace_id": str(credential.workspace_id),
        "kind": "password",
        "provider": "local",
        "status": "active",
        "provider_id": None,
        "email": credential.account.email,
        "last_used_at": None,
        "tags": [],
        "meta": {},
        "created_at": data["created_at"],
        "updated_at": None,
    }
    assert "password" not in str(data).replace('"password"', "").replace("'password'", "")


def test_describe_needs_id_and_account_id_that_agree(admin, credential):
    err(admin.call("/credentials/describe", {"id": str(credential.pk)}), 400, "account_id required")
    err(admin.call("/credentials/describe", {"account_id": str(credential.account_id)}), 400, "id required")
    other = AccountFactory()
    err(
        admin.call("/credentials/describe", {"id": str(credential.pk), "account_id": str(other.pk)}),
        404,
        "credential not found",
    )
    err(
        admin.call("/credentials/describe", ref(credential, id=str(uuid.uuid4()))),
        404,
        "credential not found",
    )
    err(admin.call("/credentials/describe", {"id": "nope", "account_id": str(other.pk)}), 400, "invalid id")


def test_describe_matches_the_optional_current_values(admin, workspace):
    credential = CredentialFactory(
        workspace=workspace, kind="oauth", provider="idp_a", provider_id="sub-1", email="o@example.com"
    )
    ok(admin.call("/credentials/describe", ref(credential, provider_id="sub-1", email="O@example.com")))
    err(
        admin.call("/credentials/describe", ref(credential, provider_id="sub-2")), 404, "credential not found"
    )
    err(
        admin.call("/credentials/describe", ref(credential, email="x@example.com")),
        404,
        "credential not found",
    )


def test_credentials_need_the_permission_and_the_workspace(workspace, credential, member_of):
    _, reader = member_of(workspace, "credentials:list")
    err(reader.call("/credentials/describe", ref(credential)), 403, "missing permission credentials:describe")
    err(reader.call("/credentials/update", ref(credential)), 403, "missing permission credentials:update")
    err(reader.call("/credentials/delete", ref(credential)), 403, "missing permission credentials:delete")
    err(ApiClient().call("/credentials/list"), 401, AUTH)
    no_header = ApiClient(reader.token)
    err(no_header.call("/credentials/list"), 400, "workspace required")


# isolation (docs/api.md#x-workspace)


def test_a_tenant_reaches_no_credential(member_of, credential):
    """docs/api.md#the-root-workspace: credentials are the root workspace's; a workspace owner sees none, not
    even those of its own members, and cannot act on any."""
    a = WorkspaceFactory()
    member, in_a = member_of(a, "*")
    mine = CredentialFactory(account=member)
    assert ok(in_a.call("/credentials/list"))["credentials"] == []
    for theirs in (credential, mine):
        for action in ("describe", "update"):
            err(in_a.call(f"/credentials/{action}", ref(theirs, tags=[])), 404, "credential not found")
        # not found before the operators' rule is looked at (docs/api.md#credentials)
        err(in_a.call("/credentials/update", ref(theirs, secret="x" * 12)), 404, "credential not found")
        err(in_a.call("/credentials/delete", ref(theirs)), 404, "credential not found")
    err(
        in_a.call("/credentials/list", headers={"X-Workspace": str(credential.workspace_id)}),
        403,
        "not a member of this workspace",
    )
    assert Credential.objects.filter(pk=credential.pk).exists()


# list


def test_list_with_filters(admin, workspace):
    one = AccountFactory()
    password = CredentialFactory(workspace=workspace, account=one, tags=["a"])
    oauth = CredentialFactory(
        workspace=workspace, account=one, kind="oauth", provider="idp_a", provider_id="sub-9", tags=["a", "b"]
    )
    revoked = CredentialFactory(workspace=workspace, status="revoked")

    def ids(body):
        return {item["id"] for item in ok(admin.call("/credentials/list", body))["credentials"]}

    everything = ok(admin.call("/credentials/list", {}))
    assert everything["metadata"] == {
        "total": 3,
        "count": 3,
        "offset": 0,
        "limit": 100,
        "order_bys": ["!created_at"],
    }
    assert ids({"filter": {"fields": {"account_id": str(one.pk)}}}) == {str(password.pk), str(oauth.pk)}
    assert ids({"filter": {"fields": {"kind": "oauth"}}}) == {str(oauth.pk)}
    assert ids({"filter": {"fields": {"provider": "idp_a", "provider_id": "sub-9"}}}) == {str(oauth.pk)}
    assert ids({"filter": {"fields": {"status": "revoked"}}}) == {str(revoked.pk)}
    assert ids({"filter": {"fields": {"email": revoked.email.upper()}}}) == {str(revoked.pk)}
    assert ids({"filter": {"fields": {"id": str(password.pk)}}}) == {str(password.pk)}
    assert ids({"filter": {"fields": {"workspace_id": str(workspace.pk)}}}) == {
        str(password.pk),
        str(oauth.pk),
        str(revoked.pk),
    }
    assert ids({"filter": {"tags": ["a"], "fields": {"kind": "password"}}}) == {str(password.pk)}
    page = ok(
        admin.call("/credentials/list", {"options": {"limit": 1, "offset": 1, "order_bys": "created_at"}})
    )
    assert [item["id"] for item in page["credentials"]] == [str(oauth.pk)]
    err(
        admin.call("/credentials/list", {"filter": {"fields": {"secret": "x"}}}),
        400,
        "unknown filter field: secret",
    )


def test_list_query_count_does_not_grow_with_the_page(admin, workspace):
    CredentialFactory.create_batch(3, workspace=workspace)
    ok(admin.call("/credentials/list"))  # warms the account and grants caches
    with CaptureQueriesContext(connection) as few:
        ok(admin.call("/credentials/list"))
    CredentialFactory.create_batch(10, workspace=workspace)
    with CaptureQueriesContext(connection) as many:
        assert ok(admin.call("/credentials/list"))["metadata"]["count"] == 13
    assert len(many) == len(few) == 2  # count and page


# update


def test_update_fields(admin, workspace):
    credential = CredentialFactory(workspace=workspace, kind="oauth", provider="idp_a", provider_id="old")
    data = ok(
        admin.call(
            "/credentials/update",
            ref(
                credential,
                provider_id="old",
                new_provider_id="new",
                new_email="New@Example.com",
                last_used_at="2026-01-02T03:04:05Z",
                tags=["x"],
                meta={"schema_version": "2", "note": "n"},
                provider="idp_b",
                kind="sso",
            ),
        )
    )
    assert (data["provider_id"], data["email"], data["provider"], data["kind"]) == (
        "new",
        "new@example.com",
        "idp_b",
        "sso",
    )
    assert data["last_used_at"].startswith("2026-01-02T03:04:05")
    assert data["tags"] == ["x"] and data["meta"]["note"] == "n" and data["updated_at"] is not None
    assert ok(admin.call("/credentials/describe", ref(credential)))["provider_id"] == "new"
    # the old provider id no longer names it
    err(
        admin.call("/credentials/update", ref(credential, provider_id="old", tags=[])),
        404,
        "credential not found",
    )


@pytest.mark.parametrize(
    ("change", "status", "message"),
    [
        ({"status": "gone"}, 400, "status must be one of active, revoked, pending"),
        ({"kind": "magic"}, 400, "kind must be one of password, oauth, sso, api_key"),
        ({"provider": 3}, 400, "provider must be one of local, idp_a, idp_b"),
        ({"meta": {"a": 1}}, 400, "meta.schema_version required"),
        ({"last_used_at": "yesterday"}, 400, "invalid last_used_at"),
        ({"new_email": "nope"}, 400, "invalid new_email"),
        ({"tags": "a"}, 400, "tags must be an array"),
        ({"secret": "short"}, 400, "password must have at least 8 characters"),
    ],
)
def test_update_validation(admin, credential, change, status, message):
    err(admin.call("/credentials/update", ref(credential, **change)), status, message)


def test_update_conflicts(admin, workspace):
    account = AccountFactory()
    CredentialFactory(workspace=workspace, account=account)
    oauth = CredentialFactory(
        workspace=workspace, account=account, kind="oauth", provider="idp_a", provider_id="a"
    )
    CredentialFactory(workspace=workspace, kind="oauth", provider="idp_a", provider_id="taken")
    err(
        admin.call("/credentials/update", ref(oauth, new_provider_id="taken")),
        409,
        "provider_id already exists",
    )
    err(
        admin.call("/credentials/update", ref(oauth, kind="password")),
        409,
        "password credential already exists",
    )


def test_secret_sets_a_new_password_and_ends_the_sessions(admin, workspace):
    account = AccountFactory()
    credential = CredentialFactory(workspace=workspace, account=account)
    session = ok(login(account))
    ok(admin.call("/credentials/update", ref(credential, secret=NEW_PASSWORD)))
    account.refresh_from_db()
    assert account.password.startswith("argon2") and NEW_PASSWORD not in account.password
    err(ApiClient(session["access_token"]).call("/auth/refresh"), 401, AUTH)
    err(login(account), 401, "invalid credentials")
    ok(login(account, NEW_PASSWORD))


def test_secret_only_applies_to_password_credentials(admin, workspace):
    oauth = CredentialFactory(workspace=workspace, kind="oauth", provider="idp_a", provider_id="s")
    err(
        admin.call("/credentials/update", ref(oauth, secret=NEW_PASSWORD)),
        400,
        "secret applies to password credentials only",
    )


def test_revoking_the_password_credential_stops_login_and_ends_sessions(admin, workspace):
    account = AccountFactory()
    credential = CredentialFactory(workspace=workspace, account=account)
    session = ok(login(account))
    assert ok(admin.call("/credentials/update", ref(credential, status="revoked")))["status"] == "revoked"
    err(ApiClient(session["access_token"]).call("/auth/refresh"), 401, AUTH)
    err(login(account), 401, "invalid credentials")
    ok(admin.call("/credentials/update", ref(credential, status="active")))
    ok(login(account))


def test_other_changes_keep_the_sessions(admin, workspace):
    account = AccountFactory()
    credential = CredentialFactory(workspace=workspace, account=account)
    session = ok(login(account))
    ok(admin.call("/credentials/update", ref(credential, tags=["t"], status="pending")))
    ok(ApiClient(session["access_token"]).call("/auth/refresh"))


# delete


def test_delete(admin, workspace):
    account = AccountFactory()
    credential = CredentialFactory(workspace=workspace, account=account)
    session = ok(login(account))
    assert ok(admin.call("/credentials/delete", ref(credential))) == {"id": str(credential.pk)}
    assert not Credential.objects.filter(pk=credential.pk).exists()
    assert Account.objects.filter(pk=account.pk).exists()
    err(admin.call("/credentials/delete", ref(credential)), 404, "credential not found")
    err(ApiClient(session["access_token"]).call("/auth/refresh"), 401, AUTH)
    err(login(account), 401, "invalid credentials")


def test_delete_needs_the_matching_account(admin, credential):
    other = AccountFactory()
    err(
        admin.call("/credentials/delete", {"id": str(credential.pk), "account_id": str(other.pk)}),
        404,
        "credential not found",
    )
    assert Credential.objects.filter(pk=credential.pk).exists()


def test_operators_pass(operator, credential):
    ok(client_for(operator, credential.workspace).call("/credentials/describe", ref(credential)))
