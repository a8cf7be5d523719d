"""SCIM linking a never-verified account within the workspace's verified domain reclaims it
(docs/security.md#consent-nobody-is-put-into-a-workspace): what its earlier holder set up, second factors
and recovery codes included, is removed. Another workspace's account with a factor keeps it."""

import pyotp
from django.utils import timezone

from authn import mfa
from authn.models import RecoveryCode, Totp
from iam.platform import crypto
from tests.conftest import ApiClient, err
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

from .conftest import scim_ok, user_body, verify_domain


def with_factor(account) -> list[str]:
    secret = pyotp.random_base32()
    Totp.objects.create(account=account, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
    return mfa._new_recovery_codes(account)


def test_linking_an_unverified_account_removes_its_second_factor(scim, workspace, other_workspace):
    verify_domain(workspace, "acme.test")
    squatter = AccountFactory(email="dan@acme.test", verified=False)
    CredentialFactory(account=squatter)
    with_factor(squatter)
    pending = ApiClient().call("/auth/login", {"email": "dan@acme.test", "password": PASSWORD}).json()
    bystander = AccountFactory(email="erin@acme.test", verified=True)
    with_factor(bystander)

    scim_ok(scim.post("/Users", user_body("dan@acme.test")), 201)

    assert not Totp.objects.filter(account=squatter).exists()
    assert not RecoveryCode.objects.filter(account=squatter).exists()
    err(
        ApiClient().call("/auth/mfa/verify", {"mfa_token": pending["data"]["mfa_token"], "code": "000000"}),
        400,
        "invalid mfa_token",
    )
    assert Totp.objects.filter(account=bystander).exists()
    assert RecoveryCode.objects.filter(account=bystander).count() == 10
