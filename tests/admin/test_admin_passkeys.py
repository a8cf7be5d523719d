"""An operator lists an account's passkeys and removes one (docs/security.md#passkeys): recorded with the
operator as actor, every session of the account ended and the account e-mailed, as the second-factor
reset. Two accounts: the other's passkey stays."""

import json

from django.core import mail
from django.urls import reverse

from authn.models import Passkey
from iam.models import AuditEntry
from tenancy.services import update_workspace
from tests.authn.soft_authenticator import SoftAuthenticator
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

AUTH = "Authentication required or invalid credentials."


def with_passkey(account, name: str) -> SoftAuthenticator:
    key = SoftAuthenticator()
    client = client_for(account)
    options = ok(client.call("/auth/passkeys/register/options"))
    ok(client.call("/auth/passkeys/register/verify", {"credential": key.create(options), "name": name}))
    return key


def passkey_sign_in(key: SoftAuthenticator):
    options = ok(ApiClient().call("/auth/passkeys/login/options"))
    return ApiClient().call("/auth/passkeys/login/verify", {"credential": key.get(options)})


def test_an_operator_removes_an_accounts_passkey(
    admin_web, operator, root, django_capture_on_commit_callbacks
):
    ada, bob = AccountFactory(), AccountFactory()
    for someone in (ada, bob):
        CredentialFactory(account=someone)
    ada_key = with_passkey(ada, "Ada's laptop")
    bob_key = with_passkey(bob, "Bob's phone")
    session = ApiClient(ok(passkey_sign_in(ada_key))["access_token"])
    page = admin_web.get(reverse("admin:accounts_account_change", args=[ada.pk]))
    assert b"Ada&#x27;s laptop" in page.content and b"Bob&#x27;s phone" not in page.content
    assert b"1 passkey(s), listed below" in page.content
    passkey = Passkey.objects.get(account=ada)
    shown = admin_web.get(reverse("admin:authn_passkey_change", args=[passkey.pk]))
    assert shown.status_code == 200
    delete_url = reverse("admin:authn_passkey_delete", args=[passkey.pk])
    assert delete_url.encode() in shown.content
    assert admin_web.get(delete_url).status_code == 200 and Passkey.objects.filter(pk=passkey.pk).exists()
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(delete_url, {"post": "yes"})
    assert response.status_code == 302
    assert not Passkey.objects.filter(account=ada).exists()
    assert Passkey.objects.filter(account=bob).exists()
    [entry] = AuditEntry.objects.filter(action="passkey.delete", resource_id=passkey.pk)
    assert (entry.actor_id, entry.actor_kind) == (operator.pk, "operator")
    assert entry.changes["account_id"] == str(ada.pk)
    err(session.call("/sessions/list"), 401, AUTH)
    assert [(message.to, message.subject) for message in mail.outbox] == [
        ([ada.email], "An administrator removed a passkey from your account")
    ]
    err(passkey_sign_in(ada_key), 400, "passkey not accepted")
    ok(passkey_sign_in(bob_key))


def test_passkeys_are_not_added_or_edited_in_the_admin(admin_web, root):
    ada = AccountFactory()
    with_passkey(ada, "Laptop")
    passkey = Passkey.objects.get(account=ada)
    assert admin_web.get(reverse("admin:authn_passkey_add")).status_code == 403
    admin_web.post(reverse("admin:authn_passkey_change", args=[passkey.pk]), {"name": "renamed"})
    assert Passkey.objects.get(pk=passkey.pk).name == "Laptop"
    listed = admin_web.get(reverse("admin:authn_passkey_changelist"), {"q": ada.email})
    assert b"Laptop" in listed.content


# The admin's own sign-in: a passkey is a second factor there too (authn/admin_login.py)


def password_step(web, email: str):
    return web.post("/admin/login/?next=/admin/authn/session/", {"username": email, "password": PASSWORD})


def test_an_operator_with_a_passkey_signs_in_to_the_admin_with_it(operator, root):
    from django.test import Client

    CredentialFactory(account=operator)
    key = with_passkey(operator, "Operator's key")
    other = with_passkey(AccountFactory(), "Someone else's")
    update_workspace(root, mfa_required=True, actor=None)  # no detour to set up TOTP: the passkey counts
    web = Client()
    first = password_step(web, operator.email)
    assert first.status_code == 302 and first["Location"] == reverse("admin:login_code")
    assert "_auth_user_id" not in web.session
    page = web.get(reverse("admin:login_code"))
    assert b'data-passkey="admin"' in page.content and b"Use a passkey" in page.content
    assert b"one-time-code" not in page.content  # no authenticator app
    options = web.post(reverse("admin:login_passkey_options")).json()
    assert [item["id"] for item in options["allowCredentials"]] == [key.id]
    refused = web.post(reverse("admin:login_code"), {"credential": json.dumps(other.get(options))})
    assert refused.status_code == 400 and b"That passkey was not accepted." in refused.content
    assert "_auth_user_id" not in web.session
    # the refusal spent that challenge; a new one, the operator's passkey
    options = web.post(reverse("admin:login_passkey_options")).json()
    done = web.post(reverse("admin:login_code"), {"credential": json.dumps(key.get(options))})
    assert done.status_code == 302 and done["Location"] == "/admin/authn/session/"
    assert web.get("/admin/").status_code == 200


def test_admin_passkey_options_need_the_password_step(operator, root):
    from django.test import Client

    web = Client()
    assert web.post(reverse("admin:login_passkey_options")).json() == {"redirect": reverse("admin:login")}
