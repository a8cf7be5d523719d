"""SSO connections as a workspace resource, and the proof of their domains (docs/api.md#sso), through the
HTTP API, with a stand-in OpenID provider and a DNS server on loopback."""

import pytest
from django.core.management import CommandError, call_command

from iam.models import AuditEntry
from iam.platform import crypto
from sso.models import SsoConnection, SsoDomain
from tests.conftest import client_for, err, ok
from tests.factories import RoleFactory, WorkspaceFactory

from .conftest import connection_body


@pytest.fixture
def other_workspace(db):
    return WorkspaceFactory()


@pytest.fixture
def neighbour(member_of, other_workspace):
    """Another workspace's admin, holding every permission there."""
    return member_of(other_workspace, "*")


def domains_of(connection: dict) -> dict:
    return {row["domain"]: row for row in connection["domains"]}


def test_create_answers_the_connection_without_its_secret(admin, workspace, idp, viewer_role):
    created = ok(admin.call("/sso/create", connection_body(idp, default_role_ids=[str(viewer_role.pk)])))
    assert list(created) == [
        "id", "workspace_id", "name", "protocol", "issuer", "client_id", "domains", "default_roles",
        "enabled", "trust_provider_mfa", "created_at", "updated_at", "tags", "meta",
    ]  # fmt: skip
    assert created["workspace_id"] == str(workspace.pk)
    assert created["issuer"] == idp.issuer and created["client_id"] == idp.client_id
    assert created["enabled"] is True
    assert [role["id"] for role in created["default_roles"]] == [str(viewer_role.pk)]
    (domain,) = created["domains"]
    assert domain["domain"] == "acme.test" and domain["verified"] is False
    assert domain["verification_token"].startswith("iam-verification=")
    assert idp.client_secret not in str(created)
    assert "/.well-known/openid-configuration" in idp.requests
    row = SsoConnection.objects.get(pk=created["id"])
    assert idp.client_secret not in row.client_secret_encrypted
    assert crypto.decrypt(row.client_secret_encrypted) == idp.client_secret
    assert row.token_endpoint == f"{idp.issuer}/token" and row.jwks_uri == f"{idp.issuer}/jwks"
    described = ok(admin.call("/sso/describe", {"id": created["id"]}))
    assert described == created
    listed = ok(admin.call("/sso/list", {}))
    assert [item["id"] for item in listed["sso_connections"]] == [created["id"]]
    entries = AuditEntry.objects.filter(resource_id=created["id"])
    assert idp.client_secret not in str(list(entries.values("changes")))


def test_a_connection_of_one_workspace_is_invisible_to_another(admin, idp, neighbour):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    _, other = neighbour
    assert ok(other.call("/sso/list", {}))["sso_connections"] == []
    for path in ("/sso/describe", "/sso/delete"):
        err(other.call(path, {"id": created["id"]}), 404, "sso connection not found")
    err(other.call("/sso/update", {"id": created["id"], "name": "mine"}), 404, "sso connection not found")
    err(
        other.call("/sso/verify-domain", {"id": created["id"], "domain": "acme.test"}),
        404,
        "sso connection not found",
    )
    assert ok(admin.call("/sso/describe", {"id": created["id"]}))["name"] == "Acme Okta"


@pytest.mark.parametrize(
    ("path", "permission"),
    [
        ("/sso/create", "sso:create"),
        ("/sso/describe", "sso:describe"),
        ("/sso/list", "sso:list"),
        ("/sso/update", "sso:update"),
        ("/sso/delete", "sso:delete"),
        ("/sso/verify-domain", "sso:update"),
    ],
)
def test_each_endpoint_needs_its_permission(workspace, member_of, path, permission):
    _, without = member_of(workspace, "projects:*")
    err(without.call(path, {}), 403, f"missing permission {permission}")
    _, holder = member_of(workspace, permission)
    response = holder.call(path, {})
    assert response.status_code != 403, response.json()


def test_verify_domain_needs_update_not_a_verify_permission(workspace, member_of, idp, admin, dns_server):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    _, updater = member_of(workspace, "sso:update")
    answered = ok(updater.call("/sso/verify-domain", {"id": created["id"], "domain": "acme.test"}))
    assert answered["id"] == created["id"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"issuer": "another"}, "the document names another issuer"),
        ({"discovery": 404}, "the provider answered 404"),
        ({"discovery": ["not", "an", "object"]}, "the document is not a json object"),
        ({"jwks_uri": None}, "jwks_uri missing or not https"),
        ({"token_endpoint": "ftp://example.com/token"}, "token_endpoint missing or not https"),
    ],
)
def test_discovery_must_name_the_same_issuer_and_its_endpoints(admin, idp, change, reason):
    if "discovery" in change:
        idp.discovery = change["discovery"]
    else:
        key, value = next(iter(change.items()))
        idp.discovery = {**idp.discovery, key: value if key != "issuer" else idp.issuer + "/" + value}
    body = err(admin.call("/sso/create", connection_body(idp)), 400, f"issuer discovery failed: {reason}")
    assert body["field"] == "issuer"
    assert SsoConnection.objects.count() == 0


def test_an_unreachable_or_plain_http_issuer_fails_discovery(admin, idp):
    idp.close()
    body = err(admin.call("/sso/create", connection_body(idp)), 400)
    assert (
        body["message"].startswith("issuer discovery failed: provider unreachable")
        and body["field"] == "issuer"
    )
    body = err(admin.call("/sso/create", connection_body(idp, issuer="http://idp.example.com")), 400)
    assert body["message"] == "issuer discovery failed: issuer must be an https url without query or fragment"


def test_discovery_goes_through_the_address_guard(admin, idp, settings):
    settings.IAM_WEBHOOK_ALLOW_PRIVATE = False
    body = err(admin.call("/sso/create", connection_body(idp)), 400)
    assert (
        body["message"]
        == "issuer discovery failed: address not allowed (127.0.0.1 resolves to a non-public address)"
    )
    assert idp.requests == []


def test_update_of_issuer_discovers_again(admin, idp, other_idp):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    idp.requests.clear()
    other_idp.discovery = {**other_idp.discovery, "issuer": "https://elsewhere.example.com"}
    err(admin.call("/sso/update", {"id": created["id"], "issuer": other_idp.issuer}), 400,
        "issuer discovery failed: the document names another issuer")  # fmt: skip
    other_idp.discovery = {**other_idp.discovery, "issuer": other_idp.issuer}
    updated = ok(admin.call("/sso/update", {"id": created["id"], "issuer": other_idp.issuer}))
    assert updated["issuer"] == other_idp.issuer
    assert SsoConnection.objects.get(pk=created["id"]).jwks_uri == f"{other_idp.issuer}/jwks"
    ok(admin.call("/sso/update", {"id": created["id"], "name": "renamed"}))  # no discovery
    assert idp.requests == []
    entries = AuditEntry.objects.filter(action="ssoconnection.update", resource_id=created["id"])
    assert [entry.changes["issuer"] for entry in entries if "issuer" in entry.changes] == [
        {"before": idp.issuer, "after": other_idp.issuer}
    ]


def test_update_changes_what_is_sent_and_replaces_the_secret(admin, idp, viewer_role):
    created = ok(admin.call("/sso/create", connection_body(idp, domains=["acme.test", "acme.example"])))
    updated = ok(
        admin.call(
            "/sso/update",
            {"id": created["id"], "client_secret": "new-secret", "enabled": False,
             "default_role_ids": [str(viewer_role.pk)], "domains": ["acme.test", "acme.org"]},
        )
    )  # fmt: skip
    assert updated["enabled"] is False and updated["name"] == "Acme Okta"
    assert [role["name"] for role in updated["default_roles"]] == ["viewer"]
    assert sorted(domains_of(updated)) == ["acme.org", "acme.test"]
    assert domains_of(updated)["acme.test"] == domains_of(created)["acme.test"]  # kept with its token
    assert "new-secret" not in str(updated)
    row = SsoConnection.objects.get(pk=created["id"])
    assert crypto.decrypt(row.client_secret_encrypted) == "new-secret"


def test_default_roles_must_be_roles_of_the_workspace(admin, idp, neighbour):
    foreign = RoleFactory(workspace=WorkspaceFactory())
    body = err(
        admin.call("/sso/create", connection_body(idp, default_role_ids=[str(foreign.pk)])),
        400,
        "default_role_ids must name roles of this workspace",
    )
    assert body["field"] == "default_role_ids"


def test_default_roles_may_not_grant_what_the_caller_lacks(workspace, member_of, idp):
    owner_like = RoleFactory(workspace=workspace, permissions=["*"])
    _, creator = member_of(workspace, "sso:*")
    err(
        creator.call("/sso/create", connection_body(idp, default_role_ids=[str(owner_like.pk)])),
        403,
        "cannot grant permissions you do not hold",
    )


@pytest.mark.parametrize(
    ("change", "message", "field"),
    [
        ({"name": ""}, "name required", "name"),
        ({"issuer": "not a url"}, "invalid issuer", "issuer"),
        ({"client_secret": None}, "client_secret required", "client_secret"),
        ({"domains": ["not a domain"]}, "domains must hold domain names such as example.com", "domains"),
        ({"domains": [3]}, "domains must be an array of domain names", "domains"),
        ({"domains": "acme.test"}, "domains must be an array", "domains"),
        ({"enabled": "yes"}, "enabled must be true or false", "enabled"),
    ],
)
def test_create_validates_the_body(admin, idp, change, message, field):
    body = err(admin.call("/sso/create", connection_body(idp, **change)), 400, message)
    assert body["field"] == field


def test_names_are_unique_in_a_workspace(admin, idp, neighbour):
    ok(admin.call("/sso/create", connection_body(idp, domains=[])))
    err(admin.call("/sso/create", connection_body(idp, domains=[])), 409, "name already exists")
    _, other = neighbour
    ok(other.call("/sso/create", connection_body(idp, domains=[])))


def test_delete_takes_the_domains(admin, idp):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    assert ok(admin.call("/sso/delete", {"id": created["id"]})) == {"id": created["id"]}
    assert not SsoDomain.objects.exists()
    err(admin.call("/sso/describe", {"id": created["id"]}), 404, "sso connection not found")


def test_the_connection_quota(admin, idp, settings, operator, workspace):
    settings.IAM_QUOTA_SSO_CONNECTIONS = 2
    for n in range(2):
        ok(admin.call("/sso/create", connection_body(idp, name=f"c{n}", domains=[])))
    err(admin.call("/sso/create", connection_body(idp, name="c2", domains=[])), 403,
        "quota reached: sso connections (2)")  # fmt: skip
    ok(client_for(operator, workspace).call("/sso/create", connection_body(idp, name="c3", domains=[])))


# Domains


def test_a_domain_is_verified_by_its_dns_txt_record(admin, idp, dns_server):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    token = domains_of(created)["acme.test"]["verification_token"]
    body = {"id": created["id"], "domain": "acme.test"}
    answered = ok(admin.call("/sso/verify-domain", body))
    assert domains_of(answered)["acme.test"]["verified"] is False  # no record yet
    assert "_iam-verification.acme.test" in dns_server.queries
    dns_server.records["_iam-verification.acme.test"] = ["some-other-proof"]
    assert domains_of(ok(admin.call("/sso/verify-domain", body)))["acme.test"]["verified"] is False
    dns_server.records["_iam-verification.acme.test"] = ["v=spf1 -all", token]
    assert domains_of(ok(admin.call("/sso/verify-domain", body)))["acme.test"]["verified"] is True
    assert domains_of(ok(admin.call("/sso/describe", {"id": created["id"]})))["acme.test"]["verified"]
    err(admin.call("/sso/verify-domain", {**body, "domain": "other.test"}), 404, "domain not found")


def test_a_silent_nameserver_is_503(admin, idp, settings):
    import socket

    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    settings.IAM_DNS_NAMESERVERS = [f"127.0.0.1:{silent.getsockname()[1]}"]
    created = ok(admin.call("/sso/create", connection_body(idp)))
    try:
        err(admin.call("/sso/verify-domain", {"id": created["id"], "domain": "acme.test"}), 503,
            "domain verification unavailable")  # fmt: skip
    finally:
        silent.close()


def test_a_domain_verified_by_one_workspace_cannot_be_claimed_by_another(admin, idp, neighbour, dns_server):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    _, other = neighbour
    squatted = ok(other.call("/sso/create", connection_body(idp)))  # unverified: both may hold it
    token = domains_of(created)["acme.test"]["verification_token"]
    dns_server.records["_iam-verification.acme.test"] = [token]
    ok(admin.call("/sso/verify-domain", {"id": created["id"], "domain": "acme.test"}))
    # The other workspace's own token is not in DNS; even with it there, the domain is taken.
    dns_server.records["_iam-verification.acme.test"] = [
        token,
        domains_of(squatted)["acme.test"]["verification_token"],
    ]
    err(
        other.call("/sso/verify-domain", {"id": squatted["id"], "domain": "acme.test"}),
        409,
        "domain already claimed",
    )
    err(other.call("/sso/create", connection_body(idp, name="again")), 409, "domain already claimed")
    other_only = ok(other.call("/sso/create", connection_body(idp, name="other", domains=["b.test"])))
    err(other.call("/sso/update", {"id": other_only["id"], "domains": ["b.test", "acme.test"]}), 409,
        "domain already claimed")  # fmt: skip
    # Within one workspace a domain belongs to one connection.
    err(admin.call("/sso/create", connection_body(idp, name="second")), 409, "domain already claimed")


def test_operator_verification_by_command(admin, idp, workspace, neighbour, other_workspace):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    _, other = neighbour
    ok(other.call("/sso/create", connection_body(idp)))
    call_command("verify_domain", "--workspace", workspace.slug, "--domain", "acme.test")
    assert domains_of(ok(admin.call("/sso/describe", {"id": created["id"]})))["acme.test"]["verified"]
    with pytest.raises(CommandError, match="domain already claimed"):
        call_command("verify_domain", "--workspace", str(other_workspace.pk), "--domain", "acme.test")
    with pytest.raises(CommandError, match="domain not found"):
        call_command("verify_domain", "--workspace", workspace.slug, "--domain", "nowhere.test")
    entry = AuditEntry.objects.get(action="ssoconnection.verify_domain")
    assert entry.actor_kind == "command" and entry.changes == {
        "domain": "acme.test",
        "verified_by": "operator",
    }


def test_a_tenant_cannot_verify_by_operator_word(workspace, member_of, admin, idp):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    answered = ok(
        admin.call(
            "/sso/update",
            {
                "id": created["id"],
                "domains": ["acme.test"],
                "meta": {"schema_version": "1", "verified": True},
            },
        )
    )
    assert domains_of(answered)["acme.test"]["verified"] is False


def test_list_query_count_does_not_grow_with_the_page(admin, idp, viewer_role):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def make(n: int) -> None:
        body = connection_body(
            idp, name=f"c{n}", domains=[f"d{n}.test", f"e{n}.test"], default_role_ids=[str(viewer_role.pk)]
        )
        ok(admin.call("/sso/create", body))

    def counted() -> int:
        admin.call("/sso/list", {})  # warm the auth caches
        with CaptureQueriesContext(connection) as queries:
            ok(admin.call("/sso/list", {}))
        return len(queries)

    make(0)
    few = counted()
    for n in range(1, 8):
        make(n)
    assert counted() == few
    listed = ok(admin.call("/sso/list", {"filter": {"fields": {"enabled": True}}}))["sso_connections"]
    assert len(listed) == 8 and all(len(item["domains"]) == 2 for item in listed)


def test_the_nameserver_setting_takes_an_address_with_an_optional_port(settings):
    from django.core.exceptions import ImproperlyConfigured

    from sso import dns_proof

    settings.IAM_DNS_NAMESERVERS = ["192.0.2.1", "192.0.2.2:5353", "[2001:db8::1]:53", "2001:db8::2"]
    found = [(ns.address, ns.port) for ns in dns_proof.resolver().nameservers]
    assert found == [("192.0.2.1", 53), ("192.0.2.2", 5353), ("2001:db8::1", 53), ("2001:db8::2", 53)]
    for wrong in ("dns.example.com", "192.0.2.1:x", "192.0.2.1:70000"):
        settings.IAM_DNS_NAMESERVERS = [wrong]
        with pytest.raises(ImproperlyConfigured, match="IAM_DNS_NAMESERVERS"):
            dns_proof.resolver()


def test_a_malformed_nameserver_setting_stops_the_start():
    from tests.iam.test_startup import PRODUCTION, start

    refused = start(**PRODUCTION, IAM_DNS_NAMESERVERS="dns.example.com")
    assert refused.returncode != 0
    assert "IAM_DNS_NAMESERVERS: not an address or address:port: 'dns.example.com'" in refused.stderr
    assert start(**PRODUCTION, IAM_DNS_NAMESERVERS="127.0.0.1:5353, ::1").returncode == 0
