"""`POST /clients/validate` (docs/integration.md#validate-each-token-clientsvalidate): the hot path other
services call on every request they serve. On a warm cache it makes no query: the client, the account, the
grants and the workspace's MFA policy are all cached, and each is
purged around the commit of any change to it, so a revoke, a rotation or a removed membership answers
`authorized: false` at once, and with the cache down the database answers."""

import datetime as dt
import time
from uuid import UUID

from authn import tokens
from authn.sessions import check_session_state, session_keys
from authn.tokens import TokenError
from iam.platform import cache, crypto
from rbac import policy
from rbac.explain import grant_paths
from tenancy.workspace_cache import requires_mfa, workspace_key

from .client_cache import client_key, find_client, workspace_of


class VerifiedTokens(dict):
    """token -> its claims, in process memory, for tokens whose signature and claims checked out lately:
    a calling service presents the same token on every request it serves, and verifying it again is a
    fifth of this endpoint's time. Only expiry moves with the clock, so it is checked on every use; an
    entry is verified afresh after VERIFY_AGAIN_SECONDS (a signing key that was taken out of service).
    Revocation is not decided here: the session and the session version are checked on every call."""

    LIMIT = 10_000
    VERIFY_AGAIN_SECONDS = 60

    def claims(self, token: str) -> dict:
        now = time.time()
        entry = self.get(token)
        if entry is None or entry[1] < now:
            claims = tokens.decode(token, types={tokens.ACCESS})
            if len(self) >= self.LIMIT:
                self.clear()
            entry = self[token] = (claims, now + self.VERIFY_AGAIN_SECONDS)
        if entry[0]["exp"] <= now:  # PyJWT's rule: expired from `exp` on
            raise TokenError("token_expired")
        return entry[0]


verified_tokens = VerifiedTokens()


def verified_until(token: str) -> float:
    """time.time() from which an answer about `token` must be computed afresh: its expiry, or the next
    verification of its signature, whichever comes first; now when it was not verified."""
    entry = verified_tokens.get(token)
    return min(entry[0]["exp"], entry[1]) if entry is not None else 0.0


def _answer(
    reason: str | None,
    *,
    workspace_id: str | None = None,
    account=None,
    roles=(),
    permissions=(),
    allowed: bool | None = None,
    expires_at: int | None = None,
) -> dict:
    return {
        "authorized": reason is None,
        "reason": reason,
        "account": (
            {
                "id": str(account.id),
                "email": account.email,
                "name": account.name,
                "verified": account.verified,
                "enabled": account.enabled,
            }
            if account is not None
            else None
        ),
        "workspace_id": workspace_id,
        "roles": sorted(roles),
        "permissions": sorted(permissions),
        "allowed": allowed,
        "expires_at": (
            dt.datetime.fromtimestamp(expires_at, dt.UTC).isoformat().replace("+00:00", "Z")
            if expires_at is not None
            else None
        ),
    }


def validate(
    *,
    client_id: UUID,
    client_secret: str,
    token: str,
    permission: str | None = None,
    project_id: UUID | None = None,
) -> dict:
    denied = False if permission is not None else None
    try:
        claims, token_error = verified_tokens.claims(token), None
    except TokenError as exc:
        claims, token_error = None, exc
    # One cache round trip for the client, the account and the grants. A client never changes workspace,
    # so once this process has seen it, its workspace (and with it the grant keys) is known up front.
    keys = [client_key(client_id)]
    with_grants = False
    if claims:
        keys += session_keys(claims)  # the account and, for a token naming one, its session
        if client_id in workspace_of:
            # the grants, and the workspace (its MFA policy), last
            keys += policy.grant_keys(claims["sub"], workspace_of[client_id])
            keys.append(workspace_key(workspace_of[client_id]))
            with_grants = True
    found = cache.get_many(keys)
    client = find_client(client_id, prefetched=found.get(keys[0], cache.MISSING))
    if client is None or not crypto.digest_matches(client_secret, client.secret_digest):
        return _answer("invalid_client", allowed=denied)
    workspace_id = workspace_of.remember(client_id, client.workspace_id)
    try:
        if token_error is not None:
            raise token_error
        if claims.get(tokens.APP_WORKSPACE_CLAIM, workspace_id) != workspace_id:
            # another workspace's application's token counts only there (docs/security.md#application-tokens)
            raise TokenError("invalid_token")
        account = check_session_state(claims, found=found)
    except TokenError as exc:
        return _answer(exc.reason, workspace_id=workspace_id, allowed=denied)
    prefetched = found if with_grants else None
    grants = policy.grants(account.id, UUID(workspace_id), prefetched=prefetched)
    if not grants.member:
        return _answer("not_a_member", workspace_id=workspace_id, allowed=denied, expires_at=claims["exp"])
    read_workspace = found.get(keys[-1], cache.MISSING) if with_grants else cache.MISSING
    mfa_required = requires_mfa(workspace_id, prefetched=read_workspace)
    if mfa_required is None:  # deleted while this call ran: its clients went with it
        return _answer("invalid_client", allowed=denied)
    if mfa_required and not policy.mfa_satisfied(claims, workspace_id):
        return _answer("mfa_required", workspace_id=workspace_id, allowed=denied, expires_at=claims["exp"])
    roles, permissions = set(grants.roles), set(grants.permissions)
    if project_id is not None:
        roles |= grants.project_roles.get(str(project_id), frozenset())
        permissions |= grants.project_permissions.get(str(project_id), frozenset())
    return _answer(
        None,
        workspace_id=workspace_id,
        account=account,
        roles=roles,
        permissions=permissions,
        allowed=grants.allows(permission, project_id) if permission is not None else None,
        expires_at=claims["exp"],
    )


def explained(answer: dict, *, permission: str | None = None, project_id: UUID | None = None) -> dict:
    """`"explain": true`: the answer plus `matched`, every grant path behind `allowed` (the same policy
    data, `rbac.explain.grant_paths`); empty when nothing was asked or nothing allows it. Costs nothing
    when not asked for."""
    matched = []
    if answer["allowed"]:
        matched = grant_paths(
            UUID(answer["account"]["id"]), UUID(answer["workspace_id"]), permission, project_id
        )
    return {**answer, "matched": matched}
