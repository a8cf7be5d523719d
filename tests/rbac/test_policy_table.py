"""Every authorization rule in one table (docs/architecture.md): the decisions
of `rbac.policy` that the endpoints reach through `admit` (before the body) and `get_object` (the record
found within reach, else 404, then `authorize`), and the escalation, consent and credential rules the
services and endpoints ask. Two workspaces and accounts of both: a grant in one workspace, or in one
project, never reaches the other."""

import uuid
from types import SimpleNamespace

import pytest

from accounts.models import Account
from authn.models import Credential
from iam.http.errors import ApiError
from rbac import policy
from rbac.api.access import get_object
from rbac.models import Membership
from sso.models import SsoConnection
from tenancy.models import Project, Workspace
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

ALLOWED = None
CANNOT_GRANT = (403, "cannot grant permissions you do not hold")
OPERATOR_ONLY = (403, "only an operator may change this credential")


def missing(permission: str) -> tuple[int, str]:
    return 403, f"missing permission {permission}"


@pytest.fixture
def w(db, root):
    """Workspace `a` with projects `p1`, `p2`; workspace `b`. `wide` holds projects, memberships,
    credentials:update and workspaces:describe across `a`; `p1` holds projects and memberships in project
    `p1` only; `stranger` holds `*` in `b`; `root_admin` holds accounts and workspaces in the root
    workspace; `plain` belongs nowhere; `invited` is invited to `a`; `sso_admin` holds `sso:*` in `a`,
    which has an SSO `connection`."""
    a, b = WorkspaceFactory(), WorkspaceFactory()
    p1, p2 = ProjectFactory(workspace=a), ProjectFactory(workspace=a)
    world = SimpleNamespace(a=a, b=b, p1=p1, p2=p2, root=root)

    def member(workspace, *permissions, **membership):
        account = AccountFactory()
        role = RoleFactory(workspace=workspace, permissions=list(permissions))
        MembershipFactory(account=account, workspace=workspace, roles=[role], **membership)
        return account

    world.wide = member(a, "projects:*", "memberships:*", "credentials:update", "workspaces:describe")
    world.p1_member = member(a, "projects:*", "memberships:*", scope=Membership.Scope.PROJECT, project=p1)
    world.stranger = member(b, "*")
    world.root_admin = member(root, "accounts:*", "workspaces:*")
    world.plain = AccountFactory()
    world.operator = AccountFactory(is_superuser=True)
    world.invited = AccountFactory()
    world.invitation = MembershipFactory(account=world.invited, workspace=a, status=Membership.Status.INVITED)
    world.credential = CredentialFactory(account=world.plain)
    world.sso_admin = member(a, "sso:*")
    world.connection = SsoConnection.objects.create(
        workspace=a, name="Okta", issuer="https://idp.test", client_id="c"
    )
    return world


def decide(call) -> tuple[int, str] | None:
    try:
        call()
    except ApiError as exc:
        return exc.status, exc.message
    return ALLOWED


ADMIT = [
    # (caller, workspace, permission, options, decision)
    ("p1_member", "a", "projects:describe", {"project_scoped": True}, ALLOWED),
    ("p1_member", "a", "projects:create", {}, missing("projects:create")),
    ("wide", "a", "projects:create", {}, ALLOWED),
    ("wide", "b", "projects:create", {}, missing("projects:create")),
    ("stranger", "a", "projects:describe", {"project_scoped": True}, missing("projects:describe")),
    ("operator", "a", "roles:create", {}, ALLOWED),
    ("plain", "a", None, {}, ALLOWED),
    ("plain", None, "accounts:list", {}, missing("accounts:list")),
    ("wide", None, "accounts:list", {}, missing("accounts:list")),
    ("root_admin", None, "accounts:list", {}, ALLOWED),
    ("plain", None, "accounts:describe", {"decided_on_object": True}, ALLOWED),
]


@pytest.mark.parametrize(("caller", "workspace", "permission", "options", "decision"), ADMIT)
def test_admit(w, caller, workspace, permission, options, decision):
    space = getattr(w, workspace) if workspace else None
    account = getattr(w, caller)
    assert decide(lambda: policy.admit(account, space, permission, **options)) == decision


AUTHORIZE = [
    # (caller, workspace, permission, record, fields, project_scoped, decision)
    # project scope (docs/api.md#authorization): a project-scope grant counts for its own project only
    ("p1_member", "a", "projects:describe", "p1", None, True, ALLOWED),
    ("p1_member", "a", "projects:describe", "p2", None, True, missing("projects:describe")),
    ("p1_member", "a", "memberships:create", "a", None, True, missing("memberships:create")),
    ("wide", "a", "projects:describe", "p2", None, True, ALLOWED),
    ("wide", "a", "memberships:create", "a", None, True, ALLOWED),
    # self access on accounts; everything else on accounts needs the root workspace
    # (docs/api.md#the-root-workspace, #authorization)
    ("plain", None, "accounts:describe", "plain", {"id": 1}, False, ALLOWED),
    ("plain", None, "accounts:update", "plain", {"name": "x"}, False, ALLOWED),
    ("plain", None, "accounts:update", "plain", {"enabled": False}, False, missing("accounts:update")),
    ("plain", None, "accounts:update", "plain", {"verified": True}, False, missing("accounts:update")),
    ("plain", None, "accounts:delete", "plain", None, False, missing("accounts:delete")),
    ("plain", None, "accounts:describe", "wide", None, False, missing("accounts:describe")),
    ("wide", None, "accounts:describe", "plain", None, False, missing("accounts:describe")),
    ("root_admin", None, "accounts:describe", "plain", None, False, ALLOWED),
    ("operator", None, "accounts:update", "plain", {"enabled": False}, False, ALLOWED),
    # a workspace's own endpoints: in itself or in the root workspace (non-members: `reaches`, below)
    ("wide", None, "workspaces:describe", "a", None, False, ALLOWED),
    ("wide", None, "workspaces:update", "a", None, False, missing("workspaces:update")),
    ("stranger", None, "workspaces:delete", "b", None, False, ALLOWED),
    ("root_admin", None, "workspaces:update", "a", None, False, ALLOWED),
    # credentials (docs/api.md#credentials): what only an operator may change
    ("wide", "a", "credentials:update", "credential", {"tags": []}, False, ALLOWED),
    ("wide", "a", "credentials:update", "credential", {"secret": "x"}, False, OPERATOR_ONLY),
    ("wide", "a", "credentials:update", "credential", {"new_email": "x@example.com"}, False, OPERATOR_ONLY),
    ("wide", "a", "credentials:delete", "credential", None, False, OPERATOR_ONLY),
    ("operator", "a", "credentials:delete", "credential", None, False, ALLOWED),
    # SSO connections: what a connection trusts needs `*` (who points it at a provider signs in as its
    # people); refused once the connection is found, so another workspace's is a 404
    ("sso_admin", "a", "sso:update", "connection", {"name": "x", "enabled": False}, False, ALLOWED),
    ("sso_admin", "a", "sso:update", "connection", {"issuer": "https://x.test"}, False, CANNOT_GRANT),
    ("sso_admin", "a", "sso:update", "connection", {"domains": []}, False, CANNOT_GRANT),
    ("sso_admin", "a", "sso:update", "connection", {"trust_provider_mfa": True}, False, CANNOT_GRANT),
    ("sso_admin", "a", "sso:update", None, {"client_id": "x"}, False, ALLOWED),  # the lookup's 404 follows
    ("operator", "a", "sso:update", "connection", {"client_secret": "x"}, False, ALLOWED),
]


@pytest.mark.parametrize(
    ("caller", "workspace", "permission", "record", "fields", "project_scoped", "decision"), AUTHORIZE
)
def test_authorize(w, caller, workspace, permission, record, fields, project_scoped, decision):
    space = getattr(w, workspace) if workspace else None
    target = getattr(w, record) if record else None
    account = getattr(w, caller)
    decided = decide(
        lambda: policy.authorize(
            account, space, permission, target, project_scoped=project_scoped, fields=fields
        )
    )
    assert decided == decision


NOT_FOUND = {"account": (404, "account not found"), "workspace": (404, "workspace not found")}

GET_OBJECT = [
    # (caller, X-Workspace, permission, what is named, fields, project_scoped, decision): found first,
    # then decided (docs/api.md#conventions): out of reach or unknown is 404 whoever asks, before any
    # rule on the record
    ("plain", None, "workspaces:describe", "unknown workspace", None, False, NOT_FOUND["workspace"]),
    ("root_admin", None, "workspaces:update", "unknown workspace", None, False, NOT_FOUND["workspace"]),
    ("operator", None, "workspaces:delete", "unknown workspace", None, False, NOT_FOUND["workspace"]),
    ("wide", None, "workspaces:describe", "b", None, False, NOT_FOUND["workspace"]),
    ("stranger", None, "workspaces:describe", "a", None, False, NOT_FOUND["workspace"]),
    ("wide", None, "workspaces:update", "a", None, False, missing("workspaces:update")),
    ("wide", None, "workspaces:describe", "a", None, False, ALLOWED),
    ("root_admin", None, "workspaces:update", "a", None, False, ALLOWED),
    ("operator", None, "workspaces:update", "b", None, False, ALLOWED),
    ("plain", None, "accounts:describe", "unknown account", None, False, NOT_FOUND["account"]),
    ("plain", None, "accounts:describe", "wide", None, False, NOT_FOUND["account"]),
    ("plain", None, "accounts:update", "plain", {"enabled": False}, False, missing("accounts:update")),
    ("plain", None, "accounts:update", "plain", {"name": "x"}, False, ALLOWED),
    ("root_admin", None, "accounts:describe", "unknown account", None, False, NOT_FOUND["account"]),
    ("root_admin", None, "accounts:describe", "wide", None, False, ALLOWED),
    ("p1_member", "a", "projects:describe", "unknown project", None, True, (404, "project not found")),
    ("p1_member", "a", "projects:describe", "p2", None, True, missing("projects:describe")),
    ("p1_member", "a", "projects:describe", "p1", None, True, ALLOWED),
    # a root credential named with another workspace's X-Workspace: 404 before the operators' rule
    ("wide", "a", "credentials:update", "credential", {"secret": "x"}, False, (404, "credential not found")),
    ("wide", "a", "credentials:delete", "credential", None, False, (404, "credential not found")),
    ("wide", "root", "credentials:update", "credential", {"secret": "x"}, False, OPERATOR_ONLY),
    ("operator", "a", "credentials:delete", "credential", None, False, (404, "credential not found")),
]

QUERYSETS = {"workspaces": Workspace.objects.all, "accounts": Account.objects.all}


def queryset_for(permission: str, space):
    resource = permission.split(":")[0]
    if resource in QUERYSETS:
        return QUERYSETS[resource]()
    model = {"projects": Project, "credentials": Credential}[resource]
    return model.objects.in_workspace(space)


@pytest.mark.parametrize(
    ("caller", "workspace", "permission", "named", "fields", "project_scoped", "decision"), GET_OBJECT
)
def test_get_object(w, caller, workspace, permission, named, fields, project_scoped, decision):
    space = getattr(w, workspace) if workspace else None
    target = uuid.uuid4() if named.startswith("unknown") else getattr(w, named).pk
    request = SimpleNamespace(user=getattr(w, caller), workspace=space, auth={"amr": ["pwd"]})
    decided = decide(
        lambda: get_object(
            request,
            queryset_for(permission, space),
            permission=permission,
            project_scoped=project_scoped,
            fields=fields or (),
            pk=target,
        )
    )
    assert decided == decision


GRANTABLE = [
    # (caller, names, project, decision): the docs/api.md#authorization escalation rule
    ("wide", ["projects:create"], None, ALLOWED),
    ("wide", ["projects:*"], None, ALLOWED),
    ("wide", ["*:create"], None, CANNOT_GRANT),
    ("wide", ["roles:create"], None, CANNOT_GRANT),
    ("p1_member", ["projects:create"], "p1", ALLOWED),
    ("p1_member", ["projects:create"], "p2", CANNOT_GRANT),
    ("p1_member", ["projects:create"], None, CANNOT_GRANT),
    ("stranger", ["projects:create"], None, CANNOT_GRANT),  # `*` in b is nothing in a
    ("operator", ["*"], None, ALLOWED),
    (None, ["*"], None, ALLOWED),  # the system: commands, bootstrap
]


@pytest.mark.parametrize(("caller", "names", "project", "decision"), GRANTABLE)
def test_require_grantable(w, caller, names, project, decision):
    account = getattr(w, caller) if caller else None
    project_id = getattr(w, project).pk if project else None
    assert decide(lambda: policy.require_grantable(account, w.a, names, project_id=project_id)) == decision


@pytest.mark.parametrize(
    ("caller", "vouched", "decision"),
    [
        ("invited", False, ALLOWED),
        ("wide", False, (403, "only the invited account can accept")),
        ("wide", True, (403, "only the invited account can accept")),  # only the system vouches
        ("stranger", False, (403, "only the invited account can accept")),
        ("operator", False, ALLOWED),
        (None, False, (403, "only the invited account can accept")),
        (None, True, ALLOWED),  # a workspace's directory, for an account of its own domain
    ],
)
def test_require_activation(w, caller, vouched, decision):
    """An invitation becomes active only by its own account or an operator; the system only
    for an account it vouches for (SCIM within the workspace's verified domains)."""
    account = getattr(w, caller) if caller else None
    assert decide(lambda: policy.require_activation(account, w.invitation, vouched=vouched)) == decision


def test_visible_projects(w):
    assert policy.visible_projects(w.p1_member, w.a, "projects:list") == [str(w.p1.pk)]
    assert policy.visible_projects(w.wide, w.a, "projects:list") is None
    assert policy.visible_projects(w.operator, w.a, "projects:list") is None
    assert policy.visible_projects(w.stranger, w.a, "projects:list") == []
