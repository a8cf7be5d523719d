"""`scim-tokens/create|list|delete` and what a SCIM token opens: its own workspace's SCIM service, and
nothing else (not another workspace's, not the API); nothing else opens the SCIM service."""

import pytest

from iam.models import AuditEntry
from iam.platform import crypto
from scim.models import ScimToken
from tests.conftest import ApiClient, client_for, err, ok, token_for
from tests.factories import AccountFactory

from .conftest import Scim, new_token, scim_err, scim_ok

FIELDS = {"id", "name", "token", "created_at"}


def test_a_token_is_shown_once_and_stored_hashed(admin, workspace):
    created = ok(admin.call("/scim-tokens/create", {"name": "Okta"}))
    assert set(created) == FIELDS and created["name"] == "Okta"
    assert created["token"].startswith("scim_") and len(created["token"]) > 40
    stored = ScimToken.objects.get(pk=created["id"])
    assert stored.token_digest == crypto.digest(created["token"])
    assert created["token"] not in str(ScimToken.objects.filter(pk=created["id"]).values().get())
    listed = ok(admin.call("/scim-tokens/list", {}))
    assert listed["metadata"]["total"] == 1
    (item,) = listed["scim_tokens"]
    assert item["id"] == created["id"] and "token" not in item and "token_digest" not in item
    entry = AuditEntry.objects.get(action="scimtoken.create")
    assert entry.workspace_id == workspace.pk and created["token"] not in str(entry.changes)
    scim_ok(Scim(workspace.pk, created["token"]).get("/Users"))


def test_a_name_is_required_and_unique(admin):
    err(admin.call("/scim-tokens/create", {}), 400, "name required")
    ok(admin.call("/scim-tokens/create", {"name": "Okta"}))
    err(admin.call("/scim-tokens/create", {"name": "Okta"}), 409, "name already exists")


def test_deleting_a_token_refuses_its_directory_at_once(admin, workspace):
    created = ok(admin.call("/scim-tokens/create", {"name": "Okta"}))
    directory = Scim(workspace.pk, created["token"])
    scim_ok(directory.get("/Users"))
    assert ok(admin.call("/scim-tokens/delete", {"id": created["id"]})) == {"id": created["id"]}
    scim_err(directory.get("/Users"), 401)
    err(admin.call("/scim-tokens/delete", {"id": created["id"]}), 404, "scim token not found")


def test_the_permissions_are_needed(member_of, workspace):
    _, nobody = member_of(workspace, "projects:list")
    err(nobody.call("/scim-tokens/create", {"name": "x"}), 403, "missing permission scim-tokens:create")
    err(nobody.call("/scim-tokens/list", {}), 403, "missing permission scim-tokens:list")
    err(
        nobody.call("/scim-tokens/delete", {"id": str(workspace.pk)}),
        403,
        "missing permission scim-tokens:delete",
    )


def test_only_a_caller_who_could_grant_everything_issues_a_token(member_of, workspace):
    """The directory may give any role of the workspace (the owner's too) to anyone: issuing its token is
    granting every permission."""
    _, holder = member_of(workspace, "scim-tokens:*")
    err(holder.call("/scim-tokens/create", {"name": "x"}), 403, "cannot grant permissions you do not hold")


def test_tokens_of_another_workspace_are_invisible(admin, workspace, other_workspace):
    theirs = new_token(other_workspace, name="Theirs")
    other = ScimToken.objects.get(token_digest=crypto.digest(theirs))
    assert ok(admin.call("/scim-tokens/list", {}))["scim_tokens"] == []
    err(admin.call("/scim-tokens/delete", {"id": str(other.pk)}), 404, "scim token not found")
    scim_ok(Scim(other_workspace.pk, theirs).get("/Users"))


def test_a_token_of_one_workspace_never_reaches_another(workspace, other_workspace, scim, other_scim):
    scim_ok(scim.get("/Users"))
    crossed = Scim(other_workspace.pk, scim.token)
    for method, path in [("GET", "/Users"), ("GET", "/Groups"), ("POST", "/Users"), ("GET", "/Schemas")]:
        body = {"userName": "x@example.com"} if method == "POST" else None
        scim_err(crossed(method, path, body), 401)


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope", "Basic c2NpbTp4", "Bearer scim_forged"])
def test_no_or_a_wrong_token_is_refused(scim, header):
    response = scim.http.get(scim.base + "/Users", headers={"Authorization": header} if header else {})
    body = scim_err(response, 401)
    assert body["detail"] == "a SCIM token of this workspace is required"


def test_an_api_token_is_refused_on_scim_and_a_scim_token_on_the_api(workspace, scim):
    account = AccountFactory()
    scim_err(scim.get("/Users", token=token_for(account)), 401)
    api = ApiClient(scim.token, str(workspace.pk))
    err(api.call("/roles/list", {}), 401, "Authentication required or invalid credentials.")
    err(ApiClient(scim.token).call("/sessions/list", {}), 401)
    err(ApiClient(scim.token).call("/workspace/list", {}), 401)


def test_an_unknown_or_malformed_workspace_is_refused_as_unauthenticated(scim):
    scim_err(Scim("7d3b5f9a-2c4e-4a6d-b1f3-8e5c7a9d2b64", scim.token).get("/Users"), 401)
    scim_err(Scim("not-a-uuid", scim.token).get("/Users"), 401)


def test_an_operator_creates_tokens_anywhere(operator, workspace):
    created = ok(client_for(operator, workspace).call("/scim-tokens/create", {"name": "ops"}))
    scim_ok(Scim(workspace.pk, created["token"]).get("/ServiceProviderConfig"))


def test_everything_in_another_workspace_issues_no_token_here(member_of, workspace, other_workspace):
    """`*` counts in its own workspace only: a holder of `*` elsewhere and `scim-tokens:*` here still cannot
    grant this workspace's roles, so issues no token here."""
    account, _ = member_of(other_workspace, "*")
    _, holder = member_of(workspace, "scim-tokens:*", account=account)
    err(holder.call("/scim-tokens/create", {"name": "x"}), 403, "cannot grant permissions you do not hold")
    assert ok(client_for(account, other_workspace).call("/scim-tokens/create", {"name": "x"}))["token"]
    assert not ScimToken.objects.filter(workspace=workspace).exists()
