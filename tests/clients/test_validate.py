"""`POST /clients/validate` (docs/integration.md#validate-each-token-clientsvalidate) over HTTP: the answers,
the warm-cache budget of zero queries, and correctness right after a revoke, a rotation or a removed
membership, with the cache up or down."""

import datetime as dt
import uuid

import jwt
import pytest
import redis
from django.core.cache import caches
from django.test import override_settings

from authn import mfa, tokens
from clients import validation
from iam.platform.redis_cache import RedisCache
from rbac.models import Membership
from tenancy.workspace_cache import forget_authorization
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import AccountFactory, ClientFactory, MembershipFactory, ProjectFactory, RoleFactory

PERMISSION_FORM = "permission must have the form resource:action (each side a name or *), or *"

FIELDS = {
    "authorized",
    "reason",
    "account",
    "service_account",
    "workspace_id",
    "roles",
    "permissions",
    "allowed",
    "expires_at",
}


pytestmark = pytest.mark.admin("clients:*", "memberships:*")


@pytest.fixture
def client(workspace):
    return ClientFactory(workspace=workspace)


@pytest.fixture
def user(workspace):
    account = AccountFactory()
    role = RoleFactory(workspace=workspace, name="editor", permissions=["projects:*", "roles:list"])
    membership = MembershipFactory(account=account, workspace=workspace, roles=[role])
    return account, membership


def validate(client, token, secret=None, **extra):
    body = {"client_id": str(client.pk), "client_secret": secret or client.secret, "token": token, **extra}
    data = ok(ApiClient().call("/clients/validate", body))
    assert set(data) == FIELDS
    return data


def test_authorized_member(client, user, workspace):
    account, _ = user
    token = tokens_of(account)
    data = validate(client, token, permission="projects:update")
    exp = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert data == {
        "authorized": True,
        "reason": None,
        "account": {
            "id": str(account.pk),
            "email": account.email,
            "name": account.name,
            "verified": True,
            "enabled": True,
        },
        "service_account": None,  # a person's token
        "workspace_id": str(workspace.pk),
        "roles": ["editor"],
        "permissions": ["projects:*", "roles:list"],
        "allowed": True,
        "expires_at": dt.datetime.fromtimestamp(exp, dt.UTC).isoformat().replace("+00:00", "Z"),
    }
    assert validate(client, token, permission="clients:delete")["allowed"] is False
    assert validate(client, token)["allowed"] is None


def tokens_of(account):
    return client_for(account).token


def test_project_scope_roles_count_only_for_their_project(client, workspace):
    account = AccountFactory()
    project, other = ProjectFactory(workspace=workspace), ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, name="deployer", permissions=["deploys:run"])
    MembershipFactory(account=account, workspace=workspace, scope="project", project=project, roles=[role])
    token = tokens_of(account)
    data = validate(client, token, permission="deploys:run", project_id=str(project.pk))
    assert (data["authorized"], data["roles"], data["permissions"], data["allowed"]) == (
        True,
        ["deployer"],
        ["deploys:run"],
        True,
    )
    data = validate(client, token, permission="deploys:run", project_id=str(other.pk))
    assert (data["authorized"], data["roles"], data["allowed"]) == (True, [], False)
    assert validate(client, token, permission="deploys:run")["allowed"] is False


def test_refusals(client, user, workspace, operator_api):
    account, _ = user
    token = tokens_of(account)
    unknown = validate(ClientFactory.build(workspace=workspace, secret=client.secret), token)  # never saved
    assert unknown == {
        "authorized": False,
        "reason": "invalid_client",
        "account": None,
        "service_account": None,
        "workspace_id": None,
        "roles": [],
        "permissions": [],
        "allowed": None,
        "expires_at": None,
    }
    assert validate(client, token, secret="wrong", permission="x:y")["reason"] == "invalid_client"
    assert validate(client, token, secret="wrong", permission="x:y")["allowed"] is False
    assert validate(client, "not-a-jwt")["reason"] == "invalid_token"
    refresh = ApiClient().call("/auth/refresh", headers={"Authorization": f"Bearer {token}"}).json()
    assert validate(client, refresh["data"]["refresh_token"])["reason"] == "invalid_token"
    expired, _ = tokens.issue(
        account.pk, type=tokens.ACCESS, session_version=account.session_version, lifetime=dt.timedelta(-1)
    )
    data = validate(client, expired)
    assert (data["authorized"], data["reason"], data["workspace_id"]) == (
        False,
        "token_expired",
        str(workspace.pk),
    )
    outsider = AccountFactory()
    data = validate(client, tokens_of(outsider), permission="projects:list")
    assert (data["authorized"], data["reason"], data["account"], data["roles"], data["allowed"]) == (
        False,
        "not_a_member",
        None,
        [],
        False,
    )
    suspended = AccountFactory()
    MembershipFactory(account=suspended, workspace=workspace, status="suspended")
    assert validate(client, tokens_of(suspended))["reason"] == "not_a_member"
    disabled = AccountFactory()
    MembershipFactory(account=disabled, workspace=workspace)
    disabled_token = tokens_of(disabled)
    assert validate(client, disabled_token)["authorized"] is True
    ok(operator_api.call("/accounts/update", {"id": str(disabled.pk), "enabled": False}))
    assert validate(client, disabled_token)["reason"] == "account_disabled"


def test_a_member_of_another_workspace_is_not_a_member(client, member_of):
    stranger, _ = member_of(None, "*")
    assert validate(client, tokens_of(stranger))["reason"] == "not_a_member"


def test_body_validation(api, client):
    err(api.call("/clients/validate", {}), 400, "client_id required")
    err(api.call("/clients/validate", {"client_id": "x", "client_secret": "s", "token": "t"}), 400)
    err(
        api.call("/clients/validate", {"client_id": str(client.pk), "token": "t"}),
        400,
        "client_secret required",
    )
    err(
        api.call("/clients/validate", {"client_id": str(client.pk), "client_secret": "s"}),
        400,
        "token required",
    )
    err(api.call("/clients/validate", [1]), 400, "Invalid JSON structure.")
    err(api.call("/clients/validate", raw="{"), 400, "Malformed JSON syntax.")
    body = {"client_id": str(client.pk), "client_secret": "s", "token": "t"}
    err(api.call("/clients/validate", {**body, "permission": "bad perm"}), 400, PERMISSION_FORM)
    err(api.call("/clients/validate", {**body, "project_id": 3}), 400, "project_id must be a UUID string")
    err(api.call("/clients/validate", {**body, "permission": "a:" + "b" * 200}), 400)
    err(api.call("/clients/validate", {**body, "client_secret": ""}), 400, "client_secret required")
    err(api.call("/clients/validate", {**body, "token": 5}), 400, "token must be a string")
    assert (
        ok(api.call("/clients/validate", {**body, "permission": None, "project_id": None}))["allowed"] is None
    )
    # a Bearer header is not looked at: the endpoint is public
    bad = api.call("/clients/validate", body, headers={"Authorization": "Bearer garbage"})
    assert ok(bad)["reason"] == "invalid_client"


def test_warm_validation_makes_no_query(client, user, django_assert_num_queries):
    account, _ = user
    token = tokens_of(account)
    validate(client, token, permission="projects:update", project_id=str(uuid.uuid4()))
    with django_assert_num_queries(0):
        data = validate(client, token, permission="projects:update", project_id=str(uuid.uuid4()))
    assert data["authorized"] is True
    with django_assert_num_queries(0):
        assert validate(client, token, secret="wrong")["reason"] == "invalid_client"


def test_warm_validation_makes_no_round_trip_to_redis(client, user, monkeypatch):
    """Every entry the hot path reads (client, account, session, grants, the workspace's MFA policy) is
    served from process memory once warm: a key left out of the local layer costs a Redis round trip
    on every call."""
    if not isinstance(caches["default"], RedisCache):
        pytest.skip("the local layer belongs to the Redis cache (CI runs with REDIS_URL)")
    redis_client = caches["default"]._cache.get_client(None)
    account, _ = user
    token = tokens_of(account)
    trips = []
    mget = redis_client.mget

    def counted_mget(*args, **kwargs):
        trips.append(args)
        return mget(*args, **kwargs)

    monkeypatch.setattr(redis_client, "mget", counted_mget)
    for _ in range(20):  # a FLUSHDB by another suite's worker may empty the layer between two calls
        validate(client, token, permission="projects:update")
        trips.clear()
        assert validate(client, token, permission="projects:update")["authorized"] is True
        if not trips:
            return
    raise AssertionError(f"a warm clients/validate went to Redis every time, last for {trips}")


def _revoke_rotate_remove(client, user, admin):
    """The three changes that must be seen at once, each checked right after its API call. Before each,
    the answer is asked three times: computed, computed from process memory, then served as kept
    (`KeptAnswers`), where there is a cache."""
    account, membership = user
    token = tokens_of(account)

    def settled(token, secret=None):
        return [validate(client, token, secret=secret)["authorized"] for _ in range(3)] == [True] * 3

    assert settled(token)

    # membership removed
    ok(admin.call("/memberships/delete", {"id": str(membership.pk)}))
    assert validate(client, token)["reason"] == "not_a_member"
    assert not Membership.objects.filter(pk=membership.pk).exists()
    MembershipFactory(account=account, workspace=membership.workspace)
    forget_authorization(membership.workspace_id)  # as the membership service does
    assert settled(token)

    # token revoked
    ok(ApiClient(token).call("/auth/revoke"))
    assert validate(client, token)["reason"] == "token_revoked"
    account.refresh_from_db()
    fresh = tokens_of(account)
    assert settled(fresh)

    # secret rotated
    rotated = ok(admin.call("/clients/regenerate-secret", {"id": str(client.pk)}))
    assert validate(client, fresh)["reason"] == "invalid_client"
    assert settled(fresh, secret=rotated["secret"])

    # client deleted
    ok(admin.call("/clients/delete", {"id": str(client.pk)}))
    assert validate(client, fresh, secret=rotated["secret"])["reason"] == "invalid_client"


def test_changes_are_seen_at_once(client, user, admin, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        _revoke_rotate_remove(client, user, admin)


def test_changes_are_seen_at_once_with_the_cache_down(client, user, admin, cache_down):
    _revoke_rotate_remove(client, user, admin)


@override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}})
def test_changes_are_seen_at_once_without_a_cache(client, user, admin):
    _revoke_rotate_remove(client, user, admin)


def test_a_token_verified_once_is_not_verified_again_yet_still_expires(client, user, monkeypatch):
    account, _ = user
    token, _ = tokens.issue(
        account.pk,
        type=tokens.ACCESS,
        session_version=account.session_version,
        lifetime=dt.timedelta(seconds=30),
        auth_time=int(dt.datetime.now(dt.UTC).timestamp()),
    )
    assert validate(client, token)["authorized"] is True
    # With its key taken out of service the token would no longer verify: answered as before, it was not
    # verified again (the process's verified tokens), and it still expires at its `exp`.
    with override_settings(IAM_JWT_SIGNING_KEY="a-key-taken-out-of-service-" + "x" * 32):
        assert validate(client, token)["authorized"] is True
        exp = jwt.decode(token, options={"verify_signature": False})["exp"]
        monkeypatch.setattr(validation.time, "time", lambda: exp)
        assert validate(client, token)["reason"] == "token_expired"


def test_a_verified_token_is_verified_afresh_after_a_while(client, user, monkeypatch):
    account, _ = user
    token = tokens_of(account)
    assert validate(client, token)["authorized"] is True
    later = validation.time.time() + validation.VerifiedTokens.VERIFY_AGAIN_SECONDS + 1
    monkeypatch.setattr(validation.time, "time", lambda: later)
    with override_settings(IAM_JWT_SIGNING_KEY="a-key-taken-out-of-service-" + "x" * 32):
        assert validate(client, token)["reason"] == "invalid_token"


def test_other_methods_than_post_are_refused(api):
    err(api.call("/clients/validate", method="GET"), 405, "use POST")
    err(api.call("/clients/validate", method="PUT"), 405, "use POST")


def test_a_body_the_fast_reader_declines_is_answered_by_the_serializer(
    client, user, django_assert_num_queries
):
    """`clients/validate` reads a calling service's usual body itself and leaves any other to its request
    serializer: an unknown field changes nothing in the answer and costs no query once warm, and a
    malformed field beside it is the serializer's 400 naming that field."""
    account, _ = user
    token = tokens_of(account)
    expected = validate(client, token, permission="projects:update")
    with django_assert_num_queries(0):
        assert validate(client, token, permission="projects:update", unknown=1) == expected
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token, "unknown": 1}
    for field, value, message in [
        ("project_id", 3, "project_id must be a UUID string"),
        ("client_id", 5, "client_id must be a UUID string"),
        ("permission", "bad perm", PERMISSION_FORM),
        ("explain", "yes", "explain must be true or false"),
    ]:
        answer = err(ApiClient().call("/clients/validate", {**body, field: value}), 400, message)
        assert answer["field"] == field


@pytest.mark.admin("*")
def test_a_deleted_workspace_s_clients_stop_at_once(
    client, user, admin, workspace, django_capture_on_commit_callbacks
):
    """The workspace's cascade takes its clients: they stop validating, and reading their events, when the
    delete commits, as after `clients/delete`, not when their cached records expire. Another workspace's
    client is untouched."""
    account, _ = user
    token = tokens_of(account)
    other = ClientFactory()
    MembershipFactory(account=account, workspace=other.workspace)
    events = {"client_id": str(client.pk), "client_secret": client.secret}
    assert validate(client, token)["authorized"] is True
    assert validate(client, token)["authorized"] is True  # cached, where there is a cache
    assert validate(other, token)["authorized"] is True
    ok(ApiClient().call("/clients/events", events))

    with django_capture_on_commit_callbacks(execute=True):
        ok(admin.call("/workspace/delete", {"id": str(workspace.pk)}))

    assert validate(client, token)["reason"] == "invalid_client"
    err(ApiClient().call("/clients/events", events), 401, "invalid client")
    assert validate(other, token)["authorized"] is True


def test_an_mfa_token_is_no_access_token(client, user):
    account, _ = user
    mfa_token = mfa.challenge(account, amr=["pwd"])
    data = validate(client, mfa_token)
    assert data["authorized"] is False and data["reason"] == "invalid_token"


# Kept answers (clients/api/validate.py `KeptAnswers`): the same body again, while nothing it was answered
# from has changed, gets the same answer without computing it.


@pytest.fixture
def local_layer():
    if not isinstance(caches["default"], RedisCache):
        pytest.skip("answers are kept only beside the Redis cache's local layer (CI runs with REDIS_URL)")
    return caches["default"]._cache


def computing_refused(*args, **kwargs):
    raise AssertionError("computed")


def kept_answer_of(client, token, monkeypatch, **extra):
    """The answer to a body once it is kept: the first of up to 20 tries in which it is not computed (a
    FLUSHDB by another worker of the suite empties the local layer, and with it what is kept)."""
    for _ in range(20):
        validate(client, token, **extra)
        validate(client, token, **extra)  # computed from process memory: kept
        with monkeypatch.context() as patch:
            patch.setattr(validation, "validate", computing_refused)
            try:
                return validate(client, token, **extra)
            except AssertionError as error:
                if "computed" not in str(error):
                    raise
    raise AssertionError("the answer was never kept")


def test_a_warm_answer_is_kept_and_served_again(client, user, local_layer, monkeypatch):
    account, _ = user
    token = tokens_of(account)
    expected = validate(client, token, permission="projects:update")
    assert kept_answer_of(client, token, monkeypatch, permission="projects:update") == expected
    # another body (another permission asked) is computed
    monkeypatch.setattr(validation, "validate", computing_refused)
    with pytest.raises(AssertionError, match="computed"):
        validate(client, token, permission="roles:list")


def test_a_kept_answer_goes_when_another_process_changes_what_it_was_read_from(
    client, user, local_layer, monkeypatch
):
    """Another process's change reaches this one as a Redis report on one of the entries the answer was
    read from: the next call computes afresh (here: the account's entry, written as another worker's
    purge and reload would, now disabled)."""
    account, _ = user
    token = tokens_of(account)
    assert kept_answer_of(client, token, monkeypatch)["authorized"] is True
    Account = type(account)
    Account.objects.filter(pk=account.pk).update(enabled=False)
    other = redis.Redis(connection_pool=local_layer._get_connection_pool(True))
    other.delete(caches["default"].make_and_validate_key(f"account:{account.pk}"))
    assert validate(client, token)["reason"] == "account_disabled"


def test_refusals_of_the_client_or_the_token_are_not_kept(client, user, local_layer, monkeypatch):
    account, _ = user
    token = tokens_of(account)
    for _ in range(3):
        assert validate(client, token, secret="wrong")["reason"] == "invalid_client"
        assert validate(client, "not-a-token")["reason"] == "invalid_token"
    monkeypatch.setattr(validation, "validate", computing_refused)
    for secret, token_sent in (("wrong", token), (None, "not-a-token")):
        with pytest.raises(AssertionError, match="computed"):
            validate(client, token_sent, secret=secret)


def test_an_answer_that_made_a_statement_is_not_kept(client, user, local_layer, monkeypatch):
    """Only what the cache's process memory alone answered is kept: an answer that read the database
    (here a validation that queries beside its cached reads) is computed on every call."""
    account, _ = user
    token = tokens_of(account)
    computed = validation.validate

    def querying(**kwargs):
        Membership.objects.exists()
        return computed(**kwargs)

    monkeypatch.setattr(validation, "validate", querying)
    for _ in range(3):
        assert validate(client, token)["authorized"] is True
    monkeypatch.setattr(validation, "validate", computing_refused)
    with pytest.raises(AssertionError, match="computed"):
        validate(client, token)
