"""`/account` (docs/pages.md#the-account-page) through Django's test client: signed out it sends to
`/signin` and back; the name and address; the password change (the API's rules: a login's throttles, the
password rules, every session ends, this browser goes on); the sessions, each ended by its button (another
than this browser's after a recent sign-in, asked by a password prompt); the authenticator app set up,
turned on and off; the applications' consents revoked; the workspaces. Two accounts throughout: one
never sees nor ends the other's sessions or consents."""

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client

from authn import mfa
from authn.models import Session, Totp
from authn.sessions import issue_session
from oidc import services as oidc_services
from oidc.models import Consent
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, MembershipFactory, RoleFactory, WorkspaceFactory
from tests.oidc.conftest import make_app

from .helpers import CSP, browser_session, code, label_for, sign_in, text, unescaped, with_totp

NEW_PASSWORD = "a-brand-new-passphrase"
UNAUTHORIZED = "Authentication required or invalid credentials."


def button(html: str, words: str) -> bool:
    """A submit button of exactly these words (its other attributes whatever they are)."""
    return re.search(rf'<button [^>]*type="submit"[^>]*>{re.escape(words)}</button>', html) is not None


def signed_in(client: Client, account) -> Session:
    response = sign_in(client, account.email)
    assert response.status_code == 302, text(response)
    return browser_session(client)


def api_session(account, user_agent: str = "curl/8.5") -> dict:
    """An API login's session (as `auth/login` starts one), with its tokens."""
    return issue_session(account, amr=["pwd"], ip="198.51.100.7", user_agent=user_agent)


def age(session: Session, seconds: int) -> None:
    """The sign-in that started the session happened `seconds` ago (its `auth_time`)."""
    Session.objects.filter(pk=session.pk).update(created_at=session.created_at - timedelta(seconds=seconds))


def stale(session: Session) -> None:
    age(session, settings.IAM_REAUTH_SECONDS + 60)


def sid_of(pair: dict) -> str:
    import jwt

    return jwt.decode(pair["access_token"], options={"verify_signature": False})["sid"]


# Signed out, the page and its layout


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/account"),
        ("get", "/account/confirm"),
        ("post", "/account/password"),
        ("post", "/account/sessions/end"),
        ("post", "/account/totp/set-up"),
        ("post", "/account/totp/turn-on"),
        ("post", "/account/totp/turn-off"),
        ("post", "/account/applications/revoke"),
    ],
)
def test_signed_out_goes_to_sign_in_and_back(browser, method, path):
    response = getattr(browser, method)(path)
    assert response.status_code == 302 and response["Location"] == "/signin?next=%2Faccount"


def test_the_page_shows_who_is_signed_in_with_labels_and_the_page_headers(browser, ada, bob):
    signed_in(browser, ada)
    response = browser.get("/account")
    html = text(response)
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CSP and "no-store" in response["Cache-Control"]
    assert '<html lang="en">' in html
    # the one script, the service's own file (Add a passkey, docs/pages.md#passkeys), nothing inline
    assert re.findall(r"<script[^>]*>[^<]*</script>", html) == [
        '<script src="/static/pages/passkeys.js" defer></script>'
    ]
    assert ada.email in html and ada.name in html and bob.email not in html
    assert label_for(html, "Current password") == "id_current_password"
    assert label_for(html, "New password") == "id_new_password"
    assert button(html, "Change password") and button(html, "Set up authenticator app")


def test_a_signed_out_browser_session_is_signed_out_for_the_page_too(browser, ada):
    session = signed_in(browser, ada)
    Session.objects.filter(pk=session.pk).update(revoked_at=session.created_at)
    assert browser.get("/account")["Location"] == "/signin?next=%2Faccount"


def test_every_post_needs_its_csrf_token(browser, ada):
    signed_in(browser, ada)
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = browser.cookies  # signed in, without the page's token
    for path in (
        "/account/confirm",
        "/account/password",
        "/account/sessions/end",
        "/account/totp/set-up",
        "/account/totp/turn-on",
        "/account/totp/turn-off",
        "/account/applications/revoke",
    ):
        response = strict.post(path, {})
        assert response.status_code == 403 and "This page has expired" in text(response), path


# Password


def change(client: Client, current: str = PASSWORD, new: str = NEW_PASSWORD):
    return client.post("/account/password", {"current_password": current, "new_password": new})


def test_changing_the_password_ends_every_other_session_and_keeps_this_browser(browser, other_browser, ada):
    before = signed_in(browser, ada)
    elsewhere = signed_in(other_browser, ada)
    api = api_session(ada)
    response = change(browser)
    assert response.status_code == 302 and response["Location"] == "/account?done=password"
    now = browser_session(browser)
    assert now.pk != before.pk and Session.objects.live().filter(pk=now.pk).exists()
    assert not Session.objects.live().filter(pk__in=[before.pk, elsewhere.pk]).exists()
    err(ApiClient(api["access_token"]).call("/sessions/list"), 401, UNAUTHORIZED)
    assert other_browser.get("/account")["Location"] == "/signin?next=%2Faccount"
    page = browser.get(response["Location"])
    assert "Your password is changed. Every other session is signed out." in text(page)
    err(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}), 401)
    ok(ApiClient().call("/auth/login", {"email": ada.email, "password": NEW_PASSWORD}))


def test_a_wrong_current_password_is_told_at_its_field_and_counted_as_a_login_failure(browser, ada):
    signed_in(browser, ada)
    response = change(browser, current="not-my-password")
    html = text(response)
    assert response.status_code == 400 and "Incorrect password." in html
    assert 'aria-describedby="id_current_password-error"' in html
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL - 1):
        assert change(browser, current="not-my-password").status_code == 400
    waited = change(browser)  # the right one too: the limit is reached
    assert waited.status_code == 429 and "Retry-After" in waited and "Too many attempts" in text(waited)
    err(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}), 429)
    assert ada.__class__.objects.get(pk=ada.pk).check_password(PASSWORD)


def test_the_new_password_meets_the_apis_rules(browser, ada):
    signed_in(browser, ada)
    short = change(browser, new="short")
    assert short.status_code == 400 and "Use at least 8 characters." in text(short)
    assert 'aria-describedby="id_new_password-error"' in text(short)
    common = change(browser, new="password123")
    assert common.status_code == 400 and "This password is too common." in text(common)
    assert browser_session(browser).revoked_at is None  # nothing changed
    ok(ApiClient().call("/auth/login", {"email": ada.email, "password": PASSWORD}))


def test_an_account_without_a_password_is_offered_none_to_change(browser, ada):
    signed_in(browser, ada)
    ada.set_unusable_password()
    ada.save(update_fields=["password"])
    html = text(browser.get("/account"))
    assert "Current password" not in html and '<a href="/forgot-password">Set a password</a>' in html
    assert change(browser).status_code == 302


# Sessions


def rows(html: str) -> dict[str, str]:
    return dict(re.findall(r'<li class="row" id="session-([0-9a-f-]+)">(.*?)</li>', html, re.S))


def end(client: Client, session_id) -> object:
    return client.post("/account/sessions/end", {"id": str(session_id)})


def test_sessions_are_listed_with_their_device_address_and_times_and_this_device_marked(browser, ada, bob):
    mine = signed_in(browser, ada)
    api = api_session(ada, user_agent="ExampleApp/2.1 (Linux)")
    marked_up = api_session(ada, user_agent='<img src=x onerror="alert(1)">')
    theirs = api_session(bob)
    listed = rows(text(browser.get("/account")))
    assert set(listed) == {str(mine.pk), sid_of(api), sid_of(marked_up)}
    assert "<img" not in listed[sid_of(marked_up)] and "&lt;img src=x" in listed[sid_of(marked_up)]
    assert sid_of(theirs) not in listed
    assert "This device" in listed[str(mine.pk)] and "This device" not in listed[sid_of(api)]
    assert "ExampleApp/2.1 (Linux)" in listed[sid_of(api)] and "198.51.100.7" in listed[sid_of(api)]
    assert "Started" in listed[sid_of(api)] and "Last used" in listed[sid_of(api)]
    assert button(listed[sid_of(api)], "Sign out")


def test_ending_another_session_refuses_its_tokens_and_keeps_this_one(browser, ada):
    signed_in(browser, ada)
    api = api_session(ada)
    other = api_session(ada)
    response = end(browser, sid_of(api))
    assert response.status_code == 302 and response["Location"] == "/account?done=session"
    err(ApiClient(api["access_token"]).call("/sessions/list"), 401, UNAUTHORIZED)
    ok(ApiClient(other["access_token"]).call("/sessions/list"))
    assert "That session is signed out." in text(browser.get(response["Location"]))


def test_another_accounts_session_is_neither_listed_nor_ended(browser, ada, bob):
    signed_in(browser, ada)
    theirs = api_session(bob)
    response = end(browser, sid_of(theirs))
    assert response.status_code == 404 and "That item was not found." in text(response)
    ok(ApiClient(theirs["access_token"]).call("/sessions/list"))
    assert end(browser, "not-a-uuid").status_code == 404


def test_an_operator_ends_only_their_own_sessions_here(browser, ada, bob):
    ada.is_superuser = True
    ada.save(update_fields=["is_superuser"])
    signed_in(browser, ada)
    theirs = api_session(bob)
    assert end(browser, sid_of(theirs)).status_code == 404
    ok(ApiClient(theirs["access_token"]).call("/sessions/list"))


def test_ending_another_session_after_an_old_sign_in_asks_the_password_first(browser, ada):
    session = signed_in(browser, ada)
    api = api_session(ada)
    stale(session)
    asked = end(browser, sid_of(api))
    assert asked.status_code == 302 and asked["Location"] == "/account/confirm?next=%2Faccount"
    ok(ApiClient(api["access_token"]).call("/sessions/list"))  # nothing ended yet
    prompt = browser.get(asked["Location"])
    assert label_for(text(prompt), "Password") == "id_password" and button(text(prompt), "Continue")
    wrong = browser.post(asked["Location"], {"password": "not-my-password"})
    assert wrong.status_code == 400 and "Incorrect password." in text(wrong)
    right = browser.post(asked["Location"], {"password": PASSWORD})
    assert right.status_code == 302 and right["Location"] == "/account"
    renewed = browser_session(browser)
    assert renewed.pk != session.pk and renewed.amr == ["pwd"]
    assert Session.objects.get(pk=session.pk).revoked_at is not None
    assert end(browser, sid_of(api))["Location"] == "/account?done=session"
    err(ApiClient(api["access_token"]).call("/sessions/list"), 401, UNAUTHORIZED)


def test_signing_out_this_device_from_its_row_ends_the_browser_session(browser, ada):
    session = signed_in(browser, ada)
    stale(session)  # no recent sign-in needed to sign oneself out
    response = end(browser, session.pk)
    assert response.status_code == 200 and "You are signed out" in text(response)
    assert Session.objects.get(pk=session.pk).revoked_at is not None
    assert browser.get("/account").status_code == 302


# The second factor


def set_up(client: Client) -> tuple[str, object]:
    page = client.post("/account/totp/set-up")
    secret = re.search(r'<code class="secret" id="totp-secret">([A-Z2-7]+)</code>', text(page)).group(1)
    return secret, page


def test_setting_up_the_authenticator_app_shows_a_qr_code_and_the_secret_then_the_recovery_codes(
    browser, ada, clock
):
    before = signed_in(browser, ada)
    secret, page = set_up(browser)
    html = text(page)
    assert page.status_code == 200 and page["Content-Security-Policy"] == CSP
    assert re.search(r'<div class="qr" role="img" aria-label="[^"]+"><svg ', html)
    assert label_for(html, "Code") == "id_code" and button(html, "Turn on")
    assert 'action="/account/totp/turn-on"' in html and '<a href="/account">Cancel</a>' in html
    wrong = browser.post("/account/totp/turn-on", {"code": "000000"})
    assert wrong.status_code == 400 and "Incorrect code." in text(wrong) and secret in text(wrong)
    assert not mfa.has_totp(ada)
    on = browser.post("/account/totp/turn-on", {"code": code(secret, clock.now)})
    codes = re.findall(r"<li>([a-z2-9]{5}-[a-z2-9]{5})</li>", text(on))
    assert on.status_code == 200 and len(codes) == 10
    assert '<a class="button" href="/account">Continue</a>' in text(on)
    assert mfa.has_totp(ada)
    stepped = browser_session(browser)
    assert stepped.pk != before.pk and stepped.amr == ["pwd", "otp", "mfa"]
    page = text(browser.get("/account"))
    assert button(page, "Turn off") and not button(page, "Set up authenticator app")
    assert codes[0] not in page  # shown once


def test_setting_up_after_an_old_sign_in_asks_the_password_first(browser, ada):
    stale(signed_in(browser, ada))
    response = browser.post("/account/totp/set-up")
    assert response["Location"] == "/account/confirm?next=%2Faccount"
    assert not Totp.objects.filter(account=ada).exists()


def test_an_old_sign_in_cannot_read_or_turn_on_a_pending_set_up(browser, ada, clock):
    session = signed_in(browser, ada)
    secret, _ = set_up(browser)
    stale(session)
    for entry in ("000000", code(secret, clock.now)):
        response = browser.post("/account/totp/turn-on", {"code": entry})
        assert response["Location"] == "/account/confirm?next=%2Faccount" and secret not in text(response)
    assert not mfa.has_totp(ada)


def test_the_password_prompt_has_the_logins_throttle(browser, ada):
    stale(signed_in(browser, ada))
    for _ in range(settings.IAM_LOGIN_FAILURES_PER_EMAIL):
        assert browser.post("/account/confirm", {"password": "not-my-password"}).status_code == 400
    waited = browser.post("/account/confirm", {"password": PASSWORD})
    assert waited.status_code == 429 and int(waited["Retry-After"]) > 0
    assert browser.post("/account/totp/set-up")["Location"] == "/account/confirm?next=%2Faccount"


def test_turning_off_with_a_code_ends_every_other_session(browser, ada, clock):
    secret = with_totp(ada, clock)
    browser.post("/signin", {"email": ada.email})
    browser.post("/signin", {"step": "password", "email": ada.email, "password": PASSWORD})
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    clock.now += 30
    mine = browser_session(browser)
    api = api_session(ada)
    wrong = browser.post("/account/totp/turn-off", {"code": "000000"})
    assert wrong.status_code == 400 and "Incorrect code." in text(wrong) and mfa.has_totp(ada)
    response = browser.post("/account/totp/turn-off", {"code": code(secret, clock.now)})
    assert response["Location"] == "/account?done=totp-off"
    assert not mfa.has_totp(ada)
    err(ApiClient(api["access_token"]).call("/sessions/list"), 401, UNAUTHORIZED)
    assert browser_session(browser).pk == mine.pk and Session.objects.live().filter(pk=mine.pk).exists()
    assert "Your authenticator app is turned off." in unescaped(browser.get(response["Location"]))


def test_turning_off_takes_a_recovery_code_too(browser, ada, clock):
    secret = mfa.enroll(ada)["secret"]
    recovery = mfa.confirm(ada, code(secret, clock.now))["recovery_codes"]
    clock.now += 30
    signed_in(browser, ada)  # the password step, then the code
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    response = browser.post("/account/totp/turn-off", {"code": recovery[0]})
    assert response["Location"] == "/account?done=totp-off" and not mfa.has_totp(ada)


def test_turning_off_after_an_old_sign_in_asks_the_password_first(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email)
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    clock.now += 30
    stale(browser_session(browser))
    response = browser.post("/account/totp/turn-off", {"code": code(secret, clock.now)})
    assert response["Location"] == "/account/confirm?next=%2Faccount" and mfa.has_totp(ada)


def test_without_a_password_the_recent_sign_in_is_asked_by_a_code(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email)
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    clock.now += 30
    session = browser_session(browser)
    ada.set_unusable_password()
    ada.save(update_fields=["password"])
    stale(session)
    prompt = text(browser.get("/account/confirm?next=/account"))
    assert label_for(prompt, "Code") == "id_code" and "Password" not in prompt
    right = browser.post("/account/confirm?next=/account", {"code": code(secret, clock.now)})
    assert right["Location"] == "/account"
    renewed = browser_session(browser)
    assert renewed.pk != session.pk and renewed.amr == ["pwd", "otp", "mfa"]
    assert renewed.auth_time > Session.objects.get(pk=session.pk).auth_time  # signed in again now
    assert Session.objects.get(pk=session.pk).revoked_at is not None


def test_five_wrong_codes_give_a_wait(browser, ada, clock):
    secret = with_totp(ada, clock)
    sign_in(browser, ada.email)
    browser.post("/signin/code", {"code": code(secret, clock.now)})
    for _ in range(settings.IAM_MFA_FAILURES_PER_ACCOUNT):
        assert browser.post("/account/totp/turn-off", {"code": "000000"}).status_code == 400
    waited = browser.post("/account/totp/turn-off", {"code": code(secret, clock.now + 30)})
    assert waited.status_code == 429 and mfa.has_totp(ada)


# Applications and workspaces


@pytest.fixture
def tenants(root, ada, bob):
    acme = WorkspaceFactory(name="Acme Corp", slug="acme")
    globex = WorkspaceFactory(name="Globex Inc", slug="globex")
    MembershipFactory(account=ada, workspace=acme, roles=[RoleFactory(workspace=acme, name="editor")])
    MembershipFactory(account=bob, workspace=globex, roles=[RoleFactory(workspace=globex)])
    crm = make_app(acme, "Acme CRM").application
    wiki = make_app(globex, "Globex Wiki").application
    return {
        "acme": acme,
        "globex": globex,
        "ada": oidc_services.grant_consent(ada, crm, scopes=["openid", "email"]),
        "bob": oidc_services.grant_consent(bob, wiki, scopes=["openid"]),
    }


def test_applications_and_workspaces_are_the_accounts_own(browser, ada, tenants):
    signed_in(browser, ada)
    html = unescaped(browser.get("/account"))
    assert "Acme CRM" in html and "Globex Wiki" not in html
    assert button(html, "Revoke access")
    workspaces = html.split('id="workspaces-heading"')[1]
    assert "Acme Corp" in workspaces and "editor" in workspaces and "Globex Inc" not in workspaces


def test_revoking_access_removes_the_consent_and_ends_the_applications_sessions(browser, ada, tenants):
    signed_in(browser, ada)
    consent = tenants["ada"]
    app_session = Session.objects.create(
        account=ada,
        expires_at=browser_session(browser).expires_at,
        session_version=ada.session_version,
        application_id=consent.application_id,
    )
    assert "Acme CRM" in rows(unescaped(browser.get("/account")))[str(app_session.pk)]  # its row says whose
    response = browser.post("/account/applications/revoke", {"id": str(consent.pk)})
    assert response["Location"] == "/account?done=revoked"
    assert not Consent.objects.filter(pk=consent.pk).exists()
    assert Session.objects.get(pk=app_session.pk).revoked_at is not None
    assert not oidc_services.consent_covers(ada, consent.application, ["openid"])
    assert "The application's access is revoked." in unescaped(browser.get(response["Location"]))


def test_another_accounts_consent_cannot_be_revoked(browser, ada, tenants):
    signed_in(browser, ada)
    theirs = tenants["bob"]
    response = browser.post("/account/applications/revoke", {"id": str(theirs.pk)})
    assert response.status_code == 404
    assert Consent.objects.filter(pk=theirs.pk).exists()
