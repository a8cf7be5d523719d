"""`/signin` (docs/pages.md): e-mail first, then the password; the API's rules (no enumeration, the
throttles, a disabled account) in page words; the browser session it starts; where it goes next."""

import re

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Account
from authn import browser as browser_module
from authn import services
from authn.models import Session
from iam.models import AuditEntry
from iam.platform import crypto
from tests.conftest import ApiClient, ok
from tests.factories import PASSWORD

from .helpers import (
    CSP,
    INCORRECT,
    browser_session,
    button,
    enter_email,
    enter_password,
    label_for,
    sign_in,
    text,
)


def test_the_email_step_labels_its_field_and_links_the_other_pages(browser):
    response = browser.get("/signin")
    html = text(response)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert label_for(html, "Email") == "id_email"
    assert button(html, "Continue")
    assert '<a href="/forgot-password">Forgot password?</a>' in html
    assert '<a href="/signup">Create account</a>' in html
    assert '<html lang="en">' in html
    assert 'name="csrfmiddlewaretoken"' in html
    # the one script, the service's own file, and no inline script or style (docs/pages.md#passkeys)
    assert re.findall(r"<script[^>]*>[^<]*</script>", html) == [
        '<script src="/static/pages/passkeys.js" defer></script>'
    ]
    assert "style=" not in html and "<style" not in html
    assert '<link rel="stylesheet" href="/static/pages/pages.css">' in html
    assert '<main id="main"' in html and 'href="#main"' in html  # the landmark and the skip link


def test_every_page_answer_carries_the_csp_and_no_framing(browser, ada):
    for response in (
        browser.get("/signin"),
        enter_email(browser, ada.email),
        enter_password(browser, ada.email, "wrong password"),
        browser.get("/signout"),
        browser.get("/signin/done"),  # a redirect: marked too
    ):
        assert response["Content-Security-Policy"] == CSP
        assert response["X-Frame-Options"] == "DENY"
        assert "no-store" in response["Cache-Control"]


def test_the_api_answers_without_a_page_csp(api):
    response = api.get("/health-check")
    assert "Content-Security-Policy" not in response


def test_an_address_without_sso_gets_the_password_step(browser, ada):
    response = enter_email(browser, ada.email)
    html = text(response)
    assert response.status_code == 200
    assert label_for(html, "Password") == "id_password"
    assert button(html, "Sign in")
    assert ada.email in html
    assert 'type="password"' in html and 'autocomplete="current-password"' in html


def test_an_invalid_address_is_told_at_its_field(browser):
    html = text(enter_email(browser, "not-an-address"))
    assert 'aria-invalid="true"' in html
    assert 'aria-describedby="id_email-error"' in html
    assert (
        '<p class="field-error" id="id_email-error">Enter an email address like name@example.com.</p>' in html
    )


def test_signing_in_starts_a_browser_session_and_goes_to_the_landing_page(browser, ada):
    response = sign_in(browser, ada.email)
    assert response.status_code == 302 and response["Location"] == "/signin/done"
    cookie = browser.cookies["iam_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and not cookie["secure"]
    assert cookie["path"] == "/"
    session_id, secret = cookie.value.split(".")
    record = Session.objects.get(pk=session_id)
    assert (record.kind, record.account_id, record.amr) == (Session.Kind.BROWSER, ada.pk, ["pwd"])
    assert record.secret_digest == crypto.digest(secret) and secret not in record.secret_digest
    assert AuditEntry.objects.filter(action="account.login", resource_id=ada.pk).exists()
    landing = browser.get("/signin/done")
    assert landing.status_code == 200 and ada.email in text(landing)
    assert button(text(landing), "Sign out")
    assert Account.objects.get(pk=ada.pk).last_login is not None


def test_the_cookie_is_secure_when_the_service_is_served_over_https(browser, ada, settings):
    settings.IAM_PUBLIC_URL = "https://id.example.com"
    sign_in(browser, ada.email)
    assert browser.cookies["iam_session"]["secure"]


def test_an_unknown_address_and_a_wrong_password_get_the_same_page(browser, other_browser, ada, monkeypatch):
    burnt = []
    real = services._burn_password_check
    monkeypatch.setattr(services, "_burn_password_check", lambda password: burnt.append(1) or real(password))
    unknown = sign_in(browser, "nobody@example.com", "some password")
    wrong = sign_in(other_browser, ada.email, "some password")
    assert burnt == [1]  # the unknown address cost a password check, as the wrong password did

    def normalized(response) -> str:
        html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", text(response))
        return html.replace("nobody@example.com", "ADDRESS").replace(ada.email, "ADDRESS")

    assert unknown.status_code == wrong.status_code == 200
    assert normalized(unknown) == normalized(wrong)
    assert INCORRECT in text(wrong)
    assert 'aria-describedby="id_password-error"' in text(wrong)
    assert "iam_session" not in browser.cookies and "iam_session" not in other_browser.cookies


def test_a_disabled_account_is_told_after_its_right_password_only(browser, other_browser, ada):
    Account.objects.filter(pk=ada.pk).update(enabled=False)
    wrong = sign_in(browser, ada.email, "some password")
    assert wrong.status_code == 200 and INCORRECT in text(wrong)
    right = sign_in(other_browser, ada.email)
    assert right.status_code == 403
    assert "This account is disabled" in text(right)
    assert right["Content-Security-Policy"] == CSP
    assert "iam_session" not in other_browser.cookies


def test_five_failures_make_the_sixth_sign_in_wait_without_checking(browser, ada, bob, settings):
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL):
        assert sign_in(browser, ada.email, "wrong password").status_code == 200
    throttled = sign_in(browser, ada.email)  # even the right password
    assert throttled.status_code == 429
    assert int(throttled["Retry-After"]) > 0
    assert "Too many attempts. Wait 15 minutes, then try again." in text(throttled)
    assert throttled["Content-Type"].startswith("text/html")
    assert "iam_session" not in browser.cookies
    assert sign_in(browser, bob.email).status_code == 302  # another address is not held up


def test_the_throttle_counts_api_and_page_failures_alike(browser, ada, settings):
    api = ApiClient()
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL - 1):
        api.call("/auth/login", {"email": ada.email, "password": "wrong"})
    sign_in(browser, ada.email, "wrong password")
    assert sign_in(browser, ada.email).status_code == 429


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example/",
        "\\\\evil.example/",
        "http:/evil.example",
        "javascript:alert(1)",
        "/\t/evil.example",
        " /signin/done",
        "evil.example",
        "",
        "/" + "a" * 2048,
    ],
)
def test_next_leaves_this_host_never(browser, ada, target):
    assert sign_in(browser, ada.email, next_url=target)["Location"] == "/signin/done"


def test_next_goes_on_to_a_path_of_this_host(browser, ada):
    target = "/oauth2/authorize?client_id=c1&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb&state=s"
    step = enter_email(browser, ada.email, next_url=target)
    assert 'action="/signin?next=%2Foauth2%2Fauthorize%3Fclient_id%3Dc1' in text(step)  # carried along
    assert enter_password(browser, ada.email, next_url=target)["Location"] == target


def test_a_second_sign_in_replaces_the_browser_session(browser, ada, bob):
    sign_in(browser, ada.email)
    first = browser_session(browser)
    sign_in(browser, bob.email)
    second = browser_session(browser)
    first.refresh_from_db()
    assert first.revoked_at is not None and second.account_id == bob.pk and second.revoked_at is None
    assert bob.email in text(browser.get("/signin/done"))


def test_login_hint_fills_the_address(browser):
    assert 'value="ada@example.com"' in text(browser.get("/signin?login_hint=ada@example.com"))


def test_the_landing_page_without_a_session_goes_to_sign_in(browser):
    response = browser.get("/signin/done")
    assert response.status_code == 302 and response["Location"] == "/signin?next=%2Fsignin%2Fdone"


def test_other_methods_are_refused(browser):
    assert browser.put("/signin").status_code == 405
    assert browser.post("/signin/done").status_code == 405


# The cookie: what makes it worth something


def test_the_cookie_holds_only_for_its_own_secret_and_account(browser, other_browser, ada, bob):
    sign_in(browser, ada.email)
    sign_in(other_browser, bob.email)
    ada_id, ada_secret = browser.cookies["iam_session"].value.split(".")
    bob_id, bob_secret = other_browser.cookies["iam_session"].value.split(".")
    for forged in (f"{ada_id}.{bob_secret}", f"{bob_id}.{ada_secret}", ada_id, f"{ada_id}.", "x.y", ""):
        thief = Client()
        thief.cookies["iam_session"] = forged
        assert thief.get("/signin/done").status_code == 302, forged
    assert ada.email in text(browser.get("/signin/done"))


@pytest.mark.parametrize("ended_by", ["disable", "revoke_all", "expiry", "sessions_revoke"])
def test_the_browser_session_ends_as_any_session_ends(browser, ada, ended_by):
    sign_in(browser, ada.email)
    record = browser_session(browser)
    if ended_by == "disable":
        Account.objects.filter(pk=ada.pk).update(enabled=False)
    elif ended_by == "revoke_all":
        ok(
            ApiClient(
                services.login(email=ada.email, password=PASSWORD, ip="", user_agent="")[1]["access_token"]
            ).call("/auth/revoke", {})
        )
    elif ended_by == "expiry":
        Session.objects.filter(pk=record.pk).update(expires_at=record.created_at)
    else:
        token = services.login(email=ada.email, password=PASSWORD, ip="", user_agent="")[1]["access_token"]
        assert ok(ApiClient(token).call("/sessions/revoke", {"id": str(record.pk)}))["revoked"] is True
    assert browser.get("/signin/done").status_code == 302


def test_current_session_reads_the_cookie_once_per_request(rf, ada, django_assert_num_queries):
    record = browser_module.sessions.open_browser_session(ada, amr=["pwd"])
    response = Client().get("/")  # any response to carry the cookie
    browser_module.start_browser_session(response, record)
    request = rf.get("/signin/done")
    request.COOKIES["iam_session"] = response.cookies["iam_session"].value
    with django_assert_num_queries(1):
        assert browser_module.current_session(request) == record
        assert browser_module.current_session(request) == record


def test_only_a_browser_session_goes_in_the_cookie(ada):
    api_session = Session.objects.create(account=ada, expires_at=timezone.now(), session_version=0)
    with pytest.raises(ValueError, match="only a browser session"):
        browser_module.start_browser_session(Client().get("/"), api_session)


def test_the_page_speaks_the_first_of_the_browsers_languages_the_service_has(browser, settings):
    assert '<html lang="en">' in text(browser.get("/signin", headers={"Accept-Language": "fr, de;q=0.8"}))
    settings.LANGUAGES = [("en", "English"), ("de", "Deutsch")]
    page = browser.get("/signin", headers={"Accept-Language": "fr, de;q=0.8"})
    assert '<html lang="de">' in text(page)  # the text stays English until a German catalogue is shipped
    assert "Accept-Language" in page["Vary"]
