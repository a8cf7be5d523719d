"""The SSO admin: connections with their domains and verification state per workspace, the last login
through each, and the operator's "verify domain" action (with the same one-workspace rule as the API);
never the client secret."""

from django.urls import reverse

from iam.models import AuditEntry
from iam.platform import crypto
from sso import services
from sso.models import SsoConnection, SsoDomain
from tests.factories import WorkspaceFactory

from .conftest import META


def make_connection(workspace, idp, *, name="Acme", domains=("acme.test",)) -> SsoConnection:
    return services.create_connection(
        workspace,
        name=name,
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
        domains=list(domains),
        default_roles=[],
        tags=[],
        meta=META,
        actor=None,
    )


def test_connections_are_listed_with_domains_state_and_never_the_secret(admin_web, idp):
    first = make_connection(WorkspaceFactory(slug="acme"), idp, domains=("acme.test", "acme.org"))
    services.verify_domain(first, "acme.test", actor=None, by=services.BY_OPERATOR)
    listing = admin_web.get(reverse("admin:sso_ssoconnection_changelist")).content.decode()
    assert "acme.test (verified)" in listing and "acme.org (pending)" in listing
    page = admin_web.get(reverse("admin:sso_ssoconnection_change", args=[first.pk])).content.decode()
    assert idp.client_secret not in page and first.client_secret_encrypted not in page
    assert crypto.decrypt(first.client_secret_encrypted) == idp.client_secret
    assert f"{idp.issuer}/jwks" in page
    domains = admin_web.get(reverse("admin:sso_ssodomain_changelist")).content.decode()
    assert "acme.org" in domains and "Last login through the connection" in domains


def test_the_operator_verifies_a_domain_and_cannot_give_it_to_a_second_workspace(admin_web, idp, operator):
    mine = make_connection(WorkspaceFactory(), idp)
    theirs = make_connection(WorkspaceFactory(), idp, name="Other")
    rows = SsoDomain.objects.filter(domain="acme.test").order_by("created_at")
    url = reverse("admin:sso_ssodomain_changelist")
    mine_row = rows.get(connection=mine)
    response = admin_web.post(
        url, {"action": "verify_domains", "_selected_action": [str(mine_row.pk)]}, follow=True
    )
    assert "1 domain(s) verified." in response.content.decode()
    mine_row.refresh_from_db()
    assert mine_row.verified and mine_row.verified_by == "operator"
    entry = AuditEntry.objects.get(action="ssoconnection.verify_domain")
    assert entry.actor_id == operator.pk
    response = admin_web.post(
        reverse("admin:sso_ssoconnection_changelist"),
        {"action": "verify_domains", "_selected_action": [str(theirs.pk)]},
        follow=True,
    )
    assert "Domain already claimed: acme.test" in response.content.decode()
    assert not rows.get(connection=theirs).verified


def test_a_saml_connection_shows_its_idp_its_sp_values_and_its_recent_failures(admin_web, saml_idp, settings):
    settings.IAM_PUBLIC_URL = "https://iam.example.com"
    connection = services.create_connection(
        WorkspaceFactory(slug="acme"),
        name="Acme SAML",
        protocol="saml",
        idp_metadata_xml=saml_idp.metadata(),
        domains=["acme.test"],
        default_roles=[],
        tags=[],
        meta=META,
        actor=None,
    )
    other = services.create_connection(
        WorkspaceFactory(slug="beta"),
        name="Beta SAML",
        protocol="saml",
        idp_metadata_xml=saml_idp.metadata(),
        domains=["beta.test"],
        default_roles=[],
        tags=[],
        meta=META,
        actor=None,
    )
    for target, reason in ((connection, "Audience is not the SP entity id"), (other, "Destination missing")):
        AuditEntry.objects.create(
            action="sso.login_failed",
            actor_kind="account",
            workspace_id=target.workspace_id,
            resource_type="ssoconnection",
            resource_id=target.pk,
            changes={"connection_id": str(target.pk), "reason": reason},
            ip="203.0.113.7",
        )
    listing = admin_web.get(reverse("admin:sso_ssoconnection_changelist")).content.decode()
    assert saml_idp.entity_id in listing and "saml" in listing
    page = admin_web.get(reverse("admin:sso_ssoconnection_change", args=[connection.pk])).content.decode()
    assert saml_idp.entity_id in page and saml_idp.sso_url in page
    assert "CN=test idp" in page  # the signing certificate's subject, with its expiry
    assert f"https://iam.example.com/saml/{connection.pk}/acs" in page
    assert f'<a href="https://iam.example.com/saml/{connection.pk}/metadata">' in page
    assert "203.0.113.7: Audience is not the SP entity id" in page
    assert "Destination missing" not in page  # the other connection's failure
    assert "jwks" not in page.lower()  # no OpenID fields for a SAML connection
