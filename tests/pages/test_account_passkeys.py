"""The account page's passkeys (docs/pages.md#passkeys), through Django's test client with the software
authenticator doing the script's part: `Passkey name` and `Add a passkey`, a `Remove` per passkey, a
recent sign-in for both, only the account's own passkeys. Two accounts, two browsers."""

import json
import re

import pytest

from authn import passkeys
from authn.models import Passkey
from tests.authn.soft_authenticator import SoftAuthenticator

from .helpers import button, label_for, sign_in, text

PAGE = "/account"


def add_passkey(client, key: SoftAuthenticator, name: str = "Laptop"):
    response = client.post("/account/passkeys/options")
    assert response.status_code == 200, response.content
    credential = key.create(response.json())
    return client.post("/account/passkeys/add", {"name": name, "credential": json.dumps(credential)})


@pytest.fixture
def ada_browser(browser, ada):
    sign_in(browser, ada.email)
    return browser


def test_signed_out_goes_to_sign_in_and_back(browser):
    response = browser.get(PAGE)
    assert response.status_code == 302 and response["Location"] == "/signin?next=%2Faccount"
    assert browser.post("/account/passkeys/options").status_code == 302


def test_the_section_lists_the_accounts_own_passkeys(ada_browser, ada, bob):
    passkeys.register(
        bob,
        SoftAuthenticator().create(passkeys.registration_options(bob, session_id=None)),
        name="Bob's phone",
        session_id=None,
    )
    assert add_passkey(ada_browser, SoftAuthenticator(), "Ada's laptop").status_code == 302
    html = text(ada_browser.get(PAGE))
    assert label_for(html, "Passkey name")
    assert button(html, "Add a passkey")
    assert "Ada&#x27;s laptop" in html and "Bob&#x27;s phone" not in html
    remove = r'<button class="[^"]*" type="submit" aria-describedby="passkey-[^"]+-name">Remove</button>'
    assert len(re.findall(remove, html)) == 1
    assert '<script src="/static/pages/passkeys.js" defer></script>' in html


def test_add_a_passkey(ada_browser, ada):
    response = add_passkey(ada_browser, SoftAuthenticator(), "Laptop")
    assert response.status_code == 302 and response["Location"] == f"{PAGE}?done=passkey-added"
    assert Passkey.objects.get(account=ada).name == "Laptop"
    assert "Your passkey is added." in text(ada_browser.get(response["Location"]))


def test_add_needs_a_name(ada_browser, ada):
    options = ada_browser.post("/account/passkeys/options").json()
    credential = json.dumps(SoftAuthenticator().create(options))
    response = ada_browser.post("/account/passkeys/add", {"name": "", "credential": credential})
    assert response.status_code == 400 and 'aria-invalid="true"' in text(response)
    assert not Passkey.objects.exists()


def test_a_challenge_of_another_session_adds_nothing(ada_browser, other_browser, ada):
    sign_in(other_browser, ada.email)
    options = other_browser.post("/account/passkeys/options").json()
    credential = json.dumps(SoftAuthenticator().create(options))
    response = ada_browser.post("/account/passkeys/add", {"name": "x", "credential": credential})
    assert response.status_code == 400 and "That passkey was not added." in text(response)
    assert not Passkey.objects.exists()


def test_adding_and_removing_need_a_recent_sign_in(ada_browser, ada, settings):
    add_passkey(ada_browser, SoftAuthenticator())
    passkey = Passkey.objects.get(account=ada)
    settings.IAM_REAUTH_SECONDS = -1
    assert ada_browser.post("/account/passkeys/options").json() == {
        "redirect": "/account/confirm?next=%2Faccount"
    }
    response = ada_browser.post("/account/passkeys/remove", {"id": str(passkey.pk)})
    assert response.status_code == 302 and response["Location"] == "/account/confirm?next=%2Faccount"
    assert Passkey.objects.filter(pk=passkey.pk).exists()


def test_remove_own_only(ada_browser, ada, bob):
    passkeys.register(
        bob,
        SoftAuthenticator().create(passkeys.registration_options(bob, session_id=None)),
        name="Bob's phone",
        session_id=None,
    )
    add_passkey(ada_browser, SoftAuthenticator())
    bobs = Passkey.objects.get(account=bob)
    response = ada_browser.post("/account/passkeys/remove", {"id": str(bobs.pk)})
    assert response.status_code == 404 and Passkey.objects.filter(pk=bobs.pk).exists()
    assert ada_browser.post("/account/passkeys/remove", {"id": "nope"}).status_code == 404
    adas = Passkey.objects.get(account=ada)
    response = ada_browser.post("/account/passkeys/remove", {"id": str(adas.pk)})
    assert response.status_code == 302 and response["Location"] == f"{PAGE}?done=passkey-removed"
    assert not Passkey.objects.filter(pk=adas.pk).exists()
