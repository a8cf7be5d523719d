"""Client credentials (docs/oidc.md#client-credentials): a `web` application with the `client_credentials`
grant names a service account of its workspace (400s otherwise), `/oauth2/token` answers it a 60-minute
access token of that service account (`sub` the service account, `aud` the client_id, no refresh token,
no ID token), usable as the service account's API keys are, in its workspace only."""

import base64
import datetime as dt

import jwt
import pytest
from django.test import Client

from iam.models import AuditEntry
from tests.conftest import ApiClient, err, ok
from tests.factories import ClientFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.admin("applications:*", "service-accounts:*", "projects:*")

AUTH = "Authentication required or invalid credentials."
META = {"schema_version": "1"}


@pytest.fixture
def service_account(admin, workspace):
    role = RoleFactory(workspace=workspace, name="deployer", permissions=["projects:*"])
    body = {"name": "ci", "role_ids": [str(role.pk)], "tags": [], "meta": META}
    return ok(admin.call("/service-accounts/create", body))


def machine_app(api, service_account_id, **fields) -> dict:
    body = {
        "name": "ci-runner",
        "type": "web",
        "redirect_uris": [],
        "grant_types": ["client_credentials"],
        "service_account_id": service_account_id,
        "tags": [],
        "meta": META,
        **fields,
    }
    return api.call("/applications/create", body)


@pytest.fixture
def app(admin, service_account):
    return ok(machine_app(admin, service_account["id"]))


def token_request(app, **form):
    credentials = base64.b64encode(f"{app['client_id']}:{app['client_secret']}".encode()).decode()
    body = {"grant_type": "client_credentials", **form}
    return Client().post("/oauth2/token", body, HTTP_AUTHORIZATION=f"Basic {credentials}")


def token_of(app) -> str:
    response = token_request(app)
    assert response.status_code == 200, response.content
    return response.json()["access_token"]


# the application


def test_the_grant_names_a_service_account_of_the_workspace(admin, service_account, member_of):
    body = err(machine_app(admin, None), 400, "service_account_id required")
    assert body["field"] == "service_account_id"
    unknown = "0d8f2b6a-4c1e-4a3b-8f5d-9e7c1a3b5d24"
    body = err(machine_app(admin, unknown), 400, "service account not found")
    assert body["field"] == "service_account_id"
    other = WorkspaceFactory()
    _, other_admin = member_of(other, "*")
    theirs = ok(
        other_admin.call("/service-accounts/create", {"name": "x", "role_ids": [], "tags": [], "meta": META})
    )
    err(machine_app(admin, theirs["id"]), 400, "service account not found")
    body = err(
        machine_app(admin, service_account["id"], type="spa"),
        400,
        "client_credentials is for web applications",
    )
    assert body["field"] == "grant_types"
    created = ok(machine_app(admin, service_account["id"]))
    assert created["service_account_id"] == service_account["id"]
    update = {"id": created["id"], "service_account_id": theirs["id"]}
    err(admin.call("/applications/update", update), 400, "service account not found")
    update = {"id": created["id"], "service_account_id": None}
    err(admin.call("/applications/update", update), 400, "service_account_id required")


# the token


def test_the_token_is_the_service_accounts_for_sixty_minutes(app, service_account):
    response = token_request(app)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert set(answer) == {"access_token", "token_type", "expires_in", "scope"}  # no refresh, no ID token
    assert answer["token_type"] == "Bearer"
    assert 3590 <= answer["expires_in"] <= 3600
    claims = jwt.decode(answer["access_token"], options={"verify_signature": False})
    assert claims["sub"] == service_account["id"]
    assert claims["aud"] == app["client_id"]
    assert claims["exp"] - claims["iat"] == 3600
    answer = token_request(app, scope="openid offline_access").json()
    assert "refresh_token" not in answer and "id_token" not in answer


def test_a_wrong_secret_or_another_grant_is_refused(app, admin):
    wrong = {**app, "client_secret": "not-it"}
    assert token_request(wrong).status_code == 401
    people = ok(
        admin.call(
            "/applications/create",
            {
                "name": "portal",
                "type": "web",
                "redirect_uris": ["https://p.example.com/cb"],
                "tags": [],
                "meta": META,
            },
        )
    )
    response = token_request(people)
    assert response.status_code == 400 and response.json()["error"] == "unauthorized_client"


def test_the_token_acts_as_its_keys_do(app, service_account, workspace, member_of, admin):
    api = ApiClient(token_of(app))
    ok(api.call("/projects/list", {}))
    err(api.call("/roles/create", {}), 403, "missing permission roles:create")
    other = WorkspaceFactory()
    member_of(other, "*")
    err(api.in_workspace(other).call("/projects/list", {}), 403, "not a member of this workspace")
    for path in ("/auth/revoke", "/accounts/describe", "/sessions/list", "/workspace/create"):
        err(api.call(path, {}), 401, AUTH)
    project = ok(api.call("/projects/create", {"name": "P", "tags": [], "meta": META, "config": META}))
    entry = AuditEntry.objects.get(action="project.create", resource_id=project["id"])
    assert (entry.actor_kind, str(entry.actor_id)) == ("service_account", service_account["id"])
    assert entry.via == {"kind": "application", "id": app["client_id"]}
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": False}))
    err(api.call("/projects/list", {}), 401, AUTH)
    response = token_request(app)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": True}))
    ok(api.call("/projects/list", {}))
    ok(admin.call("/service-accounts/delete", {"id": service_account["id"]}))
    err(api.call("/projects/list", {}), 401, AUTH)


def test_clients_validate_answers_for_the_token(app, service_account, workspace, admin):
    token = token_of(app)
    client = ClientFactory(workspace=workspace)
    body = {
        "client_id": str(client.pk),
        "client_secret": client.secret,
        "token": token,
        "permission": "projects:list",
    }
    data = ok(ApiClient().call("/clients/validate", body))
    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert (data["authorized"], data["account"], data["service_account"]) == (
        True,
        None,
        {"id": service_account["id"], "name": "ci"},
    )
    assert data["roles"] == ["deployer"] and data["allowed"] is True
    assert data["expires_at"] == dt.datetime.fromtimestamp(exp, dt.UTC).isoformat().replace("+00:00", "Z")
    other = ClientFactory(workspace=WorkspaceFactory())
    body = {"client_id": str(other.pk), "client_secret": other.secret, "token": token}
    assert ok(ApiClient().call("/clients/validate", body))["reason"] == "not_a_member"
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": False}))
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token}
    assert ok(ApiClient().call("/clients/validate", body))["reason"] == "account_disabled"


def test_discovery_names_the_grant():
    document = Client().get("/.well-known/openid-configuration").json()
    assert "client_credentials" in document["grant_types_supported"]
