"""The second factor on the hosted pages (docs/pages.md): the sign-in's code step, recovery codes, the
step-up of a browser session a workspace sends (`/signin/mfa`) and the set-up of an authenticator app
when the account has none. The rules are `auth/mfa/*`'s: one use per code, 5 wrong codes give a wait."""

import re

import pyotp
import pytest

from authn import mfa
from authn.models import Session, Totp
from iam.models import AuditEntry, Event

from .helpers import (
    browser_session,
    button,
    code,
    enter_email,
    enter_password,
    label_for,
    query,
    sign_in,
    text,
    unescaped,
    with_totp,
)


def recovery_codes_of(account, clock) -> tuple[str, list[str]]:
    secret = mfa.enroll(account)["secret"]
    codes = mfa.confirm(account, code(secret, clock.now))["recovery_codes"]
    clock.now += 30
    return secret, codes


def test_a_password_of_an_account_with_totp_asks_the_code(browser, ada, clock):
    with_totp(ada, clock)
    response = sign_in(browser, ada.email, next_url="/somewhere")
    assert response.status_code == 302 and response["Location"] == "/signin/code?next=%2Fsomewhere"
    assert "iam_session" not in browser.cookies  # no session before the second factor
    page = browser.get(response["Location"])
    html = text(page)
    assert label_for(html, "Code") == "id_code"
    assert button(html, "Verify")
    assert 'autocomplete="one-time-code"' in html and 'inputmode="numeric"' in html
    assert '<a href="/signin/code?next=%2Fsomewhere&amp;with=recovery">Use a recovery code</a>' in html


def test_the_right_code_starts_a_session_with_both_factors(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email, next_url="/somewhere")
    response = browser.post("/signin/code?next=%2Fsomewhere", {"code": code(secret, clock.now)})
    assert response.status_code == 302 and response["Location"] == "/somewhere"
    record = browser_session(browser)
    assert (record.kind, record.amr) == (Session.Kind.BROWSER, ["pwd", "otp", "mfa"])
    assert browser.get("/signin/code").status_code == 302  # the pending step is spent


def test_a_wrong_code_is_told_at_its_field_and_the_step_stays(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email)
    wrong = browser.post("/signin/code?next=%2Fsignin%2Fdone", {"code": "000000"})
    html = text(wrong)
    assert wrong.status_code == 200
    assert 'aria-describedby="id_code-error"' in html and 'aria-invalid="true"' in html
    assert "Incorrect code. Check your authenticator app and try again." in html
    right = browser.post("/signin/code", {"code": code(secret, clock.now)})
    assert right.status_code == 302 and browser_session(browser).amr == ["pwd", "otp", "mfa"]


def test_a_code_works_once(browser, other_browser, ada, clock):
    secret = with_totp(ada, clock)
    once = code(secret, clock.now)
    sign_in(browser, ada.email)
    assert browser.post("/signin/code", {"code": once}).status_code == 302
    sign_in(other_browser, ada.email)
    again = other_browser.post("/signin/code", {"code": once})
    assert again.status_code == 200 and "Incorrect code." in text(again)
    assert "iam_session" not in other_browser.cookies


def test_a_recovery_code_signs_in_once(browser, other_browser, ada, clock):
    _, codes = recovery_codes_of(ada, clock)
    sign_in(browser, ada.email)
    page = browser.get("/signin/code?next=%2Fsignin%2Fdone&with=recovery")
    assert label_for(text(page), "Recovery code") == "id_recovery_code"
    assert button(text(page), "Verify")
    assert "Use your authenticator app" in text(page)
    response = browser.post("/signin/code?next=%2Fsignin%2Fdone&with=recovery", {"recovery_code": codes[0]})
    assert response.status_code == 302 and browser_session(browser).amr == ["pwd", "otp", "mfa"]
    assert AuditEntry.objects.filter(action="account.mfa_recovery_code_used").count() == 1
    sign_in(other_browser, ada.email)
    again = other_browser.post("/signin/code?with=recovery", {"recovery_code": codes[0]})
    assert "Incorrect or already used recovery code." in text(again)
    assert 'aria-describedby="id_recovery_code-error"' in text(again)


def test_five_wrong_codes_give_a_wait_for_that_account_only(
    browser, other_browser, ada, bob, clock, settings
):
    secret = with_totp(ada, clock)
    bob_secret = with_totp(bob, clock)
    sign_in(browser, ada.email)
    for _ in range(settings.IAM_MFA_FAILURES_PER_ACCOUNT):
        assert browser.post("/signin/code", {"code": "000000"}).status_code == 200
    waiting = browser.post("/signin/code", {"code": code(secret, clock.now)})
    assert waiting.status_code == 429 and int(waiting["Retry-After"]) > 0
    assert "Too many attempts." in text(waiting)
    assert "iam_session" not in browser.cookies
    sign_in(other_browser, bob.email)
    assert other_browser.post("/signin/code", {"code": code(bob_secret, clock.now)}).status_code == 302


def test_an_expired_step_starts_again(browser, ada, clock, settings):
    secret = with_totp(ada, clock)
    settings.IAM_MFA_TOKEN_LIFETIME = -settings.IAM_MFA_TOKEN_LIFETIME  # spent before it is used
    sign_in(browser, ada.email)
    response = browser.post("/signin/code?next=%2Fx", {"code": code(secret, clock.now)})
    assert response.status_code == 400
    assert "Your sign-in took too long. Start again." in text(response)
    assert label_for(text(response), "Email")
    assert browser.get("/signin/code").status_code == 302


def test_without_a_pending_sign_in_the_code_page_sends_to_sign_in(browser):
    response = browser.get("/signin/code?next=%2Fx")
    assert response.status_code == 302 and response["Location"] == "/signin?next=%2Fx"


# Step-up: a workspace requires a second factor the browser session has not used


def test_step_up_asks_a_signed_out_browser_to_sign_in_first(browser):
    response = browser.get("/signin/mfa?next=%2Foauth2%2Fauthorize%3Fa%3D1")
    assert response.status_code == 302
    assert (
        response["Location"] == "/signin?next=%2Fsignin%2Fmfa%3Fnext%3D%252Foauth2%252Fauthorize%253Fa%253D1"
    )


def test_a_session_with_mfa_goes_straight_on(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email)
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    response = browser.get("/signin/mfa?next=%2Fthere")
    assert response.status_code == 302 and response["Location"] == "/there"


def test_step_up_with_a_code_replaces_the_browser_session(browser, ada, clock):
    sign_in(browser, ada.email)  # one factor: TOTP came later
    before = browser_session(browser)
    secret = with_totp(ada, clock)
    page = browser.get("/signin/mfa?next=%2Fthere")
    assert label_for(text(page), "Code") and button(text(page), "Verify")
    assert "This workspace asks for a second factor." in text(page)
    wrong = browser.post("/signin/mfa?next=%2Fthere", {"code": "000000"})
    assert "Incorrect code." in text(wrong)
    response = browser.post("/signin/mfa?next=%2Fthere", {"code": code(secret, clock.now)})
    assert response.status_code == 302 and response["Location"] == "/there"
    after = browser_session(browser)
    before.refresh_from_db()
    assert after.pk != before.pk and after.amr == ["pwd", "otp", "mfa"] and after.kind == Session.Kind.BROWSER
    assert before.revoked_at is not None
    revoked = Event.objects.filter(payload__type="session.revoked")
    assert [event.payload["data"]["session_id"] for event in revoked] == [str(before.pk)]


def test_step_up_with_a_recovery_code(browser, ada, clock):
    sign_in(browser, ada.email)
    _, codes = recovery_codes_of(ada, clock)
    page = browser.get("/signin/mfa?next=%2Fthere&with=recovery")
    assert label_for(text(page), "Recovery code")
    response = browser.post("/signin/mfa?next=%2Fthere&with=recovery", {"recovery_code": codes[3]})
    assert response.status_code == 302 and browser_session(browser).amr == ["pwd", "otp", "mfa"]


def test_step_up_waits_after_five_wrong_codes(browser, ada, clock, settings):
    sign_in(browser, ada.email)
    secret = with_totp(ada, clock)
    for _ in range(settings.IAM_MFA_FAILURES_PER_ACCOUNT):
        browser.post("/signin/mfa", {"code": "000000"})
    waiting = browser.post("/signin/mfa", {"code": code(secret, clock.now)})
    assert waiting.status_code == 429 and "Retry-After" in waiting
    assert browser_session(browser).amr == ["pwd"]


# Set-up when the account has no second factor


def test_set_up_shows_a_button_first_and_a_get_changes_nothing(browser, ada):
    sign_in(browser, ada.email)
    page = browser.get("/signin/mfa?next=%2Fthere")
    assert page.status_code == 200 and button(text(page), "Set up authenticator app")
    assert not Totp.objects.filter(account=ada).exists()


def test_set_up_then_turn_on_then_recovery_codes_then_next(browser, ada, bob, clock):
    sign_in(browser, ada.email)
    before = browser_session(browser)
    page = browser.post("/signin/mfa?next=%2Fthere", {"action": "enroll"})
    html = unescaped(page)
    assert page.status_code == 200
    assert re.search(
        r'<div class="qr" role="img" aria-label="QR code for your authenticator app"><svg ', html
    )
    secret = re.search(r'<code class="secret" id="totp-secret">([A-Z2-7]+)</code>', html).group(1)
    assert label_for(html, "Code") and button(html, "Turn on")
    assert browser.get("/signin/mfa?next=%2Fthere").content.decode().count(secret) == 1  # a reload: the same
    wrong = browser.post("/signin/mfa?next=%2Fthere", {"action": "confirm", "code": "000000"})
    assert "Incorrect code." in text(wrong) and secret in text(wrong)
    done = browser.post(
        "/signin/mfa?next=%2Fthere", {"action": "confirm", "code": pyotp.TOTP(secret).at(int(clock.now))}
    )
    html = text(done)
    codes = re.findall(r"<li>([a-z2-9]{5}-[a-z2-9]{5})</li>", html)
    assert len(codes) == 10
    assert '<a class="button" href="/there">Continue</a>' in html
    assert Totp.objects.get(account=ada).confirmed_at is not None
    assert not Totp.objects.filter(account=bob).exists()
    after = browser_session(browser)
    assert after.pk != before.pk and after.amr == ["pwd", "otp", "mfa"]
    assert codes[0] not in text(browser.get("/signin/mfa?next=%2Fthere"))  # shown once; now a redirect


def test_set_up_needs_a_recent_sign_in(browser, ada, settings):
    sign_in(browser, ada.email)
    Session.objects.filter(pk=browser_session(browser).pk).update(
        created_at=browser_session(browser).created_at.replace(year=2000)
    )
    response = browser.post("/signin/mfa?next=%2Fthere", {"action": "enroll"})
    assert response.status_code == 302
    assert response["Location"].startswith("/signin?next=%2Fsignin%2Fmfa%3Fnext%3D%252Fthere&login_hint=")
    assert not Totp.objects.filter(account=ada).exists()


@pytest.mark.parametrize("path", ["/signin/code", "/signin/mfa"])
def test_the_code_pages_mark_their_answers(browser, path):
    assert browser.get(path)["Content-Security-Policy"].startswith("default-src 'self'")


def test_the_second_factor_forms_keep_the_address_out_of_sight(browser, ada, clock):
    with_totp(ada, clock)
    enter_email(browser, ada.email)
    enter_password(browser, ada.email)
    html = text(browser.get(query("/signin/code", "/x")))  # no token in the page, nor in its URLs
    assert "mfa_token" not in html and "eyJ" not in html
