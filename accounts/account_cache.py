"""The account as authentication sees it, cached: a warm Bearer check costs no query
(docs/api.md#authentication), and every write to an account purges the entry after commit. The database stays
the truth: a cache that is down is skipped, and entries expire after IAM_AUTH_CACHE_SECONDS in case a purge
was lost with the cache."""

from typing import NamedTuple
from uuid import UUID

from django.conf import settings

from iam.platform import cache

from .models import Account


def account_key(account_id: UUID | str) -> str:
    return f"account:{account_id}"


class AccountState(NamedTuple):
    """What the checks of a Bearer token and of `clients/validate`, and a refresh's ID token, read of an
    account, and nothing more: the cache never holds the password hash or any other secret (ASVS 8.3),
    only these values, as a plain tuple. In the model's field order, which `Model.from_db` expects of a
    partial row (a test holds it)."""

    id: UUID
    email: str
    name: str
    avatar_url: str | None  # the ID token's `picture` (oidc/claims.py)
    enabled: bool
    verified: bool
    is_superuser: bool
    session_version: int


CACHED_FIELDS = AccountState._fields


def get_account_state(account_id: UUID | str, *, prefetched: object = cache.MISSING) -> AccountState | None:
    """`prefetched`: the cached entry, when the caller fetched it already with others in one round trip."""
    values = cache.read_through(
        account_key(account_id),
        lambda: Account.objects.filter(pk=account_id).values_list(*CACHED_FIELDS).first(),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=_fits,
    )
    return None if values is None else AccountState._make(values)


def as_account(state: AccountState) -> Account:
    """An `Account` with only CACHED_FIELDS loaded (others load on access, from the database)."""
    return Account.from_db("default", CACHED_FIELDS, state)


def _fits(values: object) -> bool:
    return isinstance(values, tuple) and len(values) == len(CACHED_FIELDS)


def forget_account(account_id: UUID | str) -> None:
    cache.around_commit(lambda: cache.delete_many([account_key(account_id)]))
