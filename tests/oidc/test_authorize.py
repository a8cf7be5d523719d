"""`GET /oauth2/authorize` (docs/oidc.md#the-authorization-endpoint): what is refused and how (an error page,
never a redirect, for an unknown application or redirect URI; a redirect with `error`, `state` and `iss` for
the rest), and the steps of a sign-in: the browser session, `prompt`, `max_age`, the workspace chooser, the
workspace's second factor, another workspace's consent. Each test has two accounts, two workspaces and both
kinds of application (tests/oidc/conftest.py's world)."""

import datetime as dt
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from oidc.models import AuthorizationCode, Consent
from tests.factories import backdate
from tests.oidc.conftest import authorize, code_of, redirected_to, sign_in


def refused_with(response, asked, error: str) -> dict:
    where, query = redirected_to(response)
    assert where == asked.app.redirect_uri
    assert query["error"] == error, query
    assert query["state"] == asked.params["state"]
    assert query["iss"] == settings.IAM_PUBLIC_URL
    assert "code" not in query
    return query


def error_page(response) -> None:
    assert response.status_code == 400
    assert "Location" not in response
    assert b"Sign-in cannot continue" in response.content


# What is refused


@pytest.mark.parametrize("app", ["portal", "crm"])
def test_pkce_is_required_of_every_application_and_only_s256(client, world, app):
    sign_in(client, world.alice)
    application = getattr(world, app)
    asked, response = authorize(client, application, code_challenge=None, code_challenge_method=None)
    assert "code_challenge required" in refused_with(response, asked, "invalid_request")["error_description"]
    asked, response = authorize(client, application, code_challenge_method="plain")
    refused_with(response, asked, "invalid_request")
    asked, response = authorize(client, application, code_challenge_method=None)
    refused_with(response, asked, "invalid_request")
    assert not AuthorizationCode.objects.exists()


@pytest.mark.parametrize(
    "uri",
    [
        "https://portal.example.com/cb/",  # a trailing slash
        "https://Portal.example.com/cb",  # case
        "https://portal.example.com/CB",
        "https://portal.example.com/cb?x=1",  # a query
        "https://portal.example.com:443/cb",
        "http://portal.example.com/cb",
        "https://crm.example.com/cb",  # another application's
    ],
)
def test_a_redirect_uri_that_differs_by_one_character_gets_a_page_never_a_redirect(client, world, uri):
    sign_in(client, world.alice)
    for app in (world.portal, world.crm):
        _, response = authorize(client, app, redirect_uri=uri)
        error_page(response)


def test_a_native_applications_loopback_uri_matches_on_any_port_only(client, world):
    from tests.oidc.conftest import make_app

    native = make_app(world.root, "Cli", "native", redirect_uri="http://127.0.0.1/callback")
    sign_in(client, world.bob)
    _asked, response = authorize(client, native, redirect_uri="http://127.0.0.1:53127/callback")
    assert redirected_to(response)[0] == "http://127.0.0.1:53127/callback"
    assert redirected_to(response)[1]["code"]
    for other in (
        "http://127.0.0.1:53127/callback/",
        "http://localhost:53127/callback",
        "http://127.0.0.1:1/x",
    ):
        error_page(authorize(client, native, redirect_uri=other)[1])
    error_page(authorize(client, world.portal, redirect_uri="https://portal.example.com:8443/cb")[1])


def test_an_unknown_client_or_no_redirect_uri_gets_a_page(client, world):
    sign_in(client, world.alice)
    for client_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid", None):
        _, response = authorize(client, world.portal, client_id=client_id)
        error_page(response)
    error_page(authorize(client, world.portal, redirect_uri=None)[1])


def test_response_type_and_scope(client, world):
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal, response_type="token")
    refused_with(response, asked, "unsupported_response_type")
    asked, response = authorize(client, world.portal, scope="email profile")
    refused_with(response, asked, "invalid_scope")
    asked, response = authorize(client, world.portal, prompt="none login")
    refused_with(response, asked, "invalid_request")
    asked, response = authorize(client, world.portal, prompt="sometimes")
    refused_with(response, asked, "invalid_request")
    asked, response = authorize(client, world.portal, max_age="-1")
    refused_with(response, asked, "invalid_request")


def test_prompt_none_without_a_session_is_login_required(client, world):
    for app in (world.portal, world.crm):
        asked, response = authorize(client, app, prompt="none")
        refused_with(response, asked, "login_required")
    session = sign_in(client, world.bob)  # a session too old for max_age is none either
    backdate(session, "created_at", timezone.now() - dt.timedelta(seconds=10))
    asked, response = authorize(client, world.portal, prompt="none", max_age="5")
    refused_with(response, asked, "login_required")


# Signing in


def test_without_a_session_the_browser_goes_to_signin_and_comes_back(client, world):
    asked, response = authorize(client, world.crm, login_hint="alice@example.com")
    where, query = redirected_to(response)
    assert where == "/signin"
    assert query["login_hint"] == "alice@example.com"
    back = query["next"]
    assert back.startswith("/oauth2/authorize?")
    sign_in(client, world.alice)
    Consent.objects.create(
        account=world.alice,
        application=world.crm.application,
        scopes=["openid", "email", "profile", "offline_access"],
    )
    assert code_of(client.get(back), asked)


@pytest.mark.parametrize("how", [{"prompt": "login"}, {"max_age": "0"}])
def test_prompt_login_and_max_age_sign_in_again_once(client, world, how):
    session = sign_in(client, world.bob)
    backdate(session, "created_at", timezone.now() - dt.timedelta(seconds=10))
    asked, response = authorize(client, world.portal, **how)
    where, query = redirected_to(response)
    assert where == "/signin"
    assert redirected_to(client.get(query["next"]))[0] == "/signin"  # the old sign-in still does not count
    sign_in(client, world.bob)
    assert code_of(client.get(query["next"]), asked)  # the new one does, once: no loop


def test_a_recent_enough_session_meets_max_age(client, world):
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal, max_age="3600")
    assert code_of(response, asked)


# The workspace


def test_the_chooser_shows_one_button_per_workspace_and_its_choice_goes_in_the_code(client, world):
    sign_in(client, world.alice)
    asked, response = authorize(client, world.portal)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Choose a workspace" in page
    for workspace in (world.acme, world.globex):
        assert f'name="workspace" value="{workspace.pk}">{workspace.name}</button>' in page
    chosen = client.post(response.wsgi_request.get_full_path(), {"workspace": str(world.globex.pk)})
    code = code_of(chosen, asked)
    assert AuthorizationCode.objects.get().workspace_id == world.globex.pk
    assert code


def test_one_membership_is_chosen_without_a_page_and_a_workspace_can_be_named(client, world):
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal)
    code_of(response, asked)
    assert AuthorizationCode.objects.get().workspace_id == world.globex.pk
    other = Client()
    sign_in(other, world.alice)
    asked, response = authorize(other, world.portal, workspace="acme")
    code_of(response, asked)
    assert (
        AuthorizationCode.objects.filter(browser_session__account=world.alice).get().workspace_id
        == world.acme.pk
    )


def test_a_workspace_the_account_is_not_in_is_access_denied(client, world):
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal, workspace=str(world.acme.pk))
    refused_with(response, asked, "access_denied")
    asked, response = authorize(client, world.portal, workspace="no-such-workspace")
    refused_with(response, asked, "invalid_request")


def test_prompt_none_with_a_choice_to_make_is_interaction_required(client, world):
    sign_in(client, world.alice)
    asked, response = authorize(client, world.portal, prompt="none")
    refused_with(response, asked, "interaction_required")


def test_a_workspace_requiring_mfa_sends_a_one_factor_session_to_step_up(client, world):
    world.globex.mfa_required = True
    world.globex.save()
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal)
    where, query = redirected_to(response)
    assert where == "/signin/mfa"
    back = parse_qs(urlsplit(query["next"]).query)
    assert back["workspace"] == [str(world.globex.pk)]
    asked, response = authorize(client, world.portal, prompt="none")
    refused_with(response, asked, "interaction_required")
    sign_in(client, world.bob, amr=("pwd", "otp", "mfa"))
    asked, response = authorize(client, world.portal)
    assert code_of(response, asked)


def test_a_login_through_the_workspaces_own_sso_meets_its_mfa_policy(client, world):
    world.globex.mfa_required = True
    world.globex.save()
    sign_in(client, world.bob, amr=("fed",), sso_workspace_id=world.globex.pk)
    asked, response = authorize(client, world.portal)
    assert code_of(response, asked)


# Another workspace's application


def test_a_third_party_application_signs_in_only_its_workspaces_active_members(client, world):
    sign_in(client, world.bob)  # a member of globex, not of acme
    asked, response = authorize(client, world.crm)
    refused_with(response, asked, "access_denied")
    asked, response = authorize(client, world.crm, workspace=str(world.globex.pk))
    refused_with(response, asked, "invalid_request")


def test_consent_is_asked_once_and_remembered(client, world):
    sign_in(client, world.alice)
    asked, response = authorize(client, world.crm, scope="openid email")
    assert response.status_code == 200
    page = response.content.decode()
    for words in ("Acme CRM", "Acme", "See your email address", ">Allow<", ">Deny<"):
        assert words in page
    code_of(client.post(response.wsgi_request.get_full_path(), {"consent": "allow"}), asked)
    assert Consent.objects.get().scopes == ["email", "openid"]
    asked, response = authorize(client, world.crm, scope="openid email")
    assert code_of(response, asked)  # remembered
    asked, response = authorize(client, world.crm, scope="openid email profile")
    assert response.status_code == 200  # a new scope: asked again
    asked, response = authorize(client, world.crm, scope="openid email", prompt="consent")
    assert response.status_code == 200
    asked, response = authorize(client, world.crm, scope="openid profile", prompt="none")
    refused_with(response, asked, "consent_required")


def test_deny_is_access_denied(client, world):
    sign_in(client, world.alice)
    asked, response = authorize(client, world.crm)
    denied = client.post(response.wsgi_request.get_full_path(), {"consent": "deny"})
    refused_with(denied, asked, "access_denied")
    assert not Consent.objects.exists()


def test_a_first_party_application_asks_no_consent(client, world):
    sign_in(client, world.bob)
    asked, response = authorize(client, world.portal_spa)
    assert code_of(response, asked)
    assert not Consent.objects.exists()


# The pages' rules


def test_posts_without_a_csrf_token_are_refused(world):
    browser = Client(enforce_csrf_checks=True)
    sign_in(browser, world.alice)
    _, response = authorize(browser, world.crm)
    assert response.status_code == 200
    assert browser.post(response.wsgi_request.get_full_path(), {"consent": "allow"}).status_code == 403
    _asked, response = authorize(browser, world.portal)
    assert (
        browser.post(response.wsgi_request.get_full_path(), {"workspace": str(world.acme.pk)}).status_code
        == 403
    )
    assert not Consent.objects.exists() and not AuthorizationCode.objects.exists()


def test_the_pages_cannot_be_framed(client, world):
    sign_in(client, world.alice)
    for response in (authorize(client, world.crm)[1], authorize(client, world.portal)[1]):
        assert response.status_code == 200
        assert response["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert b"<script" not in response.content


def test_starts_are_throttled_per_address(client, world, monkeypatch):
    from authn import throttling

    monkeypatch.setattr(throttling.oauth_starts_by_ip, "limit", 2)
    sign_in(client, world.bob)
    for _ in range(2):
        assert authorize(client, world.portal)[1].status_code == 302
    response = authorize(client, world.portal)[1]
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert b"Too many sign-ins" in response.content
