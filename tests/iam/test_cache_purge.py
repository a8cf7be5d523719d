"""A purge the cache could not take is retried from the outbox: an entry that survived an outage cannot
keep a revoked session alive once the cache is reachable again."""

from django.core.cache import cache as django_cache

from accounts.account_cache import CACHED_FIELDS, account_key
from iam.models import OutboxMessage
from iam.platform import outbox
from tests.conftest import ApiClient, break_cache, err, ok, token_for
from tests.factories import AccountFactory


def test_a_revocation_during_a_cache_split_is_purged_when_the_cache_returns(
    db, monkeypatch, django_capture_on_commit_callbacks
):
    account = AccountFactory()
    token = token_for(account)
    api = ApiClient(token)
    ok(api.call("/accounts/describe", {"id": str(account.pk)}))  # the account is now cached
    assert django_cache.get(account_key(account.pk)) is not None

    with monkeypatch.context() as split:  # the cache keeps its data but cannot be reached
        break_cache(split, "delete_many")
        with django_capture_on_commit_callbacks(execute=False):
            ok(api.call("/auth/revoke", {}))

    # The stale entry is still there, and a purge is owed.
    cached = dict(zip(CACHED_FIELDS, django_cache.get(account_key(account.pk)), strict=True))
    assert cached["session_version"] == account.session_version
    (message,) = OutboxMessage.objects.filter(topic="cache.purge", payload__keys=[account_key(account.pk)])
    assert outbox.process(message.pk) == "done"
    err(
        api.call("/accounts/describe", {"id": str(account.pk)}),
        401,
        "Authentication required or invalid credentials.",
    )


def test_the_purge_is_retried_while_the_cache_stays_away(db, monkeypatch):
    break_cache(monkeypatch, "delete_many")
    from iam.platform import cache

    cache.delete_many(["account:x"])
    message = OutboxMessage.objects.get(topic="cache.purge")
    assert outbox.process(message.pk) == "retry"
    message.refresh_from_db()
    assert message.attempts == 1 and "cache unavailable" in message.last_error


def test_the_cached_account_state_is_in_the_models_field_order():
    """`Model.from_db` reads a partial row in the model's field order: `AccountState` must follow it."""
    from accounts.account_cache import AccountState
    from accounts.models import Account

    in_model_order = tuple(
        f.attname for f in Account._meta.concrete_fields if f.attname in AccountState._fields
    )
    assert AccountState._fields == in_model_order
