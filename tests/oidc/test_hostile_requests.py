"""No request to the OpenID Provider's endpoints answers 500, however malformed (docs/api.md#conventions): odd
characters, repeated or missing parameters, JSON where a form belongs, the wrong method, huge values."""

import pytest
from django.test import Client

from tests.oidc.conftest import basic, request_for, sign_in

ODD = ['"', "\\", "é", "\x00", "a" * 5000, "%", "<script>", "\u2028"]


@pytest.mark.parametrize("value", ODD)
def test_the_authorization_endpoint_never_answers_500(client, world, value):
    sign_in(client, world.alice)
    base = request_for(world.crm).params
    for name in (*base, "prompt", "max_age", "workspace", "login_hint", "signed_in_after"):
        for params in ({**base, name: value}, {**base, name: [value, value]}):
            response = client.get("/oauth2/authorize", params)
            assert response.status_code < 500, (name, value, response.content[:300])
            response = client.post("/oauth2/authorize", {"consent": value, "workspace": value})
            assert response.status_code < 500, (name, value)


@pytest.mark.parametrize("value", ODD)
def test_the_token_endpoints_never_answer_500(world, value):
    anonymous = Client()
    fields = (
        "grant_type",
        "code",
        "redirect_uri",
        "code_verifier",
        "client_id",
        "client_secret",
        "refresh_token",
    )
    for path in ("/oauth2/token", "/oauth2/revoke", "/oauth2/introspect"):
        for name in (*fields, "token", "token_type_hint", "scope"):
            for grant in ("authorization_code", "refresh_token", value):
                body = {"grant_type": grant, name: value, "token": "x"}
                for extra in ({}, basic(world.portal), {"HTTP_AUTHORIZATION": f"Basic {value}"}):
                    response = anonymous.post(path, body, **extra)
                    assert response.status_code < 500, (path, name, value, response.content[:300])
        response = anonymous.post(
            path, '{"grant_type": "authorization_code"}', content_type="application/json"
        )
        assert response.status_code < 500
        assert anonymous.put(path).status_code == 405
    for header in (f"Bearer {value}", value, "Bearer", ""):
        assert anonymous.get("/oauth2/userinfo", HTTP_AUTHORIZATION=header).status_code == 401


@pytest.mark.parametrize("value", ODD)
def test_logout_never_answers_500(client, world, value):
    sign_in(client, world.bob)
    for name in ("id_token_hint", "post_logout_redirect_uri", "state", "client_id", "ui_locales"):
        assert client.get("/oauth2/logout", {name: value}).status_code < 500


def test_bytes_that_are_not_utf8_never_answer_500(client, world):
    """A lone surrogate or a stray byte, percent-encoded as no test client would send it."""
    sign_in(client, world.alice)
    for raw in ("%ED%A0%80", "%FF", "%C3"):
        for name in ("client_id", "redirect_uri", "state", "response_type", "scope", "nonce"):
            query = f"response_type=code&{name}={raw}&client_id={world.crm.client_id}"
            assert client.get(f"/oauth2/authorize?{query}").status_code < 500
            assert client.get(f"/oauth2/logout?id_token_hint={raw}&state={raw}").status_code < 500
        body = f"grant_type=authorization_code&code={raw}&client_id={raw}&redirect_uri={raw}"
        response = Client().post("/oauth2/token", body, content_type="application/x-www-form-urlencoded")
        assert response.status_code < 500
