"""An SSO login that reclaims a never-verified account (docs/security.md#enterprise-sso-linking) removes
what its earlier holder set up, second factors included: the squatter's TOTP is not asked of the owner,
and its recovery codes and pending `mfa_token` open nothing. Workspace B's connection is another's."""

import pyotp
import pytest
from django.utils import timezone

from authn import mfa
from authn.models import MfaChallenge, RecoveryCode, Totp
from iam.platform import crypto
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

from .test_login import connect, sso_login


@pytest.fixture(autouse=True)
def _public_urls(settings):
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example.com"]
    settings.IAM_PUBLIC_URL = "http://testserver"


def test_an_sso_reclaim_removes_the_squatters_factor_and_asks_for_none(api, admin, idp, other_idp, member_of):
    squatter = AccountFactory(email="alice@acme.test", verified=False)
    CredentialFactory(account=squatter)
    secret = pyotp.random_base32()
    Totp.objects.create(
        account=squatter, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now()
    )
    codes = mfa._new_recovery_codes(squatter)
    pending = ok(api.call("/auth/login", {"email": "alice@acme.test", "password": PASSWORD}))["mfa_token"]
    _, beta_admin = member_of(WorkspaceFactory(), "*")
    connect(beta_admin, other_idp, verified=("beta.test",))
    connection = connect(admin, idp)

    query = sso_login(api, connection_id=str(connection.pk))

    assert "mfa_token" not in query and query["access_token"]
    ok(ApiClient(query["access_token"]).call("/sessions/list"))
    for second_factor in ({"code": pyotp.TOTP(secret).now()}, {"recovery_code": codes[0]}):
        err(api.call("/auth/mfa/verify", {"mfa_token": pending, **second_factor}), 400, "invalid mfa_token")
    assert not Totp.objects.filter(account=squatter).exists()
    assert not RecoveryCode.objects.filter(account=squatter).exists()
    assert not MfaChallenge.objects.filter(account=squatter).exists()
