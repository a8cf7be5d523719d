"""Confirmation and password-reset e-mails (SPEC 6.3, CONTRACT 9), sent through the durable outbox.

The outbox payload holds no token, only `{"kind", "account_id"}`: the JWT is minted when the e-mail is
sent, so the database never stores a usable link. A reset token carries the account's session version,
and `update-password` bumps that version, so a reset link works once (CONTRACT 5)."""

import logging
import smtplib
from uuid import UUID

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string

from accounts.models import Account
from iam import metrics, outbox
from iam.models import OutboxMessage
from rbac.models import Membership
from rbac.services import INVITATION_LIFETIME

from . import throttling, tokens

logger = logging.getLogger(__name__)

TOPIC = "email"
CONFIRM = "confirm"
RESET = "reset"
INVITE = "invite"

_KINDS = {
    CONFIRM: {
        "type": tokens.ACCOUNT_CONFIRM,
        "path": "confirm-email",
        "template": "emails/confirm",
        "subject": "Confirm your e-mail address",
    },
    RESET: {
        "type": tokens.PASSWORD_RESET,
        "path": "reset-password",
        "template": "emails/reset",
        "subject": "Reset your password",
    },
    # CONTRACT 15: recorded by `rbac.services.invite` with the membership's id.
    INVITE: {
        "type": tokens.MEMBERSHIP_INVITE,
        "path": "accept-invitation",
        "template": "emails/invite",
        "subject": "You are invited to a workspace",
    },
}
LIFETIMES = {INVITE: INVITATION_LIFETIME}


@transaction.atomic(savepoint=False)  # the caller's transaction, or one of its own
def enqueue(kind: str, account_id: UUID | None) -> OutboxMessage | None:
    """Records the e-mail in the caller's transaction, published to the workers when it commits.
    `account_id=None` (a reset or resend for an unknown, unmailable or throttled address) records and
    queues nothing, yet costs the database what a real one costs, so the two answers take as long
    (CONTRACT 13: no enumeration by timing): the same insert runs in a savepoint that is rolled back. The
    transaction still got an id, so its commit flushes as a real one does, and both paths send as many
    statements (SAVEPOINT, INSERT, then RELEASE or ROLLBACK TO)."""
    assert kind in _KINDS, kind
    payload = {"kind": kind, "account_id": str(account_id) if account_id else None}
    savepoint = transaction.savepoint()
    if account_id is None:
        outbox.record(TOPIC, payload, within=settings.IAM_EMAIL_TOKEN_LIFETIME)
        transaction.savepoint_rollback(savepoint)
        return None
    message = outbox.enqueue(TOPIC, payload, within=settings.IAM_EMAIL_TOKEN_LIFETIME)
    transaction.savepoint_commit(savepoint)
    return message


def should_send(kind: str, account: Account | None) -> bool:
    """Who gets mail: an enabled account; for a confirmation, only while it is unverified (SPEC 4 rule 1)."""
    if account is None or not account.enabled:
        return False
    return not (kind == CONFIRM and account.verified)


def link(kind: str, account: Account, *, membership: Membership | None = None) -> str:
    spec = _KINDS[kind]
    token, _ = tokens.issue(
        account.pk,
        type=spec["type"],
        session_version=account.session_version,
        lifetime=LIFETIMES.get(kind, settings.IAM_EMAIL_TOKEN_LIFETIME),
        extra={"mid": str(membership.pk)} if membership is not None else None,
    )
    return f"{settings.IAM_FRONTEND_URL}/{spec['path']}?token={token}"


def build(kind: str, account: Account, *, membership: Membership | None = None) -> EmailMultiAlternatives:
    spec = _KINDS[kind]
    lifetime = LIFETIMES.get(kind, settings.IAM_EMAIL_TOKEN_LIFETIME)
    context = {
        "account": account,
        "membership": membership,
        "link": link(kind, account, membership=membership),
        "hours": int(lifetime.total_seconds() // 3600),
        "days": lifetime.days,
    }
    message = EmailMultiAlternatives(
        subject=spec["subject"],
        body=render_to_string(f"{spec['template']}.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[account.email],
    )
    message.attach_alternative(render_to_string(f"{spec['template']}.html", context), "text/html")
    return message


@outbox.handler(TOPIC)
def send(message: OutboxMessage) -> None:
    kind = message.payload.get("kind")
    if kind not in _KINDS:
        raise outbox.Undeliverable(f"unknown e-mail kind {kind!r}")
    account_id = message.payload.get("account_id")
    # Re-read at send time: the account may have been confirmed, disabled or deleted since.
    account = Account.objects.filter(pk=account_id).first() if account_id else None
    if not should_send(kind, account):
        return
    membership = None
    if kind == INVITE:  # an invitation already accepted, declined or withdrawn sends nothing
        membership = (
            Membership.objects.select_related("workspace")
            .filter(pk=message.payload.get("membership_id"), account=account)
            .filter(status=Membership.Status.INVITED)
            .first()
        )
        if membership is None:
            return
        if throttling.invitations_by_address.retry_after(account.email) is not None:
            logger.warning("email: invitation %s not mailed: address over its hourly limit", membership.pk)
            return
        throttling.invitations_by_address.hit(account.email)
    try:
        try:
            build(kind, account, membership=membership).send()
        except Exception:
            metrics.EMAILS.labels("failed").inc()
            raise
    except smtplib.SMTPResponseException as exc:
        if exc.smtp_code >= 500:  # a permanent refusal (RFC 5321 4.2.1)
            raise outbox.Undeliverable(f"smtp {exc.smtp_code}") from exc
        raise outbox.RetryLater(f"smtp {exc.smtp_code}") from exc
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        if all(code >= 500 for code in codes):
            raise outbox.Undeliverable(f"recipient refused: {codes}") from exc
        raise outbox.RetryLater(f"recipient refused: {codes}") from exc
    except (smtplib.SMTPException, OSError) as exc:  # connection refused, timeouts, TLS failures
        raise outbox.RetryLater(f"{type(exc).__name__}: {exc}") from exc
    metrics.EMAILS.labels("sent").inc()
    logger.info("email: sent %s to account %s", kind, account.pk)
