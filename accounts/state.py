"""The account as authentication sees it, cached: a warm Bearer check costs no query (SPEC 5), and every
write to an account purges the entry after commit. The database stays the truth: a cache that is down
is skipped, and entries expire after IAM_AUTH_CACHE_SECONDS in case a purge was lost with the cache."""

from uuid import UUID

from django.conf import settings

from iam import cache

from .models import Account


def account_key(account_id: UUID | str) -> str:
    return f"account:{account_id}"


def get_account(account_id: UUID | str, *, read: object = cache.MISSING) -> Account | None:
    """`read`: the cached entry, when the caller fetched it already with others in one round trip."""
    key = account_key(account_id)
    account = cache.get(key) if read is cache.MISSING else read
    if account is cache.MISSING:
        account = Account.objects.filter(pk=account_id).first()
        if account is not None:
            cache.set(key, account, settings.IAM_AUTH_CACHE_SECONDS)
    return account


def forget_account(account_id: UUID | str) -> None:
    cache.around_commit(lambda: cache.delete_many([account_key(account_id)]))
