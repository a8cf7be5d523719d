"""Confirmation and password reset by e-mail (docs/api.md#auth, #errors, docs/security.md#tokens,
docs/operations.md#e-mail, docs/api.md#throttling) over HTTP.

E-mails go through the outbox after commit; the `post` fixture runs the commit hooks of each request, so
the locmem backend's `mail.outbox` holds what a worker would have sent."""

import re
import smtplib
import uuid
from datetime import timedelta

import jwt
import pytest
from django.conf import settings
from django.core import mail
from django.core.mail import EmailMultiAlternatives

from accounts.models import Account
from authn import emails, tokens
from authn.models import Credential
from iam.models import OutboxMessage
from iam.platform import outbox
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

AUTH = "Authentication required or invalid credentials."
RESET_MESSAGE = "If an account exists for this address, a password reset link has been sent."
EMAIL = "new@example.com"
NEW_PASSWORD = "another long passphrase"


@pytest.fixture
def post(api, django_capture_on_commit_callbacks):
    """POSTs like `api.call` and then runs what the request scheduled after commit (the outbox)."""

    def call(path: str, body=None, client: ApiClient | None = None):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or api).call(path, body)

    return call


def link_in(message, kind: str) -> tuple[str, str]:
    """The link of the text body and the token in it; the HTML body carries the same link."""
    found = re.search(rf"{re.escape(settings.IAM_FRONTEND_URL)}/{kind}\?token=(\S+)", message.body)
    assert found, message.body
    html = message.alternatives[0]
    assert html[1] == "text/html" and found.group(0) in html[0]
    return found.group(0), found.group(1)


def register(post, email=EMAIL) -> dict:
    return ok(post("/auth/register", {"email": email, "password": PASSWORD, "name": "New"}))


def test_register_confirm_reset_update_login(post, api, root):
    session = register(post)
    account_id = session["account"]["id"]
    assert len(mail.outbox) == 1
    confirm = mail.outbox[0]
    assert confirm.to == [EMAIL] and confirm.subject == "Confirm your e-mail address"
    _, token = link_in(confirm, "confirm-email")
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["type"] == "AccountConfirm" and claims["sub"] == account_id
    assert claims["exp"] - claims["iat"] == 24 * 3600
    assert Credential.objects.get(account_id=account_id).status == "pending"

    assert ok(post("/auth/confirm", {"token": token})) == {"account_id": account_id, "verified": True}
    account = Account.objects.get(pk=account_id)
    assert account.verified
    assert Credential.objects.get(account=account).status == "active"
    # idempotent while the token is valid
    assert ok(post("/auth/confirm", {"token": token})) == {"account_id": account_id, "verified": True}

    assert ok(post("/auth/reset-password", {"email": "NEW@example.com"})) == {"message": RESET_MESSAGE}
    assert len(mail.outbox) == 2
    reset = mail.outbox[1]
    assert reset.to == [EMAIL] and reset.subject == "Reset your password"
    _, reset_token = link_in(reset, "reset-password")
    assert jwt.decode(reset_token, options={"verify_signature": False})["type"] == "PasswordReset"

    updated = ok(post("/auth/update-password", {"token": reset_token, "password": NEW_PASSWORD}))
    assert updated == {"account_id": account_id}

    # every old session ended, the reset link is spent, the new password works and the old does not
    err(ApiClient(session["access_token"]).call("/auth/refresh"), 401, AUTH)
    err(
        post("/auth/update-password", {"token": reset_token, "password": "yet another passphrase"}), 401, AUTH
    )
    err(api.call("/auth/login", {"email": EMAIL, "password": PASSWORD}), 401, "invalid credentials")
    fresh = ok(api.call("/auth/login", {"email": EMAIL, "password": NEW_PASSWORD}))
    ok(ApiClient(fresh["access_token"]).call("/accounts/describe", {"id": account_id}))


def test_the_outbox_row_holds_no_token(post):
    register(post)
    row = OutboxMessage.objects.get(topic="email")
    assert set(row.payload) == {"kind", "account_id"} and row.payload["kind"] == "confirm"
    assert row.status == OutboxMessage.Status.DONE
    _, token = link_in(mail.outbox[0], "confirm-email")
    assert token not in str(row.payload)


def test_registration_rolled_back_sends_nothing(post):
    register(post)
    mail.outbox.clear()
    err(post("/auth/register", {"email": EMAIL, "password": PASSWORD}), 400, "email already exists")
    assert mail.outbox == []


def test_a_weak_new_password_is_refused_and_the_link_stays_usable(post, member):
    ok(post("/auth/reset-password", {"email": member.email}))
    _, token = link_in(mail.outbox[0], "reset-password")
    err(
        post("/auth/update-password", {"token": token, "password": "12345678"}), 400, "password is too common"
    )
    ok(post("/auth/update-password", {"token": token, "password": NEW_PASSWORD}))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"password": NEW_PASSWORD}, "token required"),
        ({"token": "", "password": NEW_PASSWORD}, "token required"),
        ({"token": "x"}, "password required"),
        ({"token": "x", "password": ""}, "password required"),
        ({"token": 5, "password": NEW_PASSWORD}, "token must be a string"),
    ],
)
def test_update_password_validation(api, body, message):
    err(api.call("/auth/update-password", body), 400, message)


@pytest.mark.parametrize("path", ["/auth/confirm", "/auth/update-password"])
def test_token_endpoints_parse_errors(api, path):
    err(api.call(path, raw="{nope"), 400, "Malformed JSON syntax.")
    err(api.call(path, raw="[1]"), 400, "Invalid JSON structure.")
    err(api.call(path, {}), 400, "token required")


def special(account, type_, lifetime=timedelta(hours=1), session_version=None):
    token, _ = tokens.issue(
        account.pk,
        type=type_,
        session_version=account.session_version if session_version is None else session_version,
        lifetime=lifetime,
    )
    return token


def tamper(token: str) -> str:
    header, _, signature = token.split(".")
    claims = jwt.decode(token, options={"verify_signature": False})
    claims["sub"] = str(uuid.uuid4())
    forged = jwt.encode(claims, "another key of at least thirty-two bytes!!", algorithm="HS256")
    return f"{header}.{forged.split('.')[1]}.{signature}"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda a: special(a, tokens.ACCOUNT_CONFIRM, lifetime=timedelta(seconds=-5)), id="expired"
        ),
        pytest.param(lambda a: special(a, tokens.ACCESS), id="access-token"),
        pytest.param(lambda a: special(a, tokens.PASSWORD_RESET), id="reset-token"),
        pytest.param(lambda a: tamper(special(a, tokens.ACCOUNT_CONFIRM)), id="tampered"),
        pytest.param(lambda a: special(a, tokens.ACCOUNT_CONFIRM)[:-3] + "abc", id="bad-signature"),
        pytest.param(lambda a: "not.a.jwt", id="garbage"),
    ],
)
def test_confirm_refuses_bad_tokens(api, make):
    account = AccountFactory(verified=False)
    CredentialFactory(account=account, status=Credential.Status.PENDING)
    err(api.call("/auth/confirm", {"token": make(account)}), 401, AUTH)
    account.refresh_from_db()
    assert not account.verified


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda a: special(a, tokens.PASSWORD_RESET, lifetime=timedelta(seconds=-5)), id="expired"
        ),
        pytest.param(lambda a: special(a, tokens.ACCESS), id="access-token"),
        pytest.param(lambda a: special(a, tokens.REFRESH), id="refresh-token"),
        pytest.param(lambda a: special(a, tokens.ACCOUNT_CONFIRM), id="confirm-token"),
        pytest.param(lambda a: tamper(special(a, tokens.PASSWORD_RESET)), id="tampered"),
        pytest.param(
            lambda a: special(a, tokens.PASSWORD_RESET, session_version=a.session_version - 1), id="reused"
        ),
    ],
)
def test_update_password_refuses_bad_tokens(api, member, make):
    err(api.call("/auth/update-password", {"token": make(member), "password": NEW_PASSWORD}), 401, AUTH)
    ok(api.call("/auth/login", {"email": member.email, "password": PASSWORD}))


def test_tokens_of_a_deleted_or_disabled_account_are_refused(api, member):
    token = special(member, tokens.PASSWORD_RESET)
    Account.objects.filter(pk=member.pk).update(enabled=False)
    err(api.call("/auth/update-password", {"token": token, "password": NEW_PASSWORD}), 401, AUTH)
    confirm = special(member, tokens.ACCOUNT_CONFIRM)
    member.delete()
    err(api.call("/auth/confirm", {"token": confirm}), 401, AUTH)


def test_a_reset_link_dies_when_the_sessions_end(post, member):
    ok(post("/auth/reset-password", {"email": member.email}))
    _, token = link_in(mail.outbox[0], "reset-password")
    session = ok(post("/auth/login", {"email": member.email, "password": PASSWORD}))
    ok(post("/auth/revoke", client=ApiClient(session["access_token"])))
    err(post("/auth/update-password", {"token": token, "password": NEW_PASSWORD}), 401, AUTH)


# reset-password and resend-confirm: the same answer whatever the address


@pytest.mark.parametrize("path", ["/auth/reset-password", "/auth/resend-confirm"])
def test_unknown_addresses_get_the_same_answer_and_no_mail(post, root, path):
    known = AccountFactory(verified=False)
    CredentialFactory(account=known, workspace=root, status=Credential.Status.PENDING)
    answer_known = post(path, {"email": known.email})
    answer_unknown = post(path, {"email": "ghost@example.com"})
    assert answer_known.status_code == answer_unknown.status_code == 200
    assert answer_known.json() == answer_unknown.json()
    assert [message.to for message in mail.outbox] == [[known.email]]


def test_resend_confirm_sends_a_fresh_link_to_unverified_accounts_only(post, member):
    session = register(post)
    mail.outbox.clear()
    data = ok(post("/auth/resend-confirm", {"email": EMAIL}))
    assert set(data) == {"message"} and data["message"]
    _, token = link_in(mail.outbox[0], "confirm-email")
    ok(post("/auth/confirm", {"token": token}))
    assert Account.objects.get(pk=session["account"]["id"]).verified

    mail.outbox.clear()
    assert ok(post("/auth/resend-confirm", {"email": EMAIL})) == data  # verified now: nothing sent
    assert ok(post("/auth/resend-confirm", {"email": member.email})) == data
    assert mail.outbox == []


def test_disabled_accounts_get_no_reset_mail(post, member):
    Account.objects.filter(pk=member.pk).update(enabled=False)
    ok(post("/auth/reset-password", {"email": member.email}))
    assert mail.outbox == []


@pytest.mark.parametrize("path", ["/auth/reset-password", "/auth/resend-confirm"])
@pytest.mark.parametrize(
    ("body", "message"),
    [({}, "email required"), ({"email": ""}, "email required"), ({"email": "nope"}, "invalid email")],
)
def test_email_request_validation(api, path, body, message):
    err(api.call(path, body), 400, message)


def test_requests_for_known_and_unknown_addresses_do_the_same_database_work(member):
    """docs/security.md#throttling-and-enumeration: no enumeration by timing. Both look the address up and run
    the outbox insert in one transaction; for an unknown address it is rolled back to its savepoint, so no row
    stays. The mail itself goes out in the worker."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from authn import email_links

    def shape(context):
        return [
            re.sub(r"'[^']*'|\b[0-9a-f]{32}\b|\d+", "?", query["sql"]).replace(
                "ROLLBACK TO SAVEPOINT",
                "RELEASE SAVEPOINT",  # the one statement that differs
            )
            for query in context.captured_queries
        ]

    with CaptureQueriesContext(connection) as known:
        email_links.request_email("reset", email=member.email, ip="203.0.113.1")
    with CaptureQueriesContext(connection) as unknown:
        email_links.request_email("reset", email="ghost@example.com", ip="203.0.113.1")
    assert shape(known) == shape(unknown)
    assert any(query.startswith("INSERT") for query in shape(known))
    assert any(query["sql"].startswith("ROLLBACK TO SAVEPOINT") for query in unknown.captured_queries)
    assert OutboxMessage.objects.filter(topic="email").count() == 1


@pytest.mark.parametrize("path", ["/auth/reset-password", "/auth/resend-confirm"])
def test_only_a_mailable_address_writes_a_row_and_queues_a_task(
    api, root, path, django_capture_on_commit_callbacks
):
    """Every request wrote an outbox row and queued a task (600 requests, 600 rows). Now an
    unknown address, one that gets no mail (a confirmed one asking for a confirmation) and one past its
    hourly limit write nothing and queue nothing, and all get the same answer."""
    known = AccountFactory(verified=False)
    CredentialFactory(account=known, workspace=root, status=Credential.Status.PENDING)
    confirmed = AccountFactory(verified=True)

    def rows_and_tasks(email: str) -> tuple[int, int, dict]:
        before = OutboxMessage.objects.count()
        with django_capture_on_commit_callbacks() as tasks:
            answer = ok(api.call(path, {"email": email}))
        return OutboxMessage.objects.count() - before, len(tasks), answer

    mailed = rows_and_tasks(known.email)
    assert mailed[:2] == (1, 1)
    assert rows_and_tasks("ghost@example.com") == (0, 0, mailed[2])
    if path == "/auth/resend-confirm":
        assert rows_and_tasks(confirmed.email) == (0, 0, mailed[2])
    for _ in range(settings.IAM_EMAILS_PER_ADDRESS_PER_HOUR - 1):
        assert rows_and_tasks(known.email) == (1, 1, mailed[2])
    assert rows_and_tasks(known.email) == (0, 0, mailed[2])  # past 3 an hour


def test_past_twenty_requests_an_hour_from_one_client_address_is_429(post, member):
    """Both endpoints count together, known addresses or not; a refused request does nothing at all."""
    answers = [
        post(path, {"email": email})
        for _ in range(5)
        for path in ("/auth/reset-password", "/auth/resend-confirm")
        for email in (member.email, "ghost@example.com")
    ]
    assert [answer.status_code for answer in answers] == [200] * settings.IAM_EMAIL_REQUESTS_PER_IP_PER_HOUR
    rows = OutboxMessage.objects.count()
    for path in ("/auth/reset-password", "/auth/resend-confirm"):
        response = post(path, {"email": "someone.new@example.com"})
        err(response, 429, "too many requests")
        assert 3590 <= int(response["Retry-After"]) <= 3600
    assert OutboxMessage.objects.count() == rows
    other = ApiClient(REMOTE_ADDR="203.0.113.7")
    assert ok(post("/auth/reset-password", {"email": member.email}, client=other))


# docs/api.md#throttling: at most 3 e-mails per address per hour, and the answer does not change


def test_three_mails_per_address_per_hour(post, member):
    answers = [post("/auth/reset-password", {"email": member.email}).json() for _ in range(5)]
    assert all(answer == answers[0] for answer in answers)
    assert len(mail.outbox) == settings.IAM_EMAILS_PER_ADDRESS_PER_HOUR == 3


def test_registration_counts_towards_the_limit(post):
    register(post)
    for _ in range(4):
        ok(post("/auth/resend-confirm", {"email": EMAIL}))
    assert len(mail.outbox) == 3
    assert all(message.subject == "Confirm your e-mail address" for message in mail.outbox)


def test_the_limit_is_per_address(post, member):
    other = AccountFactory()
    for _ in range(4):
        ok(post("/auth/reset-password", {"email": member.email}))
    ok(post("/auth/reset-password", {"email": other.email}))
    assert [message.to for message in mail.outbox][-1] == [other.email]
    assert len(mail.outbox) == 4


# Delivery failures (docs/architecture.md): retry what is temporary, give up on what is permanent


@pytest.mark.parametrize(
    ("error", "status"),
    [
        pytest.param(smtplib.SMTPServerDisconnected("gone"), OutboxMessage.Status.PENDING, id="disconnected"),
        pytest.param(ConnectionRefusedError(111, "refused"), OutboxMessage.Status.PENDING, id="refused"),
        pytest.param(
            smtplib.SMTPResponseException(451, b"try later"), OutboxMessage.Status.PENDING, id="451"
        ),
        pytest.param(smtplib.SMTPResponseException(554, b"no"), OutboxMessage.Status.FAILED, id="554"),
        pytest.param(
            smtplib.SMTPRecipientsRefused({EMAIL: (550, b"no such user")}),
            OutboxMessage.Status.FAILED,
            id="550",
        ),
    ],
)
def test_smtp_failures(post, monkeypatch, error, status):
    def fail(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(EmailMultiAlternatives, "send", fail)
    ok(post("/auth/register", {"email": EMAIL, "password": PASSWORD}))  # the request does not wait for SMTP
    row = OutboxMessage.objects.get(topic="email")
    assert (row.status, row.attempts) == (status, 1)
    assert row.last_error
    if status == OutboxMessage.Status.PENDING:
        assert row.next_attempt_at > row.created_at  # backoff
        monkeypatch.undo()
        OutboxMessage.objects.filter(pk=row.pk).update(next_attempt_at=row.created_at)
        assert outbox.process(row.pk) == OutboxMessage.Status.DONE
        assert [message.to for message in mail.outbox] == [[EMAIL]]


def test_a_mail_for_an_account_confirmed_meanwhile_is_not_sent(post, root):
    account = AccountFactory(verified=True)
    emails.enqueue(emails.CONFIRM, account.pk)
    row = OutboxMessage.objects.get(topic="email")
    assert outbox.process(row.pk) == OutboxMessage.Status.DONE
    assert mail.outbox == []


def test_confirm_does_not_revive_a_revoked_password_credential(api, root):
    # e.g. revoked by the OAuth hijack defence (docs/api.md#oauth-login) or by an administrator
    account = AccountFactory(verified=False)
    CredentialFactory(account=account, workspace=root, status=Credential.Status.REVOKED)
    ok(api.call("/auth/confirm", {"token": special(account, tokens.ACCOUNT_CONFIRM)}))
    assert Credential.objects.get(account=account).status == Credential.Status.REVOKED
    err(api.call("/auth/login", {"email": account.email, "password": PASSWORD}), 401, "invalid credentials")
