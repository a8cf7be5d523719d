"""Application tokens are this service's session tokens (docs/security.md#application-tokens): a first-party
application's access token calls the API as its account; another workspace's application's token is answered
401 by the API, serves `clients/validate` of that workspace's clients only; `sessions/list|revoke`,
`auth/revoke` and push events treat them as any session's; ending the browser session ends them."""

from django.test import Client

from authn.models import Session
from authn.sessions import end_session
from iam.models import Event
from oidc.models import Consent
from tests.conftest import ApiClient, err, ok
from tests.factories import ClientFactory
from tests.oidc.conftest import sign_in, signed_in_tokens


def crm_tokens(client, world) -> dict:
    scopes = ["openid", "email", "profile", "offline_access"]
    Consent.objects.create(account=world.alice, application=world.crm.application, scopes=scopes)
    return signed_in_tokens(client, world.crm, world.alice)


def validate(client, token: str) -> dict:
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token}
    return ok(ApiClient().call("/clients/validate", body))


def test_a_first_party_applications_token_calls_the_api_as_its_account(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    api = ApiClient(tokens["access_token"])
    assert ok(api.call("/accounts/describe", {"id": str(world.bob.pk)}))["email"] == "bob@example.com"
    # authenticated as bob: a member of globex (whose role holds nothing here), not of acme
    err(api.in_workspace(world.globex).call("/roles/list", {}), 403, "missing permission roles:list")
    err(api.in_workspace(world.acme).call("/roles/list", {}), 403, "not a member of this workspace")


def test_another_workspaces_applications_token_is_refused_by_the_api(client, world):
    tokens = crm_tokens(client, world)
    api = ApiClient(tokens["access_token"])
    message = "Authentication required or invalid credentials."
    err(api.call("/sessions/list", {}), 401, message)
    err(api.in_workspace(world.acme).call("/roles/list", {}), 401, message)
    err(api.call("/accounts/describe", {"id": str(world.alice.pk)}), 401, message)
    err(ApiClient(tokens["refresh_token"]).call("/auth/refresh", {}), 401, message)
    err(api.call("/auth/revoke", {}), 401, message)


def test_clients_validate_takes_a_third_party_token_only_for_its_own_workspace(client, world):
    tokens = crm_tokens(client, world)
    acme_client = ClientFactory(workspace=world.acme)
    globex_client = ClientFactory(workspace=world.globex)  # alice is a member there too
    answer = validate(acme_client, tokens["access_token"])
    assert (answer["authorized"], answer["account"]["id"]) == (True, str(world.alice.pk))
    answer = validate(globex_client, tokens["access_token"])
    assert (answer["authorized"], answer["reason"]) == (False, "invalid_token")


def test_clients_validate_takes_a_first_party_token_like_any_session(client, world):
    tokens = signed_in_tokens(client, world.portal, world.alice, workspace="globex")
    for workspace in (world.acme, world.globex):
        assert validate(ClientFactory(workspace=workspace), tokens["access_token"])["authorized"] is True


def test_the_application_session_is_listed_and_revocable_like_any(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    own = ApiClient(
        ApiClient()
        .call("/auth/login", {"email": "bob@example.com", "password": "correct horse battery staple"})
        .json()["data"]["access_token"]
    )
    listed = ok(own.call("/sessions/list", {}))["sessions"]
    application_session = Session.objects.get(application_id=world.portal.application.pk)
    assert str(application_session.pk) in [session["id"] for session in listed]
    portal_client = ClientFactory(workspace=world.globex)
    ok(own.call("/sessions/revoke", {"id": str(application_session.pk)}))
    assert validate(portal_client, tokens["access_token"])["reason"] == "token_revoked"
    revoked = Event.objects.filter(payload__type="session.revoked")
    assert any(event.payload["data"].get("session_id") == str(application_session.pk) for event in revoked)


def test_auth_revoke_ends_the_application_tokens(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    ok(ApiClient(tokens["access_token"]).call("/auth/revoke", {}))
    assert (
        validate(ClientFactory(workspace=world.globex), tokens["access_token"])["reason"] == "token_revoked"
    )


def test_ending_the_browser_session_ends_every_application_session_it_started(client, world):
    first = signed_in_tokens(client, world.portal, world.alice, workspace="acme")
    browser = Session.objects.get(account=world.alice, browser_session=None, kind=Session.Kind.BROWSER)
    Consent.objects.create(
        account=world.alice,
        application=world.crm.application,
        scopes=["openid", "email", "profile", "offline_access"],
    )
    from tests.oidc.conftest import authorize, code_of, exchange

    asked, response = authorize(client, world.crm)
    second = exchange(Client(), asked, code_of(response, asked)).json()
    assert Session.objects.filter(browser_session=browser).count() == 2
    other_browser = Client()
    sign_in(other_browser, world.alice)  # another device: its session lives on
    end_session(browser, actor=None)
    acme_client = ClientFactory(workspace=world.acme)
    for tokens in (first, second):
        assert validate(acme_client, tokens["access_token"])["reason"] == "token_revoked"
    assert Session.objects.live().filter(account=world.alice).count() == 1
