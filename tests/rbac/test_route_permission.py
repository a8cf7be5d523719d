"""docs/api.md#authorization: `POST /<resource>/<action>` needs `<resource>:<action>`, the resource in plural.
Every endpoint writes its permission as a literal (`permission = "invitations:create"`); this holds each one
served to the one its path names, so a literal can never drift from the rule."""

import pytest

from tests.conftest import err
from tests.endpoints import ENDPOINTS

# The docs/api.md#authorization resources, by the first segment of their paths (the API's workspace paths are
# singular).
PLURAL = {
    "accounts": "accounts",
    "workspace": "workspaces",
    "projects": "projects",
    "roles": "roles",
    "permissions": "permissions",
    "memberships": "memberships",
    "credentials": "credentials",
    "clients": "clients",
}
# What needs no permission: the public and self-service endpoints (docs/api.md#conventions, #authorization,
# #invitations, #sessions, #passkeys).
NO_PERMISSION = {
    *(path for path in ENDPOINTS if path.startswith("/auth/")),
    "/clients/validate",
    "/clients/events",
    "/workspace/create",
    "/workspace/list",
    "/memberships/accept",
    "/memberships/decline",
    "/invitations/accept",
    "/invitations/decline",
    "/invitations/mine",
    "/sessions/list",
    "/sessions/revoke",
    "/passkeys/list",
    "/passkeys/update",
    "/passkeys/delete",
}


# What docs/api.md#authorization names otherwise: verifying an SSO connection's domain is an update of the
# connection, and a service account's keys are updates of it.
NAMED = {
    "/sso/verify-domain": "sso:update",
    "/service-accounts/create-key": "service-accounts:update",
    "/service-accounts/revoke-key": "service-accounts:update",
}


def contract_4(path: str) -> str | None:
    if path in NO_PERMISSION:
        return None
    if path in NAMED:
        return NAMED[path]
    resource, action = path.strip("/").split("/")
    return f"{PLURAL.get(resource, resource)}:{action}"


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_every_endpoint_needs_the_permission_contract_4_names(path):
    assert ENDPOINTS[path].permission == contract_4(path)


@pytest.mark.parametrize(
    "path",
    sorted(
        path
        for path, endpoint in ENDPOINTS.items()
        if endpoint.workspace_scoped and endpoint.permission is not None
    ),
)
def test_a_member_without_the_permission_is_refused_naming_it(member_of, workspace, path):
    _, member = member_of(workspace, "nothing:here")
    err(member.call(path, {}), 403, f"missing permission {contract_4(path)}")
