"""docs/security.md#the-edges, SSRF: an IPv6 address that embeds a loopback, private or link-local IPv4
address (6to4, NAT64, IPv4-compatible, IPv4-mapped, SIIT, Teredo) is refused like the IPv4 address itself, at
create, at update and again at delivery. The endpoints are IPv6 literals, so no DNS answer is involved."""

import pytest
from django.test import override_settings

from clients.models import Client, Delivery
from tests.clients.test_push import emit_membership_created
from tests.conftest import err, ok

BODY = {"name": "svc", "tags": [], "meta": {"schema_version": "1"}}
EMBEDDING_PRIVATE = [
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254 (cloud metadata)
    "64:ff9b::7f00:1",  # NAT64 well-known prefix, 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix, 169.254.169.254
    "64:ff9b:1::a00:1",  # NAT64 local-use prefix
    "::7f00:1",  # IPv4-compatible 127.0.0.1
    "::c0a8:1",  # IPv4-compatible 192.168.0.1
    "::ffff:7f00:1",  # IPv4-mapped 127.0.0.1
    "::ffff:a9fe:a9fe",  # IPv4-mapped 169.254.169.254
    "::ffff:0:7f00:1",  # SIIT IPv4-translated 127.0.0.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
]


def url(address: str) -> str:
    return f"http://[{address}]:8080/hook"


pytestmark = pytest.mark.admin("clients:*", "memberships:*")


@override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False)
@pytest.mark.parametrize("address", EMBEDDING_PRIVATE)
def test_refused_at_create_and_update(admin, address):
    body = err(admin.call("/clients/create", {**BODY, "endpoint": url(address)}), 400, "endpoint not allowed")
    assert body["field"] == "endpoint"
    public = "http://[2001:4860:4860::8888]/hook"
    created = ok(admin.call("/clients/create", {**BODY, "endpoint": public}))
    body = err(
        admin.call("/clients/update", {"id": created["id"], "endpoint": url(address)}),
        400,
        "endpoint not allowed",
    )
    assert body["field"] == "endpoint"
    assert Client.objects.get(pk=created["id"]).endpoint == public


@pytest.mark.parametrize("address", EMBEDDING_PRIVATE)
def test_refused_at_delivery(admin, workspace, address, monkeypatch, django_capture_on_commit_callbacks):
    ok(admin.call("/clients/create", {**BODY, "endpoint": url(address)}))  # allowed in development

    def no_connection(*args, **kwargs):
        raise AssertionError("the guard let a connection through")

    monkeypatch.setattr("socket.create_connection", no_connection)
    with override_settings(IAM_WEBHOOK_ALLOW_PRIVATE=False):
        emit_membership_created(workspace, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    error = delivery.attempt_rows.get().error
    assert error.startswith(f"endpoint not allowed: {address} resolves to a non-public address"), error
    assert delivery.last_error.startswith("permanent: endpoint not allowed")  # not retried
