"""Authorization, decided in one place (docs/api.md#authorization, #invitations; docs/architecture.md).

Every API request is decided by two functions of this module: `admit` before the body is read (the
endpoint's declared permission, asked by `EndpointPermission`, the DRF permission class at the end of this
module), and `authorize` once `get_object` (below) has found the object the request names within the
caller's reach (`reaches`; else 404). Every rule reads here: wildcards (`matches`), project scope
(`Grants.allows`), self access on accounts and root-workspace rights for global resources (`authorize`),
no escalation (`require_grantable`), consent (`require_activation`), the operators' credential fields
(`require_credential_change`) and what an SSO connection trusts (`require_provider_change`);
tests/rbac/test_policy_table.py holds them in one table. `clients/validate`
reads the same grants. The grants of an (account, workspace) pair are cached under the workspace's
authorization generation, which every change to memberships, roles, permissions or projects bumps."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from django.conf import settings
from django.db.models import Q, QuerySet

from accounts.models import Account
from iam.http.errors import ApiError
from iam.platform import cache, events
from tenancy.models import Project, Workspace
from tenancy.workspace_cache import authz_generation, generation_key, root_workspace

from .machine_cache import SERVICE_ACCOUNT_CLAIM
from .models import Membership, ServiceAccount


def matches(granted: str, wanted: str) -> bool:
    """`resource:action`, `resource:*`, `*:action` and `*` (docs/api.md#authorization)."""
    if granted == "*" or granted == wanted:
        return True
    granted_resource, _, granted_action = granted.partition(":")
    wanted_resource, _, wanted_action = wanted.partition(":")
    return granted_resource in ("*", wanted_resource) and granted_action in ("*", wanted_action)


def allows(granted: Iterable[str], wanted: str) -> bool:
    return any(matches(name, wanted) for name in granted)


def _sides(name: str) -> tuple[str, str]:
    if name == "*":
        return "*", "*"
    resource, _, action = name.partition(":")
    return resource, action


def covers(granted: str, wanted: str) -> bool:
    """The docs/api.md#authorization escalation rule: holding `granted` lets a caller grant `wanted`. Unlike
    `matches`, a wildcard is covered only by an equal or wider wildcard: `projects:*` covers `projects:create`
    and `projects:*`, but `projects:create` does not cover `projects:*`, nor `*:create` cover `projects:*`."""
    return all(held in ("*", want) for held, want in zip(_sides(granted), _sides(wanted), strict=True))


def uncovered(granted: Iterable[str], wanted: Iterable[str]) -> set[str]:
    granted = list(granted)
    return {name for name in wanted if not any(covers(held, name) for held in granted)}


@dataclass(frozen=True)
class Grants:
    """What the account's active memberships in one workspace give it."""

    member: bool = False
    roles: frozenset[str] = frozenset()
    permissions: frozenset[str] = frozenset()
    project_roles: dict[str, frozenset[str]] = field(default_factory=dict)
    project_permissions: dict[str, frozenset[str]] = field(default_factory=dict)

    def allows(self, permission: str, project_id: UUID | str | None = None) -> bool:
        if allows(self.permissions, permission):
            return True
        return project_id is not None and allows(
            self.project_permissions.get(str(project_id), ()), permission
        )

    def allows_in_some_project(self, permission: str) -> bool:
        return any(allows(names, permission) for names in self.project_permissions.values())

    def projects_allowing(self, permission: str) -> list[str]:
        return [project for project, names in self.project_permissions.items() if allows(names, permission)]


def _load_grants(account_id: UUID, workspace_id: UUID) -> Grants:
    memberships = {
        membership_id: (scope, project_id)
        for membership_id, scope, project_id in Membership.objects.filter(
            account_id=account_id, workspace_id=workspace_id, status=Membership.Status.ACTIVE
        ).values_list("id", "scope", "project_id")
    }
    if not memberships:
        return _service_account_grants(account_id, workspace_id)
    roles: set[str] = set()
    permissions: set[str] = set()
    project_roles: dict[str, set[str]] = {}
    project_permissions: dict[str, set[str]] = {}
    rows = Membership.roles.through.objects.filter(membership_id__in=memberships).values_list(
        "membership_id", "role__name", "role__permissions__name"
    )
    for membership_id, role, permission in rows:
        scope, project_id = memberships[membership_id]
        if scope == Membership.Scope.WORKSPACE:
            role_set, permission_set = roles, permissions
        else:
            role_set = project_roles.setdefault(str(project_id), set())
            permission_set = project_permissions.setdefault(str(project_id), set())
        role_set.add(role)
        if permission is not None:
            permission_set.add(permission)
    return Grants(
        member=True,
        roles=frozenset(roles),
        permissions=frozenset(permissions),
        project_roles={key: frozenset(value) for key, value in project_roles.items()},
        project_permissions={key: frozenset(value) for key, value in project_permissions.items()},
    )


def _service_account_grants(service_account_id: UUID, workspace_id: UUID) -> Grants:
    """A service account's roles in its own workspace, as a workspace-scope membership's
    (docs/api.md#service-accounts); nothing anywhere else. The id of an account matches no row."""
    rows = ServiceAccount.objects.filter(pk=service_account_id, workspace_id=workspace_id).values_list(
        "roles__name", "roles__permissions__name"
    )
    found = False
    roles: set[str] = set()
    permissions: set[str] = set()
    for role, permission in rows:
        found = True
        if role is not None:
            roles.add(role)
        if permission is not None:
            permissions.add(permission)
    if not found:
        return Grants()
    return Grants(member=True, roles=frozenset(roles), permissions=frozenset(permissions))


def grant_keys(account_id: UUID | str, workspace_id: UUID | str) -> list[str]:
    """The cache keys `grants()` reads, for a caller that fetches them with others in one round trip."""
    return [generation_key(workspace_id), f"grants:{workspace_id}:{account_id}"]


def grants(account_id: UUID, workspace_id: UUID, *, prefetched: dict | None = None) -> Grants:
    """One cache round trip when warm (none when the caller passes, as `prefetched`, what it fetched with
    `grant_keys`): the workspace's generation and the entry, which is only good when stored under that
    same generation."""
    generation_at, key = grant_keys(account_id, workspace_id)
    found = cache.get_many([generation_at, key]) if prefetched is None else prefetched
    generation = authz_generation(workspace_id, prefetched=found.get(generation_at, cache.MISSING))
    entry = found.get(key)
    if entry is not None and entry[0] == generation:
        return entry[1]
    loaded = _load_grants(account_id, workspace_id)
    cache.set(key, (generation, loaded), settings.IAM_AUTH_CACHE_SECONDS)
    return loaded


def has_permission(
    account: Account, workspace: Workspace, permission: str, *, project_id: UUID | str | None = None
) -> bool:
    if account.is_superuser:  # operators pass every check (docs/api.md#authorization)
        return True
    return grants(account.pk, workspace.pk).allows(permission, project_id)


def require(
    account: Account, workspace: Workspace, permission: str, *, project_id: UUID | str | None = None
) -> None:
    if not has_permission(account, workspace, permission, project_id=project_id):
        raise ApiError(403, f"missing permission {permission}")


CANNOT_GRANT = "cannot grant permissions you do not hold"


def require_grantable(
    account: Account | None,
    workspace: Workspace | UUID | str,
    names: Iterable[str],
    *,
    project_id: UUID | str | None = None,
) -> None:
    """docs/api.md#authorization, no escalation (Kubernetes RBAC's rule): a caller may attach a permission to
    a role, a role to a membership, or create or rename a permission, only when its own grants in the
    workspace at the same or a wider scope already cover every permission name the result grants.
    `project_id`: the result grants only in that project, so the caller's grants there count too. Operators,
    holders of `*` and the system (`account=None`: commands, bootstrap) are exempt."""
    if account is None or account.is_superuser:
        return
    held = grants(account.pk, getattr(workspace, "pk", workspace))
    scoped = held.permissions | (
        held.project_permissions.get(str(project_id), frozenset()) if project_id else frozenset()
    )
    if "*" in held.permissions:
        return
    if uncovered(scoped, names):
        raise ApiError(403, CANNOT_GRANT)


# Credentials (docs/api.md#credentials): what only an operator may change.

OPERATOR_ONLY_CREDENTIAL_FIELDS = frozenset(
    {"secret", "status", "kind", "provider", "new_provider_id", "new_email"}
)
OPERATOR_ONLY_CREDENTIAL = "only an operator may change this credential"


def require_credential_change(account: Account, fields: Iterable[str] | None) -> None:
    """`fields`: the request's fields; None for a delete. Members holding `credentials:update` may change
    `tags`, `meta` and `last_used_at`; a credential's secret, status, kind, provider, identity or e-mail,
    and its deletion, belong to operators: whoever may change them can take the account over."""
    if account.is_superuser:
        return
    if fields is None or OPERATOR_ONLY_CREDENTIAL_FIELDS.intersection(fields):
        raise ApiError(403, OPERATOR_ONLY_CREDENTIAL)


# SSO connections: whoever points one at a provider, or names the domains it vouches for, can sign in as
# their people (docs/security.md#enterprise-sso-linking).

SSO_PROVIDER_FIELDS = frozenset(
    {"issuer", "client_id", "client_secret", "idp_metadata_xml", "domains", "trust_provider_mfa"}
)


def require_provider_change(account: Account, workspace: Workspace, fields: Iterable[str]) -> None:
    """Changing what a connection trusts needs `*` in the workspace (operators pass)."""
    if SSO_PROVIDER_FIELDS.intersection(fields):
        require_grantable(account, workspace, ["*"])


# Consent (docs/api.md#invitations)

ONLY_INVITED_CAN_ACCEPT = "only the invited account can accept"


def require_activation(account: Account | None, membership: Membership, *, vouched: bool = False) -> None:
    """A membership that was never accepted becomes active only by its own account or an operator:
    `memberships/update` cannot make someone a member without consent. The system (`account=None`)
    activates one only for an account it vouches for (`vouched`: a workspace's directory, for an account
    of a domain the workspace has verified or one it created, docs/scim.md#what-maps-to-what)."""
    if membership.accepted_at is not None or (account is None and vouched):
        return
    if account is None or (not account.is_superuser and account.pk != membership.account_id):
        raise ApiError(403, ONLY_INVITED_CAN_ACCEPT)


def has_global_permission(account: Account, permission: str, *, claims: dict | None) -> bool:
    """Permissions on global resources are granted by roles in the root workspace (docs/api.md#accounts),
    and the root workspace's MFA policy covers them
    (docs/security.md#second-factors-and-the-workspace-mfa-policy): while it requires MFA, a session of
    `claims` that does not meet it holds none of them, operators included."""
    root = root_workspace()
    return has_permission(account, root, permission) and not mfa_unmet(claims, root)


def require_global(account: Account, permission: str, *, claims: dict | None) -> None:
    """A global permission: 403 `missing permission` without it, then 403 `mfa required by this
    workspace` (the root workspace's) for a session that does not meet the root's MFA policy."""
    root = root_workspace()
    if not has_permission(account, root, permission):
        raise ApiError(403, f"missing permission {permission}")
    require_mfa(claims, root)


# The two decisions every endpoint goes through


def admit(
    account: Account,
    workspace: Workspace | None,
    permission: str | None,
    *,
    project_scoped: bool = False,
    decided_on_object: bool = False,
    claims: dict | None = None,
) -> None:
    """Before the body (the docs/api.md#errors order): the endpoint's declared `permission`, in the
    `X-Workspace` workspace, or in the root workspace for a global resource (docs/api.md#accounts), with the
    root's MFA policy (`require_global`: `claims` are the caller's token's). `project_scoped`: a grant in some
    project admits, and `authorize` checks the record's project. `decided_on_object`: the permission
    depends on the object alone (self access, a workspace's own grants), so `authorize` decides it."""
    if permission is None or decided_on_object:
        return
    if workspace is None:
        require_global(account, permission, claims=claims)
        return
    if account.is_superuser:
        return
    held = grants(account.pk, workspace.pk)
    if held.allows(permission) or (project_scoped and held.allows_in_some_project(permission)):
        return
    raise ApiError(403, f"missing permission {permission}")


SELF_SERVICE = frozenset({"accounts:describe", "accounts:update"})
ACCOUNT_FLAGS = frozenset({"enabled", "verified"})


def project_of(record: object) -> UUID | None:
    """The project a record belongs to (a project is its own); None: the workspace itself."""
    if isinstance(record, Project):
        return record.pk
    return getattr(record, "project_id", None)


def reaches(account: Account, record: object, permission: str) -> bool:
    """A global record within the caller's reach: the account itself, a workspace where it holds an
    active membership, any with `permission` in the root workspace (operators: all). Out of reach is not
    found, whoever asks. A workspace's records are reached through the `X-Workspace` querysets."""
    if account.is_superuser or not isinstance(record, Account | Workspace):
        return True
    if isinstance(record, Account) and record.pk == account.pk:
        return True
    if isinstance(record, Workspace) and grants(account.pk, record.pk).member:
        return True
    # Reach is existence, not the right to act: the root's MFA policy is decided after (`authorize`).
    return has_permission(account, root_workspace(), permission)


def authorize(
    account: Account,
    workspace: Workspace | None,
    permission: str | None,
    record: object,
    *,
    project_scoped: bool = False,
    fields: Iterable[str] | None = None,
    claims: dict | None = None,
) -> None:
    """The decision on a record found within the caller's reach (`get_object`).

    - Global resources (`workspace` None): an account describes and updates itself, but not its
      `enabled`/`verified` flags; a workspace needs the permission in itself or in the root workspace,
      after its MFA policy; anything else needs the root workspace.
    - Credentials: only operators change a secret, status, kind, provider, identity or e-mail, or delete.
    - SSO connections: their provider, secret, domains and trust in the provider's MFA need `*`.
    - `project_scoped`: a project-scope grant counts for the record's own project only.

    `fields`: the request's fields (an update's changes); `claims`: the caller's token's, which a
    workspace's MFA policy reads (operators included)."""
    if permission is None:
        return
    if workspace is None and isinstance(record, Workspace):
        require_mfa(claims, record)  # a member without the permission learns the policy first
        if not has_permission(account, record, permission):
            require_global(account, permission, claims=claims)  # under the root's MFA policy too
        return
    fields = frozenset(fields or ())
    if workspace is None:
        # An account's own record is no right the root workspace grants: its MFA policy does not cover it.
        if not (
            permission in SELF_SERVICE
            and isinstance(record, Account)
            and record.pk == account.pk
            and not fields & ACCOUNT_FLAGS
        ):
            require_global(account, permission, claims=claims)
        return
    if account.is_superuser:
        return
    if permission == "credentials:update":
        require_credential_change(account, fields)
    elif permission == "credentials:delete":
        require_credential_change(account, None)
    elif permission == "sso:update" and record is not None:
        require_provider_change(account, workspace, fields)
    if project_scoped and record is not None:
        require(account, workspace, permission, project_id=project_of(record))


# A workspace's MFA policy (`mfa_required`)

MFA_REQUIRED = "mfa required by this workspace"
# The session claim that says which workspace's own SSO connection the login came through: signed with
# the token, so it costs no lookup and cannot be forged; a refresh keeps it as it keeps `amr`.
SSO_WORKSPACE_CLAIM = "sso_workspace"


def mfa_satisfied(claims: dict | None, workspace_id: UUID | str) -> bool:
    """Whether the session of `claims` meets a workspace's MFA policy: two factors were used (`amr` holds
    `mfa`, RFC 8176), or the login came through one of that workspace's own SSO connections (the
    workspace's provider then decides how its people sign in). Another workspace's SSO does not count."""
    if not claims:
        return False
    if claims.get(SERVICE_ACCOUNT_CLAIM):  # a machine: the policy is about how people sign in
        return True
    amr = claims.get("amr") or ()
    return "mfa" in amr or claims.get(SSO_WORKSPACE_CLAIM) == str(workspace_id)


def mfa_unmet(claims: dict | None, workspace: Workspace) -> bool:
    """Whether the workspace requires MFA and the session of `claims` does not meet it."""
    return workspace.mfa_required and not mfa_satisfied(claims, workspace.pk)


def require_mfa(claims: dict | None, workspace: Workspace) -> None:
    """A call naming a workspace that requires MFA, with a session that does not meet it: 403, whoever
    the caller is (operators too). Runs once the workspace is known and the caller is in it."""
    if mfa_unmet(claims, workspace):
        raise ApiError(403, MFA_REQUIRED)


def admin_needs_second_factor() -> bool:
    """The Django admin holds every operator's power over every workspace: while the root workspace
    requires MFA, an operator signs in to it with a second factor (and one without a factor sets one up
    first), and a browser session signed in without one may not use it."""
    return root_workspace().mfa_required


USE_A_SECOND_FACTOR_FIRST = "use a second factor in this session before requiring one"


def require_mfa_to_require(
    account: Account, claims: dict | None, workspace: Workspace | None, *, mfa_required: bool | None
) -> None:
    """Turning a workspace's `mfa_required` on (`workspace/create` with it, `workspace/update` from off to
    on; `workspace` None: one being created) needs a session that would meet it, so nobody locks
    themselves out of their own workspace. Operators are exempt: the admin can turn it off again."""
    if not mfa_required or account.is_superuser or (workspace is not None and workspace.mfa_required):
        return
    if not mfa_satisfied(claims, workspace.pk if workspace is not None else ""):
        raise ApiError(403, USE_A_SECOND_FACTOR_FIRST)


def without_unmet_mfa(workspaces: QuerySet, claims: dict | None) -> QuerySet:
    """`workspace/list`: a workspace whose MFA policy the session does not meet is left out, so a
    one-factor session reads nothing of it (its name, config, tags and meta included)."""
    if claims and "mfa" in (claims.get("amr") or ()):
        return workspaces
    unmet = Q(mfa_required=True)
    sso_workspace = (claims or {}).get(SSO_WORKSPACE_CLAIM)
    if sso_workspace:
        unmet &= ~Q(pk=sso_workspace)
    return workspaces.exclude(unmet)


def visible_projects(account: Account, workspace: Workspace, permission: str | None) -> list[str] | None:
    """For a project-scoped list: None when the caller holds the permission workspace-wide, else the
    projects in which a project-scope membership grants it."""
    if not permission or account.is_superuser:
        return None
    held = grants(account.pk, workspace.pk)
    if held.allows(permission):
        return None
    return held.projects_allowing(permission)


@events.register_account_workspaces
def workspaces_of(account_ids: Iterable[UUID | str]) -> set[UUID]:
    """Where events about these accounts go (docs/api.md#invitations): workspaces where they hold an accepted
    membership, and the root workspace, which holds their credentials. An invitation alone tells a
    workspace nothing more about an account."""
    account_ids = list(account_ids)
    found = set(
        Membership.objects.filter(account_id__in=account_ids, accepted_at__isnull=False)
        .values_list("workspace_id", flat=True)
        .distinct()
    )
    if Account.objects.filter(pk__in=account_ids, credentials__isnull=False).exists():
        found.add(root_workspace().pk)
    return found
