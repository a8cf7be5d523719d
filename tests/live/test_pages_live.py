"""The hosted sign-in pages as deployed (gunicorn, DEBUG off, collected static files, secure CSRF cookie):
a person signs in with the page's forms, the browser session is one of the account's sessions, and
signing out ends it; the stylesheet comes from the manifest; a POST without its CSRF token is a page."""

import re

import requests

from tests.live.api import ok
from tests.live.conftest import PASSWORD

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
CSP = "default-src 'self'; img-src 'self' https:; frame-ancestors 'none'"


class PageBrowser:
    """A browser on the pages. The CSRF cookie is `Secure` (DEBUG off) and the live layer speaks plain
    HTTP on loopback, so it keeps the cookies itself, as a browser behind TLS would."""

    def __init__(self, live):
        self.live = live
        self.cookies: dict[str, str] = {}
        self.set: dict[str, requests.cookies.Cookie] = {}

    def request(self, method: str, path: str, data: dict | None = None) -> requests.Response:
        headers = {"Cookie": "; ".join(f"{name}={value}" for name, value in self.cookies.items())}
        response = requests.request(
            method, f"{self.live.url}{path}", data=data, headers=headers, allow_redirects=False, timeout=30
        )
        for cookie in response.cookies:
            self.set[cookie.name] = cookie
            self.cookies[cookie.name] = cookie.value
        for header in response.raw.headers.getlist("Set-Cookie"):  # a deletion (the jar drops it unseen)
            if "Max-Age=0" in header:
                self.cookies.pop(header.split("=", 1)[0], None)
        return response

    def form(self, path: str, fields: dict, page: requests.Response | None = None) -> requests.Response:
        page = page or self.request("GET", path)
        token = TOKEN.search(page.text).group(1)
        return self.request("POST", path, {**fields, "csrfmiddlewaretoken": token})


def test_a_person_signs_in_and_out_through_the_pages(live):
    person = live.register()
    email, token = person["account"]["email"], person["access_token"]
    browser = PageBrowser(live)

    page = browser.request("GET", "/signin")
    assert page.status_code == 200 and page.headers["Content-Security-Policy"] == CSP
    assert browser.set["csrftoken"].secure  # DEBUG off
    stylesheet = re.search(r'<link rel="stylesheet" href="(/static/pages/pages\.[0-9a-f]+\.css)">', page.text)
    assert stylesheet, page.text[:1000]  # the manifest's name: cached for ever, changed with the file
    css = requests.get(f"{live.url}{stylesheet.group(1)}", timeout=10)
    assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")

    step = browser.form("/signin", {"email": email}, page)
    assert 'for="id_password">Password</label>' in step.text
    signed_in = browser.form("/signin", {"step": "password", "email": email, "password": PASSWORD}, step)
    assert signed_in.status_code == 302 and signed_in.headers["Location"] == "/signin/done"
    cookie = browser.set["iam_session"]
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite") == "Lax"
    assert email in browser.request("GET", "/signin/done").text

    sessions = ok(live.post("/sessions/list", {}, token=token))["sessions"]
    browser_session = browser.cookies["iam_session"].split(".")[0]
    assert browser_session in [session["id"] for session in sessions]
    assert browser.cookies["iam_session"].split(".")[1] not in str(sessions)

    refused = browser.request("POST", "/signout")  # no CSRF token
    assert refused.status_code == 403 and "This page has expired" in refused.text
    assert refused.headers["Content-Security-Policy"] == CSP
    out = browser.form("/signout", {})
    assert out.status_code == 200 and "You are signed out" in out.text
    assert "iam_session" not in browser.cookies
    assert browser.request("GET", "/signin/done").status_code == 302
    listed = ok(live.post("/sessions/list", {}, token=token))["sessions"]
    assert [session["id"] for session in listed] == [
        session["id"] for session in sessions if session["id"] != browser_session
    ]
