"""`manage.py cleanup` (docs/operations.md#the-admin-and-management-commands operations)."""

from datetime import timedelta
from io import StringIO

from django.apps import apps
from django.core.management import call_command
from django.utils import timezone

from authn.models import RefreshToken
from iam.models import OutboxMessage
from tests.factories import AccountFactory


def run(**options) -> str:
    out = StringIO()
    call_command("cleanup", stdout=out, **options)
    return out.getvalue()


def message(status: str, processed_days_ago: float | None) -> OutboxMessage:
    now = timezone.now()
    return OutboxMessage.objects.create(
        topic="push.event",
        status=status,
        deadline=now,
        processed_at=None if processed_days_ago is None else now - timedelta(days=processed_days_ago),
    )


def test_deletes_old_delivered_messages_and_expired_refresh_tokens(db, settings):
    settings.IAM_OUTBOX_RETENTION_DAYS = 7
    old_done = message("done", 8)
    kept = [message("done", 6), message("failed", 30), message("pending", None)]
    account = AccountFactory()
    now = timezone.now()
    expired = RefreshToken.objects.create(account=account, expires_at=now - timedelta(seconds=1))
    used_but_valid = RefreshToken.objects.create(
        account=account, expires_at=now + timedelta(days=1), used_at=now - timedelta(days=40)
    )
    fresh = RefreshToken.objects.create(account=account, expires_at=now + timedelta(days=30))

    out = run()

    assert "deleted 1 outbox messages" in out
    assert "deleted 1 refresh tokens" in out
    assert "oauth states" in out
    assert not OutboxMessage.objects.filter(pk=old_done.pk).exists()
    assert set(OutboxMessage.objects.values_list("pk", flat=True)) == {m.pk for m in kept}
    # used rows stay until they expire: presenting one again is reuse (RFC 9700 4.14)
    assert set(RefreshToken.objects.values_list("pk", flat=True)) == {used_but_valid.pk, fresh.pk}
    assert not RefreshToken.objects.filter(pk=expired.pk).exists()


def test_retention_is_a_setting(db, settings):
    settings.IAM_OUTBOX_RETENTION_DAYS = 1
    message("done", 2)
    assert "deleted 1 outbox messages" in run()
    assert "deleted 0 outbox messages" in run()


def test_expired_oauth_states(db):
    """Counts 0 on a branch without `authn.OAuthState`; drops expired states where it exists."""
    try:
        model = apps.get_model("authn", "OAuthState")
    except LookupError:
        assert "deleted 0 oauth states" in run()
        return
    now = timezone.now()
    for index, expires_at in enumerate([now - timedelta(seconds=1), now + timedelta(minutes=10)]):
        model.objects.create(
            state_digest=f"{index:064d}",
            provider="idp_a",
            redirect_url="http://localhost:3000/",
            code_verifier="x",
            expires_at=expires_at,
        )
    assert "deleted 1 oauth states" in run()
    assert model.objects.count() == 1


def test_help_text():
    from iam.management.commands.cleanup import Command

    assert "IAM_OUTBOX_RETENTION_DAYS" in Command.help


def test_expired_sessions_go_and_live_or_revoked_ones_stay_until_they_expire(db):
    from authn.models import Session
    from authn.sessions import issue_session

    account = AccountFactory()
    for _ in range(3):
        issue_session(account, amr=["pwd"])
    expired, revoked, live = Session.objects.order_by("created_at", "id")
    Session.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    Session.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    assert "deleted 1 sessions" in run()
    assert set(Session.objects.values_list("pk", flat=True)) == {revoked.pk, live.pk}
