"""TOTP's single use under concurrency (docs/api.md#second-factor-totp): one `mfa_token` sent by many requests
at once starts one session, and one code sent with many `mfa_token`s at once is accepted once, across every
web worker (the rows are locked; nothing is decided in one process's memory); and 16 wrong codes sent at once
get no more checks than the limit of 5 (each is counted in Redis before it is checked)."""

import time
from concurrent.futures import ThreadPoolExecutor

import pyotp

from tests.live.api import ok
from tests.live.conftest import PASSWORD

CONCURRENCY = 12


def enrolled(live) -> tuple[str, str]:
    """A new account with TOTP active: its e-mail and secret."""
    session = live.register()
    token = session["access_token"]
    secret = ok(live.post("/auth/mfa/totp/enroll", {}, token=token))["secret"]
    ok(live.post("/auth/mfa/totp/confirm", {"code": pyotp.TOTP(secret).now()}, token=token))
    return session["account"]["email"], secret


def mfa_token(live, email: str) -> str:
    answer = ok(live.post("/auth/login", {"email": email, "password": PASSWORD}))
    assert answer["mfa_required"] is True
    return answer["mfa_token"]


def all_at_once(calls) -> list[int]:
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return sorted(response.status_code for response in pool.map(lambda call: call(), calls))


def test_one_mfa_token_sent_at_once_starts_one_session(live):
    email, secret = enrolled(live)
    token = mfa_token(live, email)
    code = pyotp.TOTP(secret).at(
        time.time() + 30
    )  # the confirming code's step is spent; drift allows the next
    statuses = all_at_once(
        [lambda: live.post("/auth/mfa/verify", {"mfa_token": token, "code": code})] * CONCURRENCY
    )
    # the others: `invalid mfa_token`, or 429 for those beyond the 5 tries the account's counter lets be
    # checked at once (each try is counted before it is checked and given back after)
    assert statuses[0] == 200 and set(statuses[1:]) <= {400, 429}, statuses


def test_one_code_sent_with_many_mfa_tokens_at_once_is_accepted_once(live):
    email, secret = enrolled(live)
    tokens = [mfa_token(live, email) for _ in range(CONCURRENCY)]
    code = pyotp.TOTP(secret).at(time.time() + 30)
    statuses = all_at_once(
        [
            lambda token=token: live.post("/auth/mfa/verify", {"mfa_token": token, "code": code})
            for token in tokens
        ]
    )
    # the others: `invalid code`, or 429 once 5 of them counted as wrong codes for the account
    assert statuses[0] == 200 and set(statuses[1:]) <= {400, 429}, statuses


def test_sixteen_wrong_codes_at_once_get_five_checks(live):
    """The limit of 5 wrong codes per account is counted before a code is checked: of 16 sent at once to
    every web worker, 5 are checked (400) and the others refused unchecked (429)."""
    email, _ = enrolled(live)
    token = mfa_token(live, email)
    wrong = {"mfa_token": token, "code": "000000"}
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda _: live.post("/auth/mfa/verify", wrong), range(16)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [400] * 5 + [429] * 11, statuses
    assert all(response.headers.get("Retry-After") for response in responses if response.status_code == 429)
