"""The one rule for an e-mail address (docs/api.md#validation): exactly one `@`, no quoted local part, no
comment, so that every service reads the same domain from it. Held wherever an address is taken: the API's
request fields, account creation by any door (commands, a provider's user-info), with `invalid email`."""

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account
from iam.http.fields import is_address
from rbac.models import Invitation
from tests.authn import test_oauth as oauth_flow
from tests.conftest import err
from tests.factories import RoleFactory, WorkspaceFactory

provider = oauth_flow.provider
configured = oauth_flow.configured

REFUSED = [
    '"victim@corp-a.test"@evil-m.test',  # a reader splitting at the first `@` sees corp-a.test
    '"quoted"@evil-m.test',
    "victim@corp-a.test@evil-m.test",
    "victim(comment)@evil-m.test",
    "victim@evil-m.test(corp-a.test)",
    "victim\\@corp-a.test@evil-m.test",
    "no-at-sign.test",
    "x" * 250 + "@a.test",
]
ACCEPTED = ["ada@example.com", "first.last+tag@sub.example.co.uk", "o'brien@example.ie"]


@pytest.mark.parametrize("address", REFUSED)
def test_the_rule_refuses(address):
    assert not is_address(address)


@pytest.mark.parametrize("address", ACCEPTED)
def test_the_rule_accepts(address):
    assert is_address(address)


@pytest.mark.parametrize("address", REFUSED)
def test_every_endpoint_taking_an_address_refuses_it(api, root, member_of, operator_api, address):
    acme, beta = WorkspaceFactory(slug="acme"), WorkspaceFactory(slug="beta")
    _, owner = member_of(acme, "*")
    member_of(beta, "*")
    role = RoleFactory(workspace=acme, permissions=["projects:list"])
    password = "a-long-enough-passphrase"
    calls = [
        (api, "/auth/register", {"email": address, "password": password}),
        (api, "/auth/reset-password", {"email": address}),
        (api, "/auth/resend-confirm", {"email": address}),
        (operator_api, "/accounts/create", {"email": address, "password": password, "name": "N"}),
        (owner, "/invitations/create", {"email": address, "scope": "workspace", "role_ids": [str(role.pk)]}),
    ]
    for client, path, body in calls:
        err(client.call(path, body), 400, "invalid email")
    assert not Account.objects.filter(email__contains="evil-m").exists()
    assert not Invitation.objects.exists()


def test_a_command_refuses_it(db):
    with pytest.raises(CommandError, match="invalid email"):
        call_command("bootstrap", "--email", REFUSED[0], "--password", "a-long-enough-passphrase")
    assert not Account.objects.exists()


def test_a_providers_quoted_address_makes_no_account(api, configured):
    configured.claims = {"sub": "s-1", "email": REFUSED[0], "email_verified": True, "name": "Eve"}
    assert oauth_flow.sign_in(api) == {"error": "oauth_failed"}
    assert not Account.objects.exists()
    configured.claims = {"sub": "s-2", "email": "eve@evil-m.test", "email_verified": True, "name": "Eve"}
    assert "access_token" in oauth_flow.sign_in(api)
    assert list(Account.objects.values_list("email", flat=True)) == ["eve@evil-m.test"]
