"""The account as authentication sees it, cached: a warm Bearer check costs no query (SPEC 5), and every
write to an account purges the entry after commit. The database stays the truth: a cache that is down
is skipped, and entries expire after IAM_AUTH_CACHE_SECONDS in case a purge was lost with the cache."""

from uuid import UUID

from django.conf import settings

from iam import cache

from .models import Account


def account_key(account_id: UUID | str) -> str:
    return f"account:{account_id}"


# What the checks of a Bearer token and of `clients/validate` read, and nothing more: the cache never
# holds the password hash or any other secret (ASVS 8.3), only these values, as a plain tuple.
_WANTED = {"id", "email", "name", "verified", "enabled", "is_superuser", "session_version"}
# In the model's field order, which `Model.from_db` expects of a partial row.
CACHED_FIELDS = tuple(field.attname for field in Account._meta.concrete_fields if field.attname in _WANTED)


def get_account(account_id: UUID | str, *, prefetched: object = cache.MISSING) -> Account | None:
    """`prefetched`: the cached entry, when the caller fetched it already with others in one round trip.
    The answer is an `Account` with only CACHED_FIELDS loaded (others load on access, from the database)."""
    values = cache.read_through(
        account_key(account_id),
        lambda: Account.objects.filter(pk=account_id).values_list(*CACHED_FIELDS).first(),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=_fits,
    )
    return None if values is None else Account.from_db("default", CACHED_FIELDS, values)


def _fits(values: object) -> bool:
    return isinstance(values, tuple) and len(values) == len(CACHED_FIELDS)


def forget_account(account_id: UUID | str) -> None:
    cache.around_commit(lambda: cache.delete_many([account_key(account_id)]))
