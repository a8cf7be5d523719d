"""Sessions as records (docs/api.md#sessions) over HTTP: every login starts one, its tokens name it (`sid`,
`amr`), `sessions/list` and `sessions/revoke` for the account and for operators, `auth/revoke` with
`except_current`, and a revoked session refused at once on Bearer calls, on refresh and in
`clients/validate`, from a warm cache, a flushed one and with the cache down."""

import datetime as dt
import time
import uuid

import jwt
import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from accounts.models import Account
from authn import sessions
from authn.models import USER_AGENT_MAX, Session
from authn.tokens import ACCESS, decode, sign
from iam.models import AuditEntry, Event
from tenancy.workspace_cache import root_workspace
from tests.authn.test_oauth import configured, provider, sign_in  # noqa: F401 (fixtures)
from tests.conftest import ApiClient, access_claims, break_cache, err, ok
from tests.factories import PASSWORD, AccountFactory, ClientFactory, CredentialFactory, MembershipFactory

AUTH = "Authentication required or invalid credentials."
OTHER_ACCOUNT = "only an operator may list another account's sessions"
REAUTH = "recent authentication required"


def login(account, *, agent="agent-a", ip="10.0.0.1"):
    response = ApiClient().call(
        "/auth/login",
        {"email": account.email, "password": PASSWORD},
        headers={"User-Agent": agent},
        REMOTE_ADDR=ip,
    )
    return ok(response)


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def sid_of(session: dict) -> str:
    return claims_of(session["access_token"])["sid"]


def describe(token: str, account) -> object:
    return ApiClient(token).call("/accounts/describe", {"id": str(account.pk)})


def listed(token: str, body=None) -> dict:
    return ok(ApiClient(token).call("/sessions/list", body or {}))


def revoke(token: str, session_id) -> object:
    return ApiClient(token).call("/sessions/revoke", {"id": str(session_id)})


def events(kind: str) -> list[dict]:
    return [m.payload for m in Event.objects.all() if m.payload["type"] == kind]


@pytest.fixture
def other(db):
    """A second account that can sign in: it must neither see nor end `member`'s sessions."""
    account = AccountFactory()
    CredentialFactory(account=account)
    return account


@pytest.fixture
def tenant(member):
    """A workspace `member` belongs to, with a client validating its tokens."""
    membership = MembershipFactory(account=member)
    return ClientFactory(workspace=membership.workspace)


def validate(client, token: str) -> dict:
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token}
    return ok(ApiClient().call("/clients/validate", body))


# Every login starts a session


def test_a_login_starts_a_session_its_tokens_name(member):
    session = login(member, agent="Mozilla/5.0 (test)", ip="10.1.2.3")
    access, refresh = claims_of(session["access_token"]), claims_of(session["refresh_token"])
    assert access["sid"] == refresh["sid"] and access["amr"] == refresh["amr"] == ["pwd"]
    record = Session.objects.get(pk=access["sid"])
    assert (record.account_id, record.ip, record.user_agent, record.amr) == (
        member.pk,
        "10.1.2.3",
        "Mozilla/5.0 (test)",
        ["pwd"],
    )
    assert record.expires_at == dt.datetime.fromtimestamp(access["auth_time"], dt.UTC) + (
        settings.IAM_REFRESH_TOKEN_LIFETIME
    )
    assert login(member)["access_token"] and Session.objects.filter(account=member).count() == 2


def test_register_starts_a_password_session(api):
    body = {"email": "new@example.com", "password": "a-long-passphrase"}
    data = ok(api.call("/auth/register", body, headers={"User-Agent": "x" * 5000}))
    claims = claims_of(data["access_token"])
    assert claims["amr"] == ["pwd"]
    record = Session.objects.get(pk=claims["sid"])
    assert record.user_agent == "x" * USER_AGENT_MAX and record.ip == "127.0.0.1"


def test_an_oauth_login_starts_a_federated_session(api, configured):  # noqa: F811
    tokens = sign_in(api)
    claims = claims_of(tokens["access_token"])
    assert claims["amr"] == ["fed"]  # RFC 8176: federated
    record = Session.objects.get(pk=claims["sid"])
    assert (record.account.email, record.amr, record.ip) == ("alice@example.com", ["fed"], "127.0.0.1")
    paired = ok(ApiClient(tokens["access_token"]).call("/auth/refresh"))  # no refresh token in the URL
    assert claims_of(ok(ApiClient(paired["refresh_token"]).call("/auth/refresh"))["access_token"])["amr"] == [
        "fed"
    ]


def test_the_address_follows_the_proxies_setting(member, settings):
    settings.IAM_NUM_PROXIES = 1
    response = ApiClient().call(
        "/auth/login",
        {"email": member.email, "password": PASSWORD},
        headers={"X-Forwarded-For": "203.0.113.9, 198.51.100.7"},
    )
    assert Session.objects.get(pk=sid_of(ok(response))).ip == "198.51.100.7"
    settings.IAM_NUM_PROXIES = 0
    spoofed = ApiClient().call(
        "/auth/login", {"email": member.email, "password": PASSWORD}, headers={"X-Forwarded-For": "1.2.3.4"}
    )
    assert Session.objects.get(pk=sid_of(ok(spoofed))).ip == "127.0.0.1"


@pytest.mark.parametrize(
    ("forwarded", "kept"), [("fe80::1%eth0", "fe80::1"), ("unknown", None), ("1.2.3.4\x00", None)]
)
def test_a_forwarded_address_the_database_cannot_take_is_kept_safely(member, settings, forwarded, kept):
    settings.IAM_NUM_PROXIES = 2  # one entry: the client wrote it
    response = ApiClient().call(
        "/auth/login", {"email": member.email, "password": PASSWORD}, headers={"X-Forwarded-For": forwarded}
    )
    assert Session.objects.get(pk=sid_of(ok(response))).ip == kept


def test_refresh_keeps_sid_and_amr_and_moves_last_used_at(member):
    session = login(member)
    record = Session.objects.get(pk=sid_of(session))
    Session.objects.filter(pk=record.pk).update(last_used_at=timezone.now() - dt.timedelta(hours=2))
    rotated = ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))
    again = ok(ApiClient(rotated["access_token"]).call("/auth/refresh"))
    for token in (*rotated.values(), *again.values()):
        assert (claims_of(token)["sid"], claims_of(token)["amr"]) == (str(record.pk), ["pwd"])
    record.refresh_from_db()
    assert timezone.now() - record.last_used_at < dt.timedelta(minutes=1)
    assert Session.objects.filter(account=member).count() == 1


def test_a_rotation_costs_no_more_round_trips_than_before(member, django_assert_max_num_queries):
    """The spent refresh token is one conditional UPDATE, not a locking read and a write, so the
    session's `last_used_at` rides along: spend, touch, new row, inside the request's transaction (here
    a savepoint and its release) with none of its own."""
    session = login(member)
    ok(describe(session["access_token"], member))  # the account is cached
    with django_assert_max_num_queries(5):
        ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))


@pytest.mark.parametrize(
    "overrides",
    [{"sid": "not-a-uuid"}, {"sid": 5}, {"amr": "pwd"}, {"amr": [1]}, {"sid": str(uuid.uuid4())}],
)
def test_a_token_with_a_bad_or_unknown_session_is_refused(member, overrides):
    token = jwt.encode(access_claims(member, **overrides), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    err(describe(token, member), 401, AUTH)


def test_a_token_naming_another_accounts_session_is_refused(member, other):
    theirs = sid_of(login(other))
    token = jwt.encode(access_claims(member, sid=theirs), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    err(describe(token, member), 401, AUTH)


def test_tokens_issued_before_sessions_were_records_work_until_the_version_moves(member):
    legacy = jwt.encode(access_claims(member), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    ok(describe(legacy, member))
    renewed = ok(ApiClient(legacy).call("/auth/refresh"))
    assert "sid" not in claims_of(renewed["access_token"])
    ok(describe(renewed["access_token"], member))
    ok(ApiClient(login(member)["access_token"]).call("/auth/revoke"))
    err(describe(legacy, member), 401, AUTH)
    err(describe(renewed["access_token"], member), 401, AUTH)


# sessions/list


def test_the_list_shows_the_callers_live_sessions_only(member, other):
    first, second = login(member, agent="first", ip="10.0.0.1"), login(member, agent="second", ip="::1")
    login(other)
    data = listed(first["access_token"])
    assert data["metadata"]["total"] == 2
    newest = data["sessions"][0]
    assert set(newest) == {
        "id",
        "account_id",
        "created_at",
        "last_used_at",
        "expires_at",
        "ip",
        "user_agent",
        "amr",
    }
    assert (newest["id"], newest["account_id"], newest["ip"], newest["user_agent"], newest["amr"]) == (
        sid_of(second),
        str(member.pk),
        "::1",
        "second",
        ["pwd"],
    )
    assert [
        row["id"]
        for row in listed(first["access_token"], {"options": {"order_bys": "created_at"}})["sessions"]
    ] == [
        sid_of(first),
        sid_of(second),
    ]
    # ended, expired and versioned-out sessions are not live
    ok(revoke(first["access_token"], sid_of(second)))
    third = login(member)
    Session.objects.filter(pk=sid_of(third)).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert [row["id"] for row in listed(first["access_token"])["sessions"]] == [sid_of(first)]
    ok(ApiClient(first["access_token"]).call("/auth/revoke"))
    fresh = login(member)
    assert [row["id"] for row in listed(fresh["access_token"])["sessions"]] == [sid_of(fresh)]


def test_the_list_filters_by_id_and_by_the_callers_own_account(member):
    first, second = login(member), login(member)
    body = {"filter": {"fields": {"id": sid_of(second)}}}
    assert [row["id"] for row in listed(first["access_token"], body)["sessions"]] == [sid_of(second)]
    mine = {"filter": {"fields": {"account_id": str(member.pk).upper()}}}
    assert listed(first["access_token"], mine)["metadata"]["total"] == 2


def test_another_accounts_sessions_are_for_operators_only(member, other, operator_api):
    theirs = login(other)
    mine = login(member)
    body = {"filter": {"fields": {"account_id": str(other.pk)}}}
    err(ApiClient(mine["access_token"]).call("/sessions/list", body), 403, OTHER_ACCOUNT)
    # an id of another account's session finds nothing among the caller's own
    by_id = {"filter": {"fields": {"id": sid_of(theirs)}}}
    assert listed(mine["access_token"], by_id)["sessions"] == []
    data = ok(operator_api.call("/sessions/list", body))
    assert [row["id"] for row in data["sessions"]] == [sid_of(theirs)]
    # without the filter, an operator's list is its own sessions too
    assert str(other.pk) not in {
        row["account_id"] for row in ok(operator_api.call("/sessions/list"))["sessions"]
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"filter": {"fields": {"account_id": "nope"}}}, 400, "invalid value for filter field: account_id"),
        ({"filter": {"fields": {"account_id": 5}}}, 400, "invalid value for filter field: account_id"),
        ({"filter": {"fields": {"account_id": None}}}, 400, "invalid value for filter field: account_id"),
        ({"filter": {"fields": {"ip": "1.2.3.4"}}}, 400, "unknown filter field: ip"),
        ({"options": {"order_bys": "updated_at"}}, 400, "unknown filter field: updated_at"),
        ({"options": {"limit": 0}}, 400, "options.limit must be at least 1"),
        # Sessions carry no tags: a filter by them is refused, not a 500 (schemathesis found it).
        ({"filter": {"tags": ["a"]}}, 400, "unknown filter field: tags"),
    ],
)
def test_list_validation(member, body, status, message):
    err(ApiClient(login(member)["access_token"]).call("/sessions/list", body), status, message)


def test_the_list_needs_a_token(api):
    err(api.call("/sessions/list"), 401, AUTH)
    err(api.call("/sessions/revoke", {"id": str(uuid.uuid4())}), 401, AUTH)


@pytest.mark.parametrize("limit", [5, 100])
def test_the_list_costs_fixed_queries_whatever_the_page(member, limit, django_assert_max_num_queries):
    token = login(member)["access_token"]
    for _ in range(30):
        sessions.issue_session(member, amr=["pwd"], ip="10.0.0.9", user_agent="batch")
    listed(token)
    with django_assert_max_num_queries(2):  # count, page; the caller from the cache
        data = listed(token, {"options": {"limit": limit}})
    assert data["metadata"]["count"] == min(limit, 31)


# sessions/revoke


def test_ending_one_session_refuses_its_tokens_at_once_while_the_other_lives(member, tenant):
    first, second = login(member), login(member)
    for session in (first, second):  # each read (and cached) as valid
        ok(describe(session["access_token"], member))
        assert validate(tenant, session["access_token"])["authorized"] is True
    assert ok(revoke(first["access_token"], sid_of(second))) == {"id": sid_of(second), "revoked": True}
    err(describe(second["access_token"], member), 401, AUTH)
    err(ApiClient(second["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    answer = validate(tenant, second["access_token"])
    assert (answer["authorized"], answer["reason"]) == (False, "token_revoked")
    ok(describe(first["access_token"], member))
    assert validate(tenant, first["access_token"])["authorized"] is True
    ok(ApiClient(first["refresh_token"]).call("/auth/refresh"))
    # the refused refresh token was not counted as reuse: the account's other sessions still live
    assert Account.objects.get(pk=member.pk).session_version == member.session_version


def test_ending_the_current_session_needs_no_recent_login(member):
    session = login(member)
    old = timezone.now() - dt.timedelta(seconds=settings.IAM_REAUTH_SECONDS + 60)
    token = _with_auth_time(member, session, old)
    ok(revoke(token, sid_of(session)))
    err(describe(token, member), 401, AUTH)


def _with_auth_time(account, session: dict, when: dt.datetime) -> str:
    """An access token of `session` whose login is `when`."""
    claims = access_claims(account, sid=sid_of(session), amr=["pwd"], auth_time=int(when.timestamp()))
    return jwt.encode(claims, settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")


def test_ending_another_session_needs_a_recent_login(member, settings):
    first, second = login(member), login(member)
    stale = _with_auth_time(member, first, timezone.now() - dt.timedelta(seconds=601))
    err(revoke(stale, sid_of(second)), 403, REAUTH)
    ok(describe(second["access_token"], member))
    settings.IAM_REAUTH_SECONDS = 3600
    ok(revoke(stale, sid_of(second)))
    err(describe(second["access_token"], member), 401, AUTH)


def test_a_token_without_a_session_ends_any_session_only_after_a_recent_login(member):
    target = login(member)
    legacy = access_claims(member, auth_time=int(time.time()) - 3600)
    token = jwt.encode(legacy, settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    err(revoke(token, sid_of(target)), 403, REAUTH)


def test_another_accounts_session_is_not_found(member, other):
    theirs, mine = login(other), login(member)
    err(revoke(mine["access_token"], sid_of(theirs)), 404, "session not found")
    err(revoke(mine["access_token"], uuid.uuid4()), 404, "session not found")
    ok(describe(theirs["access_token"], other))
    assert Session.objects.get(pk=sid_of(theirs)).revoked_at is None


def test_an_operator_ends_any_accounts_session(member, operator_api, operator):
    first, second = login(member), login(member)
    assert ok(operator_api.call("/sessions/revoke", {"id": sid_of(first)}))["revoked"] is True
    err(describe(first["access_token"], member), 401, AUTH)
    ok(describe(second["access_token"], member))
    [entry] = AuditEntry.objects.filter(action="session.revoke", resource_id=sid_of(first))
    assert (entry.actor_id, entry.workspace_id, entry.resource_type) == (operator.pk, None, "session")
    assert entry.changes == {"account_id": str(member.pk), "revoked": {"before": False, "after": True}}


def test_an_operators_stale_login_cannot_end_anothers_session(member, operator):
    target = login(member)
    claims = access_claims(operator, auth_time=int(time.time()) - 3600)
    stale = jwt.encode(claims, settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    err(revoke(stale, sid_of(target)), 403, REAUTH)


@pytest.mark.parametrize(
    ("body", "message"),
    [({}, "id required"), ({"id": "x"}, "invalid id"), ({"id": 5}, "id must be a UUID string")],
)
def test_revoke_validation(member, body, message):
    err(ApiClient(login(member)["access_token"]).call("/sessions/revoke", body), 400, message)


def test_ending_a_session_pushes_and_records_it_once(member, tenant):
    first, second = login(member, ip="10.7.7.7", agent="secret-agent"), login(member)
    ok(revoke(second["access_token"], sid_of(first)))
    ok(revoke(second["access_token"], sid_of(first)))  # again: already ended, nothing new
    pushed = events("session.revoked")  # once to each workspace of the account: the tenant and the root
    assert sorted(event["workspace_id"] for event in pushed) == sorted(
        [str(tenant.workspace_id), str(root_workspace().pk)]
    )
    for event in pushed:
        assert event["data"] == {
            "account_ids": [str(member.pk)],
            "resource": {"type": "account", "id": str(member.pk)},
            "session_id": sid_of(first),
        }
    [entry] = AuditEntry.objects.filter(action="session.revoke", resource_id=sid_of(first))
    assert entry.workspace_id is None and entry.actor_id == member.pk
    assert "10.7.7.7" not in str(entry.changes) and "secret-agent" not in str(entry.changes)


# auth/revoke


def test_revoke_except_current_keeps_only_the_callers_session(member, tenant):
    current, other_session = login(member), login(member)
    legacy = jwt.encode(access_claims(member), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    for token in (current["access_token"], other_session["access_token"], legacy):
        ok(describe(token, member))
    body = {"except_current": True}
    assert ok(ApiClient(current["access_token"]).call("/auth/revoke", body)) == {
        "account_id": str(member.pk),
        "revoked": True,
    }
    for token in (other_session["access_token"], legacy):
        err(describe(token, member), 401, AUTH)
    err(ApiClient(other_session["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    ok(describe(current["access_token"], member))
    assert validate(tenant, current["access_token"])["authorized"] is True
    assert validate(tenant, other_session["access_token"])["reason"] == "token_revoked"
    renewed = ok(ApiClient(current["refresh_token"]).call("/auth/refresh"))
    ok(describe(renewed["access_token"], member))
    assert [row["id"] for row in listed(renewed["access_token"])["sessions"]] == [sid_of(current)]


def test_revoke_except_current_with_the_refresh_token_keeps_that_session(member):
    current, other_session = login(member), login(member)
    ok(ApiClient(current["refresh_token"]).call("/auth/revoke", {"except_current": True}))
    err(describe(other_session["access_token"], member), 401, AUTH)
    ok(describe(current["access_token"], member))


def test_revoke_without_except_current_ends_every_session(member):
    current, other_session = login(member), login(member)
    ok(ApiClient(current["access_token"]).call("/auth/revoke", {"except_current": False}))
    for session in (current, other_session):
        err(describe(session["access_token"], member), 401, AUTH)


def test_revoke_except_current_from_a_token_without_a_session(member):
    """Such a token has no session to keep: every recorded session ends, the session version stays."""
    recorded = login(member)
    legacy = jwt.encode(access_claims(member), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256")
    ok(ApiClient(legacy).call("/auth/revoke", {"except_current": True}))
    err(describe(recorded["access_token"], member), 401, AUTH)
    ok(describe(legacy, member))


def test_revoke_validation_of_except_current(member):
    token = login(member)["access_token"]
    err(
        ApiClient(token).call("/auth/revoke", {"except_current": "yes"}),
        400,
        "except_current must be true or false",
    )


# The hot paths: no query when warm, the database the truth when the cache is not


def test_a_warm_bearer_check_makes_no_query(member, django_assert_num_queries):
    token = login(member)["access_token"]
    sessions.authenticate_token(token)
    with django_assert_num_queries(0):
        account, claims = sessions.authenticate_token(token)
    assert account.pk == member.pk and claims["sid"]


def test_a_warm_validation_of_a_session_token_makes_no_query(member, tenant, django_assert_num_queries):
    token = login(member)["access_token"]
    validate(tenant, token)
    with django_assert_num_queries(0):
        assert validate(tenant, token)["authorized"] is True


def test_a_session_ended_with_the_cache_down_is_refused(member, tenant, monkeypatch):
    first, second = login(member), login(member)
    ok(describe(second["access_token"], member))  # cached as valid
    break_cache(monkeypatch)
    ok(revoke(first["access_token"], sid_of(second)))
    err(describe(second["access_token"], member), 401, AUTH)
    assert validate(tenant, second["access_token"])["reason"] == "token_revoked"
    ok(describe(first["access_token"], member))


def test_an_ended_session_stays_refused_with_the_cache_flushed_or_down(member, tenant, monkeypatch):
    first, second = login(member), login(member)
    ok(revoke(first["access_token"], sid_of(second)))
    cache.clear()
    err(describe(second["access_token"], member), 401, AUTH)
    break_cache(monkeypatch)
    err(describe(second["access_token"], member), 401, AUTH)
    err(ApiClient(second["refresh_token"]).call("/auth/refresh"), 401, AUTH)
    assert validate(tenant, second["access_token"])["reason"] == "token_revoked"
    ok(describe(first["access_token"], member))
    assert validate(tenant, first["access_token"])["authorized"] is True


def test_the_revocation_purges_an_entry_cached_mid_transaction(member, django_capture_on_commit_callbacks):
    first, second = login(member), login(member)
    ok(describe(second["access_token"], member))
    with django_capture_on_commit_callbacks(execute=True):
        ok(revoke(first["access_token"], sid_of(second)))
    err(describe(second["access_token"], member), 401, AUTH)


def test_a_signed_token_reports_the_claims_it_carries():
    """`tokens.sign` answers the claims it signed (what the OpenID Provider repeats in its answer and ID
    token without decoding the token): those `decode` reads, with `sub`, `jti` and `sid` as strings."""
    account_id, session_id = uuid.uuid4(), uuid.uuid4()
    signed = sign(
        account_id,
        type=ACCESS,
        session_version=3,
        lifetime=dt.timedelta(minutes=5),
        auth_time=int(time.time()),
        not_after=timezone.now() + dt.timedelta(minutes=1),
        extra={"sid": str(session_id), "amr": ["pwd"], "scope": "openid"},
    )
    decoded = decode(signed.token, types={ACCESS})
    assert signed.claims == {
        **decoded,
        "sub": str(account_id),
        "jti": str(decoded["jti"]),
        "sid": str(session_id),
    }
    assert signed.claims["exp"] == int(signed.expires_at.timestamp())  # capped by `not_after`
