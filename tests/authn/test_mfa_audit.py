"""Second factors and sessions leave a trail (docs/api.md#second-factor-totp): each change is an audit entry
naming who made it, and the account is e-mailed when a second factor is added or removed or a recovery code is
used. Over HTTP, with two accounts: nothing is recorded about, or mailed to, the other one."""

import jwt
from django.core import mail

from iam.models import AuditEntry
from tests.conftest import ApiClient, ok

from . import test_totp as totp
from .test_totp import code, enrolled, login, signed_in

ada, bob, clock, post = totp.ada, totp.bob, totp.clock, totp.post  # the fixtures, as there


def entries(account, action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(resource_id=account.pk, action=action))


def sid_of(token: str) -> str:
    return jwt.decode(token, options={"verify_signature": False})["sid"]


def test_enrolling_is_recorded_by_the_account_and_mailed(api, ada, bob, clock, post):
    client = signed_in(api, ada)
    secret = ok(client.call("/auth/mfa/totp/enroll"))["secret"]
    assert entries(ada, "account.mfa_enabled") == []  # pending: nothing added yet
    mail.outbox.clear()
    ok(post(client, "/auth/mfa/totp/confirm", {"code": code(secret, clock.now)}))
    [entry] = entries(ada, "account.mfa_enabled")
    assert (entry.actor_id, entry.changes) == (ada.pk, {"method": "totp"})
    assert [(message.to, message.subject) for message in mail.outbox] == [
        ([ada.email], "A second factor was added to your account")
    ]
    assert not AuditEntry.objects.filter(resource_id=bob.pk).exists()


def test_disabling_with_a_recovery_code_records_and_mails_both(api, ada, bob, clock, post):
    client, secret, codes = enrolled(api, ada, clock)
    other = ok(
        api.call(
            "/auth/mfa/verify",
            {"mfa_token": ok(login(api, ada))["mfa_token"], "code": code(secret, clock.now)},
        )
    )
    mail.outbox.clear()
    ok(post(client, "/auth/mfa/totp/disable", {"recovery_code": codes[0]}))
    [used] = entries(ada, "account.mfa_recovery_code_used")
    [disabled] = entries(ada, "account.mfa_disabled")
    assert used.actor_id == disabled.actor_id == ada.pk
    # its other sessions ended: recorded as a revocation of the account's sessions
    assert [entry.actor_id for entry in entries(ada, "session.revoke")] == [ada.pk]
    assert sorted(message.subject for message in mail.outbox) == [
        "A recovery code was used",
        "The second factor of your account was removed",
    ]
    assert {tuple(message.to) for message in mail.outbox} == {(ada.email,)}
    assert ApiClient(other["access_token"]).call("/sessions/list").status_code == 401


def test_signing_in_with_a_recovery_code_is_recorded_and_mailed(api, ada, clock, post):
    _, _, codes = enrolled(api, ada, clock)
    mail.outbox.clear()
    challenge = ok(login(api, ada))["mfa_token"]
    ok(post(api, "/auth/mfa/verify", {"mfa_token": challenge, "recovery_code": codes[3]}))
    [entry] = entries(ada, "account.mfa_recovery_code_used")
    assert entry.actor_id == ada.pk
    assert [message.subject for message in mail.outbox] == ["A recovery code was used"]


def test_ending_sessions_is_recorded_with_its_actor(api, ada, bob):
    first, second = ok(login(api, ada)), ok(login(api, ada))
    ok(ApiClient(first["access_token"]).call("/sessions/revoke", {"id": sid_of(second["access_token"])}))
    [entry] = AuditEntry.objects.filter(action="session.revoke", resource_id=sid_of(second["access_token"]))
    assert entry.actor_id == ada.pk and entry.changes["account_id"] == str(ada.pk)
    ok(ApiClient(first["access_token"]).call("/auth/revoke", {"except_current": True}))
    [bump] = entries(ada, "session.revoke")
    assert bump.actor_id == ada.pk and set(bump.changes) == {"session_version"}
    assert not AuditEntry.objects.filter(action="session.revoke", resource_id=bob.pk).exists()
