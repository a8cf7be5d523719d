"""API keys of service accounts as the checks of a Bearer key and of `clients/validate` read them
(docs/api.md#api-keys), cached as sessions are (authn/session_cache.py): one narrow entry per key, keyed by
the key's digest, holding what the checks read of the key and of its service account, never the digest's
secret. A warm check costs no query. Every change to a key or to its service account (revoked, disabled,
renamed, deleted) purges the entries around the commit; the database stays the truth, so with the cache
down the row is read, and a revoked key is refused all the same."""

import time
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from iam.platform import cache, crypto
from tenancy.models import Workspace
from tenancy.workspace_cache import purge_on_delete

from .models import ServiceAccount, ServiceAccountKey

KEY_PREFIX = "iam_sk_"
KEY_LENGTH = len(KEY_PREFIX) + 43  # 32 random bytes in base64url
USED_EVERY_SECONDS = 60  # `last_used_at` is written at most this often per key

# The claim a service account's token carries (`request.auth` of a key's call, an application's client
# credentials token): its id. The workspace's MFA policy is about people: a call carrying it meets it
# (docs/security.md#service-accounts).
SERVICE_ACCOUNT_CLAIM = "service_account"


class KeyState(NamedTuple):
    key_id: str
    service_account_id: str
    workspace_id: str
    name: str  # the service account's
    enabled: bool  # the service account's
    expires_at: int | None  # Unix seconds
    revoked: bool


def key_entry(digest: str) -> str:
    return f"apikey:{digest}"


def looks_like_key(raw: str) -> bool:
    return raw.startswith(KEY_PREFIX)


def get_key_state(raw: str, *, prefetched: object = cache.MISSING) -> KeyState | None:
    """None for a string that is no key of any service account. An unknown digest is not cached (anyone
    may send any): it reads the database each time."""
    if not looks_like_key(raw) or len(raw) != KEY_LENGTH:
        return None
    digest = crypto.digest(raw)
    values = cache.read_through(
        key_entry(digest),
        lambda: _load(digest),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=lambda values: isinstance(values, tuple) and len(values) == len(KeyState._fields),
    )
    return None if values is None else KeyState(*values)


def entry_of(raw: str) -> str:
    """The cache entry `get_key_state` reads, for a caller that fetches it with others in one round trip."""
    return key_entry(crypto.digest(raw))


def _load(digest: str) -> tuple | None:
    row = (
        ServiceAccountKey.objects.filter(digest=digest)
        .values_list(
            "id",
            "service_account_id",
            "service_account__workspace_id",
            "service_account__name",
            "service_account__enabled",
            "expires_at",
            "revoked_at",
        )
        .first()
    )
    if row is None:
        return None
    key_id, account_id, workspace_id, name, enabled, expires_at, revoked_at = row
    expires = int(expires_at.timestamp()) if expires_at is not None else None
    return (str(key_id), str(account_id), str(workspace_id), name, enabled, expires, revoked_at is not None)


def service_account_entry(service_account_id: UUID | str) -> str:
    return f"service-account:{service_account_id}"


def token_state(claims: dict, *, prefetched: object = cache.MISSING) -> KeyState | None:
    """A service account's access token (an application's client credentials grant,
    docs/oidc.md#client-credentials) read as a key: its service account's cached state (workspace, name,
    `enabled`), the token's expiry; None when the service account is gone or the token names another
    workspace than its own."""
    service_account_id = str(claims[SERVICE_ACCOUNT_CLAIM])
    values = service_account_state(service_account_id, prefetched=prefetched)
    if values is None or values[0] != claims.get("workspace_id"):
        return None
    workspace_id, name, enabled = values
    return KeyState("", service_account_id, workspace_id, name, enabled, claims["exp"], False)


def service_account_state(
    service_account_id: str, *, prefetched: object = cache.MISSING
) -> tuple[str, str, bool] | None:
    """The service account's workspace id, name and `enabled`, cached (purged with its keys' entries);
    None when it is gone."""
    return cache.read_through(
        service_account_entry(service_account_id),
        lambda: _load_service_account(service_account_id),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=lambda values: isinstance(values, tuple) and len(values) == 3,
    )


def _load_service_account(service_account_id: str) -> tuple | None:
    try:
        UUID(service_account_id)
    except ValueError:
        return None
    row = (
        ServiceAccount.objects.filter(pk=service_account_id)
        .values_list("workspace_id", "name", "enabled")
        .first()
    )
    return None if row is None else (str(row[0]), row[1], row[2])


def refusal(state: KeyState | None) -> str | None:
    """Why a key is refused (the reasons of `clients/validate`), or None when it may act."""
    if state is None or state.revoked:
        return "invalid_token"
    if state.expires_at is not None and state.expires_at <= time.time():
        return "token_expired"
    if not state.enabled:
        return "account_disabled"
    return None


def forget_keys(digests: list[str]) -> None:
    """Call inside the transaction that changes the keys or their service account."""
    if digests:
        keys = [key_entry(digest) for digest in digests]
        cache.around_commit(lambda: cache.delete_many(keys))


def forget_service_account(service_account: ServiceAccount) -> None:
    """Its keys' entries and its own (its tokens read it)."""
    keys = ServiceAccountKey.objects.filter(service_account=service_account)
    entries = [key_entry(digest) for digest in keys.values_list("digest", flat=True)]
    entries.append(service_account_entry(service_account.pk))
    cache.around_commit(lambda: cache.delete_many(entries))


def mark_used(key_id: str, service_account_id: str) -> None:
    """`last_used_at` of the key and its service account, at most once a minute per key (the cache says
    when it was written last; with the cache down, nothing is written: a call never waits on it)."""
    if not cache.add(f"apikey-used:{key_id}", 1, USED_EVERY_SECONDS):
        return
    now = timezone.now()
    ServiceAccountKey.objects.filter(pk=key_id).update(last_used_at=now)
    ServiceAccount.objects.filter(pk=service_account_id).update(last_used_at=now)


def mark_service_account_used(service_account_id: str) -> None:
    """`last_used_at` of a service account an application's client credentials grant acts as, kept to
    the minute as its keys' (docs/api.md#service-accounts): written at most once a minute."""
    if cache.add(f"service-account-used:{service_account_id}", 1, USED_EVERY_SECONDS):
        ServiceAccount.objects.filter(pk=service_account_id).update(last_used_at=timezone.now())


@dataclass(frozen=True)
class ServiceAccountCaller:
    """`request.user` of a call a service account makes (docs/api.md#api-keys): what the policy asks of a
    caller (`pk`, `is_superuser`) with the grants of its roles (`rbac.policy.grants` reads them by its id),
    in its workspace only. `via`: how it authenticated, `{"kind": "api_key" | "application", "id"}`."""

    id: UUID
    workspace_id: UUID
    name: str
    via: dict = field(default_factory=dict)
    is_superuser = False
    is_staff = False
    is_authenticated = True
    is_anonymous = False
    is_active = True
    enabled = True
    is_service_account = True

    @property
    def pk(self) -> UUID:
        return self.id


def is_service_account(caller: object) -> bool:
    return getattr(caller, "is_service_account", False)


@purge_on_delete("service account keys")
def forget_workspace_keys(workspace: Workspace) -> None:
    """A deleted workspace takes its service accounts and their keys in its cascade: each key is refused
    when that commits, not when its cached entry expires."""
    keys = ServiceAccountKey.objects.filter(service_account__workspace=workspace)
    forget_keys(list(keys.values_list("digest", flat=True)))
    accounts = ServiceAccount.objects.filter(workspace=workspace).values_list("pk", flat=True)
    entries = [service_account_entry(pk) for pk in accounts]
    if entries:
        cache.around_commit(lambda: cache.delete_many(entries))
