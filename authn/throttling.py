"""Failure counters in fixed windows (docs/api.md#throttling). They live in the cache: when it is down the
limits fail open and say so in the log, rather than locking every user out."""

import hashlib
import math
import time
from datetime import timedelta

from django.conf import settings

from iam.platform import cache


def _key(scope: str, value: str) -> str:
    return f"throttle:{scope}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


class Window:
    def __init__(self, scope: str, limit: int, window: timedelta):
        self.scope = scope
        self.limit = limit
        self.seconds = int(window.total_seconds())

    def retry_after(self, value: str) -> int | None:
        """Seconds until the window passes, when the limit is reached; None otherwise."""
        return longest_retry_after((self, value))

    def _keys(self, value: str) -> tuple[str, str]:
        key = _key(self.scope, value)
        return key, f"{key}:start"

    def _retry_after(self, value: str, found: dict) -> int | None:
        key, start = self._keys(value)
        if found.get(key, 0) < self.limit:
            return None
        started = found.get(start, time.time())
        return max(1, math.ceil(started + self.seconds - time.time()))

    def hit(self, value: str) -> int | None:
        key = _key(self.scope, value)
        cache.add(f"{key}:start", time.time(), self.seconds)
        return cache.incr(key, self.seconds)

    def take(self, value: str) -> int | None:
        """Counts an attempt before it is made, then reads the count: the seconds to wait when this
        attempt is past the limit (it must not be made), else None. The increment is atomic in the shared
        cache, so of any number of attempts arriving at once at most `limit` are made; `give_back` undoes
        the count of one that turned out not to count (a right code)."""
        count = self.hit(value)
        if count is None or count <= self.limit:
            return None  # within the limit, or the cache is down (fail open, logged)
        return self.retry_after(value) or 1

    def give_back(self, value: str) -> None:
        cache.decr(_key(self.scope, value))

    def counted(self, value: str, found: dict) -> bool:
        """Whether `found` (`read`) holds a count of this window for `value`: else there is nothing to
        `reset` (a count made since is a failure that came after, and stands)."""
        return any(key in found for key in self._keys(value))

    def reset(self, value: str) -> None:
        key = _key(self.scope, value)
        cache.delete_many([key, f"{key}:start"])


def read(*checks: tuple[Window, str]) -> dict:
    """The counters of several windows, each `(window, value)`, in one round trip (a login's address and
    client: docs/api.md#throttling), for `longest_retry_after` and `Window.counted`."""
    return cache.get_many([key for window, value in checks for key in window._keys(value)])


def longest_retry_after(*checks: tuple[Window, str], found: dict | None = None) -> int | None:
    """The longest `retry_after` of several windows, each `(window, value)`; `found`: their `read`."""
    found = read(*checks) if found is None else found
    waits = [window._retry_after(value, found) for window, value in checks]
    return max((wait for wait in waits if wait), default=None)


login_failures_by_email = Window(
    "login-email", settings.IAM_LOGIN_FAILURES_PER_EMAIL, settings.IAM_LOGIN_FAILURE_WINDOW
)
login_failures_by_ip = Window(
    "login-ip", settings.IAM_LOGIN_FAILURES_PER_IP, settings.IAM_LOGIN_FAILURE_WINDOW
)
# Wrong second-factor codes (TOTP or recovery), per account.
mfa_failures_by_account = Window(
    "mfa-account", settings.IAM_MFA_FAILURES_PER_ACCOUNT, settings.IAM_LOGIN_FAILURE_WINDOW
)
emails_by_address = Window("emails", settings.IAM_EMAILS_PER_ADDRESS_PER_HOUR, timedelta(hours=1))
# reset-password and resend-confirm requests per client address, whatever e-mail address they name.
email_requests_by_ip = Window(
    "email-requests-ip", settings.IAM_EMAIL_REQUESTS_PER_IP_PER_HOUR, timedelta(hours=1)
)
# Registrations per client address, whether or not they succeed: more accounts are no way around the
# per-account quotas.
registrations_by_ip = Window("register-ip", settings.IAM_REGISTRATIONS_PER_IP_PER_HOUR, timedelta(hours=1))
# Invitations are sent on a tenant's say-so: no workspace may flood an address with them.
invitations_by_address = Window(
    "invitations", settings.IAM_INVITATIONS_PER_ADDRESS_PER_HOUR, timedelta(hours=1)
)
# OAuth and SSO starts per client address; each stores a state row until the state expires.
oauth_starts_by_ip = Window(
    "oauth-initiate", settings.IAM_OAUTH_STARTS_PER_IP_PER_MINUTE, timedelta(minutes=1)
)
# Passkey sign-in options per client address: each stores a challenge for 5 minutes, so anonymous callers
# pile up no more than this rate allows (docs/security.md#passkeys); the OAuth starts' limit.
passkey_starts_by_ip = Window(
    "passkey-options", settings.IAM_OAUTH_STARTS_PER_IP_PER_MINUTE, timedelta(minutes=1)
)
