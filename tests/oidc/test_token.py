"""`POST /oauth2/token` (docs/oidc.md; RFC 6749 4.1.3, 5.2 and 6, RFC 7636, RFC 9700 4.14): the code
exchange with each way an application authenticates, the ID token's claims exactly, a code's single use
(the session of its first use ended), its 60 seconds, its binding to one application, redirect URI and
PKCE challenge, the refresh's rotation and reuse detection, and the errors' exact form."""

import base64
import datetime as dt

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from authn import tokens
from authn.models import Session
from iam.models import AuditEntry
from oidc.models import AuthorizationCode
from tests.oidc.conftest import (
    authorize,
    basic,
    code_of,
    exchange,
    id_token_claims,
    sign_in,
    signed_in_tokens,
)

ANSWER = {"access_token", "token_type", "expires_in", "id_token", "refresh_token", "scope"}


def grant_error(response, error: str, status: int = 400) -> dict:
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"error", "error_description"}, body
    assert body["error"] == error
    assert response["Cache-Control"] == "no-store"
    return body


def a_code(client, app, account, **params):
    sign_in(client, account)
    asked, response = authorize(client, app, **params)
    return asked, code_of(response, asked)


def test_a_first_party_web_application_gets_tokens_and_an_id_token(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    response = exchange(Client(), asked, code)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    answer = response.json()
    assert set(answer) == ANSWER
    assert (answer["token_type"], answer["expires_in"]) == ("Bearer", 3600)
    assert answer["scope"] == "openid email profile offline_access"
    claims = id_token_claims(answer["id_token"], world.portal)
    browser = Session.objects.get(account=world.bob, browser_session=None)
    application_session = Session.objects.get(browser_session=browser)
    assert claims == {
        "iss": settings.IAM_PUBLIC_URL,
        "sub": str(world.bob.pk),
        "aud": world.portal.client_id,
        "azp": world.portal.client_id,
        "exp": claims["exp"],
        "iat": claims["iat"],
        "auth_time": browser.auth_time,
        "nonce": "nonce-456",
        "amr": ["pwd"],
        "sid": str(application_session.pk),
        "email": "bob@example.com",
        "email_verified": True,
        "name": "Bob",
        "picture": None,
        "workspace_id": str(world.globex.pk),  # his one workspace, chosen without a page
    }
    assert claims["exp"] - claims["iat"] == 3600
    assert application_session.application_id == world.portal.application.pk


def test_the_answer_and_the_id_token_say_what_the_access_token_carries(client, world):
    """Both come from the claims the access token was signed with (`tokens.Signed.claims`), not from
    decoding it again: they must stay what it says, after a code exchange and after a refresh."""
    answer = signed_in_tokens(client, world.portal, world.bob)
    again = (
        Client()
        .post(
            "/oauth2/token",
            {
                "grant_type": "refresh_token",
                "refresh_token": answer["refresh_token"],
                "scope": "openid email",
            },
            **basic(world.portal),
        )
        .json()
    )
    for each in (answer, again):
        access = tokens.decode(each["access_token"], types={tokens.ACCESS})
        claims = id_token_claims(each["id_token"], world.portal)
        assert (each["expires_in"], each["scope"]) == (access["exp"] - access["iat"], access["scope"])
        assert (claims["sid"], claims["auth_time"], claims["amr"]) == (
            str(access["sid"]),
            access["auth_time"],
            access["amr"],
        )
        assert claims["workspace_id"] == access["workspace_id"]
    assert again["scope"] == "openid email"  # narrowed by the refresh, and so is its ID token
    assert "name" not in id_token_claims(again["id_token"], world.portal)


def test_scopes_decide_the_claims_and_offline_access_the_refresh_token(client, world):
    asked, code = a_code(client, world.portal, world.bob, scope="openid", nonce=None)
    answer = exchange(Client(), asked, code).json()
    assert "refresh_token" not in answer
    claims = id_token_claims(answer["id_token"], world.portal)
    assert not {"email", "email_verified", "name", "picture", "nonce"} & set(claims)


def test_a_third_party_applications_id_token_always_names_its_workspace(client, world):
    from oidc.models import Consent

    Consent.objects.create(account=world.alice, application=world.crm.application, scopes=["openid", "email"])
    asked, code = a_code(client, world.crm, world.alice, scope="openid email")
    answer = exchange(Client(), asked, code).json()
    claims = id_token_claims(answer["id_token"], world.crm)
    assert claims["workspace_id"] == str(world.acme.pk)
    assert claims["aud"] == world.crm.client_id


def test_a_first_party_sign_in_without_a_workspace_has_none(client, world):
    from tests.factories import AccountFactory

    loner = AccountFactory()
    answer = signed_in_tokens(client, world.portal, loner)
    assert "workspace_id" not in id_token_claims(answer["id_token"], world.portal)


@pytest.mark.parametrize("how", ["basic", "post"])
def test_a_web_application_authenticates_with_basic_or_post(client, world, how):
    asked, code = a_code(client, world.portal, world.bob)
    if how == "basic":
        response = exchange(Client(), asked, code)
    else:
        body = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": asked.app.redirect_uri,
            "code_verifier": asked.verifier,
            "client_id": world.portal.client_id,
            "client_secret": world.portal.secret,
        }
        response = Client().post("/oauth2/token", body)
    assert response.status_code == 200, response.content


def test_a_public_application_sends_its_id_alone(client, world):
    asked, code = a_code(client, world.portal_spa, world.bob)
    response = exchange(Client(), asked, code)
    assert response.status_code == 200, response.content


def test_a_wrong_or_missing_secret_is_401_invalid_client(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    wrong = base64.b64encode(f"{world.portal.client_id}:nope".encode()).decode()
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": asked.app.redirect_uri}
    for extra, form in (
        ({"HTTP_AUTHORIZATION": f"Basic {wrong}"}, {}),
        ({}, {"client_id": world.portal.client_id, "client_secret": "nope"}),
        ({}, {"client_id": world.portal.client_id}),  # a confidential application must prove itself
        ({}, {"client_id": "00000000-0000-0000-0000-000000000000"}),
        ({}, {}),
    ):
        response = Client().post("/oauth2/token", {**body, **form, "code_verifier": asked.verifier}, **extra)
        grant_error(response, "invalid_client", 401)
        assert response["WWW-Authenticate"].startswith("Basic ")
    assert exchange(Client(), asked, code).status_code == 200  # none of that spent the code


def test_a_code_used_twice_fails_and_ends_the_session_of_its_first_use(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    first = exchange(Client(), asked, code).json()
    api = Client(headers={"Authorization": f"Bearer {first['access_token']}"})
    assert api.post("/sessions/list", {}, content_type="application/json").status_code == 200
    grant_error(exchange(Client(), asked, code), "invalid_grant")
    assert api.post("/sessions/list", {}, content_type="application/json").status_code == 401
    refreshed = Client().post(
        "/oauth2/token",
        {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
        **basic(world.portal),
    )
    grant_error(refreshed, "invalid_grant")
    [entry] = AuditEntry.objects.filter(action="oauth2.code_reuse")
    assert entry.resource_id == world.portal.application.pk
    assert entry.changes["account_id"] == str(world.bob.pk)


def test_a_code_expires_after_60_seconds(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    row = AuthorizationCode.objects.get()
    assert row.expires_at - row.created_at == dt.timedelta(seconds=60)
    AuthorizationCode.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    grant_error(exchange(Client(), asked, code), "invalid_grant")


def test_a_code_is_bound_to_its_application_redirect_uri_and_challenge(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    from tests.oidc.conftest import Request

    stolen = Request(world.globex_app, asked.verifier, asked.params)
    response = exchange(Client(), stolen, code, redirect_uri=world.portal.redirect_uri)
    grant_error(response, "invalid_grant")  # another application's code
    grant_error(
        exchange(Client(), asked, code, redirect_uri="https://portal.example.com/cb/"), "invalid_grant"
    )
    grant_error(exchange(Client(), asked, code, code_verifier="x" * 43), "invalid_grant")
    grant_error(exchange(Client(), asked, code, code_verifier=None), "invalid_request")
    assert exchange(Client(), asked, code).status_code == 200  # the failures spent nothing
    assert not AuditEntry.objects.filter(action="oauth2.code_reuse").exists()


def test_another_applications_spent_code_is_unknown_and_ends_nothing(client, world):
    """The code is read by its digest alone and then held to the application that authenticated: a
    code spent by its own application and presented by another is `invalid_grant`, not a replay."""
    asked, code = a_code(client, world.portal, world.bob)
    first = exchange(Client(), asked, code).json()
    from tests.oidc.conftest import Request

    stolen = Request(world.globex_app, asked.verifier, asked.params)
    grant_error(exchange(Client(), stolen, code, redirect_uri=world.portal.redirect_uri), "invalid_grant")
    api = Client(headers={"Authorization": f"Bearer {first['access_token']}"})
    assert api.post("/sessions/list", {}, content_type="application/json").status_code == 200
    assert not AuditEntry.objects.filter(action="oauth2.code_reuse").exists()


def test_a_code_of_a_browser_session_that_ended_is_refused(client, world):
    asked, code = a_code(client, world.portal, world.bob)
    from authn.sessions import end_session

    end_session(Session.objects.get(account=world.bob), actor=None)
    grant_error(exchange(Client(), asked, code), "invalid_grant")


def test_the_refresh_is_rotated_and_a_refresh_token_used_twice_ends_the_session(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    response = Client().post("/oauth2/token", refresh, **basic(world.portal))
    assert response.status_code == 200, response.content
    again = response.json()
    assert set(again) == ANSWER
    assert again["refresh_token"] != tokens["refresh_token"]
    first_claims = id_token_claims(tokens["id_token"], world.portal)
    claims = id_token_claims(again["id_token"], world.portal)
    for name in ("sub", "sid", "auth_time", "amr", "workspace_id"):
        assert claims[name] == first_claims[name]
    grant_error(Client().post("/oauth2/token", refresh, **basic(world.portal)), "invalid_grant")
    api = Client(headers={"Authorization": f"Bearer {again['access_token']}"})
    assert api.post("/sessions/list", {}, content_type="application/json").status_code == 401
    assert AuditEntry.objects.filter(action="session.refresh_reuse").exists()


def test_a_refresh_token_serves_only_its_own_application(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    grant_error(Client().post("/oauth2/token", refresh, **basic(world.globex_app)), "invalid_grant")
    narrowed = Client().post("/oauth2/token", {**refresh, "scope": "openid email"}, **basic(world.portal))
    assert narrowed.json()["scope"] == "openid email"
    wider = {
        "grant_type": "refresh_token",
        "refresh_token": narrowed.json()["refresh_token"],
        "scope": "openid admin",
    }
    grant_error(Client().post("/oauth2/token", wider, **basic(world.portal)), "invalid_scope")


def test_other_grants_and_requests(client, world):
    grant_error(
        Client().post("/oauth2/token", {"grant_type": "password"}, **basic(world.portal)),
        "unsupported_grant_type",
    )
    grant_error(Client().post("/oauth2/token", {}, **basic(world.portal)), "unsupported_grant_type")
    grant_error(
        Client().post("/oauth2/token", {"grant_type": "authorization_code"}, **basic(world.portal)),
        "invalid_request",
    )
    assert Client().get("/oauth2/token").status_code == 405


def test_an_application_without_the_refresh_grant_gets_no_refresh_token(client, world):
    from oidc import services

    services.update_application(world.portal.application, actor=None, grant_types=["authorization_code"])
    tokens = signed_in_tokens(client, world.portal, world.bob)
    assert "refresh_token" not in tokens
    assert "offline_access" not in tokens["scope"]
