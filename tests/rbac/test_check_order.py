"""The order of docs/api.md#conventions, "404 first" included, on every endpoint that names a record:
one request fixed one mistake at a time answers the method (405), then authentication (401), the
workspace (400), the permission (403), the body (400), and last the lookup (404). An unknown record is a
404 whoever asks, before any rule that depends on the record (an account's self access, a workspace's
own grants, a project-scope grant, the operators' credential fields)."""

import uuid

import pytest

from rbac.models import Membership
from tests.conftest import ApiClient, client_for, err, ok
from tests.endpoints import ENDPOINTS, PATHS
from tests.factories import AccountFactory, MembershipFactory, ProjectFactory, RoleFactory, WorkspaceFactory

# What each resource's 404 calls its record.
NOUNS = {
    "accounts": "account",
    "applications": "application",
    "workspace": "workspace",
    "clients": "client",
    "credentials": "credential",
    "invitations": "invitation",
    "memberships": "membership",
    "passkeys": "passkey",
    "permissions": "permission",
    "projects": "project",
    "roles": "role",
    "scim-tokens": "scim token",
    "service-accounts": "service account",
    "sessions": "session",
    "sso": "sso connection",
}
# The keys besides `id` that name a record: left out, so the unknown `id` alone names it.
OTHER_KEYS = ("slug", "code", "email", "provider_id")
# What would be refused on the record if it existed: only an operator changes a credential's secret.
REFUSED_ON_THE_RECORD = {"/credentials/update": {"secret": "a-new-password-of-ours"}}

NAMING = [
    path
    for path in PATHS
    if not ENDPOINTS[path].public
    and "id" in getattr(ENDPOINTS[path].request_serializer, "_declared_fields", {})
]


def test_every_resource_that_names_a_record_is_covered():
    assert {path.split("/")[1] for path in NAMING} == set(NOUNS)


@pytest.fixture
def callers(root):
    """Accounts of workspace `a` (and one of `b`): `nothing` holds no permission there; `holder(path)`
    holds only the endpoint's permission, through a project-scope membership when the endpoint lets one
    in (`project_scoped`), so the record's own project would decide."""
    a, b = WorkspaceFactory(), WorkspaceFactory()
    nothing = AccountFactory()
    MembershipFactory(account=nothing, workspace=a, roles=[RoleFactory(workspace=a)])
    MembershipFactory(
        account=AccountFactory(), workspace=b, roles=[RoleFactory(workspace=b, permissions=["*"])]
    )

    def holder(path: str):
        endpoint = ENDPOINTS[path]
        account = AccountFactory()
        if endpoint.permission and not endpoint.workspace_scoped and not endpoint.decided_on_object:
            role = RoleFactory(workspace=root, permissions=[endpoint.permission])  # accounts/delete
            MembershipFactory(account=account, workspace=root, roles=[role])
        elif endpoint.permission and endpoint.workspace_scoped:
            role = RoleFactory(workspace=a, permissions=[endpoint.permission])
            place = (
                {"scope": Membership.Scope.PROJECT, "project": ProjectFactory(workspace=a)}
                if endpoint.project_scoped
                else {}
            )
            MembershipFactory(account=account, workspace=a, roles=[role], **place)
        return account

    return a, nothing, holder


def unknown_named(path: str) -> dict:
    endpoint = ENDPOINTS[path]
    body = {key: value for key, value in endpoint.example_request.items() if key not in OTHER_KEYS}
    body["id"] = str(uuid.uuid4())
    if "account_id" in body:
        body["account_id"] = str(uuid.uuid4())
    return {**body, **REFUSED_ON_THE_RECORD.get(path, {})}


@pytest.mark.parametrize("path", NAMING)
def test_each_mistake_is_answered_in_order(callers, path):
    a, nothing, holder = callers
    endpoint = ENDPOINTS[path]
    header = {"X-Workspace": str(a.pk)} if endpoint.workspace_scoped else {}
    body = unknown_named(path)
    anonymous = ApiClient()

    err(anonymous.call(path, {"id": "nope"}, method="GET"), 405, "use POST")
    err(anonymous.call(path, {"id": "nope"}), 401, "Authentication required or invalid credentials.")
    if endpoint.workspace_scoped:
        err(client_for(nothing).call(path, {"id": "nope"}), 400, "workspace required")
    if endpoint.permission and not endpoint.decided_on_object:
        refused = client_for(nothing).call(path, {"id": "nope"}, headers=header)
        err(refused, 403, f"missing permission {endpoint.permission}")
    caller = client_for(holder(path))
    assert err(caller.call(path, {**body, "id": "nope"}, headers=header), 400)["field"] == "id"
    err(caller.call(path, body, headers=header), 404, f"{NOUNS[path.split('/')[1]]} not found")


def test_a_deleted_workspace_is_not_found_even_by_its_former_owner(member_of):
    workspace = WorkspaceFactory()
    _, owner_api = member_of(workspace, "*")
    _, stranger_api = member_of(WorkspaceFactory(), "*")
    ref = {"id": str(workspace.pk)}
    err(stranger_api.call("/workspace/describe", ref), 404, "workspace not found")
    ok(ApiClient(owner_api.token).call("/workspace/delete", ref))
    for action in ("describe", "update", "delete"):
        for client in (owner_api, stranger_api):
            err(ApiClient(client.token).call(f"/workspace/{action}", ref), 404, "workspace not found")


PROTECTED = [path for path in PATHS if not ENDPOINTS[path].public]


@pytest.mark.parametrize("path", PROTECTED)
def test_every_protected_endpoint_answers_the_first_mistake(callers, path):
    """A body that is not even JSON is the last thing reported: the method, the token, the workspace and
    the permission come first."""
    a, nothing, _ = callers
    endpoint = ENDPOINTS[path]
    bad = "{not json"
    err(ApiClient("not.a.jwt").call(path, raw=bad, method="PUT"), 405, "use POST")
    err(ApiClient("not.a.jwt").call(path, raw=bad), 401, "Authentication required or invalid credentials.")
    member = client_for(nothing)
    if endpoint.workspace_scoped:
        err(member.call(path, raw=bad), 400, "workspace required")
        err(
            member.call(path, raw=bad, headers={"X-Workspace": str(uuid.uuid4())}), 404, "workspace not found"
        )
    in_a = {"X-Workspace": str(a.pk)} if endpoint.workspace_scoped else {}
    if endpoint.permission and not endpoint.decided_on_object:
        err(member.call(path, raw=bad, headers=in_a), 403, f"missing permission {endpoint.permission}")
    else:
        err(member.call(path, raw=bad, headers=in_a), 400, "Malformed JSON syntax.")
