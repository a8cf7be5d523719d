"""OAuth sign-ins and links leave audit entries with the signed-in account as actor (issue 16)."""

from accounts.models import Account
from authn.models import Credential
from iam.models import AuditEntry
from tests.authn.test_oauth import configured, provider, sign_in  # noqa: F401 (fixtures)
from tests.factories import AccountFactory, CredentialFactory


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
