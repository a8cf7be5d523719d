"""The root workspace's `mfa_required` covers the global rights its roles grant
(docs/security.md#second-factors-and-the-workspace-mfa-policy): with it on, a one-factor session of a
root member holding `accounts:*` and `workspaces:*` reads and changes no account but its own, lists only
its own workspaces and reaches no other workspace through the root; operators are held too. Workspaces
acme and beta are tenants; dave is a member of acme only, with no global right."""

import pytest

from accounts.models import Account
from authn.sessions import issue_session
from iam.http.errors import ApiError
from rbac import policy
from tenancy.services import update_workspace
from tests.conftest import ApiClient, err, ok
from tests.factories import AccountFactory, MembershipFactory, RoleFactory, WorkspaceFactory

MFA = "mfa required by this workspace"
ONE_FACTOR = ["pwd"]
TWO_FACTORS = ["pwd", "otp", "mfa"]


def session_of(account, amr, workspace=None) -> ApiClient:
    token = issue_session(account, amr=amr)["access_token"]
    return ApiClient(token, str(workspace.pk) if workspace is not None else None)


@pytest.fixture
def root_requires_mfa(root):
    return update_workspace(root, mfa_required=True, actor=None)


@pytest.fixture
def tenants(db):
    return WorkspaceFactory(slug="acme"), WorkspaceFactory(slug="beta")


@pytest.fixture
def carol(root, tenants):
    """A root member holding the global rights, and an owner of workspace gamma of her own."""
    account = AccountFactory(email="carol@example.com")
    role = RoleFactory(workspace=root, permissions=["accounts:*", "workspaces:*", "audit:list"])
    MembershipFactory(account=account, workspace=root, roles=[role])
    gamma = WorkspaceFactory(slug="gamma")
    MembershipFactory(
        account=account, workspace=gamma, roles=[RoleFactory(workspace=gamma, permissions=["*"])]
    )
    return account


@pytest.fixture
def dave(tenants):
    account = AccountFactory(email="dave@example.com")
    acme, _ = tenants
    MembershipFactory(account=account, workspace=acme, roles=[RoleFactory(workspace=acme, permissions=["*"])])
    return account


def account_calls(target) -> list[tuple[str, dict]]:
    return [
        ("/accounts/list", {}),
        ("/accounts/describe", {"id": str(target.pk)}),
        ("/accounts/update", {"id": str(target.pk), "enabled": False}),
        ("/accounts/create", {"email": "new@example.com", "password": "a-long-passphrase", "name": "N"}),
        ("/accounts/delete", {"id": str(target.pk)}),
    ]


def test_accounts_need_the_roots_second_factor(root_requires_mfa, carol, dave):
    one = session_of(carol, ONE_FACTOR)
    for path, body in account_calls(dave):
        err(one.call(path, body), 403, MFA)
    dave.refresh_from_db()
    assert dave.enabled and not Account.objects.filter(email="new@example.com").exists()
    two = session_of(carol, TWO_FACTORS)
    assert len(ok(two.call("/accounts/list", {}))["accounts"]) == 2
    ok(two.call("/accounts/describe", {"id": str(dave.pk)}))
    assert ok(two.call("/accounts/update", {"id": str(dave.pk), "enabled": False}))["enabled"] is False


def test_an_account_still_describes_and_updates_itself(root_requires_mfa, carol, dave):
    """Self access is every account's (docs/api.md#accounts), no right the root grants: one factor is
    enough, except for its own flags, which are a global right."""
    for account in (carol, dave):
        one = session_of(account, ONE_FACTOR)
        ok(one.call("/accounts/describe", {"id": str(account.pk)}))
        assert (
            ok(one.call("/accounts/update", {"id": str(account.pk), "name": "Renamed"}))["name"] == "Renamed"
        )
    err(
        session_of(carol, ONE_FACTOR).call("/accounts/update", {"id": str(carol.pk), "verified": False}),
        403,
        MFA,
    )
    # dave holds no global right: the root's policy is not his to learn, nor is carol within his reach
    err(
        session_of(dave, ONE_FACTOR).call("/accounts/describe", {"id": str(carol.pk)}),
        404,
        "account not found",
    )
    err(session_of(dave, TWO_FACTORS).call("/accounts/list", {}), 403, "missing permission accounts:list")


def test_operators_are_held_too(root_requires_mfa, operator, dave):
    one = session_of(operator, ONE_FACTOR)
    for path, body in account_calls(dave):
        err(one.call(path, body), 403, MFA)
    ok(one.call("/accounts/describe", {"id": str(operator.pk)}))
    ok(session_of(operator, TWO_FACTORS).call("/accounts/list", {}))


def slugs(client) -> set[str]:
    return {workspace["slug"] for workspace in ok(client.call("/workspace/list", {}))["workspaces"]}


def test_workspace_list_answers_only_the_callers_own(root_requires_mfa, carol, dave, operator):
    assert slugs(session_of(carol, ONE_FACTOR)) == {"gamma"}  # root itself requires MFA
    assert slugs(session_of(carol, TWO_FACTORS)) == {"root", "acme", "beta", "gamma"}
    assert slugs(session_of(operator, ONE_FACTOR)) == set()
    assert slugs(session_of(operator, TWO_FACTORS)) == {"root", "acme", "beta", "gamma"}
    assert slugs(session_of(dave, ONE_FACTOR)) == {"acme"}


def test_another_workspace_through_the_root_needs_the_roots_second_factor(root_requires_mfa, carol, tenants):
    acme, _ = tenants
    one, two = session_of(carol, ONE_FACTOR), session_of(carol, TWO_FACTORS)
    err(one.call("/workspace/describe", {"slug": "acme"}), 403, MFA)
    err(one.call("/workspace/update", {"slug": "acme", "name": "Taken"}), 403, MFA)
    err(one.call("/workspace/delete", {"slug": "acme"}), 403, MFA)
    acme.refresh_from_db()
    assert acme.name != "Taken"
    ok(one.call("/workspace/describe", {"slug": "gamma"}))  # her own, by her own grant
    ok(two.call("/workspace/describe", {"slug": "acme"}))


def test_global_audit_entries_need_the_roots_second_factor(root_requires_mfa, carol, dave):
    ok(session_of(dave, ONE_FACTOR).call("/auth/revoke"))  # a global entry (`session.revoke`)
    dave.refresh_from_db()
    err(session_of(carol, ONE_FACTOR, root_requires_mfa).call("/audit/list", {}), 403, MFA)
    entries = ok(session_of(carol, TWO_FACTORS, root_requires_mfa).call("/audit/list", {}))["entries"]
    assert any(entry["workspace_id"] is None for entry in entries)
    err(
        session_of(dave, ONE_FACTOR, root_requires_mfa).call("/audit/list", {}),
        403,
        "not a member of this workspace",
    )


def test_without_the_policy_one_factor_holds_the_global_rights(root, carol, dave, tenants):
    one = session_of(carol, ONE_FACTOR)
    assert len(ok(one.call("/accounts/list", {}))["accounts"]) == 2
    assert slugs(one) == {"root", "acme", "beta", "gamma"}
    ok(one.call("/workspace/describe", {"slug": "acme"}))


# The same rules as `rbac.policy` decides them, in one table (with tests/rbac/test_policy_table.py)

ONE, TWO = {"amr": ONE_FACTOR}, {"amr": TWO_FACTORS}
DENIED = (403, MFA)


def missing(permission: str) -> tuple[int, str]:
    return 403, f"missing permission {permission}"


TABLE = [
    # (caller, permission, record, fields, claims, decision); None: the `admit` decision
    ("carol", "accounts:list", None, None, ONE, DENIED),
    ("carol", "accounts:list", None, None, TWO, None),
    ("carol", "accounts:describe", "dave", None, ONE, DENIED),
    ("carol", "accounts:describe", "carol", None, ONE, None),
    ("carol", "accounts:update", "carol", {"enabled": True}, ONE, DENIED),
    ("dave", "accounts:describe", "carol", None, ONE, missing("accounts:describe")),
    ("operator", "accounts:update", "dave", {"enabled": False}, ONE, DENIED),
    ("operator", "accounts:update", "dave", {"enabled": False}, TWO, None),
    ("carol", "workspaces:update", "acme", None, ONE, DENIED),
    ("carol", "workspaces:update", "acme", None, TWO, None),
    ("dave", "workspaces:update", "acme", None, ONE, None),  # his own workspace's grant
    # authorize alone; through get_object a stranger's workspace is a 404 first (`policy.reaches`)
    ("dave", "workspaces:update", "beta", None, ONE, (403, "missing permission workspaces:update")),
]


def decide(call) -> tuple[int, str] | None:
    try:
        call()
    except ApiError as exc:
        return exc.status, exc.message
    return None


@pytest.mark.parametrize(("caller", "permission", "record", "fields", "claims", "decision"), TABLE)
def test_the_policy_table(
    root_requires_mfa, carol, dave, operator, tenants, caller, permission, record, fields, claims, decision
):
    world = {"carol": carol, "dave": dave, "operator": operator, "acme": tenants[0], "beta": tenants[1]}
    account = world[caller]
    if record is None:
        decided = decide(lambda: policy.admit(account, None, permission, claims=claims))
    else:
        target = world[record]
        decided = decide(
            lambda: policy.authorize(account, None, permission, target, fields=fields, claims=claims)
        )
    assert decided == decision
