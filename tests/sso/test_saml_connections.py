"""SAML connections through the API (docs/api.md#sso, docs/saml.md): the IdP's metadata in, the SP's
values out, the metadata's rules, what changes need `*`, and the SP metadata document."""

import pytest

from authn.models import Credential
from iam.models import AuditEntry
from sso import saml
from sso.models import SsoConnection
from tests.conftest import err, ok
from tests.factories import CredentialFactory, WorkspaceFactory

from .conftest import connection_body
from .saml_flow import _public_urls, connect_saml, saml_body  # noqa: F401 (the autouse fixture)
from .saml_idp import POST, TestIdp, new_signing_pair

SAML_FIELDS = [
    "id", "workspace_id", "name", "protocol", "idp_entity_id", "sp_entity_id", "acs_url", "metadata_url",
    "domains", "default_roles", "enabled", "trust_provider_mfa", "created_at", "updated_at", "tags", "meta",
]  # fmt: skip


def test_create_answers_the_sp_values_and_keeps_what_the_metadata_names(admin, workspace, saml_idp):
    created = ok(admin.call("/sso/create", saml_body(saml_idp)))
    assert list(created) == SAML_FIELDS
    base = f"http://testserver/saml/{created['id']}"
    assert created["protocol"] == "saml" and created["idp_entity_id"] == saml_idp.entity_id
    assert created["sp_entity_id"] == created["metadata_url"] == f"{base}/metadata"
    assert created["acs_url"] == f"{base}/acs"
    row = SsoConnection.objects.get(pk=created["id"])
    assert (row.idp_sso_url, row.issuer, row.client_id, row.client_secret_encrypted) == (
        saml_idp.sso_url,
        "",
        "",
        "",
    )
    assert row.idp_certificates == ["".join(saml_idp.certificate.strip().splitlines()[1:-1])]
    assert ok(admin.call("/sso/describe", {"id": created["id"]})) == created
    listed = ok(admin.call("/sso/list", {"filter": {"fields": {"protocol": "saml"}}}))["sso_connections"]
    assert listed == [created]
    entry = AuditEntry.objects.get(action="ssoconnection.create", resource_id=created["id"])
    assert entry.changes["idp_entity_id"] == {"before": None, "after": saml_idp.entity_id}
    assert entry.changes["protocol"] == {"before": None, "after": "saml"}


def test_an_openid_connection_answers_its_own_fields_only(admin, idp):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    assert created["protocol"] == "oidc" and created["issuer"] == idp.issuer
    assert not {"idp_entity_id", "sp_entity_id", "acs_url", "metadata_url"} & set(created)
    listed = ok(admin.call("/sso/list", {"filter": {"fields": {"protocol": "oidc"}}}))["sso_connections"]
    assert [row["id"] for row in listed] == [created["id"]]


def test_each_protocol_takes_its_own_fields(admin, saml_idp, idp):
    body = err(admin.call("/sso/create", saml_body(saml_idp, idp_metadata_xml=None) | {}), 400)
    assert body["field"] == "idp_metadata_xml"
    without = saml_body(saml_idp)
    del without["idp_metadata_xml"]
    assert (
        err(admin.call("/sso/create", without), 400, "idp_metadata_xml required")["field"]
        == "idp_metadata_xml"
    )
    for name, value in (("issuer", idp.issuer), ("client_id", "x"), ("client_secret", "y")):
        answer = err(admin.call("/sso/create", saml_body(saml_idp, **{name: value})), 400,
                     f"{name} not used by saml connections")  # fmt: skip
        assert answer["field"] == name
    oidc = connection_body(idp, idp_metadata_xml=saml_idp.metadata())
    err(admin.call("/sso/create", oidc), 400, "idp_metadata_xml not used by oidc connections")
    no_issuer = connection_body(idp)
    del no_issuer["issuer"]
    err(admin.call("/sso/create", no_issuer), 400, "issuer required")
    err(
        admin.call("/sso/create", saml_body(saml_idp, protocol="ldap")),
        400,
        "protocol must be one of oidc, saml",
    )
    assert not SsoConnection.objects.exists()
    saml = connect_saml(admin, saml_idp)
    err(
        admin.call("/sso/update", {"id": saml["id"], "issuer": idp.issuer}),
        400,
        "issuer not used by saml connections",
    )
    oidc = ok(admin.call("/sso/create", connection_body(idp, domains=["other.test"])))
    err(admin.call("/sso/update", {"id": oidc["id"], "idp_metadata_xml": saml_idp.metadata()}), 400,
        "idp_metadata_xml not used by oidc connections")  # fmt: skip
    # the protocol stays what it was
    assert ok(admin.call("/sso/update", {"id": oidc["id"], "protocol": "saml"}))["protocol"] == "oidc"


def _encryption_only(idp: TestIdp) -> str:
    return idp.metadata(use="encryption")


def _two_idp_roles(idp: TestIdp) -> str:
    role = idp.metadata().split("<md:IDPSSODescriptor", 1)[1].split("</md:IDPSSODescriptor>", 1)[0]
    extra = f"<md:IDPSSODescriptor{role}</md:IDPSSODescriptor>"
    return idp.metadata().replace("</md:EntityDescriptor>", f"{extra}</md:EntityDescriptor>")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda idp: idp.metadata(certificates=[]), "no signing certificate"),
        (_encryption_only, "no signing certificate"),
        (lambda idp: idp.metadata(binding=POST), "no SingleSignOnService with the HTTP-Redirect binding"),
        (
            lambda idp: idp.metadata(prologue='<!DOCTYPE md:EntityDescriptor [<!ENTITY x "y">]>'),
            "the document holds a DTD or entity declarations",
        ),
        (
            lambda idp: idp.metadata(prologue="<!DOCTYPE md:EntityDescriptor>"),
            "the document holds a DTD or entity declarations",
        ),
        (
            lambda idp: idp.metadata(prologue='<?xml version="1.0" encoding="UTF-16"?>'),
            "the document is not utf-8",
        ),
        (lambda idp: "not xml at all", "not a well-formed xml document"),
        (lambda idp: idp.metadata()[:-5], "not a well-formed xml document"),
        (
            lambda idp: (
                f'<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">'
                f"{idp.metadata()}</md:EntitiesDescriptor>"
            ),
            "the document must be one EntityDescriptor",
        ),
        (_two_idp_roles, "the entity must have one IDPSSODescriptor"),
        (
            lambda idp: idp.metadata().replace(idp.sso_url, "http://idp.example.com/sso"),
            "the SingleSignOnService location must be an https url",
        ),
        (
            lambda idp: idp.metadata().replace("MII", "XXX", 1),
            "a signing certificate is not an X.509 certificate",
        ),
        (lambda idp: idp.metadata().replace(f'entityID="{idp.entity_id}"', ""), "entityID missing"),
    ],
)
def test_metadata_that_is_refused(admin, saml_idp, make, reason):
    answer = err(admin.call("/sso/create", saml_body(saml_idp, idp_metadata_xml=make(saml_idp))), 400)
    assert answer["message"].startswith(f"invalid idp metadata: {reason}"), answer["message"]
    assert answer["field"] == "idp_metadata_xml"
    assert not SsoConnection.objects.exists()


def test_metadata_on_loopback_may_use_http_and_keeps_every_signing_certificate(admin):
    idp = TestIdp(sso_url="http://127.0.0.1:7000/saml/sso")
    _, rolled = new_signing_pair()
    created = ok(admin.call("/sso/create", saml_body(idp, idp_metadata_xml=idp.metadata(
        certificates=[idp.certificate, rolled]))))  # fmt: skip
    assert len(SsoConnection.objects.get(pk=created["id"]).idp_certificates) == 2


def test_new_metadata_for_another_entity_revokes_the_credentials(admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    credential = CredentialFactory(
        kind="sso", provider="idp_b", provider_id=f"{connection['id']}:alice@acme.test"
    )
    # a new certificate of the same IdP: the people stay linked
    saml_idp.key, saml_idp.certificate = new_signing_pair()
    ok(admin.call("/sso/update", {"id": connection["id"], "idp_metadata_xml": saml_idp.metadata()}))
    credential.refresh_from_db()
    assert credential.status == Credential.Status.ACTIVE
    entry = AuditEntry.objects.filter(action="ssoconnection.update", resource_id=connection["id"]).latest(
        "occurred_at"
    )
    assert entry.changes == {"idp_metadata_xml": "replaced"}
    # another IdP: a NameID names a person only at the IdP that assigned it
    other = TestIdp(entity_id="https://other-idp.test/saml")
    updated = ok(admin.call("/sso/update", {"id": connection["id"], "idp_metadata_xml": other.metadata()}))
    assert updated["idp_entity_id"] == other.entity_id
    credential.refresh_from_db()
    assert (credential.status, credential.provider_id) == (Credential.Status.REVOKED, None)
    entry = AuditEntry.objects.filter(action="ssoconnection.update", resource_id=connection["id"]).latest(
        "occurred_at"
    )
    assert entry.changes["credentials_revoked"] == 1
    assert entry.changes["idp_entity_id"] == {"before": saml_idp.entity_id, "after": other.entity_id}
    err(admin.call("/sso/update", {"id": connection["id"], "idp_metadata_xml": "<x/>"}), 400,
        "invalid idp metadata: the document must be one EntityDescriptor")  # fmt: skip
    assert SsoConnection.objects.get(pk=connection["id"]).idp_entity_id == other.entity_id


def test_new_metadata_needs_star_and_another_workspace_never_finds_the_connection(
    admin, workspace, member_of, saml_idp
):
    connection = connect_saml(admin, saml_idp)
    _, sso_admin = member_of(workspace, "sso:*")
    body = {"id": connection["id"], "idp_metadata_xml": TestIdp(entity_id="https://evil.test").metadata()}
    err(sso_admin.call("/sso/update", body), 403, "cannot grant permissions you do not hold")
    ok(sso_admin.call("/sso/update", {"id": connection["id"], "name": "Renamed"}))
    _, neighbour = member_of(WorkspaceFactory(), "*")
    err(neighbour.call("/sso/update", body), 404, "sso connection not found")
    err(neighbour.call("/sso/describe", {"id": connection["id"]}), 404, "sso connection not found")
    assert ok(neighbour.call("/sso/list", {}))["sso_connections"] == []
    assert SsoConnection.objects.get(pk=connection["id"]).idp_entity_id == saml_idp.entity_id


def test_delete_is_audited_with_the_idp(admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    ok(admin.call("/sso/delete", {"id": connection["id"]}))
    entry = AuditEntry.objects.get(action="ssoconnection.delete", resource_id=connection["id"])
    assert entry.changes["idp_entity_id"] == {"before": saml_idp.entity_id, "after": None}


def test_the_sp_metadata(api, admin, saml_idp, idp):
    connection = connect_saml(admin, saml_idp, enabled=False)  # readable before the connection is enabled
    response = api.get(f"/saml/{connection['id']}/metadata")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/samlmetadata+xml"
    document = response.content.decode()
    assert f'entityID="{connection["sp_entity_id"]}"' in document
    assert f'Location="{connection["acs_url"]}"' in document
    assert "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" in document
    assert "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress" in document
    row = SsoConnection.objects.get(pk=connection["id"])
    assert saml.toolkit_settings(row).validate_metadata(document) == []  # the toolkit's own check
    oidc = ok(admin.call("/sso/create", connection_body(idp, domains=["other.test"])))
    for unknown in (oidc["id"], "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"):
        err(api.get(f"/saml/{unknown}/metadata"), 404, "sso connection not found")
    assert api.post(f"/saml/{connection['id']}/metadata").status_code == 405
    assert api.get(f"/saml/{connection['id']}/acs").status_code == 405
