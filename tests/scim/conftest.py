import json

import pytest
from django.test import Client
from django.utils import timezone

from sso.models import SsoConnection, SsoDomain
from tests.conftest import client_for, ok
from tests.factories import AccountFactory, WorkspaceFactory

MEDIA_TYPE = "application/scim+json"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


class Scim:
    """A directory talking to one workspace's SCIM service with one token."""

    def __init__(self, workspace_id, token: str | None):
        self.base = f"/scim/v2/{workspace_id}"
        self.token = token
        self.http = Client()

    def __call__(
        self, method: str, path: str, body=None, *, token: str | None = "default", raw=None, **query
    ):
        token = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        url = self.base + path
        if method == "GET":
            return self.http.get(url, query, headers=headers)
        data = raw if raw is not None else ("" if body is None else json.dumps(body))
        return self.http.generic(method, url, data, content_type=MEDIA_TYPE, headers=headers)

    def get(self, path, **query):
        return self("GET", path, **query)

    def post(self, path, body, **kwargs):
        return self("POST", path, body, **kwargs)

    def put(self, path, body, **kwargs):
        return self("PUT", path, body, **kwargs)

    def patch(self, path, operations, **kwargs):
        return self("PATCH", path, {"schemas": [PATCH_OP], "Operations": operations}, **kwargs)

    def delete(self, path, **kwargs):
        return self("DELETE", path, **kwargs)


def scim_ok(response, status: int = 200) -> dict:
    assert response.status_code == status, response.content
    if status == 204:
        assert response.content == b""
        return {}
    assert response["Content-Type"].startswith(MEDIA_TYPE), response["Content-Type"]
    return response.json()


def scim_err(response, status: int, scim_type: str | None = None) -> dict:
    """RFC 7644 3.12: the error schema, `status` as a string, `scimType` where one applies."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(MEDIA_TYPE), response["Content-Type"]
    body = response.json()
    assert body["schemas"] == [ERROR], body
    assert body["status"] == str(status), body
    assert body.get("scimType") == scim_type, body
    return body


def new_token(workspace, name="Okta") -> str:
    """Issued by an operator: no member of the workspace is added (its Users are the test's own)."""
    operator = AccountFactory(is_superuser=True)
    return ok(client_for(operator, workspace).call("/scim-tokens/create", {"name": name}))["token"]


@pytest.fixture
def scim(workspace) -> Scim:
    """The directory of `workspace`, which has verified `acme.test` for its SSO connection."""
    verify_domain(workspace, "acme.test")
    return Scim(workspace.pk, new_token(workspace))


@pytest.fixture
def other_workspace(db):
    return WorkspaceFactory()


@pytest.fixture
def other_scim(other_workspace) -> Scim:
    """The directory of `other_workspace`, which has verified `other.test`."""
    verify_domain(other_workspace, "other.test")
    return Scim(other_workspace.pk, new_token(other_workspace))


def verify_domain(workspace, domain: str) -> None:
    if SsoDomain.objects.filter(workspace=workspace, domain=domain, verified_at__isnull=False).exists():
        return
    connection = SsoConnection.objects.create(
        workspace=workspace,
        name=f"idp-{domain}",
        issuer="https://idp.example.com",
        client_id="c",
        client_secret_encrypted="x",
        authorization_endpoint="https://idp.example.com/a",
        token_endpoint="https://idp.example.com/t",
        jwks_uri="https://idp.example.com/j",
    )
    SsoDomain.objects.create(
        connection=connection,
        workspace=workspace,
        domain=domain,
        verification_token="t",
        verified_at=timezone.now(),
        verified_by="operator",
    )


def user_body(email: str, **extra) -> dict:
    return {
        "schemas": [USER],
        "userName": email,
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "emails": [{"value": email, "primary": True, "type": "work"}],
        "active": True,
        **extra,
    }
