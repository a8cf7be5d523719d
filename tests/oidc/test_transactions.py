"""Every step of a sign-in that locks a row does it inside a transaction, as PostgreSQL requires (a lock
outside one answered 500 there, while SQLite, without row locks, let it through): the protocol end to
end with the database committing and row locks refused outside a transaction."""

import pytest
from django.test import Client

from oidc.models import Consent
from tests.iam.test_transactions import strict_locks  # noqa: F401 (a fixture)
from tests.oidc.conftest import authorize, basic, code_of, exchange, sign_in, signed_in_tokens, world  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_protocol_locks_only_inside_transactions(strict_locks, world):  # noqa: F811
    browser = Client()
    sign_in(browser, world.alice)
    asked, response = authorize(browser, world.crm)
    code = code_of(browser.post(response.wsgi_request.get_full_path(), {"consent": "allow"}), asked)
    assert Consent.objects.filter(account=world.alice).exists()
    tokens = exchange(Client(), asked, code).json()
    assert exchange(Client(), asked, code).json()["error"] == "invalid_grant"  # the replay ends its session
    tokens = signed_in_tokens(browser, world.portal, world.alice, workspace="acme")
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    again = Client().post("/oauth2/token", refresh, **basic(world.portal))
    assert again.status_code == 200, again.content
    assert Client().post("/oauth2/token", refresh, **basic(world.portal)).json()["error"] == "invalid_grant"
    fresh = signed_in_tokens(Client(), world.portal, world.bob)
    assert (
        Client().post("/oauth2/revoke", {"token": fresh["access_token"]}, **basic(world.portal)).status_code
        == 200
    )
    world.alice.refresh_from_db()  # the refresh token's reuse ended her sessions (a new session version)
    last = signed_in_tokens(browser, world.portal, world.alice, workspace="globex")
    out = browser.get("/oauth2/logout", {"id_token_hint": last["id_token"]})
    assert out.status_code == 200 and b"You are signed out" in out.content
    sign_in(browser, world.bob)
    assert browser.post("/oauth2/logout").status_code == 200
