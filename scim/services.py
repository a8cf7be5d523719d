"""Every write of SCIM provisioning but the Groups' (`scim.groups`): the tokens (the API and the admin
call these), and the Users a workspace's directory asks for, mapped onto the services of the API so that
the same audit entries, push events, cache invalidation and quotas follow.

A SCIM request acts as no account: the services are called with `actor=None` inside an `iam.platform.context`
of kind `scim` whose actor id is the token's, so their audit entries name the token, and the quotas
hold (`tenancy.quotas.exempt`). The directory vouches only for its own people: the accounts of the domains
the workspace has verified, and those it created (`vouched_for`). It sees no one else, creates and links
no one else, and makes a membership active without the account's own consent only for them; it never
reaches an operator. What it may grant is bounded where its token is issued: only a caller who could
grant every permission of the workspace (`*`) issues one, since the directory can attach any role
(Group) of the workspace to any of its Users."""

import secrets
from uuid import UUID

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Account, account_of, normalize_email
from accounts.services import create_account, update_account
from authn.services import reclaim_account
from iam.http.errors import ApiError
from iam.platform import audit, crypto
from iam.platform.service_helpers import save_unique
from rbac import policy
from rbac.models import Membership
from rbac.services.memberships import create_membership, delete_membership, update_membership
from sso.models import SsoDomain
from sso.services import domain_of
from tenancy.models import Workspace

from .models import ScimToken, ScimUser

TOKEN_PREFIX = "scim_"
USED_EVERY_SECONDS = 60  # `last_used_at` is written at most this often per token


class ScimError(Exception):
    """An RFC 7644 section 3.12 error: `status`, `scimType` where one applies, and `detail`."""

    def __init__(self, status: int, detail: str, scim_type: str | None = None):
        super().__init__(detail)
        self.status, self.detail, self.scim_type = status, detail, scim_type


# Tokens


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@transaction.atomic
def create_token(workspace: Workspace, *, name: str, actor: Account | None) -> tuple[ScimToken, str]:
    """A new token of `workspace`'s SCIM service, and the token itself (answered once, stored as its keyed
    digest). The directory that holds it may attach any role of the workspace to any member, so the
    caller must be able to grant every permission (`*`): the escalation rule."""
    policy.require_grantable(actor, workspace, ["*"])
    raw = new_token()
    token = ScimToken(
        workspace=workspace,
        name=name,
        token_digest=crypto.digest(raw),
        created_by=account_of(actor),
        meta={"schema_version": "1"},
    )
    save_unique(token, ScimToken.objects.in_workspace(workspace), {"name": name}, force_insert=True)
    audit.record(
        "scimtoken.create",
        resource=("scimtoken", token.pk),
        workspace_id=workspace.pk,
        changes=audit.created(token, ("name",)),
        actor=actor,
    )
    return token, raw


@transaction.atomic
def delete_token(token: ScimToken, *, actor: Account | None) -> dict:
    """The directory holding it is refused from now on."""
    audit.record(
        "scimtoken.delete",
        resource=("scimtoken", token.pk),
        workspace_id=token.workspace_id,
        changes=audit.removed(token, ("name",)),
        actor=actor,
    )
    summary = {"id": str(token.pk)}
    token.delete()
    return summary


def authenticate(workspace_id: UUID, raw: str) -> ScimToken | None:
    """The token of this workspace that `raw` is, or None: a token of another workspace, an API token or
    anything else opens nothing here."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 128:
        return None
    token = (
        ScimToken.objects.select_related("workspace")
        .filter(token_digest=crypto.digest(raw), workspace_id=workspace_id)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > USED_EVERY_SECONDS:
        ScimToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


# Users: an account with a workspace membership


def verified_domains(workspace: Workspace) -> list[str]:
    return sorted(
        SsoDomain.objects.filter(workspace=workspace, verified_at__isnull=False).values_list(
            "domain", flat=True
        )
    )


def vouched_for(workspace: Workspace) -> Q:
    """The accounts the workspace's directory vouches for, as a condition on memberships: an address in a
    domain the workspace has verified for its SSO connection, or an account its SCIM created. Never an
    operator's: no tenant's directory reaches an account that administers the platform."""
    created = ScimUser.objects.filter(workspace=workspace, created_account=True).values("account_id")
    vouched = Q(account_id__in=created)
    for domain in verified_domains(workspace):
        vouched |= Q(account__email__endswith=f"@{domain}")  # addresses are stored lower-cased
    return vouched & Q(account__is_superuser=False)


USER_STATUSES = (Membership.Status.ACTIVE, Membership.Status.SUSPENDED)


def user_memberships(workspace: Workspace) -> QuerySet:
    """The memberships that make the workspace's Users: one workspace-scope membership per account, active
    or suspended (an invitation not yet accepted is the account's to accept, not the directory's), of an
    account the directory vouches for. Any other account is invisible to SCIM."""
    return (
        Membership.objects.in_workspace(workspace)
        .filter(scope=Membership.Scope.WORKSPACE, status__in=USER_STATUSES)
        .filter(vouched_for(workspace))
    )


def find_user(workspace: Workspace, account_id: str) -> Membership:
    """The User `account_id` names in this workspace (its workspace membership), else 404: an account
    that is no User here (no membership, an invited one, another workspace's, an address outside the
    workspace's domains, an operator) is not found."""
    try:
        UUID(str(account_id))
    except ValueError:
        raise ScimError(404, "user not found") from None
    membership = user_memberships(workspace).select_related("account").filter(account_id=account_id).first()
    if membership is None:
        raise ScimError(404, "user not found")
    return membership


EXISTS = "userName already exists"
OUTSIDE_DOMAINS = "userName must be in a verified domain of this workspace"


@transaction.atomic
def provision_user(
    workspace: Workspace, *, email: str, name: str | None, external_id: str | None, active: bool
) -> Membership:
    """`POST /Users`, for an address in a domain the workspace has verified only (else 400, whether or not
    an account has the address: no oracle). A new account is created verified (the directory vouches
    for its own domain); an existing one is linked (one never verified is reclaimed, as an SSO login
    reclaims it: whatever its earlier holder set ends). Its workspace membership is made active (or
    suspended, for `active: false`) with no roles, an invited one included. A User already, or an
    operator's account: 409 uniqueness."""
    email = normalize_email(email)
    if domain_of(email) not in verified_domains(workspace):
        raise ScimError(400, OUTSIDE_DOMAINS, "invalidValue")
    status = Membership.Status.ACTIVE if active else Membership.Status.SUSPENDED
    account = Account.objects.select_for_update().filter(email=email).first()
    link, created = None, account is None
    if account is None:
        account = create_account(
            email=email, name=name or email.partition("@")[0], password=None, verified=True
        )
        membership = None
    else:
        if account.is_superuser:
            raise ScimError(409, EXISTS, "uniqueness")
        link = ScimUser.objects.filter(workspace=workspace, account=account).first()
        membership = (
            Membership.objects.select_for_update()
            .in_workspace(workspace)
            .filter(account=account, scope=Membership.Scope.WORKSPACE)
            .first()
        )
        if membership is not None and membership.status != Membership.Status.INVITED:
            raise ScimError(409, EXISTS, "uniqueness")
        if not account.verified:
            reclaim_account(account, password=None, actor=None)
    if membership is None:
        membership = create_membership(
            workspace,
            account=account,
            scope=Membership.Scope.WORKSPACE,
            status=status,
            roles=[],
            tags=[],
            meta={"schema_version": "1"},
            actor=None,
        )
    else:  # invited: the directory vouches for its own domain
        update_membership(membership, status=status, actor=None, vouched=True)
    created = created or (link is not None and link.created_account)  # it stays the directory's
    defaults = {"external_id": external_id, "created_account": created}
    ScimUser.objects.update_or_create(workspace=workspace, account=account, defaults=defaults)
    return membership


def scim_user(membership: Membership) -> ScimUser | None:
    return ScimUser.objects.filter(
        workspace_id=membership.workspace_id, account_id=membership.account_id
    ).first()


@transaction.atomic
def update_user(
    membership: Membership,
    *,
    email: str | None = None,
    name: str | None = None,
    external_id: str | None = None,
    set_external_id: bool = False,
    active: bool | None = None,
) -> Membership:
    """A change the directory sends (PUT or PATCH). The address is the account's everywhere, so it does
    not change here (400 mutability); the name changes only on an account this workspace's directory
    created. `active` suspends or reactivates every membership of the account in the workspace."""
    account = membership.account
    if email is not None and normalize_email(email) != account.email:
        raise ScimError(400, "userName cannot change", "mutability")
    link = scim_user(membership)
    if set_external_id:
        if link is None:
            ScimUser.objects.create(
                workspace_id=membership.workspace_id, account=account, external_id=external_id
            )
        elif link.external_id != external_id:
            ScimUser.objects.filter(pk=link.pk).update(external_id=external_id)
    if name and link is not None and link.created_account and name != account.name:
        update_account(account, name=name, actor=None)
    if active is not None:
        set_active(membership, active)
    membership.refresh_from_db()
    return membership


def set_active(membership: Membership, active: bool) -> None:
    """`active: false` suspends every membership of the account in the workspace (its grants there end
    at once: the services drop the cached grants and push `membership.updated`); `true` makes the
    workspace membership active and resumes the suspended ones. The account is a User of the workspace
    (`find_user`), one its directory vouches for, so a membership it never accepted may become active."""
    memberships = (
        Membership.objects.select_for_update()
        .filter(workspace_id=membership.workspace_id, account_id=membership.account_id)
        .order_by("created_at", "pk")
    )
    for each in memberships:
        if active:
            resume = each.pk == membership.pk or each.status == Membership.Status.SUSPENDED
            if resume and each.status != Membership.Status.ACTIVE:
                update_membership(each, status=Membership.Status.ACTIVE, actor=None, vouched=True)
        elif each.status == Membership.Status.ACTIVE:
            update_membership(each, status=Membership.Status.SUSPENDED, actor=None)


@transaction.atomic
def deprovision_user(membership: Membership) -> None:
    """`DELETE /Users/<id>`: the account leaves the workspace (every membership of it there); the account
    itself stays."""
    memberships = Membership.objects.select_for_update().filter(
        workspace_id=membership.workspace_id, account_id=membership.account_id
    )
    for each in memberships:
        delete_membership(each, actor=None)
    # An account the directory created stays its own (`vouched_for`), its `externalId` forgotten.
    links = ScimUser.objects.filter(workspace_id=membership.workspace_id, account_id=membership.account_id)
    links.filter(created_account=False).delete()
    links.update(external_id=None)


def refuse(error: ApiError) -> ScimError:
    """An API service's refusal as SCIM says it: a conflict is `uniqueness`, a bad value `invalidValue`."""
    scim_type = {409: "uniqueness", 400: "invalidValue"}.get(error.status)
    return ScimError(error.status, error.message, scim_type)
