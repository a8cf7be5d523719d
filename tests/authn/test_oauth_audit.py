"""OAuth sign-ins and links leave audit entries with the signed-in account as actor."""

from accounts.models import Account
from authn.models import Credential
from iam.models import AuditEntry, Event
from tests.authn.test_oauth import configured, provider, sign_in  # noqa: F401 (fixtures)
from tests.conftest import client_for, err, ok
from tests.factories import AccountFactory, CredentialFactory, MembershipFactory


def events(kind: str) -> list[dict]:
    return [message.payload for message in Event.objects.all() if message.payload["type"] == kind]


def actions_about(account: Account) -> dict[str, AuditEntry]:
    entries = AuditEntry.objects.filter(resource_id=account.pk).order_by("occurred_at", "id")
    return {entry.action: entry for entry in entries}


def test_linking_an_existing_account_is_recorded_with_that_account_as_actor(api, configured, root):  # noqa: F811
    account = AccountFactory(email="alice@example.com", verified=False)
    CredentialFactory(account=account, workspace=root)

    sign_in(api)

    found = actions_about(account)
    assert {"account.link", "account.update", "session.revoke", "account.login"} <= set(found)
    link = found["account.link"]
    assert link.actor_id == account.pk and link.actor_kind == "account"
    assert link.changes == {"provider": "idp_a"}
    assert found["account.update"].changes == {"verified": {"before": False, "after": True}}
    assert found["account.login"].actor_id == account.pk
    credential = Credential.objects.get(account=account, kind="oauth")
    [created] = AuditEntry.objects.filter(action="credential.create", resource_id=credential.pk)
    assert created.actor_id == account.pk and created.workspace_id == root.pk
    assert created.changes["provider_id"] == {"before": None, "after": "idp-user-1"}
    assert created.ip == "127.0.0.1" and len(created.request_id) == 32


def test_a_new_account_from_the_provider_is_recorded(api, configured, root):  # noqa: F811
    sign_in(api)

    account = Account.objects.get(email="alice@example.com")
    found = actions_about(account)
    assert found["account.create"].changes["verified"] == {"before": None, "after": True}
    assert found["account.login"].actor_id == account.pk
    assert "account.link" not in found


def test_linking_revokes_and_clears_through_the_services(api, configured, root):  # noqa: F811
    """The pre-registration hijack defence (docs/api.md#oauth-login): each credential revoked and the password
    cleared are recorded, the account's token dies, and the sessions end once (one `session.revoked`)."""
    account = AccountFactory(email="alice@example.com", verified=False)
    workspace = MembershipFactory(account=account).workspace_id  # hears the account's events
    password = CredentialFactory(account=account, workspace=root, status="pending")
    revoked_before = CredentialFactory(
        account=account, workspace=root, kind="oauth", provider="idp_a", provider_id="old", status="revoked"
    )
    token = client_for(account)
    ok(token.call("/accounts/describe", {"id": str(account.pk)}))

    sign_in(api)

    [revoke] = AuditEntry.objects.filter(action="credential.update", resource_id=password.pk)
    assert revoke.changes == {"status": {"before": "pending", "after": "revoked"}}
    assert revoke.actor_id == account.pk and revoke.workspace_id == root.pk
    assert not AuditEntry.objects.filter(resource_id=revoked_before.pk).exists()  # already revoked
    [cleared] = AuditEntry.objects.filter(action="account.password_clear", resource_id=account.pk)
    assert cleared.actor_id == account.pk
    assert AuditEntry.objects.filter(action="session.revoke", resource_id=account.pk).count() == 1
    revoked = events("session.revoked")  # one per workspace of the account: its own and the root
    assert sorted(event["workspace_id"] for event in revoked) == sorted([str(workspace), str(root.pk)])
    assert all(event["data"]["account_ids"] == [str(account.pk)] for event in revoked)
    account.refresh_from_db()
    assert not account.has_usable_password() and account.verified
    password.refresh_from_db()
    assert password.status == "revoked"
    err(token.call("/accounts/describe", {"id": str(account.pk)}), 401)
    oauth = Credential.objects.get(account=account, provider_id="idp-user-1")
    assert oauth.status == "active" and oauth.last_used_at is not None


def test_signing_in_again_marks_the_credential_used(api, configured, root):  # noqa: F811
    sign_in(api)
    credential = Credential.objects.get(provider_id="idp-user-1")
    first = credential.last_used_at
    sign_in(api)
    credential.refresh_from_db()
    assert first is not None and credential.last_used_at > first
    assert AuditEntry.objects.filter(action="account.login", resource_id=credential.account_id).count() == 2
