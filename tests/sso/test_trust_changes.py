"""What an SSO connection trusts (docs/security.md#enterprise-sso-linking): whoever points a connection at
a provider can sign in as its people, so the provider, its client, the secret, the domains and the trust
in the provider's second factor change only with `*` in the workspace; a credential of kind `sso` is
bound to the issuer that asserted it; a tenant's connection never signs in a platform operator; and the
just-in-time membership keeps to the roles-per-membership quota and is audited."""

import pyotp
import pytest
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential, Session, Totp
from iam.models import AuditEntry
from iam.platform import crypto
from rbac.models import Membership
from sso.models import SsoConnection
from tests.conftest import ApiClient, err, ok
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)

from .test_login import _public_urls, connect, sso_login  # noqa: F401 (the autouse fixture)

CANNOT_GRANT = "cannot grant permissions you do not hold"


@pytest.mark.parametrize(
    "change",
    [
        {"issuer": "ISSUER"},
        {"client_id": "another-client"},
        {"client_secret": "another-secret"},
        {"domains": ["acme.test", "more.test"]},
        {"trust_provider_mfa": True},
    ],
)
def test_what_a_connection_trusts_changes_only_with_star(admin, workspace, member_of, idp, change):
    connection = connect(admin, idp)
    change = {key: idp.issuer if value == "ISSUER" else value for key, value in change.items()}
    _, sso_admin = member_of(workspace, "sso:*")
    body = {"id": str(connection.pk), **change}
    err(sso_admin.call("/sso/update", body), 403, CANNOT_GRANT)
    # another workspace's connection stays unknown, whatever the body says
    beta = WorkspaceFactory()
    _, beta_admin = member_of(beta, "*")
    err(beta_admin.call("/sso/update", body), 404, "sso connection not found")
    ok(admin.call("/sso/update", body))  # the owner, holding `*`


def test_a_member_with_sso_rights_still_changes_the_rest(admin, workspace, member_of, idp):
    connection = connect(admin, idp)
    viewer = RoleFactory(workspace=workspace, permissions=["projects:list"])
    _, sso_admin = member_of(workspace, "sso:*", "projects:list")
    body = {"id": str(connection.pk), "name": "Renamed", "enabled": False, "tags": ["x"],
            "default_role_ids": [str(viewer.pk)]}  # fmt: skip
    updated = ok(sso_admin.call("/sso/update", body))
    assert (updated["name"], updated["enabled"]) == ("Renamed", False)
    err(sso_admin.call("/sso/update", {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f", "issuer": idp.issuer}),
        404, "sso connection not found")  # fmt: skip


def test_re_pointing_the_issuer_takes_over_no_account(api, admin, workspace, member_of, idp, other_idp):
    """The victim signed in through the connection; its new provider asserts the victim's `sub` for an
    address outside the verified domains: nobody signs in as the victim."""
    connection = connect(admin, idp)
    victim_tokens = sso_login(api, email="alice@acme.test")
    victim = Account.objects.get(email="alice@acme.test")
    other_idp.claims = {"sub": "user-1", "email": "mallory@elsewhere.test", "email_verified": True}
    repoint = {"id": str(connection.pk), "issuer": other_idp.issuer, "client_id": other_idp.client_id,
               "client_secret": other_idp.client_secret}  # fmt: skip
    _, sso_admin = member_of(workspace, "sso:*")
    err(sso_admin.call("/sso/update", repoint), 403, CANNOT_GRANT)
    assert SsoConnection.objects.get(pk=connection.pk).issuer == idp.issuer

    ok(admin.call("/sso/update", repoint))
    credential = Credential.objects.get(account=victim, kind="sso")
    assert (credential.status, credential.provider_id) == ("revoked", None)
    entry = AuditEntry.objects.filter(action="ssoconnection.update", resource_id=str(connection.pk)).latest(
        "occurred_at"
    )
    assert entry.changes["credentials_revoked"] == 1
    assert entry.changes["issuer"] == {"before": idp.issuer, "after": other_idp.issuer}
    sessions = Session.objects.filter(account=victim).count()

    assert sso_login(api, connection_id=str(connection.pk)) == {"error": "sso_failed"}
    assert Session.objects.filter(account=victim).count() == sessions
    assert not Account.objects.filter(email="mallory@elsewhere.test").exists()
    ok(client_of(victim_tokens).call("/sessions/list", {}))  # what the victim had goes on

    # The verified-domain rule links the address again, as for anyone of the domain.
    other_idp.claims = {"sub": "user-1", "email": "alice@acme.test", "email_verified": True}
    assert set(sso_login(api, connection_id=str(connection.pk))) == {"access_token"}
    assert Credential.objects.get(account=victim, status="active", kind="sso").provider_id == (
        f"{connection.pk}:user-1"
    )


def test_a_new_client_id_alone_unbinds_and_other_changes_keep_the_credentials(api, admin, idp):
    connection = connect(admin, idp)
    sso_login(api, email="alice@acme.test")
    ok(admin.call("/sso/update", {"id": str(connection.pk), "name": "Renamed", "issuer": idp.issuer,
                                  "client_id": idp.client_id, "client_secret": "rotated"}))  # fmt: skip
    assert Credential.objects.get(kind="sso").status == "active"  # the same issuer and client
    ok(admin.call("/sso/update", {"id": str(connection.pk), "client_id": "another-client"}))
    assert Credential.objects.get(kind="sso").status == "revoked"


def client_of(tokens: dict) -> ApiClient:
    return ApiClient(tokens["access_token"])


# Platform operators


def test_an_operator_is_never_signed_in_through_a_tenants_connection(api, admin, idp):
    connection = connect(admin, idp, trust_provider_mfa=True)
    operator = AccountFactory(email="alice@acme.test", verified=True, is_superuser=True)
    secret = pyotp.random_base32()
    Totp.objects.create(
        account=operator, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now()
    )
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Credential.objects.filter(account=operator, kind="sso").exists()
    assert not Membership.objects.filter(account=operator).exists()
    assert not Session.objects.filter(account=operator).exists()
    # nor through a credential linked before the rule
    CredentialFactory(account=operator, kind="sso", provider="idp_b", provider_id=f"{connection.pk}:user-1")
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}
    assert not Session.objects.filter(account=operator).exists()
    # a tenant's account of the same domain signs in as before
    idp.claims = {"sub": "bob", "email": "bob@acme.test", "email_verified": True}
    assert set(sso_login(api, email="bob@acme.test")) == {"access_token"}


# The just-in-time membership


def test_just_in_time_roles_keep_to_the_quota(api, admin, workspace, idp, settings):
    roles = [RoleFactory(workspace=workspace, permissions=["projects:list"]) for _ in range(4)]
    connect(admin, idp, roles=roles[2:])
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 1
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}  # a new membership of 2
    assert not Account.objects.filter(email="alice@acme.test").exists()

    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 3
    alice = AccountFactory(email="alice@acme.test", verified=True)
    invited = MembershipFactory(account=alice, workspace=workspace, status="invited", roles=roles[:2])
    assert sso_login(api, email="alice@acme.test") == {"error": "sso_failed"}  # 2 invited + 2 default
    invited.refresh_from_db()
    assert invited.status == "invited" and invited.roles.count() == 2

    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 4
    assert set(sso_login(api, email="alice@acme.test")) == {"access_token"}
    invited.refresh_from_db()
    assert invited.status == "active" and set(invited.roles.all()) == set(roles)
    entry = AuditEntry.objects.get(action="membership.accept", resource_id=str(invited.pk))
    assert entry.changes["role_ids"] == {
        "before": sorted(str(role.pk) for role in roles[:2]),
        "after": sorted(str(role.pk) for role in roles),
    }
