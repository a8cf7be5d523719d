"""Every write to SSO connections and their domains (docs/api.md#sso): the API, the admin and the
`verify_domain` command call these."""

import secrets
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account, account_of
from authn.models import Credential
from iam.http.errors import ApiError
from iam.platform import audit, crypto, upstream
from iam.platform.service_helpers import UNSET, apply_changes, save_unique, sent
from rbac import policy
from rbac.models import Role
from rbac.services.memberships import granted_by
from tenancy.models import Workspace
from tenancy.quotas import check_quota

from . import dns_proof, provider, saml
from .models import SsoConnection, SsoDomain

AUDITED = (
    "name",
    "issuer",
    "client_id",
    "enabled",
    "trust_provider_mfa",
    "tags",
)  # what the audit log shows of a connection
SAML_AUDITED = ("name", "protocol", "idp_entity_id", "idp_sso_url", "enabled", "trust_provider_mfa", "tags")


def audited(connection: SsoConnection) -> tuple[str, ...]:
    return SAML_AUDITED if connection.protocol == SsoConnection.Protocol.SAML else AUDITED


CLAIMED = "domain already claimed"
BY_DNS = "dns"
BY_OPERATOR = "operator"


def record_audit(action: str, connection: SsoConnection, changes: dict, actor: Account | None) -> None:
    audit.record(
        action,
        resource=("ssoconnection", connection.pk),
        workspace_id=connection.workspace_id,
        changes=changes,
        actor=actor,
    )


def get_connection(workspace: Workspace, *, id: UUID) -> SsoConnection:
    """docs/api.md#x-workspace: a connection of another workspace is not found."""
    found = SsoConnection.objects.in_workspace(workspace).filter(pk=id).first()
    if found is None:
        raise ApiError(404, "sso connection not found", "id")
    return found


def _discover(connection: SsoConnection, workspace_id: UUID) -> None:
    """Reads the issuer's discovery document into the connection's endpoints, or 400 naming `issuer`. The
    workspace's requests waiting on the network are bounded (docs/api.md#waiting-on-the-network)."""
    try:
        with upstream.waiting(workspace_id):
            found = provider.discover(connection.issuer)
    except provider.DiscoveryFailed as exc:
        raise ApiError(400, f"issuer discovery failed: {exc}", "issuer") from exc
    connection.authorization_endpoint = found.authorization_endpoint
    connection.token_endpoint = found.token_endpoint
    connection.userinfo_endpoint = found.userinfo_endpoint
    connection.jwks_uri = found.jwks_uri
    connection.token_auth_methods = found.token_auth_methods


def _read_metadata(connection: SsoConnection, document: str) -> None:
    """Reads a SAML IdP's metadata into the connection (docs/saml.md), or 400 naming `idp_metadata_xml`."""
    try:
        found = saml.read_metadata(document)
    except saml.InvalidMetadata as exc:
        raise ApiError(400, f"invalid idp metadata: {exc}", "idp_metadata_xml") from exc
    connection.idp_metadata_xml = document
    connection.idp_entity_id = found.entity_id
    connection.idp_sso_url = found.sso_url
    connection.idp_certificates = found.certificates


READ_FROM_METADATA = ("idp_metadata_xml", "idp_entity_id", "idp_sso_url", "idp_certificates")
SAML = SsoConnection.Protocol.SAML


OIDC_FIELDS = ("issuer", "client_id", "client_secret")


def _protocol_fields(protocol: str, **fields: str) -> None:
    """A connection takes the fields of its own protocol only (`fields`: those of both, UNSET if not
    sent)."""
    for name in OIDC_FIELDS if protocol == SAML else ("idp_metadata_xml",):
        if fields[name] is not UNSET:
            raise ApiError(400, f"{name} not used by {protocol} connections", name)


DISCOVERED = (
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "jwks_uri",
    "token_auth_methods",
)


def _check_roles(workspace: Workspace, roles: list[Role], actor: Account | None) -> None:
    """Whoever logs in through the connection gets its default roles: only roles whose permissions the
    caller itself holds may be attached (docs/api.md#authorization, no escalation)."""
    policy.require_grantable(actor, workspace, granted_by(roles))


def _claimed_elsewhere(workspace_id: UUID, domains: list[str]) -> bool:
    return (
        SsoDomain.objects.filter(domain__in=domains, verified_at__isnull=False)
        .exclude(workspace_id=workspace_id)
        .exists()
    )


def _set_domains(connection: SsoConnection, domains: list[str]) -> dict:
    """Replaces the connection's domains: kept ones keep their token and verification, new ones get a
    fresh token. A domain another workspace verified, or another connection of this workspace holds: 409
    `domain already claimed`. Answers the audit change."""
    domains = list(dict.fromkeys(domains))
    current = {row.domain: row for row in connection.domain_rows.all()}
    added = [domain for domain in domains if domain not in current]
    removed = [row for domain, row in current.items() if domain not in domains]
    if added:
        others = SsoDomain.objects.filter(domain__in=added).filter(
            Q(verified_at__isnull=False) | Q(workspace_id=connection.workspace_id)
        )
        if others.exists():
            raise ApiError(409, CLAIMED, "domains")
    for row in removed:
        row.delete()
    try:
        with transaction.atomic():
            SsoDomain.objects.bulk_create(
                SsoDomain(
                    connection=connection,
                    workspace_id=connection.workspace_id,
                    domain=domain,
                    verification_token=new_verification_token(),
                )
                for domain in added
            )
    except IntegrityError as exc:  # a concurrent request added one of them first
        raise ApiError(409, CLAIMED, "domains") from exc
    if not added and not removed:
        return {}
    return {"domains": {"before": sorted(current), "after": sorted(domains)}}


def new_verification_token() -> str:
    return f"iam-verification={secrets.token_urlsafe(24)}"


def _roles_change(connection: SsoConnection | None, roles: list[Role]) -> dict:
    before = (
        None
        if connection is None
        else sorted(str(pk) for pk in connection.default_roles.values_list("pk", flat=True))
    )
    after = sorted(str(role.pk) for role in roles)
    return {} if before == after else {"default_role_ids": {"before": before, "after": after}}


@transaction.atomic
def create_connection(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    domains: list[str],
    default_roles: list[Role],
    tags: list[str],
    meta: dict[str, Any],
    protocol: str = SsoConnection.Protocol.OIDC,
    issuer: str = UNSET,
    client_id: str = UNSET,
    client_secret: str = UNSET,
    idp_metadata_xml: str = UNSET,
    enabled: bool = True,
    trust_provider_mfa: bool = False,
) -> SsoConnection:
    """An OpenID connection (`issuer`, `client_id`, `client_secret`) or a SAML one (`protocol="saml"`,
    `idp_metadata_xml`)."""
    _check_roles(workspace, default_roles, actor)
    _protocol_fields(
        protocol,
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        idp_metadata_xml=idp_metadata_xml,
    )
    for field, value in (("issuer", issuer), ("client_id", client_id), ("client_secret", client_secret)):
        if protocol != SAML and value is UNSET:
            raise ApiError(400, f"{field} required", field)
    connection = SsoConnection(
        workspace=workspace,
        created_by=account_of(actor),
        name=name,
        protocol=protocol,
        issuer="" if protocol == SAML else issuer,
        client_id="" if protocol == SAML else client_id,
        client_secret_encrypted="" if protocol == SAML else crypto.encrypt(client_secret),
        enabled=enabled,
        trust_provider_mfa=trust_provider_mfa,
        tags=tags,
        meta=meta,
    )
    if SsoConnection.objects.in_workspace(workspace).filter(name=name).exists():
        raise ApiError(409, "name already exists", "name")  # before the provider is asked
    if protocol == SAML:
        _read_metadata(connection, "" if idp_metadata_xml is UNSET else idp_metadata_xml)
    else:  # before the quota's lock: no lock is held while the provider answers
        _discover(connection, workspace.pk)
    peers = SsoConnection.objects.in_workspace(workspace)
    check_quota(
        "sso connections", settings.IAM_QUOTA_SSO_CONNECTIONS, actor=actor, records=peers, owner=workspace
    )
    save_unique(connection, peers, {"name": name}, force_insert=True)
    changes = audit.created(connection, audited(connection)) | _roles_change(None, default_roles)
    record_audit("ssoconnection.create", connection, changes, actor)
    connection.default_roles.set(default_roles)
    domain_change = _set_domains(connection, domains)
    if domain_change:
        record_audit("ssoconnection.update", connection, domain_change, actor)
    return connection


@transaction.atomic
def update_connection(
    connection: SsoConnection,
    *,
    actor: Account | None,
    name: str = UNSET,
    issuer: str = UNSET,
    client_id: str = UNSET,
    client_secret: str = UNSET,
    idp_metadata_xml: str = UNSET,
    domains: list[str] | None = None,
    default_roles: list[Role] | None = None,
    enabled: bool = UNSET,
    trust_provider_mfa: bool = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> SsoConnection:
    """Only what is sent changes; a new `issuer` is discovered again, a new `client_secret` replaces the
    stored one (and is never answered), a new `idp_metadata_xml` is read again, `domains` replaces the
    set (kept domains stay verified)."""
    _protocol_fields(
        connection.protocol,
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        idp_metadata_xml=idp_metadata_xml,
    )
    changes = sent(
        name=name,
        issuer=issuer,
        client_id=client_id,
        enabled=enabled,
        trust_provider_mfa=trust_provider_mfa,
        tags=tags,
        meta=meta,
    )
    also = {}
    if client_secret is not UNSET:
        changes["client_secret_encrypted"] = crypto.encrypt(client_secret)
        also["client_secret"] = "replaced"
    if default_roles is not None:
        _check_roles(connection.workspace, default_roles, actor)
        also |= _roles_change(connection, default_roles)
    if "issuer" in changes:  # every update of `issuer` is discovered again, even to the same value
        probe = SsoConnection(issuer=issuer)
        _discover(probe, connection.workspace_id)
        changes |= {field: getattr(probe, field) for field in DISCOVERED}
    if idp_metadata_xml is not UNSET:
        probe = SsoConnection(protocol=SAML)
        _read_metadata(probe, idp_metadata_xml)
        changes |= {field: getattr(probe, field) for field in READ_FROM_METADATA}
        also["idp_metadata_xml"] = "replaced"
    if domains is not None:
        also |= _set_domains(connection, domains)
    if any(  # a NameID, like a sub, names a person only at the IdP that assigned it
        field in changes and changes[field] != getattr(connection, field)
        for field in ("issuer", "client_id", "idp_entity_id")
    ):
        also |= _unbind_credentials(connection)
    entry = audit.diff(connection, changes, audited(connection)) | also
    fields = apply_changes(connection, changes)
    peers = SsoConnection.objects.in_workspace(connection.workspace_id)
    save_unique(connection, peers, {"name": changes.get("name")}, update_fields=fields)
    if entry:
        record_audit("ssoconnection.update", connection, entry, actor)
    if default_roles is not None:
        connection.default_roles.set(default_roles)
    return connection


def _unbind_credentials(connection: SsoConnection) -> dict:
    """A credential of kind `sso` names a subject of the issuer (and client) that asserted it; another may
    reuse the subject for someone else. The connection's credentials are revoked and lose their
    `provider_id`, so that the next logins link again by the verified-domain rule only. Sessions already
    begun go on. Answers the audit change."""
    bound = Credential.objects.filter(
        kind=Credential.Kind.SSO,
        provider=Credential.Provider.IDP_B,
        provider_id__startswith=f"{connection.pk}:",
    )
    revoked = bound.update(status=Credential.Status.REVOKED, provider_id=None, updated_at=timezone.now())
    return {"credentials_revoked": revoked} if revoked else {}


@transaction.atomic
def delete_connection(connection: SsoConnection, *, actor: Account | None) -> dict:
    """Its domains go with it (another workspace may then claim them); the accounts that logged in
    through it keep their memberships, and their `sso` credentials stop finding a connection."""
    summary = {"id": str(connection.pk)}
    shown = ("name", "idp_entity_id") if connection.protocol == SAML else ("name", "issuer", "client_id")
    removed = audit.removed(connection, shown)
    record_audit("ssoconnection.delete", connection, removed, actor)
    connection.delete()
    return summary


def find_domain(connection: SsoConnection, domain: str) -> SsoDomain:
    row = connection.domain_rows.filter(domain=domain).first()
    if row is None:
        raise ApiError(404, "domain not found", "domain")
    return row


@transaction.atomic
def verify_domain(
    connection: SsoConnection, domain: str, *, actor: Account | None, by: str = BY_DNS
) -> SsoConnection:
    """Marks the connection's `domain` verified: by the DNS proof, checked now (a missing or other record
    leaves it unverified, and the answer shows it), or by an operator's word. A domain verified by
    another workspace first: 409 `domain already claimed`."""
    row = find_domain(connection, domain)
    if row.verified:
        return connection
    if _claimed_elsewhere(connection.workspace_id, [domain]):
        raise ApiError(409, CLAIMED, "domain")
    if by == BY_DNS:
        try:
            with upstream.waiting(connection.workspace_id):
                proven = dns_proof.holds(domain, row.verification_token)
        except dns_proof.LookupUnavailable as exc:
            raise ApiError(503, "domain verification unavailable") from exc
        if not proven:
            return connection
    row.verified_at = timezone.now()
    row.verified_by = by
    try:
        with transaction.atomic():
            row.save(update_fields=["verified_at", "verified_by"])
    except IntegrityError as exc:  # another workspace verified it meanwhile
        raise ApiError(409, CLAIMED, "domain") from exc
    record_audit("ssoconnection.verify_domain", connection, {"domain": domain, "verified_by": by}, actor)
    return connection


def domain_of(email: str) -> str:
    return email.rsplit("@", 1)[-1].lower()


def connection_for_email(email: str) -> SsoConnection | None:
    """Home-realm discovery: the enabled connection holding the verified domain of the address."""
    row = (
        SsoDomain.objects.select_related("connection")
        .filter(domain=domain_of(email), verified_at__isnull=False, connection__enabled=True)
        .first()
    )
    return None if row is None else row.connection


def provider_config(connection: SsoConnection) -> provider.ProviderConfig:
    return provider.ProviderConfig(
        issuer=connection.issuer,
        client_id=connection.client_id,
        client_secret=crypto.decrypt(connection.client_secret_encrypted),
        authorization_endpoint=connection.authorization_endpoint,
        token_endpoint=connection.token_endpoint,
        userinfo_endpoint=connection.userinfo_endpoint,
        jwks_uri=connection.jwks_uri,
        token_auth_methods=list(connection.token_auth_methods or []),
    )
