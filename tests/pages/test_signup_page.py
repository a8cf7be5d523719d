"""`/signup` (docs/pages.md#self-service-pages): `Name`, `Email`, `Password`, `Create account`, then
`Check your email`; an address that already has an account gets the same page and an e-mail saying so
(no enumeration); `auth/register`'s account, password rules and per-client-address limit."""

import pytest
from django.core import mail
from django.test import Client

from accounts.models import Account
from authn import throttling
from authn.models import Credential, Session
from iam.models import OutboxMessage
from tests.factories import PASSWORD

from .helpers import CSP, button, label_for, text
from .test_email_link_pages import link_of, mails_to, send_outbox


def sign_up(client: Client, email: str, password: str = PASSWORD, name: str = "Ada"):
    return client.post("/signup", {"name": name, "email": email, "password": password})


def test_the_form_labels_its_fields(browser):
    page = browser.get("/signup")
    html = text(page)
    assert page.status_code == 200 and page["Content-Security-Policy"] == CSP
    assert label_for(html, "Name") == "id_name"
    assert label_for(html, "Email") == "id_email"
    assert label_for(html, "Password") == "id_password"
    assert button(html, "Create account")
    assert 'autocomplete="new-password"' in html and 'name="csrfmiddlewaretoken"' in html
    assert "<script" not in html and "style=" not in html


def test_a_new_address_gets_a_pending_account_and_a_confirmation_link(browser, root):
    answer = sign_up(browser, "Ada@Example.com")
    assert answer.status_code == 200 and "Check your email" in text(answer)
    account = Account.objects.get(email="ada@example.com")
    assert account.name == "Ada" and not account.verified and account.check_password(PASSWORD)
    assert Credential.objects.get(account=account).status == "pending"
    assert not Session.objects.filter(account=account).exists()  # not signed in: the mailbox first
    send_outbox()
    (message,) = mails_to("ada@example.com")
    assert message.subject == "Confirm your e-mail address"
    confirm = link_of(message)
    assert confirm.startswith("/confirm-email?token=")
    assert Client().get(confirm).status_code == 200


def test_a_registered_address_gets_the_same_page_and_an_e_mail_saying_so(browser, member, root):
    new = text(sign_up(browser, "someone.new@example.com")).replace("someone.new@example.com", "")
    taken = sign_up(browser, member.email, password="another long passphrase", name="Mallory")
    assert taken.status_code == 200
    assert text(taken).replace(member.email, "") == new
    member.refresh_from_db()
    assert member.check_password(PASSWORD) and member.name != "Mallory"  # nothing changed
    assert Account.objects.filter(email=member.email).count() == 1
    send_outbox()
    (message,) = mails_to(member.email)
    assert message.subject == "You already have an account"
    assert "/signin" in message.body and "/forgot-password" in message.body
    assert "token=" not in message.body


def test_the_already_registered_e_mail_keeps_the_per_address_limit(browser, member, root):
    for _ in range(5):
        assert sign_up(browser, member.email).status_code == 200
    send_outbox()
    assert len(mails_to(member.email)) == 3  # docs/api.md#throttling: 3 e-mails per address per hour
    assert OutboxMessage.objects.filter(topic="email").count() == 3


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"password": "short"}, "password", "Use at least 8 characters."),
        ({"password": "password123"}, "password", "This password is too common. Choose another."),
        ({"email": '"a@b"@example.com'}, "email", "Enter an email address like name@example.com."),
        ({"name": ""}, "name", "Enter your name."),
    ],
)
def test_wrong_input_is_told_at_its_field_for_any_address(browser, member, root, fields, field, words):
    for email in ("someone.new@example.com", member.email):
        body = {"name": "Ada", "email": email, "password": PASSWORD, **fields}
        answer = browser.post("/signup", body)
        html = text(answer)
        assert answer.status_code == 400
        assert f'aria-describedby="id_{field}' in html and words in html
    assert not Account.objects.filter(email="someone.new@example.com").exists()


def test_the_registration_limit_per_client_address_holds(browser, root, monkeypatch):
    monkeypatch.setattr(throttling.registrations_by_ip, "limit", 2)
    assert sign_up(browser, "one@example.com").status_code == 200
    assert sign_up(browser, "two@example.com").status_code == 200
    waited = sign_up(browser, "three@example.com")
    assert waited.status_code == 429 and int(waited["Retry-After"]) > 0
    assert "Too many attempts" in text(waited)
    assert not Account.objects.filter(email="three@example.com").exists()
    assert not mail.outbox
