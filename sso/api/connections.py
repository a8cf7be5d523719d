"""`sso/create|describe|list|update|delete|verify-domain`."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import EncodedJson, Endpoint, answer_fresh
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of, prefetch
from rbac.api.access import get_object, roles_named

from .. import serializers, services
from ..models import SsoConnection


def connections_in(request: Request) -> QuerySet:
    return SsoConnection.objects.in_workspace(request.workspace)


class SsoCreate(Endpoint):
    """Connects an OpenID Connect provider (`protocol` `oidc`, the default) or a SAML 2.0 identity provider
    (`protocol` `saml`) to the `X-Workspace` workspace. OpenID: the issuer's discovery document
    (`{issuer}/.well-known/openid-configuration`) is read now and must name the same issuer; the
    client secret is stored encrypted and never answered. SAML: `idp_metadata_xml` instead of `issuer`,
    `client_id` and `client_secret`, the IdP's metadata, which must name a signing certificate and a
    single sign-on service with the HTTP-Redirect binding and hold no DTD (else 400 `invalid idp
    metadata: <reason>`); the answer gives the values to enter at the IdP: `sp_entity_id` (the
    `metadata_url`) and `acs_url`. Each domain gets a verification token: it
    routes logins and links accounts only once verified. Whoever logs in through the connection becomes
    an active member with `default_role_ids`, which must be roles of this workspace whose permissions
    the caller holds. `trust_provider_mfa` (default false): an account with TOTP that logs in through
    this connection is not asked for its code, the provider's own second factor standing for it; its
    session then counts as two factors only for this workspace's MFA policy. The discovery waits 5
    seconds at most, and while two requests of the workspace wait on the network, a third answers 429."""

    summary = "Connect an OpenID Connect provider"
    permission = "sso:create"
    workspace_scoped = True
    request_serializer = serializers.SsoConnectionCreateRequest
    response_serializer = serializers.SsoConnectionSerializer
    example_request = {
        "name": "Acme Okta",
        "issuer": "https://acme.okta.com",
        "client_id": "0oa1b2c3d4e5f6g7h8i9",
        "client_secret": "a-client-secret-from-the-provider",
        "domains": ["acme.com"],
        "default_role_ids": ["8f14e45f-ceea-4672-9f5b-7a3c2d1e0b9a"],
        "enabled": True,
        "tags": ["sso"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        fields = changes_of(data, "default_role_ids")
        fields["default_roles"] = roles_named(request, data["default_role_ids"], field="default_role_ids")
        connection = services.create_connection(request.workspace, **fields, actor=request.user)
        return answer_fresh(request, self.response_serializer, connections_in(request), connection)


class SsoDescribe(Endpoint):
    """An SSO connection of the `X-Workspace` workspace by `id`, with its domains and their verification
    state; never its client secret."""

    summary = "Describe an SSO connection"
    permission = "sso:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.SsoConnectionRef
    response_serializer = serializers.SsoConnectionSerializer
    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        connection = get_object(request, connections_in(request), permission=self.permission, pk=data["id"])
        return answer_fresh(request, self.response_serializer, connections_in(request), connection)


class SsoList(ListEndpoint):
    """The SSO connections of the `X-Workspace` workspace, with their domains; never their secrets."""

    summary = "List the workspace's SSO connections"
    permission = "sso:list"
    workspace_scoped = True
    list_key = "sso_connections"
    response_serializer = serializers.SsoConnectionSerializer
    page_prefetch = (prefetch("domain_rows"),)  # a reverse foreign key: the page's encoder reads the rest
    filter_fields = {
        "id": "id",
        "workspace_id": "workspace",
        "name": "name",
        "protocol": "protocol",
        "issuer": "issuer",
        "client_id": "client_id",
        "idp_entity_id": "idp_entity_id",
        "enabled": "enabled",
    }
    example_request = {"filter": {"fields": {"enabled": True}}, "options": {"limit": 10}}

    def get_queryset(self, request: Request) -> QuerySet:
        return connections_in(request)


class SsoUpdate(Endpoint):
    """Changes an SSO connection named by `id`; only what is sent changes, and its `protocol` never. A new
    `issuer` is discovered again, a new `client_secret` replaces the stored one, a SAML connection's new
    `idp_metadata_xml` is read again, `domains` replaces the list (domains kept stay verified, new ones
    start unverified), `default_role_ids` replaces the default roles. Sending `issuer`, `client_id`,
    `client_secret`, `idp_metadata_xml`, `domains` or `trust_provider_mfa` needs `*` in the workspace
    (else 403 `cannot grant permissions you do not hold`). A new `issuer`, `client_id` or IdP entity id
    revokes the credentials of those who signed in through the connection: their next login links them
    again by their verified domain only."""

    summary = "Change an SSO connection"
    permission = "sso:update"
    workspace_scoped = True
    request_serializer = serializers.SsoConnectionUpdateRequest
    response_serializer = serializers.SsoConnectionSerializer
    example_request = {
        "id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f",
        "domains": ["acme.com", "acme.io"],
        "enabled": True,
    }

    def handle(self, request: Request, data: dict) -> EncodedJson:
        connection = get_object(
            request, connections_in(request), permission=self.permission, fields=data, pk=data["id"]
        )
        changes = changes_of(data, "id", "default_role_ids")
        if "default_role_ids" in data:
            changes["default_roles"] = roles_named(
                request, data["default_role_ids"], field="default_role_ids"
            )
        services.update_connection(connection, **changes, actor=request.user)
        return answer_fresh(request, self.response_serializer, connections_in(request), connection)


class SsoDelete(Endpoint):
    """Deletes an SSO connection named by `id` with its domains: nobody logs in through it any more.
    Accounts that did keep their memberships. Answers its `id`."""

    summary = "Delete an SSO connection"
    permission = "sso:delete"
    workspace_scoped = True
    request_serializer = serializers.SsoConnectionRef
    response_serializer = serializers.SsoConnectionDeleted
    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}

    def handle(self, request: Request, data: dict) -> dict:
        connection = get_object(request, connections_in(request), permission=self.permission, pk=data["id"])
        return services.delete_connection(connection, actor=request.user)


class SsoVerifyDomain(Endpoint):
    """Checks now that the DNS TXT record `_iam-verification.<domain>` holds the domain's
    `verification_token`, and answers the connection: the domain is `verified` when it does. A domain
    another workspace verified first cannot be claimed (409). The lookup waits 5 seconds at most (503
    when no nameserver answers), and while two requests of the workspace wait on the network, a third
    answers 429."""

    summary = "Check a domain's DNS proof now"
    permission = "sso:update"  # verifying a domain is an update of its connection
    workspace_scoped = True
    request_serializer = serializers.VerifyDomainRequest
    response_serializer = serializers.SsoConnectionSerializer
    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f", "domain": "acme.com"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        connection = services.get_connection(request.workspace, id=data["id"])  # 404 naming `id`
        services.verify_domain(connection, data["domain"], actor=request.user)
        return answer_fresh(request, self.response_serializer, connections_in(request), connection)
