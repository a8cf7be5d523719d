"""Login through a workspace's SSO connection (docs/api.md#sso): the start (by e-mail or by connection), and
the callback, which shares the state, the callback steps and the account rules of every provider login
(`authn.oauth_state`, `authn.oauth`) and adds the ID token's checks, the verified-domain rule and the
just-in-time membership (`admit`, which a SAML connection's ACS shares: sso/saml_login.py)."""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential, OAuthState
from authn.oauth import Identity, SignedIn, SigninOutcome, finish, finish_for_signin, sign_in_identity
from authn.oauth_provider import OAuthFailure, Profile
from authn.oauth_state import begin, secret_of
from iam.http.errors import ApiError
from iam.platform import upstream
from rbac.models import Membership
from rbac.services.memberships import accept_invitation, create_membership
from tenancy.quotas import check_quota

from . import provider, saml, services
from .models import SsoConnection
from .provider import SSO_FAILED

PROVIDER = Credential.Provider.IDP_B


@dataclass(frozen=True)
class Redirect:
    """Where a login goes first, and the state it carries there (the page that started it keeps it)."""

    url: str
    state: str


def start(connection: SsoConnection, *, redirect_url: str, signin_next: str = "") -> Redirect:
    """A fresh state (PKCE S256 verifier, nonce) bound to the connection, and the provider's authorization
    URL. `signin_next`: started by the hosted sign-in page, whose callback goes on to that path. For a
    SAML connection, the IdP's single sign-on URL with an AuthnRequest whose ID derives from the nonce and
    the state as its RelayState (docs/saml.md)."""
    started = begin(
        PROVIDER, redirect_url=redirect_url, connection_id=connection.pk, nonce=True, signin_next=signin_next
    )
    if connection.protocol == SsoConnection.Protocol.SAML:
        try:
            url = saml.request_url(
                connection, authn_request_id=saml.request_id(started.nonce), relay_state=started.state
            )
        except Exception as exc:  # stored IdP data the toolkit no longer takes
            raise ApiError(503, "sso connection unusable") from exc
        return Redirect(url, started.state)
    try:
        config = services.provider_config(connection)
    except Exception as exc:  # an unreadable secret (IAM_ENCRYPTION_KEY changed)
        raise ApiError(503, "sso connection unusable") from exc
    url = provider.authorization_url(
        config, state=started.state, code_challenge=started.code_challenge, nonce=started.nonce
    )
    return Redirect(url, started.state)


def initiate(connection: SsoConnection, *, redirect_url: str, signin_next: str = "") -> str:
    """`start`'s URL."""
    return start(connection, redirect_url=redirect_url, signin_next=signin_next).url


def ensure_membership(connection: SsoConnection, account: Account) -> None:
    """Just in time: the account gets an active workspace membership with the connection's default roles
    (logging in through the workspace's own provider is its consent); an invitation it had is accepted
    with them, recorded as its acceptance. A membership an admin suspended stays suspended, and one
    already active keeps its roles. The roles count against the workspace's roles-per-membership quota
    as if the account had asked for them: past it, the login fails."""
    workspace = connection.workspace
    membership = (
        Membership.objects.in_workspace(workspace)
        .select_for_update()
        .filter(account=account, scope=Membership.Scope.WORKSPACE)
        .first()
    )
    roles = list(connection.default_roles.all())
    if membership is None or membership.status == Membership.Status.INVITED:
        held = set() if membership is None else set(membership.roles.values_list("pk", flat=True))
        try:
            check_quota(
                "roles per membership",
                settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP,
                actor=account,
                size=len(held | {role.pk for role in roles}),
            )
        except ApiError as exc:
            raise OAuthFailure(SSO_FAILED, exc.message) from exc
    if membership is None:
        create_membership(
            workspace,
            account=account,
            scope=Membership.Scope.WORKSPACE,
            status=Membership.Status.ACTIVE,
            roles=roles,
            tags=[],
            meta={"schema_version": "1"},
            actor=None,
        )
    elif membership.status == Membership.Status.INVITED:
        accept_invitation(membership, roles=roles)


def _sign_in_with(state: OAuthState, code: str, verifier: str) -> SignedIn:
    connection = (
        SsoConnection.objects.select_related("workspace")
        .filter(pk=state.connection_id, enabled=True, protocol=SsoConnection.Protocol.OIDC)
        .first()
    )
    if connection is None:
        raise OAuthFailure(SSO_FAILED, "connection gone or disabled")
    nonce = secret_of(state, "nonce", SSO_FAILED)
    try:
        config = services.provider_config(connection)
    except Exception as exc:
        raise OAuthFailure(SSO_FAILED, "connection secret unreadable") from exc
    try:  # the token, JWKS and user-info calls share the request's network budget
        with upstream.waiting(connection.workspace_id):
            profile = provider.fetch_profile(config, code=code, code_verifier=verifier, nonce=nonce)
    except upstream.Busy as exc:
        raise OAuthFailure(SSO_FAILED, "too many logins of this workspace waiting on its provider") from exc
    return admit(connection, profile)


def admit(connection: SsoConnection, profile: Profile) -> SignedIn:
    """The account the connection's provider (OpenID or SAML) signed in as `profile` (its `sub`: the ID
    token's, or the SAML NameID): found by its credential, else linked or created by an address of the
    connection's verified domains; then its just-in-time membership and the login's audit entry."""
    verified_domains = set(
        connection.domain_rows.filter(verified_at__isnull=False).values_list("domain", flat=True)
    )
    within = profile.email is not None and services.domain_of(profile.email) in verified_domains
    identity = Identity(
        kind=Credential.Kind.SSO,
        provider=PROVIDER,
        provider_id=f"{connection.pk}:{profile.sub}",
        profile=profile,
        failed=SSO_FAILED,
        email_trusted=within and profile.email_verified,
        admits_operators=False,
    )
    if len(identity.provider_id) > 255:
        raise OAuthFailure(SSO_FAILED, "sub too long")
    with transaction.atomic():
        account = sign_in_identity(identity)
        ensure_membership(connection, account)
        SsoConnection.objects.filter(pk=connection.pk).update(last_login_at=timezone.now())
        services.record_audit("ssoconnection.login", connection, {"account_id": str(account.pk)}, account)
    return SignedIn(  # meets the workspace's MFA policy
        account,
        sso_workspace_id=connection.workspace_id,
        provider_mfa_trusted=connection.trust_provider_mfa,
    )


def complete(params: dict[str, str], *, ip: str, user_agent: str) -> str:
    """The callback: the URL to send the browser on to, with the session's tokens or an `error`
    (`invalid_state`, `sso_failed`). `ip` and `user_agent` are the browser's, for the session record."""
    return finish(
        params,
        provider=PROVIDER,
        failed=SSO_FAILED,
        sign_in_with=_sign_in_with,
        ip=ip,
        user_agent=user_agent,
    )


def complete_for_signin(params: dict[str, str], *, ip: str, user_agent: str) -> SigninOutcome:
    """The callback of a login the hosted sign-in page started: the browser session, or the second factor
    still due, or the error; the page finishes it (docs/pages.md)."""
    return finish_for_signin(
        params, provider=PROVIDER, failed=SSO_FAILED, sign_in_with=_sign_in_with, ip=ip, user_agent=user_agent
    )
