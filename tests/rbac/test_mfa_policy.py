"""A workspace's MFA policy (`mfa_required`, docs/security.md#second-factors-and-the-workspace-mfa-policy)
over HTTP, with two accounts and two workspaces: set by create and update, held on every call naming the
workspace (operators too), in its order among the other refusals, at once after a change, and by
`clients/validate` at zero queries when warm."""

import jwt
import pyotp
import pytest
from django.test import Client

from authn import mfa, tokens
from authn.sessions import issue_session
from iam.models import AuditEntry, Event
from tenancy.models import Workspace
from tests.conftest import ApiClient, err, ok
from tests.factories import (
    PASSWORD,
    AccountFactory,
    ClientFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)

MFA = "mfa required by this workspace"
ONE_FACTOR = ["pwd"]
TWO_FACTORS = ["pwd", "otp", "mfa"]
META = {"schema_version": "1"}


def session_of(account, amr, workspace=None) -> ApiClient:
    token = issue_session(account, amr=amr)["access_token"]
    return ApiClient(token, str(workspace.pk) if workspace is not None else None)


@pytest.fixture
def acme(db) -> Workspace:
    return WorkspaceFactory(slug="acme", mfa_required=True)


@pytest.fixture
def beta(db) -> Workspace:
    return WorkspaceFactory(slug="beta")


@pytest.fixture
def ada(acme, beta):
    """An owner (`*`) of both workspaces."""
    account = AccountFactory()
    for workspace in (acme, beta):
        owner = RoleFactory(workspace=workspace, permissions=["*"])
        MembershipFactory(account=account, workspace=workspace, roles=[owner])
    return account


@pytest.fixture
def bob(beta):
    """An owner of beta only."""
    account = AccountFactory()
    MembershipFactory(account=account, workspace=beta, roles=[RoleFactory(workspace=beta, permissions=["*"])])
    return account


def test_create_and_update_set_it_and_the_workspace_answers_it(ada, beta):
    owner = session_of(ada, TWO_FACTORS)
    body = {"name": "Gamma", "slug": "gamma", "config": META, "tags": [], "meta": META}
    assert ok(owner.call("/workspace/create", body))["mfa_required"] is False
    created = ok(owner.call("/workspace/create", {**body, "slug": "delta", "mfa_required": True}))
    assert created["mfa_required"] is True
    assert ok(owner.call("/workspace/describe", {"slug": "delta"}))["mfa_required"] is True
    err(owner.call("/workspace/update", {"slug": "delta", "mfa_required": "yes"}), 400)
    updated = ok(owner.call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    assert updated["mfa_required"] is True and Workspace.objects.get(pk=beta.pk).mfa_required
    listed = ok(owner.call("/workspace/list", {"filter": {"fields": {"id": str(beta.pk)}}}))["workspaces"]
    assert [workspace["mfa_required"] for workspace in listed] == [True]
    required = ok(owner.call("/workspace/list", {"filter": {"fields": {"mfa_required": True}}}))
    assert {workspace["slug"] for workspace in required["workspaces"]} == {"acme", "beta", "delta"}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/projects/list", {}),
        ("/roles/list", {}),
        ("/permissions/list", {}),
        ("/memberships/list", {}),
        ("/clients/list", {}),
        ("/invitations/list", {}),
        ("/audit/list", {}),
        ("/sso/list", {}),
        ("/permissions/check", {"account_id": None, "permission": "projects:list"}),
        ("/projects/create", {"name": "P", "config": META, "tags": [], "meta": META}),
    ],
)
def test_every_x_workspace_endpoint_needs_two_factors_there_only(ada, acme, beta, path, body):
    if "account_id" in body:
        body = {**body, "account_id": str(ada.pk)}
    err(session_of(ada, ONE_FACTOR, acme).call(path, body), 403, MFA)
    ok(session_of(ada, TWO_FACTORS, acme).call(path, body))
    ok(session_of(ada, ONE_FACTOR, beta).call(path, body))  # beta requires nothing


def test_the_workspace_endpoints_need_two_factors(ada, acme):
    one, two = session_of(ada, ONE_FACTOR), session_of(ada, TWO_FACTORS)
    for path, body in [
        ("/workspace/describe", {"slug": "acme"}),
        ("/workspace/update", {"id": str(acme.pk), "name": "Acme 2"}),
        ("/workspace/delete", {"slug": "acme"}),
    ]:
        err(one.call(path, body), 403, MFA)
    assert Workspace.objects.get(pk=acme.pk).name == acme.name
    ok(two.call("/workspace/describe", {"slug": "acme"}))
    ok(two.call("/workspace/update", {"slug": "acme", "mfa_required": False}))
    ok(one.call("/workspace/describe", {"slug": "acme"}))  # the policy is off now


def test_a_one_factor_session_does_not_see_the_workspace_in_its_list(ada, acme, beta):
    def slugs(client):
        return {workspace["slug"] for workspace in ok(client.call("/workspace/list", {}))["workspaces"]}

    assert slugs(session_of(ada, ONE_FACTOR)) == {"beta"}
    assert slugs(session_of(ada, TWO_FACTORS)) == {"acme", "beta"}


def test_operators_are_held_too(operator, acme, beta, root):
    one, two = session_of(operator, ONE_FACTOR, acme), session_of(operator, TWO_FACTORS, acme)
    err(one.call("/projects/list", {}), 403, MFA)
    err(session_of(operator, ONE_FACTOR).call("/workspace/describe", {"id": str(acme.pk)}), 403, MFA)
    ok(two.call("/projects/list", {}))
    ok(session_of(operator, TWO_FACTORS).call("/workspace/describe", {"id": str(acme.pk)}))
    ok(session_of(operator, ONE_FACTOR, beta).call("/projects/list", {}))


def test_the_order_among_the_other_refusals(ada, bob, acme):
    """401, then 400 workspace required, 404 workspace not found, 403 not a member: a stranger learns
    nothing of the policy; then the policy, before the permission."""
    err(ApiClient(None, str(acme.pk)).call("/projects/list", {}), 401)
    err(session_of(ada, ONE_FACTOR).call("/projects/list", {}), 400, "workspace required")
    err(ApiClient(session_of(ada, ONE_FACTOR).token, "nowhere").call("/projects/list", {}), 404)
    err(session_of(bob, ONE_FACTOR, acme).call("/projects/list", {}), 403, "not a member of this workspace")
    err(session_of(bob, ONE_FACTOR).call("/workspace/describe", {"slug": "acme"}), 404, "workspace not found")
    # A member without the permission: the policy first, then the permission.
    carol = AccountFactory()
    MembershipFactory(account=carol, workspace=acme, roles=[RoleFactory(workspace=acme, permissions=[])])
    err(session_of(carol, ONE_FACTOR, acme).call("/roles/list", {}), 403, MFA)
    err(session_of(carol, TWO_FACTORS, acme).call("/roles/list", {}), 403, "missing permission roles:list")
    err(session_of(carol, ONE_FACTOR).call("/workspace/describe", {"slug": "acme"}), 403, MFA)
    err(
        session_of(carol, TWO_FACTORS).call("/workspace/describe", {"slug": "acme"}),
        403,
        "missing permission workspaces:describe",
    )


def test_tokens_before_sessions_were_records_and_forged_claims_do_not_pass(ada, acme, settings):
    issued = jwt.decode(session_of(ada, ONE_FACTOR).token, options={"verify_signature": False})
    forged = jwt.encode({**issued, "amr": TWO_FACTORS}, "not-the-key", algorithm="HS256")
    err(ApiClient(forged, str(acme.pk)).call("/projects/list", {}), 401)
    no_amr = {key: value for key, value in issued.items() if key not in ("amr", "sid")}
    legacy, _ = tokens.issue(
        ada.pk,
        type=tokens.ACCESS,
        session_version=ada.session_version,
        lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME,
        auth_time=no_amr["auth_time"],
    )
    err(ApiClient(legacy, str(acme.pk)).call("/projects/list", {}), 403, MFA)


def test_turning_it_on_refuses_at_once_audited_and_pushed(ada, bob, beta, django_capture_on_commit_callbacks):
    one = session_of(ada, ONE_FACTOR, beta)
    ok(one.call("/projects/list", {}))  # the workspace is cached now
    with django_capture_on_commit_callbacks(execute=True):
        ok(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    err(one.call("/projects/list", {}), 403, MFA)
    err(session_of(bob, ONE_FACTOR, beta).call("/projects/list", {}), 403, MFA)  # its author too
    entry = AuditEntry.objects.filter(action="workspace.update", workspace_id=beta.pk).latest("occurred_at")
    assert entry.changes["mfa_required"] == {"before": False, "after": True}
    assert entry.actor_id == bob.pk
    pushed = [event.payload["type"] for event in Event.objects.filter(workspace_id=beta.pk)]
    assert pushed == ["workspace.updated"]


def test_creating_it_on_is_audited(ada):
    body = {"name": "Delta", "slug": "delta", "config": META, "tags": [], "meta": META, "mfa_required": True}
    created = ok(session_of(ada, TWO_FACTORS).call("/workspace/create", body))
    entry = AuditEntry.objects.get(action="workspace.create", resource_id=created["id"])
    assert entry.changes["mfa_required"] == {"before": None, "after": True}


FIRST = "use a second factor in this session before requiring one"


def test_turning_it_on_needs_a_session_that_meets_it(ada, bob, acme, beta, operator):
    """Nobody locks themselves out: a one-factor session cannot turn the policy on, by update or at
    create; a two-factor one can, and the operator (who can turn it off again in the admin) is exempt.
    Sending it while it is on already, or turning it off, needs nothing more."""
    body = {"name": "Delta", "slug": "delta", "config": META, "tags": [], "meta": META, "mfa_required": True}
    err(session_of(bob, ONE_FACTOR).call("/workspace/create", body), 403, FIRST)
    err(
        session_of(bob, ONE_FACTOR).call("/workspace/update", {"slug": "beta", "mfa_required": True}),
        403,
        FIRST,
    )
    assert not Workspace.objects.filter(slug="delta").exists()
    assert not Workspace.objects.get(pk=beta.pk).mfa_required
    ok(session_of(bob, ONE_FACTOR).call("/workspace/update", {"slug": "beta", "mfa_required": False}))
    ok(session_of(bob, ONE_FACTOR).call("/workspace/create", {**body, "mfa_required": False}))
    # bob is no member of acme: its policy is not his to learn, with one factor or two
    err(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "acme", "mfa_required": True}), 404)
    ok(session_of(ada, TWO_FACTORS).call("/workspace/update", {"slug": "acme", "mfa_required": True}))
    ok(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    ok(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    ok(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "beta", "mfa_required": False}))
    ok(session_of(operator, ONE_FACTOR).call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    ok(session_of(operator, ONE_FACTOR).call("/workspace/create", {**body, "slug": "epsilon"}))


def test_a_login_through_the_workspaces_own_sso_may_turn_it_on(bob, beta):
    """Such a session meets the policy of that workspace only."""
    gamma = WorkspaceFactory(slug="gamma")
    MembershipFactory(account=bob, workspace=gamma, roles=[RoleFactory(workspace=gamma, permissions=["*"])])
    token = issue_session(bob, amr=["fed"], sso_workspace_id=beta.pk)["access_token"]
    err(ApiClient(token).call("/workspace/update", {"slug": "gamma", "mfa_required": True}), 403, FIRST)
    ok(ApiClient(token).call("/workspace/update", {"slug": "beta", "mfa_required": True}))


def test_an_admin_of_one_workspace_cannot_touch_the_other(bob, acme, beta):
    """bob owns beta; acme requires MFA and bob is not in it."""
    err(
        session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "acme", "mfa_required": False}),
        404,
        "workspace not found",
    )
    err(
        session_of(bob, TWO_FACTORS, beta).call(
            "/workspace/update", {"id": str(acme.pk), "mfa_required": False}
        ),
        404,
    )
    assert Workspace.objects.get(pk=acme.pk).mfa_required is True


# clients/validate


def validate(client, token) -> dict:
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token}
    return ok(ApiClient().call("/clients/validate", body))


def test_validate_answers_mfa_required(ada, acme, beta):
    acme_client, beta_client = ClientFactory(workspace=acme), ClientFactory(workspace=beta)
    one, two = session_of(ada, ONE_FACTOR).token, session_of(ada, TWO_FACTORS).token
    refused = validate(acme_client, one)
    assert (refused["authorized"], refused["reason"], refused["account"], refused["roles"]) == (
        False,
        "mfa_required",
        None,
        [],
    )
    assert validate(acme_client, two)["authorized"] is True
    assert validate(beta_client, one)["authorized"] is True
    stranger = session_of(AccountFactory(), ONE_FACTOR).token
    assert validate(acme_client, stranger)["reason"] == "not_a_member"


def test_validate_stays_at_zero_queries_and_sees_the_change_at_once(
    ada, bob, beta, django_assert_num_queries, django_capture_on_commit_callbacks
):
    client = ClientFactory(workspace=beta)
    one, two = session_of(ada, ONE_FACTOR).token, session_of(ada, TWO_FACTORS).token
    validate(client, one)
    validate(client, two)
    with django_assert_num_queries(0):
        assert validate(client, one)["authorized"] is True
    with django_capture_on_commit_callbacks(execute=True):
        ok(session_of(bob, TWO_FACTORS).call("/workspace/update", {"slug": "beta", "mfa_required": True}))
    assert validate(client, one)["reason"] == "mfa_required"
    validate(client, two)
    with django_assert_num_queries(0):
        assert validate(client, one)["reason"] == "mfa_required"
        assert validate(client, two)["authorized"] is True


def test_validate_with_the_cache_down(ada, acme, cache_down):
    client = ClientFactory(workspace=acme)
    assert validate(client, session_of(ada, ONE_FACTOR).token)["reason"] == "mfa_required"
    assert validate(client, session_of(ada, TWO_FACTORS).token)["authorized"] is True


def test_the_whole_two_step_login_meets_it(ada, acme, monkeypatch):
    """Through the API: a password login is one factor; the TOTP step makes it two, and a refresh keeps
    it."""
    now = 1_900_000_005.0
    monkeypatch.setattr(mfa, "_now", lambda: now)
    CredentialFactory(account=ada)
    api = Client()

    def call(path, body, token=None, workspace=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if workspace:
            headers["X-Workspace"] = workspace
        return api.post(path, body, content_type="application/json", headers=headers)

    login = {"email": ada.email, "password": PASSWORD}
    token = ok(call("/auth/login", login))["access_token"]
    err(call("/projects/list", {}, token, "acme"), 403, MFA)
    secret = ok(call("/auth/mfa/totp/enroll", {}, token))["secret"]
    ok(call("/auth/mfa/totp/confirm", {"code": pyotp.TOTP(secret).at(now)}, token))
    challenge = ok(call("/auth/login", login))["mfa_token"]
    verified = ok(call("/auth/mfa/verify", {"mfa_token": challenge, "code": pyotp.TOTP(secret).at(now + 30)}))
    ok(call("/projects/list", {}, verified["access_token"], "acme"))
    refreshed = ok(call("/auth/refresh", {}, verified["refresh_token"]))
    ok(call("/projects/list", {}, refreshed["access_token"], "acme"))
