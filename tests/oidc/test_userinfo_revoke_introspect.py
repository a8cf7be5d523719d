"""`/oauth2/userinfo` (OpenID Connect Core 5.3), `/oauth2/revoke` (RFC 7009) and `/oauth2/introspect`
(RFC 7662), as docs/oidc.md words them, with a first-party and a third-party application."""

import base64

import pytest
from django.test import Client

from oidc.models import Consent
from tests.conftest import ApiClient, ok
from tests.factories import ClientFactory
from tests.oidc.conftest import basic, signed_in_tokens


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def crm_tokens(client, world, scope="openid email profile offline_access") -> dict:
    Consent.objects.create(account=world.alice, application=world.crm.application, scopes=scope.split())
    return signed_in_tokens(client, world.crm, world.alice, scope=scope)


def refused(response) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer ")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


@pytest.mark.parametrize("method", ["get", "post"])
def test_userinfo_answers_sub_and_the_granted_scopes_claims(client, world, method):
    tokens = crm_tokens(client, world)
    response = getattr(Client(), method)("/oauth2/userinfo", **bearer(tokens["access_token"]))
    assert response.status_code == 200
    assert response.json() == {
        "sub": str(world.alice.pk),
        "email": "alice@example.com",
        "email_verified": True,
        "name": "Alice",
        "picture": "https://pics.example.com/a.png",
    }
    narrow = signed_in_tokens(Client(), world.portal, world.bob, scope="openid")
    assert Client().get("/oauth2/userinfo", **bearer(narrow["access_token"])).json() == {
        "sub": str(world.bob.pk)
    }


def test_userinfo_refuses_anything_else_with_invalid_token(client, world):
    tokens = crm_tokens(client, world)
    refused(Client().get("/oauth2/userinfo"))
    refused(Client().get("/oauth2/userinfo", **bearer("not-a-token")))
    refused(Client().get("/oauth2/userinfo", **bearer(tokens["refresh_token"])))
    refused(Client().get("/oauth2/userinfo", HTTP_AUTHORIZATION="Basic abc"))
    login = ApiClient().call(
        "/auth/login", {"email": "bob@example.com", "password": "correct horse battery staple"}
    )
    refused(Client().get("/oauth2/userinfo", **bearer(login.json()["data"]["access_token"])))  # no openid
    ok(
        ApiClient().call(
            "/sessions/list", {}, headers={"Authorization": f"Bearer {login.json()['data']['access_token']}"}
        )
    )
    Client().post("/oauth2/revoke", {"token": tokens["access_token"]}, **basic(world.crm))
    refused(Client().get("/oauth2/userinfo", **bearer(tokens["access_token"])))


def test_revoking_a_token_ends_its_session(client, world):
    tokens = crm_tokens(client, world)
    acme_client = ClientFactory(workspace=world.acme)
    body = {
        "client_id": str(acme_client.pk),
        "client_secret": acme_client.secret,
        "token": tokens["access_token"],
    }
    assert ok(ApiClient().call("/clients/validate", body))["authorized"] is True
    response = Client().post("/oauth2/revoke", {"token": tokens["refresh_token"]}, **basic(world.crm))
    assert response.status_code == 200
    assert ok(ApiClient().call("/clients/validate", body))["reason"] == "token_revoked"


def test_revoking_another_applications_or_an_unknown_token_answers_200_and_changes_nothing(client, world):
    tokens = crm_tokens(client, world)
    for token in (tokens["access_token"], "garbage"):
        assert Client().post("/oauth2/revoke", {"token": token}, **basic(world.globex_app)).status_code == 200
    spa = Client().post(
        "/oauth2/revoke", {"token": tokens["access_token"], "client_id": world.portal_spa.client_id}
    )
    assert spa.status_code == 200
    assert Client().get("/oauth2/userinfo", **bearer(tokens["access_token"])).status_code == 200
    wrong = base64.b64encode(f"{world.crm.client_id}:nope".encode()).decode()
    response = Client().post(
        "/oauth2/revoke", {"token": tokens["access_token"]}, HTTP_AUTHORIZATION=f"Basic {wrong}"
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_introspection_answers_the_callers_own_active_tokens(client, world):
    tokens = crm_tokens(client, world)
    response = Client().post("/oauth2/introspect", {"token": tokens["access_token"]}, **basic(world.crm))
    answer = response.json()
    assert set(answer) == {"active", "sub", "client_id", "scope", "exp", "iat", "sid", "workspace_id"}
    assert answer["active"] is True
    assert (answer["sub"], answer["client_id"], answer["workspace_id"]) == (
        str(world.alice.pk),
        world.crm.client_id,
        str(world.acme.pk),
    )
    assert answer["scope"] == "openid email profile offline_access"
    for token, caller in (
        (tokens["access_token"], world.globex_app),  # another application's token
        ("garbage", world.crm),
    ):
        assert Client().post("/oauth2/introspect", {"token": token}, **basic(caller)).json() == {
            "active": False
        }
    Client().post("/oauth2/revoke", {"token": tokens["access_token"]}, **basic(world.crm))
    assert Client().post(
        "/oauth2/introspect", {"token": tokens["refresh_token"]}, **basic(world.crm)
    ).json() == {"active": False}


def test_introspection_is_for_confidential_applications(client, world):
    tokens = signed_in_tokens(client, world.portal_spa, world.bob)
    response = Client().post(
        "/oauth2/introspect", {"token": tokens["access_token"], "client_id": world.portal_spa.client_id}
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
