"""Confirmation and password-reset e-mails (docs/operations.md#e-mail), sent through the durable outbox.

The outbox payload holds no token, only `{"kind", "account_id"}`: the JWT is minted when the e-mail is
sent, so the database never stores a usable link. A reset token carries the account's session version,
and `update-password` bumps that version, so a reset link works once (docs/security.md#tokens)."""

import logging
import re
import smtplib
import unicodedata
from uuid import UUID

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string

from accounts.models import Account
from iam.models import OutboxMessage
from iam.platform import metrics, outbox
from rbac.models import Invitation, Membership
from rbac.services.invitations import open_invitations
from rbac.services.memberships import INVITATION_LIFETIME

from . import throttling, tokens

logger = logging.getLogger(__name__)

TOPIC = "email"
CONFIRM = "confirm"
RESET = "reset"
INVITE = "invite"
INVITATION = "invitation"

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
    # docs/api.md#invitations: recorded by `rbac.services.memberships.invite` with the membership's id.
    INVITE: {
        "type": tokens.MEMBERSHIP_INVITE,
        "path": "accept-invitation",
        "template": "emails/invite",
        "subject": "You are invited to a workspace",
    },
    # docs/api.md#invitations: recorded by `rbac.services.invitations.create_invitation`, sent to an address.
    INVITATION: {
        "type": tokens.MEMBERSHIP_INVITE,
        "path": "accept-invitation",
        "template": "emails/invitation",
        "subject": "You are invited to a workspace",
    },
}
# Notices (docs/api.md#second-factor-totp): no link, no token; they tell the account its second factor
# changed.
MFA_ADDED = "mfa_added"
MFA_REMOVED = "mfa_removed"
RECOVERY_CODE_USED = "recovery_code_used"
MFA_RESET = "mfa_reset"
PASSKEY_ADDED = "passkey_added"  # docs/api.md#passkeys
PASSKEY_REMOVED = "passkey_removed"  # by an operator, as MFA_RESET
# docs/pages.md#self-service-pages: `/signup` with an address that already has an account answers as for a
# new one, and the address is told (no link with a token: the sign-in and reset pages).
ACCOUNT_EXISTS = "account_exists"
_NOTICES = {
    PASSKEY_ADDED: {"template": "emails/passkey_added", "subject": "A passkey was added to your account"},
    PASSKEY_REMOVED: {
        "template": "emails/passkey_removed",
        "subject": "An administrator removed a passkey from your account",
    },
    MFA_ADDED: {"template": "emails/mfa_added", "subject": "A second factor was added to your account"},
    MFA_REMOVED: {
        "template": "emails/mfa_removed",
        "subject": "The second factor of your account was removed",
    },
    RECOVERY_CODE_USED: {"template": "emails/recovery_code_used", "subject": "A recovery code was used"},
    MFA_RESET: {
        "template": "emails/mfa_reset",
        "subject": "An administrator removed the second factor of your account",
    },
    ACCOUNT_EXISTS: {"template": "emails/account_exists", "subject": "You already have an account"},
}
LIFETIMES = {INVITE: INVITATION_LIFETIME, INVITATION: INVITATION_LIFETIME}

# Names in mails: a registration's `name` goes to any address it names, a workspace's `name`
# to anyone its owner invites. Neither may pass for a link or a paragraph of ours: a name is shown on one
# line (every run of spaces, line breaks and control characters becomes one space), at most
# MAIL_NAME_MAX characters, and a name holding anything a mail reader could take for an address (a
# scheme, `www.`, a domain or an IP address, an e-mail address) is left out altogether.
MAIL_NAME_MAX = 64
_URL_LIKE = re.compile(
    r"://|\bwww\.|@|\b\d{1,3}(\.\d{1,3}){3}\b|[a-z0-9-]\.[a-z][a-z0-9-]*[a-z0-9]\b|\b[a-z][a-z0-9+.-]*:/?/?[a-z0-9]",
    re.IGNORECASE,
)
_BREAKS = re.compile(r"[\s\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]+")


def mail_name(name: str | None) -> str | None:
    """The name as a mail may show it, or None when it must be left out (see above)."""
    if not name:
        return None
    text = unicodedata.normalize("NFKC", name)  # fullwidth dots and slashes read as ASCII ones
    text = "".join(" " if unicodedata.category(char)[0] == "C" else char for char in text)
    text = _BREAKS.sub(" ", text).strip()
    if not text or _URL_LIKE.search(text):
        return None
    return text if len(text) <= MAIL_NAME_MAX else text[: MAIL_NAME_MAX - 1].rstrip() + "\u2026"


@transaction.atomic(savepoint=False)  # the caller's transaction, or one of its own
def enqueue(kind: str, account_id: UUID | None) -> OutboxMessage | None:
    """Records the e-mail in the caller's transaction, published to the workers when it commits.
    `account_id=None` (a reset or resend for an unknown, unmailable or throttled address) records and
    queues nothing, yet costs the database what a real one costs, so the two answers take as long
    (docs/security.md#throttling-and-enumeration: no enumeration by timing): the same insert runs in a
    savepoint that is rolled back. The transaction still got an id, so its commit flushes as a real one does,
    and both paths send as many statements (SAVEPOINT, INSERT, then RELEASE or ROLLBACK TO)."""
    assert kind in _KINDS or kind in _NOTICES, kind
    payload = {"kind": kind, "account_id": str(account_id) if account_id else None}
    savepoint = transaction.savepoint()
    if account_id is None:
        outbox.insert_unpublished(TOPIC, payload, within=settings.IAM_EMAIL_TOKEN_LIFETIME)
        transaction.savepoint_rollback(savepoint)
        return None
    message = outbox.enqueue(TOPIC, payload, within=settings.IAM_EMAIL_TOKEN_LIFETIME)
    transaction.savepoint_commit(savepoint)
    return message


def should_send(kind: str, account: Account | None) -> bool:
    """Who gets mail: an enabled account; for a confirmation, only while it is unverified
    (docs/api.md#auth)."""
    if account is None or not account.enabled:
        return False
    return not (kind == CONFIRM and account.verified)


def link(
    kind: str,
    account: Account | None,
    *,
    membership: Membership | None = None,
    invitation: Invitation | None = None,
) -> str:
    spec = _KINDS[kind]
    if invitation is not None:
        # An address, not an account: the token names the invitation (`sub` and `iid`), which is single
        # use by its status; no session version applies.
        subject, session_version, extra = invitation.pk, 0, {"iid": str(invitation.pk)}
    else:
        assert account is not None
        subject, session_version = account.pk, account.session_version
        extra = {"mid": str(membership.pk)} if membership is not None else None
    token, _ = tokens.issue(
        subject,
        type=spec["type"],
        session_version=session_version,
        lifetime=LIFETIMES.get(kind, settings.IAM_EMAIL_TOKEN_LIFETIME),
        extra=extra,
    )
    return f"{settings.IAM_FRONTEND_URL}/{spec['path']}?token={token}"


def build(
    kind: str,
    account: Account | None,
    *,
    membership: Membership | None = None,
    invitation: Invitation | None = None,
) -> EmailMultiAlternatives:
    spec = _KINDS[kind]
    lifetime = LIFETIMES.get(kind, settings.IAM_EMAIL_TOKEN_LIFETIME)
    workspace = (invitation or membership).workspace if (invitation or membership) else None
    context = {
        "name": mail_name(account.name) if account is not None else None,
        "workspace_name": mail_name(workspace.name) if workspace is not None else None,
        "link": link(kind, account, membership=membership, invitation=invitation),
        "hours": int(lifetime.total_seconds() // 3600),
        "days": lifetime.days,
    }
    message = EmailMultiAlternatives(
        subject=spec["subject"],
        body=render_to_string(f"{spec['template']}.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[invitation.email if invitation is not None else account.email],
    )
    message.attach_alternative(render_to_string(f"{spec['template']}.html", context), "text/html")
    return message


@outbox.handler(TOPIC)
def send(message: OutboxMessage) -> None:
    kind = message.payload.get("kind")
    if kind in _NOTICES:
        _send_notice(kind, message)
        return
    if kind not in _KINDS:
        raise outbox.Undeliverable(f"unknown e-mail kind {kind!r}")
    if kind == INVITATION:
        _send_invitation(message)
        return
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
    _deliver(build(kind, account, membership=membership))
    logger.info("email: sent %s to account %s", kind, account.pk)


def _send_notice(kind: str, message: OutboxMessage) -> None:
    """A notice to an enabled account, re-read at send time."""
    account_id = message.payload.get("account_id")
    account = Account.objects.filter(pk=account_id).first() if account_id else None
    if account is None or not account.enabled:
        return
    spec = _NOTICES[kind]
    context = {
        "name": mail_name(account.name),
        "signin_link": f"{settings.IAM_PUBLIC_URL}/signin",
        "reset_link": f"{settings.IAM_PUBLIC_URL}/forgot-password",
    }
    email = EmailMultiAlternatives(
        subject=spec["subject"],
        body=render_to_string(f"{spec['template']}.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[account.email],
    )
    email.attach_alternative(render_to_string(f"{spec['template']}.html", context), "text/html")
    _deliver(email)
    logger.info("email: sent %s to account %s", kind, account.pk)


def _send_invitation(message: OutboxMessage) -> None:
    """An invitation by e-mail: to its address, while it is still open, within the address's hourly
    limit (a throttled one stands, unmailed: the invitee finds it in `invitations/mine`)."""
    invitation = (
        open_invitations(Invitation.objects.select_related("workspace"))
        .filter(pk=message.payload.get("invitation_id"))
        .first()
    )
    if invitation is None:
        return
    if throttling.invitations_by_address.retry_after(invitation.email) is not None:
        logger.warning("email: invitation %s not mailed: address over its hourly limit", invitation.pk)
        return
    throttling.invitations_by_address.hit(invitation.email)
    _deliver(build(INVITATION, None, invitation=invitation))
    logger.info("email: sent invitation %s", invitation.pk)


def _deliver(email: EmailMultiAlternatives) -> None:
    try:
        try:
            email.send()
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
