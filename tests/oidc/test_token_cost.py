"""What the token endpoint costs the database (docs/performance.md#what-keeps-the-hot-paths-fast): the
application read from the cache, the code with its sign-in in one narrow read, the code spent and its
session named in one write; a warm client-credentials grant reads and writes no row. With the
application cached, a deleted application, a rotated secret, a grant taken away, a revoked consent, a
disabled account and a disabled or deleted service account are refused at once; with the cache down, the
database answers the same."""

import base64

import pytest
from django.core.cache import cache as django_cache
from django.test import Client

from accounts.services import update_account
from authn.models import Session
from iam.models import AuditEntry
from oidc import services, sessions
from oidc.application_cache import application_key
from oidc.models import AuthorizationCode, Consent
from rbac.models import ServiceAccount
from rbac.services.service_accounts import delete_service_account, update_service_account
from tests.oidc.conftest import App, authorize, basic, code_of, exchange, sign_in, signed_in_tokens
from tests.oidc.test_token import grant_error

META = {"schema_version": "1"}


def statements(captured) -> list[str]:
    return [query["sql"].split(" ", 1)[0] for query in captured.captured_queries]


def a_code(client, app, account):
    sign_in(client, account)
    asked, response = authorize(client, app)
    return asked, code_of(response, asked)


def refresh(app, refresh_token: str, **form):
    body = {"grant_type": "refresh_token", "refresh_token": refresh_token, **form}
    return Client().post("/oauth2/token", body, **basic(app))


@pytest.fixture
def machine(world):
    service_account = ServiceAccount.objects.create(workspace=world.acme, name="ci", tags=[], meta=META)
    application, secret = services.create_application(
        world.acme,
        actor=None,
        name="CI runner",
        type="web",
        redirect_uris=[],
        grant_types=["client_credentials"],
        service_account_id=service_account.pk,
        tags=[],
        meta=META,
    )
    return App(application, secret, ""), service_account


def machine_grant(app, secret: str | None = None, *, client_id: str | None = None):
    credentials = f"{client_id or app.client_id}:{secret or app.secret}"
    credentials = base64.b64encode(credentials.encode()).decode()
    return Client().post(
        "/oauth2/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=f"Basic {credentials}"
    )


# statement budgets


def test_a_code_exchange_reads_once_and_writes_three_rows(client, world, django_assert_num_queries):
    asked, code = a_code(client, world.portal, world.bob)
    assert exchange(Client(), asked, code).status_code == 200  # the application is now cached
    asked, code = a_code(client, world.portal, world.bob)
    # The code with its browser session and account; the code spent and its session named; the session;
    # its refresh token; and the endpoint's own transaction (a savepoint here, inside the test's).
    with django_assert_num_queries(6) as captured:
        assert exchange(Client(), asked, code).status_code == 200
    assert statements(captured) == ["SAVEPOINT", "SELECT", "UPDATE", "INSERT", "INSERT", "RELEASE"]
    assert "oidc_application" not in captured.captured_queries[1]["sql"]


def test_a_refresh_spends_its_token_and_writes_two_rows(client, world, django_assert_num_queries):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    tokens = refresh(world.portal, tokens["refresh_token"]).json()  # the session's state is now cached
    # The refresh token spent, the session's `last_used_at`, the new refresh token: no read.
    with django_assert_num_queries(5) as captured:
        response = refresh(world.portal, tokens["refresh_token"])
    assert response.status_code == 200, response.content
    assert statements(captured) == ["SAVEPOINT", "UPDATE", "UPDATE", "INSERT", "RELEASE"]


def test_a_warm_client_credentials_grant_reads_and_writes_no_row(machine, django_assert_num_queries):
    app, service_account = machine
    assert machine_grant(app).status_code == 200  # cached, and `last_used_at` written
    with django_assert_num_queries(2) as captured:  # the endpoint's savepoint and its release
        assert machine_grant(app).status_code == 200
    assert statements(captured) == ["SAVEPOINT", "RELEASE"]
    service_account.refresh_from_db()
    assert service_account.last_used_at is not None  # kept to the minute (docs/api.md#service-accounts)


def test_the_cached_application_is_a_plain_tuple_with_its_secrets_digest_only(machine):
    app, _ = machine
    assert machine_grant(app).status_code == 200
    cached = django_cache.get(application_key(app.client_id))
    assert type(cached) is tuple
    assert app.application.secret_digest in cached and app.secret not in cached
    assert app.application.meta not in cached


# refused at once, with the application cached


def test_a_deleted_application_is_refused_at_once(client, world, machine):
    app, _ = machine
    assert machine_grant(app).status_code == 200
    tokens = signed_in_tokens(client, world.portal, world.bob)
    client_id, basic_auth = app.client_id, basic(world.portal)  # a deleted instance has no pk
    services.delete_application(app.application, actor=None)
    services.delete_application(world.portal.application, actor=None)
    grant_error(machine_grant(app, client_id=client_id), "invalid_client", 401)
    body = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    grant_error(Client().post("/oauth2/token", body, **basic_auth), "invalid_client", 401)


def test_a_rotated_secret_is_refused_at_once(client, world, machine):
    app, _ = machine
    assert machine_grant(app).status_code == 200
    tokens = signed_in_tokens(client, world.portal, world.bob)
    new_secret = services.regenerate_secret(app.application, actor=None)
    grant_error(machine_grant(app), "invalid_client", 401)
    assert machine_grant(app, new_secret).status_code == 200
    services.regenerate_secret(world.portal.application, actor=None)
    grant_error(refresh(world.portal, tokens["refresh_token"]), "invalid_client", 401)


def test_a_grant_taken_away_is_refused_at_once(client, world, machine):
    app, _ = machine
    assert machine_grant(app).status_code == 200
    services.update_application(
        app.application,
        actor=None,
        grant_types=["authorization_code"],
        redirect_uris=["https://ci.example.com/cb"],
    )
    grant_error(machine_grant(app), "unauthorized_client")
    tokens = signed_in_tokens(client, world.portal, world.bob)
    services.update_application(world.portal.application, actor=None, grant_types=["authorization_code"])
    grant_error(refresh(world.portal, tokens["refresh_token"]), "unauthorized_client")


def test_a_revoked_consent_refuses_its_refresh_token_and_its_code_at_once(client, world):
    scopes = ["openid", "email", "profile", "offline_access"]
    consent = Consent.objects.create(account=world.alice, application=world.crm.application, scopes=scopes)
    tokens = signed_in_tokens(client, world.crm, world.alice)
    tokens = refresh(world.crm, tokens["refresh_token"]).json()
    asked, code = a_code(client, world.crm, world.alice)  # granted, not yet exchanged
    services.revoke_consent(consent, actor=world.alice)
    grant_error(refresh(world.crm, tokens["refresh_token"]), "invalid_grant")
    grant_error(exchange(Client(), asked, code), "invalid_grant")


def test_a_disabled_account_is_refused_its_code_and_its_refresh_at_once(client, world):
    tokens = signed_in_tokens(client, world.portal, world.bob)
    tokens = refresh(world.portal, tokens["refresh_token"]).json()
    asked, code = a_code(client, world.portal, world.bob)
    update_account(world.bob, actor=None, enabled=False)
    grant_error(refresh(world.portal, tokens["refresh_token"]), "invalid_grant")
    body = grant_error(exchange(Client(), asked, code), "invalid_grant")
    assert body["error_description"] == "the sign-in has ended"
    assert AuthorizationCode.objects.get(used_at=None, browser_session__account=world.bob)  # not spent


def test_a_disabled_or_deleted_service_account_is_refused_at_once(machine):
    app, service_account = machine
    assert machine_grant(app).status_code == 200
    update_service_account(service_account, actor=None, enabled=False)
    grant_error(machine_grant(app), "invalid_grant")
    update_service_account(service_account, actor=None, enabled=True)
    assert machine_grant(app).status_code == 200
    delete_service_account(service_account, actor=None)
    grant_error(machine_grant(app), "invalid_grant")


def test_with_the_cache_down_the_database_answers(client, world, machine, monkeypatch):
    from tests.conftest import break_cache

    app, _ = machine
    tokens = signed_in_tokens(client, world.portal, world.bob)
    break_cache(monkeypatch)
    assert machine_grant(app).status_code == 200
    assert refresh(world.portal, tokens["refresh_token"]).status_code == 200
    services.regenerate_secret(app.application, actor=None)
    grant_error(machine_grant(app), "invalid_client", 401)


# a code presented twice at once


def test_a_code_spent_by_a_concurrent_exchange_ends_the_session_that_one_started(client, world):
    _, code = a_code(client, world.portal, world.bob)
    row = sessions.find_code(code, world.portal.application)
    same = sessions.find_code(code, world.portal.application)  # read before either spent it
    issued = sessions.exchange_code(row, ip=None, user_agent="")
    with pytest.raises(sessions.CodeRefused, match="code already used"):
        sessions.exchange_code(same, ip=None, user_agent="")
    assert Session.objects.get(pk=issued.claims["sid"]).revoked_at is not None
    [entry] = AuditEntry.objects.filter(action="oauth2.code_reuse")
    assert entry.changes["session_id"] == str(issued.claims["sid"])
