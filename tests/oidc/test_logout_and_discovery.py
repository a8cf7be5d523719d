"""`/oauth2/logout` (OpenID Connect RP-Initiated Logout 1.0) and `/.well-known/openid-configuration`
(OpenID Connect Discovery 1.0), as docs/oidc.md words them."""

from urllib.parse import parse_qs, urlsplit

from authlib.oidc.discovery import OpenIDProviderMetadata
from django.conf import settings
from django.test import Client

from authn import browser
from authn.models import Session
from oidc.models import Consent
from tests.conftest import ApiClient, ok
from tests.factories import ClientFactory
from tests.oidc.conftest import authorize, code_of, exchange, sign_in, signed_in_tokens


def test_discovery_names_every_endpoint_exactly(db):
    response = Client().get("/.well-known/openid-configuration")
    assert response.status_code == 200
    document = response.json()
    issuer = settings.IAM_PUBLIC_URL
    assert document["issuer"] == issuer
    assert {
        name: document[name] for name in document if name.endswith("_endpoint") or name == "jwks_uri"
    } == {
        "authorization_endpoint": f"{issuer}/oauth2/authorize",
        "token_endpoint": f"{issuer}/oauth2/token",
        "userinfo_endpoint": f"{issuer}/oauth2/userinfo",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "revocation_endpoint": f"{issuer}/oauth2/revoke",
        "introspection_endpoint": f"{issuer}/oauth2/introspect",
        "end_session_endpoint": f"{issuer}/oauth2/logout",
    }
    assert document["response_types_supported"] == ["code"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["token_endpoint_auth_methods_supported"] == [
        "client_secret_basic",
        "client_secret_post",
        "none",
    ]
    assert document["subject_types_supported"] == ["public"]
    assert document["id_token_signing_alg_values_supported"][0] == "RS256"
    assert document["scopes_supported"] == ["openid", "profile", "email", "offline_access"]
    assert document["authorization_response_iss_parameter_supported"] is True
    assert {"authorization_code", "refresh_token"} <= set(document["grant_types_supported"])
    assert {"sub", "sid", "amr", "workspace_id", "email", "name"} <= set(document["claims_supported"])
    OpenIDProviderMetadata(document).validate()  # Authlib's own reading of OpenID Connect Discovery


def test_the_jwks_publishes_the_key_id_tokens_are_signed_with(db):
    keys = Client().get("/.well-known/jwks.json").json()["keys"]
    assert any(key["alg"] == "RS256" and key["kty"] == "RSA" for key in keys)


def test_a_valid_id_token_hint_ends_the_browser_session_and_its_applications_then_redirects(client, world):
    tokens = signed_in_tokens(client, world.portal, world.alice, workspace="acme")
    Consent.objects.create(
        account=world.alice,
        application=world.crm.application,
        scopes=["openid", "email", "profile", "offline_access"],
    )
    asked, response = authorize(client, world.crm)
    crm = exchange(Client(), asked, code_of(response, asked)).json()
    response = client.get(
        "/oauth2/logout",
        {
            "id_token_hint": tokens["id_token"],
            "post_logout_redirect_uri": "https://portal.example.com/bye",
            "state": "s-1",
        },
    )
    assert response.status_code == 302
    parts = urlsplit(response["Location"])
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == "https://portal.example.com/bye"
    assert parse_qs(parts.query) == {"state": ["s-1"]}
    assert response.cookies[browser.COOKIE].value == ""  # the cookie goes
    assert not Session.objects.live().filter(account=world.alice).exists()
    acme_client = ClientFactory(workspace=world.acme)
    for token in (tokens["access_token"], crm["access_token"]):
        body = {"client_id": str(acme_client.pk), "client_secret": acme_client.secret, "token": token}
        assert ok(ApiClient().call("/clients/validate", body))["reason"] == "token_revoked"


def test_an_unregistered_post_logout_redirect_uri_shows_the_page(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    response = client.get(
        "/oauth2/logout",
        {"id_token_hint": tokens["id_token"], "post_logout_redirect_uri": "https://evil.example/"},
    )
    assert response.status_code == 200
    assert b"You are signed out" in response.content
    assert not Session.objects.live().filter(account=world.bob).exists()


def test_without_a_valid_hint_it_asks_first(client, world):
    session = sign_in(client, world.bob)
    for params in (
        {},
        {"id_token_hint": "forged.token.here"},
        {"post_logout_redirect_uri": "https://portal.example.com/bye"},
    ):
        response = client.get("/oauth2/logout", params)
        assert response.status_code == 200
        assert b">Sign out</button>" in response.content
        assert Session.objects.live().filter(pk=session.pk).exists()
    pressed = client.post("/oauth2/logout")
    assert pressed.status_code == 200
    assert b"You are signed out" in pressed.content
    assert not Session.objects.live().filter(pk=session.pk).exists()


def test_signing_out_needs_the_csrf_token(world):
    browser_client = Client(enforce_csrf_checks=True)
    session = sign_in(browser_client, world.bob)
    assert browser_client.post("/oauth2/logout").status_code == 403
    assert Session.objects.live().filter(pk=session.pk).exists()
