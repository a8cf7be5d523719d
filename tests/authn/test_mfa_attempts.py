"""The 5-wrong-codes limit is exact however many codes arrive at once
(docs/security.md#second-factors-and-the-workspace-mfa-policy): each try is counted before its code is
checked, so tries arriving while others are still being checked see their count. Here they arrive inside
the first one's check; tests/live/test_totp_live.py sends them at once to gunicorn."""

import pytest

from authn import mfa
from tests.authn import test_totp as totp_flow
from tests.conftest import ok

clock = totp_flow.clock
ada = totp_flow.ada
bob = totp_flow.bob
AT_ONCE = 16


@pytest.fixture
def arriving_together(monkeypatch):
    """While the first code is checked, the others arrive: `send(call)` makes `AT_ONCE` calls so, and
    answers their statuses and how many codes were checked."""
    checked = []
    real = mfa._accept_code

    def send(call) -> tuple[list[int], int]:
        statuses = []

        def checking(totp, code):
            checked.append(code)
            if len(checked) == 1:
                statuses.extend(call().status_code for _ in range(AT_ONCE - 1))
            return real(totp, code)

        monkeypatch.setattr(mfa, "_accept_code", checking)
        statuses.append(call().status_code)
        monkeypatch.setattr(mfa, "_accept_code", real)
        return sorted(statuses), len(checked)

    return send


def test_sixteen_wrong_codes_at_once_get_five_checks(api, ada, bob, clock, arriving_together):
    _, secret, _ = totp_flow.enrolled(api, ada, clock)
    token = ok(totp_flow.login(api, ada))["mfa_token"]

    statuses, checks = arriving_together(
        lambda: api.call("/auth/mfa/verify", {"mfa_token": token, "code": "000000"})
    )

    assert checks == 5 and statuses == [400] * 5 + [429] * 11, (checks, statuses)
    right = totp_flow.code(secret, clock.now)
    assert api.call("/auth/mfa/verify", {"mfa_token": token, "code": right}).status_code == 429
    # bob's count is his own
    _, bob_secret, _ = totp_flow.enrolled(api, bob, clock)
    bob_token = ok(totp_flow.login(api, bob))["mfa_token"]
    ok(api.call("/auth/mfa/verify", {"mfa_token": bob_token, "code": totp_flow.code(bob_secret, clock.now)}))


def test_a_right_code_gives_its_count_back(api, ada, clock):
    """Only wrong codes count: four wrong, one right, then the fifth wrong is still checked."""
    _, secret, _ = totp_flow.enrolled(api, ada, clock)
    token = ok(totp_flow.login(api, ada))["mfa_token"]
    for _ in range(4):
        assert api.call("/auth/mfa/verify", {"mfa_token": token, "code": "000000"}).status_code == 400
    ok(api.call("/auth/mfa/verify", {"mfa_token": token, "code": totp_flow.code(secret, clock.now)}))
    token = ok(totp_flow.login(api, ada))["mfa_token"]
    assert api.call("/auth/mfa/verify", {"mfa_token": token, "code": "000000"}).status_code == 400
    assert api.call("/auth/mfa/verify", {"mfa_token": token, "code": "000000"}).status_code == 429
