"""CSRF on the hosted pages: every POST carries the form's token, else a page of its own with status 403;
the API's endpoints stay exempt (Bearer tokens, no cookie), and the admin keeps working."""

import pytest
from django.test import Client

from tests.conftest import ok
from tests.factories import PASSWORD

from .helpers import CSP, csrf_of, text


@pytest.fixture
def strict(db) -> Client:
    return Client(enforce_csrf_checks=True)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/signin", {"email": "ada@example.com"}),
        ("/signin", {"step": "password", "email": "ada@example.com", "password": PASSWORD}),
        ("/signin/code", {"code": "123456"}),
        ("/signin/mfa", {"action": "enroll"}),
        ("/signout", {}),
    ],
)
def test_a_post_without_its_token_is_refused_with_a_page(strict, ada, path, body):
    response = strict.post(path, body)
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert response["Content-Security-Policy"] == CSP
    assert "This page has expired" in text(response)
    assert '<html lang="en">' in text(response)
    assert "iam_session" not in strict.cookies


def test_a_post_with_its_token_signs_in(strict, ada):
    token = csrf_of(strict.get("/signin"))
    step = strict.post("/signin", {"email": ada.email, "csrfmiddlewaretoken": token})
    body = {
        "step": "password",
        "email": ada.email,
        "password": PASSWORD,
        "csrfmiddlewaretoken": csrf_of(step),
    }
    assert strict.post("/signin", body).status_code == 302
    token = csrf_of(strict.get("/signout"))
    assert strict.post("/signout", {"csrfmiddlewaretoken": token}).status_code == 200


def test_a_token_from_another_browser_is_refused(strict, ada):
    other = Client(enforce_csrf_checks=True)
    token = csrf_of(other.get("/signin"))
    strict.get("/signin")
    assert strict.post("/signin", {"email": ada.email, "csrfmiddlewaretoken": token}).status_code == 403


def test_signing_out_needs_the_token_too(ada):
    browser = Client(enforce_csrf_checks=True)
    token = csrf_of(browser.get("/signin"))
    step = browser.post("/signin", {"email": ada.email, "csrfmiddlewaretoken": token})
    body = {
        "step": "password",
        "email": ada.email,
        "password": PASSWORD,
        "csrfmiddlewaretoken": csrf_of(step),
    }
    browser.post("/signin", body)
    assert browser.post("/signout").status_code == 403  # a cross-site form cannot sign anyone out
    assert browser.get("/signin/done").status_code == 200


def test_the_api_stays_exempt_with_cookies_present(strict, ada):
    strict.get("/signin")  # the browser holds a CSRF cookie now
    response = strict.post(
        "/auth/login", {"email": ada.email, "password": PASSWORD}, content_type="application/json"
    )
    assert "access_token" in ok(response)


def test_the_admin_login_still_takes_its_token(strict, operator):
    token = csrf_of(strict.get("/admin/login/"))
    body = {"username": operator.email, "password": PASSWORD, "csrfmiddlewaretoken": token}
    assert strict.post("/admin/login/?next=/admin/", body).status_code == 302
    assert strict.post("/admin/logout/").status_code == 403
