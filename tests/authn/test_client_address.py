"""docs/operations.md#behind-a-reverse-proxy over HTTP: the per-address limits count the connection's address
(`REMOTE_ADDR`), never a client-sent `X-Forwarded-For`; only with `IAM_NUM_PROXIES=N` is the N-th entry from
the right used."""

import pytest
from django.conf import settings
from django.test import override_settings

from authn import throttling
from iam.platform.addresses import client_ip
from tests.authn.test_oauth import APP, INITIATE, provider_settings
from tests.conftest import err, ok
from tests.factories import PASSWORD

ATTACKER = "203.0.113.66"
VICTIM = "198.51.100.7"
PROXY = "10.0.0.2"
LOCKED = "too many failed login attempts"


@pytest.fixture
def victim(member):
    """The account whose login an attacker tries to lock out, or to escape the limits of."""
    return member


def fail_login(api, n: int, forwarded: str, remote: str = ATTACKER):
    """A wrong password for a fresh address each time, so only the per-address limit can trip."""
    body = {"email": f"ghost{n}@example.com", "password": "wrong-password"}
    return api.call("/auth/login", body, headers={"X-Forwarded-For": forwarded}, REMOTE_ADDR=remote)


def login(api, account, remote: str, forwarded: str | None = None):
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    body = {"email": account.email, "password": PASSWORD}
    return api.call("/auth/login", body, headers=headers, REMOTE_ADDR=remote)


def test_a_varied_forwarded_header_does_not_escape_the_address_limit(api, victim):
    assert settings.IAM_LOGIN_FAILURES_PER_IP == throttling.login_failures_by_ip.limit == 50
    for n in range(50):
        err(fail_login(api, n, f"192.0.2.{n}, 10.1.{n}.1"), 401)
    for n in range(50, 60):
        response = fail_login(api, n, f"192.0.2.{n}")
        err(response, 429, LOCKED)
        assert 1 <= int(response["Retry-After"]) <= 15 * 60
    err(login(api, victim, ATTACKER, forwarded=VICTIM), 429, LOCKED)  # the right password is not checked
    ok(login(api, victim, VICTIM))  # the attacker's failures were counted against the attacker


def test_failures_sent_in_the_victims_name_do_not_lock_the_victim_out(api, victim, monkeypatch):
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 3)  # 50 in production
    for n in range(5):
        err(fail_login(api, n, VICTIM), 401 if n < 3 else 429)
    data = ok(login(api, victim, VICTIM))
    assert data["account"]["id"] == str(victim.pk)


@override_settings(IAM_NUM_PROXIES=1)
def test_behind_one_proxy_the_rightmost_entry_counts(api, victim, monkeypatch):
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 3)
    for n in range(3):  # what the client wrote on the left changes; what the proxy appended does not
        err(fail_login(api, n, f"{VICTIM}, 192.0.2.{n}, {ATTACKER}", remote=PROXY), 401)
    err(login(api, victim, PROXY, forwarded=ATTACKER), 429, LOCKED)
    err(login(api, victim, PROXY, forwarded=f"{VICTIM}, {ATTACKER}"), 429, LOCKED)
    ok(login(api, victim, PROXY, forwarded=VICTIM))  # another client behind the same proxy
    ok(login(api, victim, PROXY, forwarded=f"{ATTACKER}, {VICTIM}"))
    ok(login(api, victim, PROXY))  # no header: the connection's address, which was never counted


@override_settings(IAM_NUM_PROXIES=2)
def test_behind_two_proxies_the_second_entry_from_the_right_counts(api, victim, monkeypatch):
    monkeypatch.setattr(throttling.login_failures_by_ip, "limit", 3)
    for n in range(3):
        err(fail_login(api, n, f"192.0.2.{n}, {ATTACKER}, 10.0.0.{n}", remote=PROXY), 401)
    err(login(api, victim, PROXY, forwarded=f"{ATTACKER}, 10.0.0.9"), 429, LOCKED)
    ok(login(api, victim, PROXY, forwarded=f"{ATTACKER}, {VICTIM}, 10.0.0.1"))


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "192.0.2.1", "10.0.0.2"),
        (0, "", "10.0.0.2"),
        (1, "", "10.0.0.2"),
        (1, " 192.0.2.1 ,  198.51.100.7 ", "198.51.100.7"),
        (1, "192.0.2.1,,", "192.0.2.1"),
        (2, "192.0.2.1, 198.51.100.7, 10.0.0.1", "198.51.100.7"),
        (3, "198.51.100.7", "198.51.100.7"),  # fewer entries than proxies: the first proxy's
    ],
)
def test_client_ip(rf, proxies, forwarded, expected):
    request = rf.post("/auth/login", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    with override_settings(IAM_NUM_PROXIES=proxies):
        assert client_ip(request) == expected


# The OAuth initiate limit (each start stores a state row) reads the address the same way.


@pytest.fixture
def oauth_configured(root):
    with override_settings(**provider_settings("http://127.0.0.1:9")):  # initiate never calls the provider
        yield


def start(api, forwarded: str | None = None, remote: str = ATTACKER):
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return api.call(INITIATE, {"redirect_url": APP}, headers=headers, REMOTE_ADDR=remote)


def test_oauth_starts_with_a_varied_forwarded_header_are_limited(api, oauth_configured, monkeypatch):
    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 3)  # 600 a minute in production
    for n in range(3):
        ok(start(api, f"192.0.2.{n}"))
    for n in range(3, 6):
        err(start(api, f"192.0.2.{n}"), 429, "too many requests")
    assert ok(start(api, remote=VICTIM))["auth_url"]


def test_oauth_starts_in_the_victims_name_do_not_block_the_victim(api, oauth_configured, monkeypatch):
    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 3)
    for _ in range(3):
        ok(start(api, VICTIM))
    err(start(api, VICTIM), 429, "too many requests")
    assert ok(start(api, remote=VICTIM))["auth_url"]


@override_settings(IAM_NUM_PROXIES=1)
def test_oauth_starts_behind_a_proxy_count_the_rightmost_entry(api, oauth_configured, monkeypatch):
    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 3)
    for n in range(3):
        ok(start(api, f"192.0.2.{n}, {ATTACKER}", remote=PROXY))
    err(start(api, ATTACKER, remote=PROXY), 429, "too many requests")
    assert ok(start(api, VICTIM, remote=PROXY))["auth_url"]
