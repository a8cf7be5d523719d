"""Reclaiming a never-verified account (docs/security.md#consent-nobody-is-put-into-a-workspace), tried as
an attacker would, over HTTP: a squatter registers the victim's address without its mailbox and enrolls
TOTP and a passkey; the victim proves the mailbox through idp_a, an invitation by e-mail, an invited
membership's link or a password reset. The squatter's password, second factors, recovery codes,
`mfa_token` and sessions end with it, and the victim is never asked for the squatter's code. Workspace A
invites; workspace B is someone else's. (SSO: tests/sso/test_reclaim_factors.py.)"""

import re
from dataclasses import dataclass

import jwt
import pytest
from django.contrib.auth.hashers import make_password
from django.core import mail

from accounts.models import Account
from authn import mfa
from authn.models import Credential, MfaChallenge, Passkey, RecoveryCode, Totp
from iam.models import AuditEntry
from tests.authn import test_oauth as oauth_flow
from tests.authn import test_totp as totp_flow
from tests.authn.soft_authenticator import SoftAuthenticator
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory, CredentialFactory, RoleFactory, WorkspaceFactory

provider = oauth_flow.provider  # the stand-in OpenID provider of idp_a, as fixtures here
configured = oauth_flow.configured
clock = totp_flow.clock  # the server's clock for codes
code = totp_flow.code
sign_in = oauth_flow.sign_in

AUTH = "Authentication required or invalid credentials."
VICTIM = "alice@example.com"  # the address the stand-in provider vouches for
SQUATTERS_PASSWORD = "squatters-own-passphrase"
OWNERS_PASSWORD = "the-owners-new-passphrase"
META = {"schema_version": "1"}


@dataclass
class Squatter:
    account_id: str
    session: ApiClient  # signed in since the registration
    secret: str
    recovery_codes: list[str]
    mfa_token: str  # a password login of theirs half done, waiting for the code
    passkey: SoftAuthenticator


def squat(api, clock, email: str = VICTIM) -> Squatter:
    """Registers `email` without its mailbox, enrolls TOTP and a passkey, and starts a login."""
    registered = ok(api.call("/auth/register", {"email": email, "password": SQUATTERS_PASSWORD}))
    session = ApiClient(registered["access_token"])
    secret = ok(session.call("/auth/mfa/totp/enroll"))["secret"]
    codes = ok(session.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))["recovery_codes"]
    clock.now += 30  # the confirming code's step is spent
    passkey = SoftAuthenticator()
    options = ok(session.call("/auth/passkeys/register/options"))
    credential = passkey.create(options)
    ok(session.call("/auth/passkeys/register/verify", {"credential": credential, "name": "mine"}))
    pending = ok(api.call("/auth/login", {"email": email, "password": SQUATTERS_PASSWORD}))
    assert pending["mfa_required"] is True
    return Squatter(registered["account"]["id"], session, secret, codes, pending["mfa_token"], passkey)


def assert_shut_out(api, clock, squatter: Squatter) -> None:
    """Nothing the squatter set up or holds opens the account any more."""
    err(squatter.session.call("/sessions/list"), 401, AUTH)
    for second_factor in (
        {"code": code(squatter.secret, clock.now)},
        {"recovery_code": squatter.recovery_codes[0]},
    ):
        err(
            api.call("/auth/mfa/verify", {"mfa_token": squatter.mfa_token, **second_factor}),
            400,
            "invalid mfa_token",
        )
    err(
        api.call("/auth/login", {"email": VICTIM, "password": SQUATTERS_PASSWORD}),
        401,
        "invalid credentials",
    )
    options = ok(api.call("/auth/passkeys/login/options"))
    err(api.call("/auth/passkeys/login/verify", {"credential": squatter.passkey.get(options)}), 400)
    account_id = squatter.account_id
    assert not Passkey.objects.filter(account_id=account_id).exists()
    assert not Totp.objects.filter(account_id=account_id).exists()
    assert not RecoveryCode.objects.filter(account_id=account_id).exists()
    assert not MfaChallenge.objects.filter(account_id=account_id).exists()
    [removed] = AuditEntry.objects.filter(action="account.mfa_removed", resource_id=account_id)
    assert removed.changes == {"totp": True, "recovery_codes": 10, "passkeys": 1, "reason": "reclaimed"}


def assert_own_factor_only(api, clock, squatter: Squatter, owner: ApiClient, next_login) -> None:
    """The owner enrolls a factor of their own: the squatter's recovery codes and codes do not stand in
    for it. `next_login()` answers the owner's next first step (an `mfa_token`)."""
    secret = ok(owner.call("/auth/mfa/totp/enroll"))["secret"]
    ok(owner.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))
    clock.now += 30
    mfa_token = next_login()
    for wrong in ({"recovery_code": squatter.recovery_codes[1]}, {"code": code(squatter.secret, clock.now)}):
        err(api.call("/auth/mfa/verify", {"mfa_token": mfa_token, **wrong}), 400, "invalid code")
    ok(api.call("/auth/mfa/verify", {"mfa_token": mfa_token, "code": code(secret, clock.now)}))


def amr(token: str) -> list[str]:
    return jwt.decode(token, options={"verify_signature": False})["amr"]


# idp_a


def test_idp_a_reclaim_removes_the_squatters_factor_and_asks_for_none(api, configured, clock):
    squatter = squat(api, clock)

    query = sign_in(api)

    assert "mfa_token" not in query and query["access_token"]  # the squatter's code is not asked
    assert amr(query["access_token"]) == ["fed"]
    assert Account.objects.get(pk=squatter.account_id).verified
    assert_shut_out(api, clock, squatter)
    owner = ApiClient(query["access_token"])
    assert_own_factor_only(api, clock, squatter, owner, lambda: sign_in(api)["mfa_token"])


def test_idp_a_reclaim_removes_a_pending_enrolment(api, configured, clock):
    registered = ok(api.call("/auth/register", {"email": VICTIM, "password": SQUATTERS_PASSWORD}))
    squatter = ApiClient(registered["access_token"])
    secret = ok(squatter.call("/auth/mfa/totp/enroll"))["secret"]

    owner = ApiClient(sign_in(api)["access_token"])

    assert not Totp.objects.filter(account_id=registered["account"]["id"]).exists()
    err(squatter.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}), 401, AUTH)
    err(owner.call("/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}), 409, "totp not enrolled")


def test_a_verified_account_linked_by_idp_a_keeps_its_factor(api, configured, clock):
    """Only a reclaim removes factors: the verified owner's own TOTP is asked for, as before."""
    alice = AccountFactory(email=VICTIM, verified=True)
    CredentialFactory(account=alice)
    totp_flow.enrolled(api, alice, clock)
    assert set(sign_in(api)) == {"mfa_token"}
    assert Totp.objects.filter(account=alice, confirmed_at__isnull=False).exists()
    assert not AuditEntry.objects.filter(action="account.mfa_removed").exists()


# Invitations


@pytest.fixture
def tenant(member_of):
    """Workspace A's owner invites with a role; workspace B is someone else's."""
    a, b = WorkspaceFactory(slug="tenant-a"), WorkspaceFactory(slug="tenant-b")
    _, owner_api = member_of(a, "*")
    _, other_api = member_of(b, "*")
    role = RoleFactory(workspace=a, permissions=["projects:list"])
    return a, b, owner_api, other_api, role


def mailed_token(django_capture_on_commit_callbacks, call, address: str = VICTIM) -> str:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        call()
    while callbacks:  # the outbox's task runs after the commit of the request that queued it
        pending, callbacks[:] = list(callbacks), []
        with django_capture_on_commit_callbacks(execute=True) as more:
            for callback in pending:
                callback()
        callbacks.extend(more)
    message = [message for message in mail.outbox if message.to == [address]][-1]
    return re.search(r"token=(\S+)", message.body).group(1)


def test_invitation_accept_reclaims_without_the_squatters_factor(
    api, clock, tenant, django_capture_on_commit_callbacks
):
    a, b, owner_api, other_api, role = tenant
    squatter = squat(api, clock)
    body = {"email": VICTIM, "scope": "workspace", "role_ids": [str(role.pk)]}
    token = mailed_token(
        django_capture_on_commit_callbacks, lambda: ok(owner_api.call("/invitations/create", body))
    )

    answer = ok(api.call("/invitations/accept", {"token": token, "password": OWNERS_PASSWORD}))

    assert "mfa_required" not in answer and amr(answer["access_token"]) == ["pwd"]
    assert answer["membership"]["account_id"] == squatter.account_id
    assert_shut_out(api, clock, squatter)
    ok(ApiClient(answer["access_token"], str(a.pk)).call("/projects/list"))
    err(
        ApiClient(answer["access_token"], str(b.pk)).call("/projects/list"),
        403,
        "not a member of this workspace",
    )
    assert ok(other_api.call("/invitations/list"))["invitations"] == []
    owner = ApiClient(answer["access_token"])

    def password_login() -> str:
        return ok(api.call("/auth/login", {"email": VICTIM, "password": OWNERS_PASSWORD}))["mfa_token"]

    assert_own_factor_only(api, clock, squatter, owner, password_login)


def test_the_membership_link_reclaims_without_the_squatters_factor(
    api, clock, tenant, django_capture_on_commit_callbacks
):
    a, _, owner_api, _, role = tenant
    squatter = squat(api, clock)
    body = {
        "account_id": squatter.account_id,
        "scope": "workspace",
        "status": "active",
        "role_ids": [str(role.pk)],
        "tags": [],
        "meta": META,
    }
    token = mailed_token(
        django_capture_on_commit_callbacks, lambda: ok(owner_api.call("/memberships/create", body))
    )

    ok(api.call("/memberships/accept", {"token": token, "password": OWNERS_PASSWORD}))

    assert_shut_out(api, clock, squatter)
    signed_in = ok(api.call("/auth/login", {"email": VICTIM, "password": OWNERS_PASSWORD}))
    assert "mfa_token" not in signed_in and amr(signed_in["access_token"]) == ["pwd"]
    ok(ApiClient(signed_in["access_token"], str(a.pk)).call("/projects/list"))


def test_a_verified_account_accepting_by_the_link_gets_no_session(
    api, clock, tenant, django_capture_on_commit_callbacks
):
    """The link alone never signs a verified account in, with a second factor or without."""
    _, _, owner_api, _, role = tenant
    alice = AccountFactory(email=VICTIM, verified=True)
    CredentialFactory(account=alice)
    totp_flow.enrolled(api, alice, clock)
    body = {"email": VICTIM, "scope": "workspace", "role_ids": [str(role.pk)]}
    token = mailed_token(
        django_capture_on_commit_callbacks, lambda: ok(owner_api.call("/invitations/create", body))
    )
    answer = ok(api.call("/invitations/accept", {"token": token, "password": OWNERS_PASSWORD}))
    assert set(answer) == {"invitation", "membership"}
    assert Totp.objects.filter(account=alice).exists()


def test_the_invitation_door_asks_for_a_factor_that_survived(
    api, clock, tenant, monkeypatch, django_capture_on_commit_callbacks
):
    """Every door that starts a session asks an account holding a second factor for it: were a factor to
    outlive the reclaim (a kind `remove_second_factors` did not know), the acceptance answers an
    `mfa_token` instead of the session."""
    _, _, owner_api, _, role = tenant
    squatter = squat(api, clock)
    monkeypatch.setattr(mfa, "remove_second_factors", lambda account, **kwargs: False)
    body = {"email": VICTIM, "scope": "workspace", "role_ids": [str(role.pk)]}
    token = mailed_token(
        django_capture_on_commit_callbacks, lambda: ok(owner_api.call("/invitations/create", body))
    )

    answer = ok(api.call("/invitations/accept", {"token": token, "password": OWNERS_PASSWORD}))

    assert answer["mfa_required"] is True and "access_token" not in answer and "refresh_token" not in answer
    assert answer["membership"]["status"] == "active"
    data = ok(
        api.call(
            "/auth/mfa/verify", {"mfa_token": answer["mfa_token"], "code": code(squatter.secret, clock.now)}
        )
    )
    assert amr(data["access_token"]) == ["pwd", "otp", "mfa"]


# Password reset: the link proves the mailbox too


def reset_token(django_capture_on_commit_callbacks, api, address: str) -> str:
    call = lambda: ok(api.call("/auth/reset-password", {"email": address}))  # noqa: E731
    return mailed_token(django_capture_on_commit_callbacks, call, address)


def test_a_reset_reclaims_a_never_verified_account(api, clock, django_capture_on_commit_callbacks):
    squatter = squat(api, clock)
    token = reset_token(django_capture_on_commit_callbacks, api, VICTIM)

    ok(api.call("/auth/update-password", {"token": token, "password": OWNERS_PASSWORD}))

    assert Account.objects.get(pk=squatter.account_id).verified
    assert_shut_out(api, clock, squatter)
    signed_in = ok(api.call("/auth/login", {"email": VICTIM, "password": OWNERS_PASSWORD}))
    assert "mfa_token" not in signed_in and amr(signed_in["access_token"]) == ["pwd"]
    assert Credential.objects.get(account_id=squatter.account_id, kind="password").status == "active"


@pytest.mark.parametrize("kind", ["oauth", "sso", "none"])
def test_a_reset_gives_an_account_without_a_password_one_that_signs_in(
    api, root, kind, django_capture_on_commit_callbacks
):
    """An account a provider, SSO or SCIM made has no password credential: the reset made a password
    that signed in nowhere. Now it adds one; the account's other credentials stay, and a second account
    is untouched."""
    alice = AccountFactory(email=VICTIM, verified=True, password=make_password(None))
    if kind != "none":
        provider = "idp_a" if kind == "oauth" else "idp_b"
        CredentialFactory(account=alice, kind=kind, provider=provider, provider_id="sub-1")
    bob = AccountFactory(email="bob@example.com", verified=True, password=make_password(None))
    token = reset_token(django_capture_on_commit_callbacks, api, VICTIM)

    ok(api.call("/auth/update-password", {"token": token, "password": OWNERS_PASSWORD}))

    ok(api.call("/auth/login", {"email": VICTIM, "password": OWNERS_PASSWORD}))
    password = Credential.objects.get(account=alice, kind="password")
    assert (password.status, password.provider, password.workspace_id) == ("active", "local", root.pk)
    assert (
        Credential.objects.filter(account=alice).exclude(kind="password").exclude(status="active").count()
        == 0
    )
    err(
        api.call("/auth/login", {"email": bob.email, "password": OWNERS_PASSWORD}), 401, "invalid credentials"
    )
    assert not Credential.objects.filter(account=bob).exists()
    assert AuditEntry.objects.filter(action="credential.create", resource_id=password.pk).exists()
