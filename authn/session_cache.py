"""A session's revocation state as the checks of a Bearer token and of `clients/validate` read it, cached
beside the account (accounts/account_cache.py) and fetched in the same round trip: a warm check costs no
query. Every change to a session purges its entry around the commit; the database stays the truth, so
with the cache down the row is read, and a revoked session is refused all the same."""

from typing import NamedTuple
from uuid import UUID

from django.conf import settings

from iam.platform import cache

from .models import Session


class SessionState(NamedTuple):
    account_id: str
    session_version: int
    revoked: bool


def session_key(session_id: UUID | str) -> str:
    return f"session:{session_id}"


def get_session_state(session_id: UUID | str, *, prefetched: object = cache.MISSING) -> SessionState | None:
    """None when no such session exists (swept after it expired). Cached as a plain tuple of the three
    values the checks read, never the address or user agent."""
    values = cache.read_through(
        session_key(session_id),
        lambda: _load(session_id),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=_fits,
        absent_timeout=settings.IAM_AUTH_CACHE_SECONDS,  # a session id never comes back
    )
    return None if values is None else SessionState(*values)


def _load(session_id: UUID | str) -> tuple | None:
    row = (
        Session.objects.filter(pk=session_id)
        .values_list("account_id", "session_version", "revoked_at")
        .first()
    )
    if row is None:
        return None
    account_id, session_version, revoked_at = row
    return (str(account_id), session_version, revoked_at is not None)


def _fits(values: object) -> bool:
    return isinstance(values, tuple) and len(values) == 3


def forget_sessions(session_ids: list[UUID]) -> None:
    if session_ids:
        keys = [session_key(session_id) for session_id in session_ids]
        cache.around_commit(lambda: cache.delete_many(keys))
