"""Clients CRUD and regenerate-secret (docs/api.md#clients, #x-workspace, #answers,
docs/integration.md#validate-each-token-clientsvalidate, #push-events) over HTTP."""

import socket
import uuid

import pytest
from django.test import override_settings

from clients.models import Client
from iam.models import Event
from iam.platform import crypto
from tests.conftest import err, ok

BODY = {"name": "billing", "tags": ["a"], "meta": {"schema_version": "1"}}
WORKSPACE_FIELDS = {
    "id",
    "name",
    "slug",
    "description",
    "branding",
    "mfa_required",
    "config",
    "tags",
    "meta",
    "created_at",
    "updated_at",
}
CLIENT_FIELDS = {
    "id",
    "workspace",
    "workspace_id",
    "name",
    "endpoint",
    "description",
    "tags",
    "meta",
    "created_at",
    "updated_at",
}


pytestmark = pytest.mark.admin("clients:*")


def create(api, **fields):
    return ok(api.call("/clients/create", {**BODY, **fields}))


def test_create_returns_the_secret_once_and_the_workspace(admin, workspace):
    data = create(admin, endpoint="https://example.com/hook", description="d")
    assert set(data) == CLIENT_FIELDS | {"secret"}
    assert set(data["workspace"]) == WORKSPACE_FIELDS
    assert data["workspace"]["id"] == data["workspace_id"] == str(workspace.pk)
    assert data["workspace"]["slug"] == workspace.slug
    assert (data["name"], data["endpoint"], data["description"], data["tags"], data["updated_at"]) == (
        "billing",
        "https://example.com/hook",
        "d",
        ["a"],
        None,
    )
    assert len(data["secret"]) >= 43  # 256 bits, url-safe base64
    stored = Client.objects.get(pk=data["id"])
    # never in plaintext at rest (docs/security.md#secrets-at-rest)
    assert data["secret"] not in (stored.secret_encrypted, stored.secret_digest)
    assert crypto.decrypt(stored.secret_encrypted) == data["secret"]
    assert crypto.digest_matches(data["secret"], stored.secret_digest)

    described = ok(admin.call("/clients/describe", {"id": data["id"]}))
    assert set(described) == CLIENT_FIELDS
    assert "secret" not in ok(admin.call("/clients/list", {}))["clients"][0]


def test_create_validation(admin):
    err(admin.call("/clients/create", {"tags": [], "meta": {"schema_version": "1"}}), 400, "name required")
    err(admin.call("/clients/create", {"name": "x", "meta": {"schema_version": "1"}}), 400, "tags required")
    err(admin.call("/clients/create", {"name": "x", "tags": []}), 400, "meta required")
    err(admin.call("/clients/create", {**BODY, "meta": {}}), 400, "meta.schema_version required")
    message = "endpoint must start with http:// or https://"
    err(admin.call("/clients/create", {**BODY, "endpoint": "ftp://x.example"}), 400, message)
    err(admin.call("/clients/create", {**BODY, "endpoint": 5}), 400, "endpoint must be a string")
    err(admin.call("/clients/create", {**BODY, "name": 5}), 400, "name must be a string")


def test_name_is_unique_per_workspace(admin, member_of):
    created = create(admin)
    err(admin.call("/clients/create", BODY), 409, "name already exists")
    other = create(admin, name="other")
    err(admin.call("/clients/update", {"id": other["id"], "name": "billing"}), 409, "name already exists")
    # the same name in another workspace is fine
    _, elsewhere = member_of(None, "clients:create")
    create(elsewhere)
    assert ok(admin.call("/clients/update", {"id": created["id"], "name": "billing"}))["name"] == "billing"


def test_update_changes_only_what_is_sent(admin):
    created = create(admin, description="keep", endpoint="https://example.com/a")
    data = ok(admin.call("/clients/update", {"id": created["id"], "tags": ["b", "c"], "endpoint": None}))
    assert set(data) == CLIENT_FIELDS
    assert (data["description"], data["tags"], data["endpoint"], data["name"]) == (
        "keep",
        ["b", "c"],
        None,
        "billing",
    )
    assert data["updated_at"] is not None


def test_delete_and_regenerate(admin):
    created = create(admin)
    data = ok(admin.call("/clients/regenerate-secret", {"id": created["id"]}))
    assert set(data) == {"id", "secret"} and data["id"] == created["id"]
    assert data["secret"] != created["secret"]
    assert Client.objects.get(pk=created["id"]).secret_version == 2
    rotated = Event.objects.get(payload__type="client.secret_rotated")
    assert rotated.payload["data"] == {
        "account_ids": [],
        "resource": {"type": "client", "id": created["id"]},
    }
    assert ok(admin.call("/clients/delete", {"id": created["id"]})) == {"id": created["id"]}
    err(admin.call("/clients/describe", {"id": created["id"]}), 404, "client not found")
    err(admin.call("/clients/delete", {"id": created["id"]}), 404, "client not found")
    err(admin.call("/clients/describe", {"id": "nope"}), 400, "invalid id")
    err(admin.call("/clients/describe", {}), 400, "id required")


@pytest.mark.parametrize(
    ("path", "permission"),
    [
        ("/clients/create", "clients:create"),
        ("/clients/describe", "clients:describe"),
        ("/clients/list", "clients:list"),
        ("/clients/update", "clients:update"),
        ("/clients/delete", "clients:delete"),
        ("/clients/regenerate-secret", "clients:regenerate-secret"),
    ],
)
def test_each_action_needs_its_permission(workspace, member_of, api, path, permission):
    _, reader = member_of(workspace, "projects:*")
    err(reader.call(path, {}), 403, f"missing permission {permission}")
    err(api.call(path, {}, headers={"X-Workspace": str(workspace.pk)}), 401)
    _, allowed = member_of(workspace, permission)
    assert allowed.call(path, {}).status_code != 403


def test_workspace_header_is_required(admin):
    err(admin.in_workspace("").call("/clients/list", {}), 400, "workspace required")


def test_clients_of_another_workspace_are_invisible(admin, member_of):
    _, other_admin = member_of(None, "clients:*")
    theirs = create(other_admin)
    mine = create(admin, name="mine")
    for path in ("/clients/describe", "/clients/delete", "/clients/regenerate-secret"):
        err(admin.call(path, {"id": theirs["id"]}), 404, "client not found")
    err(admin.call("/clients/update", {"id": theirs["id"], "name": "x"}), 404, "client not found")
    listed = ok(admin.call("/clients/list", {}))
    assert [item["id"] for item in listed["clients"]] == [mine["id"]]
    filtered = ok(admin.call("/clients/list", {"filter": {"fields": {"id": theirs["id"]}}}))
    assert filtered["clients"] == [] and filtered["metadata"]["total"] == 0
    # untouched
    assert ok(other_admin.call("/clients/describe", {"id": theirs["id"]}))["name"] == "billing"
    # a member of A naming B in the header is refused
    err(admin.in_workspace(theirs["workspace_id"]).call("/clients/list", {}), 403)


def test_list_filters_and_order(admin, workspace):
    first = create(admin, name="one", description="x")
    second = create(admin, name="two", tags=["b"])
    data = ok(admin.call("/clients/list", {}))
    assert [item["id"] for item in data["clients"]] == [second["id"], first["id"]]
    assert data["metadata"] == {
        "total": 2,
        "count": 2,
        "offset": 0,
        "limit": 100,
        "order_bys": ["!created_at"],
    }
    for fields, expected in [
        ({"name": "one"}, [first["id"]]),
        ({"description": "x"}, [first["id"]]),
        ({"workspace_id": str(workspace.pk)}, [second["id"], first["id"]]),
    ]:
        got = ok(admin.call("/clients/list", {"filter": {"fields": fields}}))["clients"]
        assert [item["id"] for item in got] == expected
    got = ok(admin.call("/clients/list", {"filter": {"tags": ["b"]}}))["clients"]
    assert [item["id"] for item in got] == [second["id"]]
    err(
        admin.call("/clients/list", {"filter": {"fields": {"secret": "x"}}}),
        400,
        "unknown filter field: secret",
    )


def test_list_query_count_does_not_grow_with_the_page(admin, workspace, django_assert_num_queries):
    for index in range(3):
        create(admin, name=f"c{index}")
    admin.call("/clients/list", {})  # warm the auth caches
    with django_assert_num_queries(2):  # count, page (workspace joined)
        ok(admin.call("/clients/list", {}))
    for index in range(3, 20):
        create(admin, name=f"c{index}")
    admin.call("/clients/list", {})
    with django_assert_num_queries(2):
        assert len(ok(admin.call("/clients/list", {}))["clients"]) == 20


# SSRF (docs/security.md#the-edges)


def _resolves_to(monkeypatch, address):
    def fake(host, port, *args, **kwargs):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False)
@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "0.0.0.0",
        "::ffff:10.0.0.1",
        "100.64.0.1",
    ],
)
def test_private_endpoints_are_refused(admin, monkeypatch, address):
    _resolves_to(monkeypatch, address)
    err(
        admin.call("/clients/create", {**BODY, "endpoint": "https://hooks.example.com/x"}),
        400,
        "endpoint not allowed",
    )


@override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False)
def test_private_endpoint_refused_on_update_and_public_accepted(admin, monkeypatch):
    _resolves_to(monkeypatch, "93.184.216.34")
    created = create(admin, endpoint="https://hooks.example.com/x")
    _resolves_to(monkeypatch, "10.0.0.5")
    body = err(
        admin.call("/clients/update", {"id": created["id"], "endpoint": "https://internal.example.com/"}),
        400,
        "endpoint not allowed",
    )
    assert body["field"] == "endpoint"
    assert Client.objects.get(pk=created["id"]).endpoint == "https://hooks.example.com/x"


@override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False)
def test_unresolvable_endpoint_is_refused(admin, monkeypatch):
    def fail(*args, **kwargs):
        raise socket.gaierror("no such host")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    err(
        admin.call("/clients/create", {**BODY, "endpoint": "https://nope.invalid/"}),
        400,
        "endpoint not allowed",
    )


BACKSLASH = "endpoint must not contain a backslash"
USERINFO = "endpoint must not contain a user name or password"
SPACE = "endpoint must not contain spaces or control characters"
ASCII = (
    "endpoint must be ASCII: write an international host name in its xn-- form and percent-encode the rest"
)
HOST = "endpoint host must be a DNS name or an IP address"
PORT = "endpoint port must be a number from 1 to 65535"
IPV4 = "endpoint host must be written as four decimal numbers (a.b.c.d) when it is an IPv4 address"
SCHEME = "endpoint must start with http:// or https://"


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        # urllib reads the host 203.0.113.5, a WHATWG parser 127.0.0.1:8197
        ("http://127.0.0.1:8197\\@203.0.113.5/", BACKSLASH),
        ("https://hooks.example.com\\@evil.example.com/", BACKSLASH),
        ("https://hooks.example.com/a\\b", BACKSLASH),
        ("https://user:pass@hooks.example.com/", USERINFO),
        ("https://hooks.example.com@203.0.113.5/", USERINFO),
        ("https://hooks.example.com:443@203.0.113.5/", USERINFO),
        ("https://@hooks.example.com/", USERINFO),
        ("https://hooks.example.com /x", SPACE),
        ("https://hooks.example.com/x\t", SPACE),
        ("https://hooks.example.com\r\n.evil/", SPACE),
        ("https://hooks.example.com/\x7f", SPACE),
        (" https://hooks.example.com/", SPACE),
        ("https://bücher.example/", ASCII),
        ("https://hooks.example.com/ü", ASCII),
        ("https://hooks.example.com\uff0fevil/", ASCII),
        ("https://hooks%2eexample.com/", HOST),
        ("https://%31%32%37.0.0.1/", HOST),
        ("http://[fe80::1%25eth0]/", HOST),
        ("http://[::1/", HOST),
        ("http://::1]/", HOST),
        ("https://hooks.example.com:65536/", PORT),
        ("https://hooks.example.com:0/", PORT),
        ("https://hooks.example.com:-1/", PORT),
        ("https://hooks.example.com:8o/", PORT),
        ("https://hooks.example.com:80:80/", PORT),
        ("http://0x7f.1/", IPV4),
        ("http://2130706433/", IPV4),
        ("http://127.1:8197/", IPV4),
        ("http://0177.0.0.1/", IPV4),
        ("http://127.0.0.1./", IPV4),
        ("https:/hooks.example.com/", SCHEME),
        ("https:hooks.example.com/", SCHEME),
    ],
)
def test_endpoints_that_parsers_read_differently_are_refused(admin, endpoint, message):
    """Refused whatever the address rules say (development allows private addresses, as here), at create
    and at update. No request is sent anywhere."""
    body = err(admin.call("/clients/create", {**BODY, "endpoint": endpoint}), 400, message)
    assert body["field"] == "endpoint"
    created = create(admin, endpoint="http://127.0.0.1:9/hook")
    body = err(admin.call("/clients/update", {"id": created["id"], "endpoint": endpoint}), 400, message)
    assert body["field"] == "endpoint"
    assert Client.objects.get(pk=created["id"]).endpoint == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:8197/hook",
        "http://[::1]:8080/hook",
        "http://localhost:3000/x?a=1&b=%2F#top",
        "HTTP://Hooks.Example.com:080/x",
        "https://xn--bcher-kva.example/a%20b",
    ],
)
def test_endpoints_every_parser_reads_alike_are_accepted(admin, endpoint):
    assert create(admin, endpoint=endpoint)["endpoint"] == endpoint


def test_an_endpoint_the_whatwg_reading_disagrees_with_is_refused(admin, monkeypatch):
    """The last rule: whatever passed the others, urllib's host must be the WHATWG parser's."""
    from iam.platform import egress

    class Elsewhere:
        def __init__(self, url):
            self.protocol, self.hostname, self.port = "https:", "elsewhere.example.com", ""

    monkeypatch.setattr(egress.ada_url, "URL", Elsewhere)
    message = "endpoint is read differently by different URL parsers"
    err(admin.call("/clients/create", {**BODY, "endpoint": "https://hooks.example.com/"}), 400, message)


def test_private_endpoints_allowed_in_development(admin):
    assert create(admin, endpoint="http://127.0.0.1:9/hook")["endpoint"] == "http://127.0.0.1:9/hook"


def test_unknown_id_is_404(admin):
    err(admin.call("/clients/describe", {"id": str(uuid.uuid4())}), 404, "client not found")
