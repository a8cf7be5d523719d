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
from iam.http.errors import ApiError
from iam.platform import cache, crypto
from rbac import machine_cache, policy
from rbac.explain import grant_paths
from tenancy.workspace_cache import requires_mfa, workspace_key

from .client_cache import client_key, find_client, root_workspace_id, workspace_of


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
    service_account: machine_cache.KeyState | None = None,
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
        "service_account": (
            {"id": service_account.service_account_id, "name": service_account.name}
            if service_account is not None
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


ROOT_CLIENTS_ONLY = "workspace_id is for clients of the root workspace"


def asked_about(client_workspace_id: str, workspace_id: UUID | None) -> str:
    """The workspace a validation answers about (docs/integration.md#one-backend-for-many-workspaces): the
    client's own, or the `workspace_id` a client of the root workspace names (400 for any other client,
    once it has proved itself)."""
    if workspace_id is None:
        return client_workspace_id
    if client_workspace_id != root_workspace_id():
        raise ApiError(400, ROOT_CLIENTS_ONLY, "workspace_id")
    return str(workspace_id)


def validate(
    *,
    client_id: UUID,
    client_secret: str,
    token: str,
    permission: str | None = None,
    project_id: UUID | None = None,
    workspace_id: UUID | None = None,
) -> dict:
    denied = False if permission is not None else None
    if machine_cache.looks_like_key(token):
        return validate_key(
            client_id=client_id,
            client_secret=client_secret,
            key=token,
            permission=permission,
            project_id=project_id,
            workspace_id=workspace_id,
        )
    asked = str(workspace_id) if workspace_id is not None else None
    try:
        claims, token_error = verified_tokens.claims(token), None
    except TokenError as exc:
        claims, token_error = None, exc
    if claims and machine_cache.SERVICE_ACCOUNT_CLAIM in claims:  # an application's client credentials
        return validate_key(
            client_id=client_id,
            client_secret=client_secret,
            claims=claims,
            permission=permission,
            project_id=project_id,
            workspace_id=workspace_id,
        )
    # One cache round trip for the client, the account and the grants. A client never changes workspace,
    # so once this process has seen it, its workspace (and with it the grant keys) is known up front.
    keys = [client_key(client_id)]
    with_grants = False
    if claims:
        keys += session_keys(claims)  # the account and, for a token naming one, its session
        target = asked or workspace_of.get(client_id)
        if target is not None:
            # the grants, and the workspace (its MFA policy), last
            keys += policy.grant_keys(claims["sub"], target)
            keys.append(workspace_key(target))
            with_grants = True
    found = cache.get_many(keys)
    client = find_client(client_id, prefetched=found.get(keys[0], cache.MISSING))
    if client is None or not crypto.digest_matches(client_secret, client.secret_digest):
        return _answer("invalid_client", allowed=denied)
    workspace_id = asked_about(workspace_of.remember(client_id, client.workspace_id), workspace_id)
    read_workspace = found.get(keys[-1], cache.MISSING) if with_grants else cache.MISSING
    if asked is not None and requires_mfa(workspace_id, prefetched=read_workspace) is None:
        return _answer("not_a_member", workspace_id=workspace_id, allowed=denied)  # no such workspace
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
    mfa_required = requires_mfa(workspace_id, prefetched=read_workspace)
    if mfa_required is None:  # deleted while this call ran: its clients went with it
        return _answer("invalid_client" if asked is None else "not_a_member", allowed=denied)
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


def validate_key(
    *,
    client_id: UUID,
    client_secret: str,
    key: str | None = None,
    claims: dict | None = None,
    permission: str | None = None,
    project_id: UUID | None = None,
    workspace_id: UUID | None = None,
) -> dict:
    """`clients/validate` of a service account's API key (docs/api.md#api-keys), or of the access token an
    application's client credentials grant issued for it (`claims`, checked already): its cached state,
    the client's and the grants' with no query when warm. Refused: an unknown or revoked key
    `invalid_token`, an expired one `token_expired`, a disabled service account `account_disabled`, one of
    another workspace `not_a_member`. `project_id` adds nothing: a service account's roles are its
    workspace's."""
    denied = False if permission is not None else None
    if claims is not None:
        entry = machine_cache.service_account_entry(claims[machine_cache.SERVICE_ACCOUNT_CLAIM])
    else:
        entry = machine_cache.entry_of(key)
    found = cache.get_many([client_key(client_id), entry])
    client = find_client(client_id, prefetched=found.get(client_key(client_id), cache.MISSING))
    if client is None or not crypto.digest_matches(client_secret, client.secret_digest):
        return _answer("invalid_client", allowed=denied)
    workspace_id = asked_about(workspace_of.remember(client_id, client.workspace_id), workspace_id)
    if claims is not None:
        state = machine_cache.token_state(claims, prefetched=found.get(entry, cache.MISSING))
    else:
        state = machine_cache.get_key_state(key, prefetched=found.get(entry, cache.MISSING))
    reason = machine_cache.refusal(state)
    if reason is not None:
        return _answer(reason, workspace_id=workspace_id, allowed=denied)
    if state.workspace_id != workspace_id:
        return _answer("not_a_member", workspace_id=workspace_id, allowed=denied, expires_at=state.expires_at)
    grants = policy.grants(UUID(state.service_account_id), UUID(workspace_id))
    if not grants.member:  # deleted while this call ran
        return _answer("invalid_token", workspace_id=workspace_id, allowed=denied)
    return _answer(
        None,
        workspace_id=workspace_id,
        service_account=state,
        roles=grants.roles,
        permissions=grants.permissions,
        allowed=grants.allows(permission) if permission is not None else None,
        expires_at=state.expires_at,
    )


def explained(answer: dict, *, permission: str | None = None, project_id: UUID | None = None) -> dict:
    """`"explain": true`: the answer plus `matched`, every grant path behind `allowed` (the same policy
    data, `rbac.explain.grant_paths`); empty when nothing was asked or nothing allows it. Costs nothing
    when not asked for."""
    matched = []
    if answer["allowed"] and answer["account"] is not None:  # a service account's roles: no membership
        matched = grant_paths(
            UUID(answer["account"]["id"]), UUID(answer["workspace_id"]), permission, project_id
        )
    return {**answer, "matched": matched}
