"""The pages the e-mails' links open (docs/pages.md#self-service-pages): `/confirm-email`, its resend form,
`/forgot-password` and `/reset-password`. Opening a link changes nothing; the button does, through the
API's services (one answer for every address, the throttles, a reset ending every session). The links
of a fresh install (no IAM_FRONTEND_URL) land on these pages."""

import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client

from accounts.models import Account
from authn import tokens
from authn.models import Credential
from iam.models import OutboxMessage
from iam.platform import outbox
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

from .helpers import CSP, browser_session, button, csrf_of, label_for, sign_in, text

INVALID = "This link is no longer valid"
NEW_PASSWORD = "a brand new passphrase"
AUTH = "Authentication required or invalid credentials."


def send_outbox() -> None:
    """What the worker does with the e-mails the requests recorded."""
    for message in OutboxMessage.objects.filter(topic="email", status="pending"):
        outbox.process(message.pk)


def mails_to(address: str) -> list:
    return [message for message in mail.outbox if message.to == [address]]


def link_of(message) -> str:
    """The e-mail's link as a path of this service (the test client's host)."""
    found = re.search(rf"{re.escape(settings.IAM_FRONTEND_URL)}(/\S+)", message.body)
    assert found, message.body
    return found.group(1)


def post_form(client: Client, page, path: str, fields: dict):
    return client.post(path, {**fields, "csrfmiddlewaretoken": csrf_of(page)})


@pytest.fixture
def unconfirmed(db):
    account = AccountFactory(email="new@example.com", verified=False)
    CredentialFactory(account=account, status=Credential.Status.PENDING)
    return account


def confirm_token(account) -> str:
    return tokens.issue(
        account.pk,
        type=tokens.ACCOUNT_CONFIRM,
        session_version=account.session_version,
        lifetime=settings.IAM_EMAIL_TOKEN_LIFETIME,
    )[0]


def reset_token(account) -> str:
    return tokens.issue(
        account.pk,
        type=tokens.PASSWORD_RESET,
        session_version=account.session_version,
        lifetime=settings.IAM_EMAIL_TOKEN_LIFETIME,
    )[0]


# The links' base


def test_the_links_default_to_the_services_own_pages():
    """A fresh install sets IAM_PUBLIC_URL only: the e-mails' links are its pages."""
    show = "import django; django.setup(); from django.conf import settings as s; print(s.IAM_FRONTEND_URL)"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DJANGO_SETTINGS_MODULE": "iam.settings",
        "DATABASE_URL": "sqlite:///:memory:",
        "DEBUG": "1",
    }
    for variables, expected in (
        ({"IAM_PUBLIC_URL": "https://id.example.com/"}, "https://id.example.com"),
        (
            {"IAM_PUBLIC_URL": "https://id.example.com", "IAM_FRONTEND_URL": "https://app.example.com"},
            "https://app.example.com",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-c", show],
            env={**env, **variables},
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected


def test_a_registration_e_mail_opens_the_confirmation_page(api, root, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        ok(api.call("/auth/register", {"email": "ada@example.com", "password": PASSWORD, "name": "Ada"}))
    path = link_of(mails_to("ada@example.com")[0])
    assert path.startswith("/confirm-email?token=")
    page = Client().get(path)
    assert page.status_code == 200 and button(text(page), "Confirm email")


# /confirm-email


def test_opening_the_confirmation_link_changes_nothing(browser, unconfirmed):
    page = browser.get(f"/confirm-email?token={confirm_token(unconfirmed)}")
    html = text(page)
    assert page.status_code == 200
    assert page["Content-Security-Policy"] == CSP
    assert button(html, "Confirm email") and 'name="csrfmiddlewaretoken"' in html
    unconfirmed.refresh_from_db()
    assert not unconfirmed.verified
    assert Credential.objects.get(account=unconfirmed).status == "pending"


def test_pressing_confirm_verifies_the_address_and_again_is_fine(browser, unconfirmed):
    token = confirm_token(unconfirmed)
    page = browser.get(f"/confirm-email?token={token}")
    done = post_form(browser, page, "/confirm-email", {"token": token})
    assert done.status_code == 200 and "Email confirmed" in text(done)
    unconfirmed.refresh_from_db()
    assert unconfirmed.verified
    assert Credential.objects.get(account=unconfirmed).status == "active"
    again = post_form(
        browser, browser.get(f"/confirm-email?token={token}"), "/confirm-email", {"token": token}
    )
    assert again.status_code == 200 and "Email confirmed" in text(again)  # docs/security.md#tokens


@pytest.mark.parametrize("kind", ["garbage", "reset", "expired", "disabled"])
def test_a_bad_confirmation_link_says_so_and_offers_a_new_one(browser, unconfirmed, kind):
    if kind == "garbage":
        token = "not-a-token"
    elif kind == "reset":  # a token of another type
        token = reset_token(unconfirmed)
    elif kind == "expired":
        token = tokens.issue(
            unconfirmed.pk, type=tokens.ACCOUNT_CONFIRM, session_version=0, lifetime=timedelta(seconds=-60)
        )[0]
    else:
        token = confirm_token(unconfirmed)
        Account.objects.filter(pk=unconfirmed.pk).update(enabled=False)
    page = browser.get(f"/confirm-email?token={token}")
    html = text(page)
    assert page.status_code == 400 and INVALID in html
    assert '<a href="/confirm-email/resend">Send a new link</a>' in html
    pressed = browser.post("/confirm-email", {"token": token})
    assert pressed.status_code == 400 and INVALID in text(pressed)
    unconfirmed.refresh_from_db()
    assert not unconfirmed.verified


def test_the_confirm_button_needs_the_pages_csrf_token(unconfirmed):
    strict = Client(enforce_csrf_checks=True)
    refused = strict.post("/confirm-email", {"token": confirm_token(unconfirmed)})
    assert refused.status_code == 403 and "This page has expired" in text(refused)
    unconfirmed.refresh_from_db()
    assert not unconfirmed.verified


def test_the_resend_form_mails_an_unconfirmed_address_and_answers_any_alike(browser, unconfirmed, member):
    page = browser.get("/confirm-email/resend")
    html = text(page)
    assert label_for(html, "Email") == "id_email" and button(html, "Send")
    answers = []
    for address in (unconfirmed.email, "nobody@example.com", member.email):
        answer = browser.post("/confirm-email/resend", {"email": address})
        assert answer.status_code == 200 and "Check your email" in text(answer)
        answers.append(text(answer).replace(address, ""))
    assert len(set(answers)) == 1
    send_outbox()
    assert [message.subject for message in mail.outbox] == ["Confirm your e-mail address"]
    assert mail.outbox[0].to == [unconfirmed.email]
    assert link_of(mail.outbox[0]).startswith("/confirm-email?token=")


def test_the_resend_form_keeps_the_apis_limits(browser, unconfirmed, settings):
    for _ in range(4):  # 3 e-mails per address per hour
        assert browser.post("/confirm-email/resend", {"email": unconfirmed.email}).status_code == 200
    send_outbox()
    assert len(mails_to(unconfirmed.email)) == 3
    for _ in range(20 - 4):
        browser.post("/confirm-email/resend", {"email": "x@example.com"})
    waited = browser.post("/confirm-email/resend", {"email": unconfirmed.email})  # 20 requests an hour
    assert waited.status_code == 429 and int(waited["Retry-After"]) > 0
    assert "Too many attempts" in text(waited)
    assert waited["Content-Security-Policy"] == CSP


def test_a_malformed_address_is_told_at_its_field(browser):
    page = browser.post("/forgot-password", {"email": '"ada@x"@example.com'})
    assert page.status_code == 400
    assert 'aria-describedby="id_email-error"' in text(page)
    assert OutboxMessage.objects.count() == 0


# /forgot-password and /reset-password


def test_forgot_password_answers_every_address_alike_and_mails_the_known_one(browser, member):
    page = browser.get("/forgot-password")
    html = text(page)
    assert label_for(html, "Email") == "id_email" and button(html, "Send reset link")
    known = text(browser.post("/forgot-password", {"email": member.email}))
    unknown = text(browser.post("/forgot-password", {"email": "nobody@example.com"}))
    assert "Check your email" in known and known == unknown
    send_outbox()
    assert [message.to for message in mail.outbox] == [[member.email]]
    assert link_of(mail.outbox[0]).startswith("/reset-password?token=")


def test_opening_the_reset_link_changes_nothing(browser, member):
    token = reset_token(member)
    page = browser.get(f"/reset-password?token={token}")
    html = text(page)
    assert page.status_code == 200
    assert label_for(html, "New password") == "id_password" and button(html, "Set password")
    assert 'autocomplete="new-password"' in html
    member.refresh_from_db()
    assert member.check_password(PASSWORD)


def test_setting_a_password_ends_every_session_and_spends_the_link(browser, other_browser, member):
    api_session = client_for(member)
    ok(api_session.call("/sessions/list", {}))
    sign_in(other_browser, member.email)
    signed_in = browser_session(other_browser)
    assert signed_in is not None
    token = reset_token(member)
    page = browser.get(f"/reset-password?token={token}")
    done = post_form(browser, page, "/reset-password", {"token": token, "password": NEW_PASSWORD})
    assert done.status_code == 200 and "Password changed" in text(done)
    member.refresh_from_db()
    assert member.check_password(NEW_PASSWORD)
    err(api_session.call("/sessions/list", {}), 401, AUTH)  # the earlier token is refused
    assert other_browser.get("/signin/done").status_code == 302  # the browser session ended
    again = browser.get(f"/reset-password?token={token}")  # works once
    assert again.status_code == 400 and INVALID in text(again)
    assert '<a href="/forgot-password">Send a new link</a>' in text(again)
    used = browser.post("/reset-password", {"token": token, "password": "yet another passphrase"})
    assert used.status_code == 400 and INVALID in text(used)
    member.refresh_from_db()
    assert member.check_password(NEW_PASSWORD)


def test_a_weak_new_password_is_told_at_its_field(browser, member):
    token = reset_token(member)
    short = browser.post("/reset-password", {"token": token, "password": "short"})
    assert short.status_code == 400 and "Use at least 8 characters." in text(short)
    assert 'aria-describedby="id_password-error"' in text(short)
    common = browser.post("/reset-password", {"token": token, "password": "password123"})
    assert "This password is too common. Choose another." in text(common)
    member.refresh_from_db()
    assert member.check_password(PASSWORD)
    assert email_link_still_works(browser, token)


def email_link_still_works(browser, token) -> bool:
    return browser.get(f"/reset-password?token={token}").status_code == 200


def test_the_reset_link_of_another_account_sets_only_that_ones_password(browser, member):
    """Two accounts: the token names its own account; the other keeps its password."""
    other = AccountFactory(email="other@example.com")
    CredentialFactory(account=other)
    token = reset_token(member)
    browser.post("/reset-password", {"token": token, "password": NEW_PASSWORD})
    other.refresh_from_db()
    assert other.check_password(PASSWORD) and not other.check_password(NEW_PASSWORD)
    assert ApiClient().call("/auth/login", {"email": other.email, "password": PASSWORD}).status_code == 200
