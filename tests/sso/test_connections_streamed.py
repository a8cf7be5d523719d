"""docs/api.md#quotas-and-budgets for SSO connections: a connection embeds its `default_roles` whole, each
with its permissions (up to 50 roles of 500 permissions at their size limits: hundreds of megabytes), so every
answer of one goes through the encoder describes use (`answer_fresh`: streamed past 1 MiB, its nested
rows read a few at a time), `sso/verify-domain` included, and `sso/list`'s page stays within its byte
budget (docs/api.md#lists), a first record past it alone and streamed. Workspace A's connections; workspace
B's admin sees none of them."""

import json

import pytest

import iam.http.endpoint
from tests.conftest import err, ok
from tests.factories import WorkspaceFactory
from tests.rbac.test_invitee_streamed import record_bytes, roles_with_shared_permissions

from .conftest import connection_body

pytestmark = pytest.mark.admin("*")


@pytest.fixture
def roles(workspace):
    return roles_with_shared_permissions(workspace, n=3)


def created(admin, idp, roles, **overrides) -> dict:
    body = connection_body(idp, default_role_ids=[str(role.pk) for role in roles], **overrides)
    return ok(admin.call("/sso/create", body))


def test_every_answer_of_a_connection_is_its_describe_streamed_or_whole(
    admin, idp, roles, dns_server, monkeypatch
):
    connection = created(admin, idp, roles)
    assert len(connection["default_roles"]) == 3
    assert sorted(len(role["permissions"]) for role in connection["default_roles"]) == [1, 2, 2]
    ref = {"id": connection["id"]}
    calls = {
        "/sso/describe": ref,
        "/sso/verify-domain": {**ref, "domain": "acme.test"},
        "/sso/update": {**ref, "enabled": True},
    }
    for path, body in calls.items():
        response = admin.call(path, body)
        assert not response.streaming and response["Content-Length"] == str(len(response.content)), path
        assert response.content == admin.call("/sso/describe", ref).content, path
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    monkeypatch.setattr(iam.http.endpoint, "CHUNK_BYTES", 7)
    for path, body in calls.items():
        response = admin.call(path, body)
        assert response.streaming, path
        streamed = b"".join(response.streaming_content)
        monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 1024 * 1024)
        assert streamed == admin.call("/sso/describe", ref).content, path
        monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    assert json.loads(streamed)["data"]["default_roles"] == connection["default_roles"]


def test_another_workspace_gets_nothing_streamed_or_not(admin, idp, roles, member_of, monkeypatch):
    connection = created(admin, idp, roles)
    _, other = member_of(WorkspaceFactory(), "*")
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    for path in ("/sso/describe", "/sso/verify-domain"):
        response = other.call(path, {"id": connection["id"], "domain": "acme.test"})
        assert not response.streaming
        err(response, 404, "sso connection not found")
    assert ok(other.call("/sso/list", {}))["sso_connections"] == []


def test_a_list_page_stays_within_its_byte_budget(admin, idp, roles, settings, monkeypatch):
    for n in range(4):
        created(admin, idp, roles[: 1 + n % 3], name=f"c{n}", domains=[f"d{n}.test"])
    order = {"order_bys": "name"}
    whole = ok(admin.call("/sso/list", {"options": order}))["sso_connections"]
    assert [item["name"] for item in whole] == ["c0", "c1", "c2", "c3"]
    head = b'{"sso_connections":['
    sizes = []
    for offset in range(4):
        body = {"options": {**order, "limit": 1, "offset": offset}}
        page = record_bytes(admin.call("/sso/list", body))
        sizes.append(page.index(b'],"metadata":') - len(head))
        described = record_bytes(admin.call("/sso/describe", {"id": whole[offset]["id"]}))
        assert page[len(head) : len(head) + sizes[-1]] == described  # a page's record is its describe
    settings.IAM_PAGE_MAX_BYTES = sizes[0] + sizes[1] + 1  # the first two fit, not the third
    seen, offset = [], 0
    while offset < 4:
        page = ok(admin.call("/sso/list", {"options": {**order, "offset": offset}}))
        count = page["metadata"]["count"]
        assert count >= 1 and page["metadata"]["total"] == 4
        assert count == 1 or sum(sizes[offset : offset + count]) <= settings.IAM_PAGE_MAX_BYTES
        seen += page["sso_connections"]
        offset += count
    assert seen == whole
    assert ok(admin.call("/sso/list", {"options": order}))["metadata"]["count"] == 2
    # A first record past the whole budget is the page alone, written as it is sent.
    settings.IAM_PAGE_MAX_BYTES = 10
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    response = admin.call("/sso/list", {"options": order})
    assert response.streaming
    page = json.loads(b"".join(response.streaming_content))["data"]
    assert page["sso_connections"] == whole[:1] and page["metadata"]["count"] == 1
