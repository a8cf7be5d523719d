"""A login through a workspace's own SSO connection meets that workspace's MFA policy
(docs/security.md#second-factors-and-the-workspace-mfa-policy), and only that workspace's: over HTTP, through
the stand-in provider, with two workspaces."""

import jwt
import pyotp
from django.utils import timezone

from accounts.models import Account
from authn.models import Session, Totp
from iam.platform import crypto
from rbac.policy import SSO_WORKSPACE_CLAIM
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory, MembershipFactory, RoleFactory, WorkspaceFactory

from .test_login import _public_urls, connect, sso_login  # noqa: F401 (the autouse fixture)

MFA = "mfa required by this workspace"


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def test_the_workspaces_own_sso_meets_its_policy_and_no_other(api, admin, idp, workspace):
    viewer = RoleFactory(
        workspace=workspace, name="viewer", permissions=["projects:list", "workspaces:describe"]
    )
    connect(admin, idp, roles=[viewer])
    workspace.mfa_required = True
    workspace.save(update_fields=["mfa_required"])
    beta = WorkspaceFactory(mfa_required=True)
    tokens = sso_login(api, email="alice@acme.test")
    alice = Account.objects.get(email="alice@acme.test")
    MembershipFactory(account=alice, workspace=beta, roles=[RoleFactory(workspace=beta, permissions=["*"])])
    claims = claims_of(tokens["access_token"])
    assert claims["amr"] == ["fed"] and claims[SSO_WORKSPACE_CLAIM] == str(workspace.pk)
    assert Session.objects.get(pk=claims["sid"]).sso_workspace_id == workspace.pk
    ok(ApiClient(tokens["access_token"], str(workspace.pk)).call("/projects/list", {}))
    ok(ApiClient(tokens["access_token"]).call("/workspace/describe", {"id": str(workspace.pk)}))
    err(ApiClient(tokens["access_token"], str(beta.pk)).call("/projects/list", {}), 403, MFA)
    listed = ok(ApiClient(tokens["access_token"]).call("/workspace/list", {}))["workspaces"]
    assert [item["id"] for item in listed] == [str(workspace.pk)]
    # A refresh keeps where the session came from.
    refreshed = ok(ApiClient(tokens["access_token"]).call("/auth/refresh"))
    assert claims_of(refreshed["refresh_token"])[SSO_WORKSPACE_CLAIM] == str(workspace.pk)
    refreshed = ok(ApiClient(refreshed["refresh_token"]).call("/auth/refresh"))
    assert claims_of(refreshed["access_token"])[SSO_WORKSPACE_CLAIM] == str(workspace.pk)
    ok(ApiClient(refreshed["access_token"], str(workspace.pk)).call("/projects/list", {}))
    err(ApiClient(refreshed["access_token"], str(beta.pk)).call("/projects/list", {}), 403, MFA)


def test_the_second_step_keeps_it(api, admin, idp, workspace):
    connect(admin, idp)
    alice = AccountFactory(email="alice@acme.test", verified=True)
    secret = pyotp.random_base32()
    Totp.objects.create(account=alice, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    query = sso_login(api, email="alice@acme.test")
    assert claims_of(query["mfa_token"])[SSO_WORKSPACE_CLAIM] == str(workspace.pk)
    data = ok(
        api.call("/auth/mfa/verify", {"mfa_token": query["mfa_token"], "code": pyotp.TOTP(secret).now()})
    )
    claims = claims_of(data["access_token"])
    assert claims["amr"] == ["fed", "otp", "mfa"] and claims[SSO_WORKSPACE_CLAIM] == str(workspace.pk)
