"""API keys of service accounts (docs/api.md#api-keys): `service-accounts/create-key|revoke-key`, a key as
Bearer on the API in its own workspace only, what refuses it, the audit entries of its calls, and a warm
key call that costs no query. Two workspaces throughout: each refusal fails without its rule."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from iam.models import AuditEntry, Event
from rbac.api.memberships import InviteeEndpoint
from rbac.machine_cache import forget_keys
from rbac.models import ServiceAccount, ServiceAccountKey
from tenancy.workspace_cache import forget_authorization, forget_workspace
from tests.conftest import ApiClient, break_cache, err, ok
from tests.endpoints import ENDPOINTS
from tests.factories import AccountFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.admin("service-accounts:*", "projects:*", "roles:*", "audit:list")

AUTH = "Authentication required or invalid credentials."
KEY = re.compile(r"iam_sk_[A-Za-z0-9_-]{43}")


@pytest.fixture
def deployer(workspace):
    return RoleFactory(workspace=workspace, name="deployer", permissions=["projects:*", "roles:list"])


@pytest.fixture
def service_account(admin, deployer):
    body = {"name": "ci", "role_ids": [str(deployer.pk)], "tags": [], "meta": {"schema_version": "1"}}
    return ok(admin.call("/service-accounts/create", body))


def new_key(api, service_account, **body) -> dict:
    return ok(api.call("/service-accounts/create-key", {"id": service_account["id"], "name": "prod", **body}))


@pytest.fixture
def key(admin, service_account):
    return new_key(admin, service_account)


@pytest.fixture
def other(member_of):
    """Another workspace, its admin and its own service account with a key."""
    workspace = WorkspaceFactory()
    _, api = member_of(workspace, "*")
    role = RoleFactory(workspace=workspace, permissions=["projects:*"])
    body = {"name": "theirs", "role_ids": [str(role.pk)], "tags": [], "meta": {"schema_version": "1"}}
    theirs = ok(api.call("/service-accounts/create", body))
    return workspace, api, theirs, new_key(api, theirs)


# create-key


def test_a_key_is_answered_once_and_stored_as_a_digest(admin, service_account, key):
    assert set(key) == {"id", "name", "key", "prefix", "created_at", "expires_at"}
    assert KEY.fullmatch(key["key"])
    assert key["prefix"] == key["key"][:12]
    assert key["expires_at"] is None
    stored = ServiceAccountKey.objects.get(pk=key["id"])
    assert key["key"] not in (stored.digest, stored.prefix)
    described = ok(admin.call("/service-accounts/describe", {"id": service_account["id"]}))
    assert described["keys"] == [
        {
            "id": key["id"],
            "name": "prod",
            "prefix": key["prefix"],
            "created_at": key["created_at"],
            "expires_at": None,
            "last_used_at": None,
        }
    ]
    assert key["key"] not in str(described)
    assert key["key"] not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_expires_at_must_be_in_the_future(admin, service_account):
    past = (timezone.now() - dt.timedelta(seconds=1)).isoformat()
    body = err(
        admin.call(
            "/service-accounts/create-key", {"id": service_account["id"], "name": "x", "expires_at": past}
        ),
        400,
        "expires_at must be in the future",
    )
    assert body["field"] == "expires_at"
    future = (timezone.now() + dt.timedelta(days=1)).replace(microsecond=0)
    created = new_key(admin, service_account, expires_at=future.isoformat())
    assert created["expires_at"] == future.isoformat().replace("+00:00", "Z")


def test_at_most_ten_live_keys(admin, service_account):
    for _ in range(10):
        new_key(admin, service_account)
    err(
        admin.call("/service-accounts/create-key", {"id": service_account["id"], "name": "11th"}),
        403,
        "quota reached: keys per service account (10)",
    )
    revoked = ServiceAccountKey.objects.filter(service_account_id=service_account["id"]).first()
    ok(admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": str(revoked.pk)}))
    new_key(admin, service_account)  # a revoked key is not live


def test_creating_a_key_needs_grants_covering_its_roles(member_of, workspace, admin, service_account):
    _, caller = member_of(workspace, "service-accounts:*", "projects:read")
    err(
        caller.call("/service-accounts/create-key", {"id": service_account["id"], "name": "x"}),
        403,
        "cannot grant permissions you do not hold",
    )
    _, wide = member_of(workspace, "service-accounts:*", "projects:*", "roles:list")
    new_key(wide, service_account)


def test_keys_of_another_workspace_are_out_of_reach(admin, other):
    _, _, theirs, their_key = other
    err(
        admin.call("/service-accounts/create-key", {"id": theirs["id"], "name": "x"}),
        404,
        "service account not found",
    )
    err(
        admin.call("/service-accounts/revoke-key", {"id": theirs["id"], "key_id": their_key["id"]}),
        404,
        "service account not found",
    )


# revoke-key


def test_revoke_key_refuses_the_key_at_once(admin, service_account, key):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))
    Event.objects.all().delete()
    answer = ok(
        admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": key["id"]})
    )
    assert answer == {"id": key["id"], "revoked": True}
    err(keyed.call("/projects/list", {}), 401, AUTH)
    assert ok(admin.call("/service-accounts/describe", {"id": service_account["id"]}))["keys"] == []
    event = Event.objects.get().payload
    assert event["type"] == "service_account.updated"
    assert event["data"]["service_account_ids"] == [service_account["id"]]
    # revoked already: not found
    err(
        admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": key["id"]}),
        404,
        "key not found",
    )


def test_revoke_key_of_another_service_account_or_unknown_is_not_found(admin, service_account, deployer):
    body = {"name": "second", "role_ids": [str(deployer.pk)], "tags": [], "meta": {"schema_version": "1"}}
    second = ok(admin.call("/service-accounts/create", body))
    their_key = new_key(admin, second)
    err(
        admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": their_key["id"]}),
        404,
        "key not found",
    )
    unknown = "0d8f2b6a-4c1e-4a3b-8f5d-9e7c1a3b5d24"
    err(
        admin.call("/service-accounts/revoke-key", {"id": service_account["id"], "key_id": unknown}),
        404,
        "key not found",
    )
    ok(ApiClient(their_key["key"]).call("/projects/list", {}))


def test_revoking_with_the_cache_down_is_still_refused(admin, service_account, key, monkeypatch):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))  # cached now
    ServiceAccountKey.objects.filter(pk=key["id"]).update(
        revoked_at=timezone.now()
    )  # as if a purge were lost
    break_cache(monkeypatch)
    err(keyed.call("/projects/list", {}), 401, AUTH)


# the key as Bearer


def test_a_key_acts_in_its_workspace_with_its_roles(workspace, key, other):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))  # no X-Workspace: its own
    ok(keyed.in_workspace(workspace).call("/projects/list", {}))
    ok(keyed.in_workspace(workspace.slug).call("/roles/list", {}))
    err(keyed.call("/roles/create", {}), 403, "missing permission roles:create")
    other_workspace = other[0]
    err(keyed.in_workspace(other_workspace).call("/projects/list", {}), 403, "not a member of this workspace")
    err(keyed.in_workspace("no-such-workspace").call("/projects/list", {}), 404, "workspace not found")


# Every endpoint that acts outside one workspace and reads a Bearer token: `auth/*`, `accounts/*`,
# `sessions/*`, `workspace/*`, an invitee's own (public, with an optional Bearer; docs/api.md#api-keys).
OUTSIDE = sorted(
    path
    for path, endpoint in ENDPOINTS.items()
    if not endpoint.workspace_scoped and (not endpoint.public or issubclass(endpoint, InviteeEndpoint))
)


def test_the_paths_contract_names_are_among_them():
    assert {
        "/auth/revoke",
        "/auth/refresh",
        "/accounts/describe",
        "/sessions/list",
        "/workspace/create",
    } <= set(OUTSIDE)


@pytest.mark.parametrize("path", OUTSIDE)
def test_a_key_opens_nothing_outside_its_workspace(key, path):
    err(ApiClient(key["key"]).call(path, {}), 401, AUTH)


def test_a_disabled_service_account_an_expired_or_unknown_key_are_refused(admin, service_account, key):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": False}))
    err(keyed.call("/projects/list", {}), 401, AUTH)
    ok(admin.call("/service-accounts/update", {"id": service_account["id"], "enabled": True}))
    ok(keyed.call("/projects/list", {}))
    soon = new_key(admin, service_account, expires_at=(timezone.now() + dt.timedelta(minutes=1)).isoformat())
    ok(ApiClient(soon["key"]).call("/projects/list", {}))
    ServiceAccountKey.objects.filter(pk=soon["id"]).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    forget_keys([ServiceAccountKey.objects.get(pk=soon["id"]).digest])
    err(ApiClient(soon["key"]).call("/projects/list", {}), 401, AUTH)
    err(ApiClient("iam_sk_" + "A" * 43).call("/projects/list", {}), 401, AUTH)
    err(ApiClient(key["key"] + "x").call("/projects/list", {}), 401, AUTH)


def test_a_deleted_service_accounts_key_is_refused(admin, service_account, key):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))
    ok(admin.call("/service-accounts/delete", {"id": service_account["id"]}))
    err(keyed.call("/projects/list", {}), 401, AUTH)


def test_role_changes_reach_the_key_at_once(admin, deployer, key):
    keyed = ApiClient(key["key"])
    ok(keyed.call("/projects/list", {}))
    ok(admin.call("/roles/update", {"id": str(deployer.pk), "permission_ids": []}))
    err(keyed.call("/projects/list", {}), 403, "missing permission projects:list")


def test_audit_entries_of_a_keys_calls_name_the_service_account_and_the_key(workspace, service_account, key):
    keyed = ApiClient(key["key"])
    project = ok(
        keyed.call(
            "/projects/create",
            {
                "name": "Built by CI",
                "tags": [],
                "meta": {"schema_version": "1"},
                "config": {"schema_version": "1"},
            },
        )
    )
    entry = AuditEntry.objects.get(action="project.create", resource_id=project["id"])
    assert entry.actor_kind == "service_account"
    assert str(entry.actor_id) == service_account["id"]
    assert entry.via == {"kind": "api_key", "id": key["id"]}
    assert entry.workspace_id == workspace.pk


def test_the_audit_list_shows_via(admin, key):
    ok(
        ApiClient(key["key"]).call(
            "/projects/create",
            {"name": "P", "tags": [], "meta": {"schema_version": "1"}, "config": {"schema_version": "1"}},
        )
    )
    entries = ok(admin.call("/audit/list", {"filter": {"fields": {"action": "project.create"}}}))
    assert entries["entries"][0]["via"] == {"kind": "api_key", "id": key["id"]}
    assert entries["entries"][0]["actor_kind"] == "service_account"


def test_last_used_at_is_kept(admin, service_account, key):
    ok(ApiClient(key["key"]).call("/projects/list", {}))
    described = ok(admin.call("/service-accounts/describe", {"id": service_account["id"]}))
    assert described["last_used_at"] is not None
    assert described["keys"][0]["last_used_at"] is not None


def test_a_service_account_creating_a_project_is_held_to_the_quota(key, settings):
    settings.IAM_QUOTA_PROJECTS = 0
    err(
        ApiClient(key["key"]).call(
            "/projects/create",
            {"name": "P", "tags": [], "meta": {"schema_version": "1"}, "config": {"schema_version": "1"}},
        ),
        403,
        "quota reached: projects (0)",
    )


def test_a_service_account_invites_as_no_account(workspace, service_account, key):
    account = AccountFactory()
    body = {
        "account_id": str(account.pk),
        "scope": "workspace",
        "status": "active",
        "role_ids": [],
        "tags": [],
        "meta": {"schema_version": "1"},
    }
    role = RoleFactory(workspace=workspace, permissions=["memberships:*"])
    ServiceAccount.objects.get(pk=service_account["id"]).roles.add(role)
    forget_authorization(workspace.pk)
    created = ok(ApiClient(key["key"]).call("/memberships/create", body))
    assert created["status"] == "invited"  # no consent from the account (docs/api.md#invitations)


def test_a_warm_key_call_costs_no_query(key, django_assert_max_num_queries):
    keyed = ApiClient(key["key"])
    err(keyed.call("/roles/create", {}), 403, "missing permission roles:create")  # warms the caches
    with django_assert_max_num_queries(0):
        err(keyed.call("/roles/create", {}), 403, "missing permission roles:create")


WORKSPACE_SCOPED = sorted(path for path, endpoint in ENDPOINTS.items() if endpoint.workspace_scoped)


@pytest.fixture
def almighty(member_of, workspace):
    """A key of a service account holding `*` in the workspace (made by an owner: only `*` grants `*`)."""
    _, owner = member_of(workspace, "*")
    role = RoleFactory(workspace=workspace, permissions=["*"])
    body = {"name": "root-ci", "role_ids": [str(role.pk)], "tags": [], "meta": {"schema_version": "1"}}
    created = ok(owner.call("/service-accounts/create", body))
    return ApiClient(new_key(owner, created)["key"])


@pytest.mark.parametrize("path", WORKSPACE_SCOPED)
def test_every_workspace_endpoint_takes_a_key_without_a_500(almighty, path):
    # An empty body: each endpoint answers its validation error or its answer, never a 500 because the
    # caller is no account.
    assert almighty.call(path, {}).status_code in (200, 400, 403, 404, 409)


def test_what_a_service_account_creates_names_no_account_as_its_creator(almighty, workspace):
    meta = {"schema_version": "1"}
    ok(almighty.call("/clients/create", {"name": "svc", "tags": [], "meta": meta}))
    ok(almighty.call("/scim-tokens/create", {"name": "Okta"}))
    invitation = ok(
        almighty.call(
            "/invitations/create", {"email": "new@example.com", "scope": "workspace", "role_ids": []}
        )
    )
    assert invitation["invited_by"] is None
    application = {
        "name": "Billing",
        "type": "web",
        "redirect_uris": ["https://billing.example.com/cb"],
        "tags": [],
        "meta": meta,
    }
    ok(almighty.call("/applications/create", application))
    entries = AuditEntry.objects.filter(workspace_id=workspace.pk, actor_kind="service_account")
    assert {"client.create", "scimtoken.create", "invitation.create", "application.create"} <= set(
        entries.values_list("action", flat=True)
    )


def test_a_workspace_requiring_mfa_does_not_refuse_its_service_accounts(workspace, key, member_of):
    workspace.mfa_required = True
    workspace.save()
    forget_workspace(workspace)
    ok(ApiClient(key["key"]).call("/projects/list", {}))
    _, person = member_of(workspace, "projects:*")  # a one-factor session of a person is refused
    err(person.call("/projects/list", {}), 403, "mfa required by this workspace")
