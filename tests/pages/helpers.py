"""Driving the hosted pages through Django's test client as a browser would: forms, CSRF tokens, the
`iam_session` cookie."""

import re
from html import unescape
from urllib.parse import urlencode

import pyotp
from django.test import Client

from authn import mfa
from authn.browser import COOKIE
from authn.models import Session
from tests.factories import PASSWORD

CSP = "default-src 'self'; img-src 'self' https:; frame-ancestors 'none'"
INCORRECT = "Incorrect email or password."
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
T0 = 1_900_000_005  # a chosen instant, 5 s into its 30-second step


def text(response) -> str:
    return response.content.decode()


def csrf_of(response) -> str:
    return CSRF_INPUT.search(text(response)).group(1)


def label_for(html: str, words: str) -> str:
    """The id of the input the `<label>` with exactly these words names (asserting it is there)."""
    found = re.search(rf'<label for="([^"]+)">{re.escape(words)}</label>', html)
    assert found, f"no <label> {words!r} in the page"
    assert re.search(rf'<input [^>]*id="{found.group(1)}"', html, re.S), f"no input for label {words!r}"
    return found.group(1)


def button(html: str, words: str) -> bool:
    return re.search(rf'<button class="[^"]*" type="submit">{re.escape(words)}</button>', html) is not None


def query(path: str, next_url: str | None = None, **params) -> str:
    values = {**({"next": next_url} if next_url is not None else {}), **params}
    return f"{path}?{urlencode(values)}" if values else path


def enter_email(client: Client, email: str, next_url: str | None = None):
    return client.post(query("/signin", next_url), {"email": email})


def enter_password(client: Client, email: str, password: str = PASSWORD, next_url: str | None = None):
    return client.post(query("/signin", next_url), {"step": "password", "email": email, "password": password})


def sign_in(client: Client, email: str, password: str = PASSWORD, next_url: str | None = None):
    enter_email(client, email, next_url)
    return enter_password(client, email, password, next_url)


def browser_session(client: Client) -> Session | None:
    """The session record the client's `iam_session` cookie names (whatever its state)."""
    cookie = client.cookies.get(COOKIE)
    if cookie is None or not cookie.value:
        return None
    return Session.objects.filter(pk=cookie.value.split(".", 1)[0]).first()


def with_totp(account, clock) -> str:
    """Turns TOTP on for the account (as `auth/mfa/totp/enroll` and `/confirm` would); its secret."""
    secret = mfa.enroll(account)["secret"]
    mfa.confirm(account, code(secret, clock.now))
    clock.now += 30  # the confirming code's step is spent
    return secret


def code(secret: str, at: float) -> str:
    return pyotp.TOTP(secret).at(int(at))


def unescaped(response) -> str:
    return unescape(text(response))
