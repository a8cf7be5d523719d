"""Login through a SAML connection (docs/saml.md), end to end through the HTTP API with responses the
test's IdP signs: `auth/sso/initiate` sends an AuthnRequest, the ACS signs the account in by the rules
of every SSO login (linking, just-in-time membership, `amr`, the second factor, operators) and ends at
the client app. Each check of a response: tests/sso/test_saml_checks.py."""

from urllib.parse import urlsplit

import jwt
import pyotp
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential, OAuthState, Session, Totp
from iam.models import AuditEntry
from iam.platform import crypto
from rbac.models import Membership
from sso.models import SsoConnection
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory, RoleFactory, WorkspaceFactory

from .saml_flow import (  # noqa: F401 (the autouse fixture)
    APP,
    INITIATE,
    _public_urls,
    connect_saml,
    failures,
    login,
    post_acs,
    refused,
    start,
)
from .saml_idp import PERSISTENT, TRANSIENT, TestIdp


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def test_initiate_sends_an_authn_request_by_redirect_with_the_state_as_relay_state(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    sent = start(api, email="Alice@ACME.test")
    assert sent.url.startswith(f"{saml_idp.sso_url}?SAMLRequest=")
    assert f'Destination="{saml_idp.sso_url}"' in sent.request_xml
    assert f'AssertionConsumerServiceURL="{connection["acs_url"]}"' in sent.request_xml
    assert f"<saml:Issuer>{connection['sp_entity_id']}</saml:Issuer>" in sent.request_xml
    assert "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" in sent.request_xml
    assert 'Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"' in sent.request_xml
    assert "RequestedAuthnContext" not in sent.request_xml  # the IdP's own way of signing in
    # the request id is the state's: single use, ten minutes, for this connection
    state = OAuthState.objects.get()
    assert str(state.connection_id) == connection["id"] and state.provider == "idp_b"
    assert sent.request_id == "_" + crypto.decrypt(state.nonce)
    assert sent.request_id not in sent.relay_state


def test_login_creates_a_verified_member_with_the_default_roles_and_a_federated_session(
    api, admin, saml_idp, workspace
):
    viewer = RoleFactory(workspace=workspace, name="viewer", permissions=["projects:list"])
    connection = connect_saml(admin, saml_idp, default_role_ids=[str(viewer.pk)])
    sent = start(api, email="alice@acme.test")
    spec = saml_idp.spec(connection, sent.request_id, attributes={"name": "Alice Liddell"})
    query = post_acs(api, connection, saml_idp.response(spec), sent.relay_state)
    assert set(query) == {"access_token"}
    alice = Account.objects.get(email="alice@acme.test")
    assert alice.verified and alice.name == "Alice Liddell" and not alice.has_usable_password()
    credential = Credential.objects.get(account=alice)
    assert (credential.kind, credential.provider, credential.provider_id) == (
        "sso",
        "idp_b",
        f"{connection['id']}:alice@acme.test",
    )
    membership = Membership.objects.get(account=alice)
    assert (membership.workspace_id, membership.status) == (workspace.pk, "active")
    assert list(membership.roles.all()) == [viewer]
    claims = claims_of(query["access_token"])
    assert claims["amr"] == ["fed"] and claims["sso_workspace"] == str(workspace.pk)
    user = ApiClient(query["access_token"], str(workspace.pk))
    assert ok(user.call("/projects/list", {}))["projects"] == []
    entry = AuditEntry.objects.get(action="ssoconnection.login", resource_id=connection["id"])
    assert entry.changes == {"account_id": str(alice.pk)}
    assert SsoConnection.objects.get(pk=connection["id"]).last_login_at is not None
    assert failures(connection) == []


def test_the_same_name_id_signs_in_the_same_account_whatever_its_address(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    first = login(api, saml_idp, connection, name_id="u-1", name_id_format=PERSISTENT,
                  attributes={"email": "alice@acme.test"})  # fmt: skip
    second = login(api, saml_idp, connection, name_id="u-1", name_id_format=PERSISTENT,
                   attributes={"email": "alice.renamed@acme.test"})  # fmt: skip
    assert claims_of(first["access_token"])["sub"] == claims_of(second["access_token"])["sub"]
    assert not Account.objects.filter(email="alice.renamed@acme.test").exists()
    assert Credential.objects.get(kind="sso").provider_id == f"{connection['id']}:u-1"


def test_a_whole_signed_response_is_accepted_as_is_one_signed_twice(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    assert set(login(api, saml_idp, connection, sign="response")) == {"access_token"}
    assert set(login(api, saml_idp, connection, sign="both")) == {"access_token"}


def test_the_address_is_the_email_name_id_else_the_email_attribute(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    # a persistent NameID without an `email` attribute names no address: nobody is created
    refused(login(api, saml_idp, connection, name_id="u-9", name_id_format=PERSISTENT), connection,
            "no usable e-mail")  # fmt: skip
    # a transient NameID names nobody twice
    refused(login(api, saml_idp, connection, name_id="t-1", name_id_format=TRANSIENT,
                  attributes={"email": "bob@acme.test"}), connection, "transient")  # fmt: skip
    query = login(api, saml_idp, connection, name_id="u-9", name_id_format=PERSISTENT,
                  attributes={"email": "Bob@ACME.test"})  # fmt: skip
    assert set(query) == {"access_token"}
    assert Account.objects.get(email="bob@acme.test").verified


def test_addresses_outside_the_verified_domains_link_nobody(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp, verified=("acme.test",), domains=["acme.test", "pending.test"])
    AccountFactory(email="carol@pending.test", verified=True)
    for address in ("carol@pending.test", "mallory@elsewhere.test", "dave@sub.acme.test"):
        refused(login(api, saml_idp, connection, name_id=address), connection,
                "the provider may not vouch for this e-mail")  # fmt: skip
    assert not Credential.objects.filter(kind="sso").exists()
    # a comment cannot cut the address short (the toolkit's parser drops comments, then reads the text)
    refused(login(api, saml_idp, connection, name_id_xml="eve@acme.test<!---->.evil.test"), connection,
            "the provider may not vouch for this e-mail")  # fmt: skip


def test_an_account_with_totp_is_asked_for_its_code_unless_the_connection_trusts_its_idp(
    api, admin, saml_idp
):
    connection = connect_saml(admin, saml_idp)
    alice = AccountFactory(email="alice@acme.test", verified=True)
    secret = pyotp.random_base32()
    Totp.objects.create(account=alice, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    query = login(api, saml_idp, connection)
    assert set(query) == {"mfa_token"}
    assert not Session.objects.filter(account=alice).exists()
    data = ok(
        api.call("/auth/mfa/verify", {"mfa_token": query["mfa_token"], "code": pyotp.TOTP(secret).now()})
    )
    assert claims_of(data["access_token"])["amr"] == ["fed", "otp", "mfa"]
    ok(admin.call("/sso/update", {"id": connection["id"], "trust_provider_mfa": True}))
    query = login(api, saml_idp, connection)
    assert set(query) == {"access_token"} and claims_of(query["access_token"])["amr"] == ["fed"]


def test_an_operator_is_never_signed_in_through_a_saml_connection(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp, trust_provider_mfa=True)
    operator = AccountFactory(email="alice@acme.test", verified=True, is_superuser=True)
    refused(login(api, saml_idp, connection), connection, "an operator's account is not signed in")
    assert not Credential.objects.filter(account=operator, kind="sso").exists()
    assert not Membership.objects.filter(account=operator).exists()
    assert not Session.objects.filter(account=operator).exists()


def test_just_in_time_roles_keep_to_the_quota(api, admin, saml_idp, workspace, settings):
    roles = [RoleFactory(workspace=workspace, permissions=["projects:list"]) for _ in range(2)]
    connection = connect_saml(admin, saml_idp, default_role_ids=[str(role.pk) for role in roles])
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 1
    refused(login(api, saml_idp, connection), connection, "quota reached: roles per membership")
    assert not Membership.objects.filter(account__email="alice@acme.test").exists()


def test_a_disabled_connection_starts_nothing_and_accepts_nothing(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    sent = start(api, connection_id=connection["id"])
    ok(admin.call("/sso/update", {"id": connection["id"], "enabled": False}))
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    refused(post_acs(api, connection, response, sent.relay_state), connection, "connection disabled")
    err(
        api.call(INITIATE, {"connection_id": connection["id"], "redirect_url": APP}),
        404,
        "sso connection not found",
    )
    err(api.call(INITIATE, {"email": "alice@acme.test", "redirect_url": APP}), 404,
        "no sso connection for this domain")  # fmt: skip


def test_two_workspaces_each_with_its_own_connection(api, admin, member_of, saml_idp):
    """Each workspace's people sign in through its own IdP; a response to one connection's request, posted
    to the other's ACS, is refused there (and writes in the other workspace's log only)."""
    acme = connect_saml(admin, saml_idp)
    beta_idp = TestIdp(entity_id="https://idp.beta.test/saml", sso_url="https://idp.beta.test/sso")
    _, beta_admin = member_of(WorkspaceFactory(), "*")
    beta = connect_saml(beta_admin, beta_idp, name="Beta SAML", verified=("beta.test",))

    sent = start(api, email="bob@beta.test")
    assert sent.url.startswith(beta_idp.sso_url)
    response = beta_idp.response(beta_idp.spec(beta, sent.request_id, name_id="bob@beta.test"))
    bob = post_acs(api, beta, response, sent.relay_state)
    assert claims_of(bob["access_token"])["sso_workspace"] == beta["workspace_id"]

    # Beta's response to beta's request, posted to acme's ACS with its RelayState.
    sent = start(api, email="bob@beta.test")
    response = beta_idp.response(beta_idp.spec(beta, sent.request_id, name_id="bob@beta.test"))
    refused(
        post_acs(api, acme, response, sent.relay_state),
        acme,
        "RelayState names a request of another connection",
    )
    assert failures(beta) == []
    # Acme's IdP answering beta's request for acme's ACS fails the same way.
    sent = start(api, email="bob@beta.test")
    response = saml_idp.response(saml_idp.spec(acme, sent.request_id, name_id="alice@acme.test"))
    refused(
        post_acs(api, acme, response, sent.relay_state),
        acme,
        "RelayState names a request of another connection",
    )
    assert not Account.objects.filter(email="alice@acme.test").exists()
    entry = AuditEntry.objects.filter(action="sso.login_failed").latest("occurred_at")
    assert str(entry.workspace_id) == acme["workspace_id"]


def test_a_failure_tells_the_browser_nothing_and_the_audit_log_why(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id, audience="https://someone-else.test")
    query = post_acs(api, connection, saml_idp.response(spec), sent.relay_state)
    assert query == {"error": "sso_failed"}
    (entry,) = AuditEntry.objects.filter(action="sso.login_failed")
    assert (entry.resource_type, str(entry.resource_id), str(entry.workspace_id)) == (
        "ssoconnection",
        connection["id"],
        connection["workspace_id"],
    )
    assert entry.actor_id is None
    assert set(entry.changes) == {"connection_id", "reason"} and "audience" in entry.changes["reason"]


def test_an_unknown_acs_fails_without_an_entry(api, admin, saml_idp):
    connection = connect_saml(admin, saml_idp)
    sent = start(api, connection_id=connection["id"])
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    ghost = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}
    assert post_acs(api, ghost, response, sent.relay_state) == {"error": "sso_failed"}
    assert not AuditEntry.objects.filter(action="sso.login_failed").exists()
    assert urlsplit(APP).netloc == "app.example.com"
