"""`auth/register` allows `IAM_REGISTRATIONS_PER_IP_PER_HOUR` (100) requests per client address per hour
(docs/security.md#throttling-and-enumeration): more accounts are no way around the per-account workspace
quota. Refused ones count too; another address still registers."""

from django.conf import settings

from accounts.models import Account
from tests.conftest import ApiClient, err, ok

PASSWORD = "a-long-enough-passphrase"


def test_past_the_limit_from_one_address_is_429_and_creates_nothing(api):
    assert settings.IAM_REGISTRATIONS_PER_IP_PER_HOUR == 100
    ok(api.call("/auth/register", {"email": "first@example.com", "password": PASSWORD}))
    for _ in range(99):  # refused registrations count as well (no password hashed: cheap)
        err(api.call("/auth/register", {"email": "first@example.com", "password": PASSWORD}), 400)
    response = api.call("/auth/register", {"email": "second@example.com", "password": PASSWORD})
    err(response, 429, "too many requests")
    assert 3590 <= int(response["Retry-After"]) <= 3600
    assert not Account.objects.filter(email="second@example.com").exists()
    other = ApiClient(REMOTE_ADDR="203.0.113.7")
    ok(other.call("/auth/register", {"email": "second@example.com", "password": PASSWORD}))
