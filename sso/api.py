"""The SSO endpoints, listed by path in sso/urls.py: a workspace's OpenID Connect and SAML connections
(create, describe, list, update, delete, verify-domain), and the login through one (`auth/sso/initiate`,
public, and the browser's way back: the OpenID callback, a SAML connection's ACS; its SP metadata)."""

from uuid import UUID

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from rest_framework.request import Request

from authn import oauth_state, throttling
from iam.addresses import client_ip, user_agent
from iam.api import EncodedJson, Endpoint, answer_fresh
from iam.errors import ApiError, error_response
from iam.list_endpoint import ListEndpoint
from iam.serializers import prefetch
from rbac.api import changes_of
from rbac.models import Role
from rbac.policy import get_object
from rbac.services import resolve

from . import login, saml, saml_login, services
from .models import SsoConnection
from .serializers import (
    SsoConnectionCreateRequest,
    SsoConnectionDeleted,
    SsoConnectionRef,
    SsoConnectionSerializer,
    SsoConnectionUpdateRequest,
    SsoInitiated,
    SsoInitiateRequest,
    VerifyDomainRequest,
)


def connections_in(request: Request) -> QuerySet:
    """The SSO connections of the `X-Workspace` workspace."""
    return SsoConnection.objects.in_workspace(request.workspace)


def default_roles_named(request: Request, ids: list) -> list[Role]:
    """The roles of the `X-Workspace` workspace that `default_role_ids` names (400 for any other)."""
    return resolve(Role.objects.in_workspace(request.workspace), ids, field="default_role_ids")


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

    permission = "sso:create"
    workspace_scoped = True
    request_serializer = SsoConnectionCreateRequest
    response_serializer = SsoConnectionSerializer
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
        fields["default_roles"] = default_roles_named(request, data["default_role_ids"])
        connection = services.create_connection(request.workspace, **fields, actor=request.user)
        return answer_fresh(request, SsoConnectionSerializer, connections_in(request), connection)


class SsoDescribe(Endpoint):
    """An SSO connection of the `X-Workspace` workspace by `id`, with its domains and their verification
    state; never its client secret."""

    permission = "sso:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = SsoConnectionRef
    response_serializer = SsoConnectionSerializer
    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        connection = get_object(request, connections_in(request), permission=self.permission, pk=data["id"])
        return answer_fresh(request, SsoConnectionSerializer, connections_in(request), connection)


class SsoList(ListEndpoint):
    """The SSO connections of the `X-Workspace` workspace, with their domains; never their secrets."""

    permission = "sso:list"
    workspace_scoped = True
    list_key = "sso_connections"
    response_serializer = SsoConnectionSerializer
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

    permission = "sso:update"
    workspace_scoped = True
    request_serializer = SsoConnectionUpdateRequest
    response_serializer = SsoConnectionSerializer
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
            changes["default_roles"] = default_roles_named(request, data["default_role_ids"])
        services.update_connection(connection, **changes, actor=request.user)
        return answer_fresh(request, SsoConnectionSerializer, connections_in(request), connection)


class SsoDelete(Endpoint):
    """Deletes an SSO connection named by `id` with its domains: nobody logs in through it any more.
    Accounts that did keep their memberships. Answers its `id`."""

    permission = "sso:delete"
    workspace_scoped = True
    request_serializer = SsoConnectionRef
    response_serializer = SsoConnectionDeleted
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

    permission = "sso:update"  # verifying a domain is an update of its connection
    workspace_scoped = True
    request_serializer = VerifyDomainRequest
    response_serializer = SsoConnectionSerializer
    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f", "domain": "acme.com"}

    def handle(self, request: Request, data: dict) -> EncodedJson:
        connection = services.get_connection(request.workspace, id=data["id"])  # 404 naming `id`
        services.verify_domain(connection, data["domain"], actor=request.user)
        return answer_fresh(request, SsoConnectionSerializer, connections_in(request), connection)


class SsoInitiate(Endpoint):
    """Starts a login through a workspace's own identity provider: by `email` (the enabled connection
    holding that address's verified domain) or by `connection_id`. Answers the URL to send the browser
    to: the provider's authorization URL, or for a SAML connection the IdP's single sign-on URL with an
    AuthnRequest (HTTP-Redirect binding) and the RelayState. The callback (a SAML connection's ACS) goes
    on to `redirect_url` (an allowed client URL) with the session's `access_token`
    (`auth/refresh` with it as Bearer answers a refresh token: none travels in a URL), or with
    `error=invalid_state` or `error=sso_failed` (a SAML login: `error=sso_failed` for every failure). For
    an account with an authenticator (TOTP) it carries an `mfa_token` instead: `auth/mfa/verify`
    completes the login with a code."""

    example_request = {"email": "alice@acme.com", "redirect_url": "https://app.example.com/after-login"}

    public = True
    request_serializer = SsoInitiateRequest
    response_serializer = SsoInitiated

    def handle(self, request: Request, data: dict) -> dict:
        if not oauth_state.redirect_allowed(data["redirect_url"]):
            raise ApiError(400, "redirect_url not allowed", "redirect_url")
        ip = client_ip(request)
        if retry_after := throttling.oauth_starts_by_ip.retry_after(ip):
            raise ApiError(429, "too many requests", headers={"Retry-After": str(retry_after)})
        throttling.oauth_starts_by_ip.hit(ip)
        if "connection_id" in data:
            connection = SsoConnection.objects.filter(pk=data["connection_id"], enabled=True).first()
            if connection is None:
                raise ApiError(404, "sso connection not found", "connection_id")
        else:
            connection = services.connection_for_email(data["email"])
            if connection is None:
                raise ApiError(404, "no sso connection for this domain", "email")
        url = login.initiate(connection, redirect_url=data["redirect_url"])
        return self.serialize({"authorization_url": url})


@require_GET
def sso_callback(request: HttpRequest) -> HttpResponseRedirect:
    """Not JSON: the browser comes back from the provider and goes on to the client app. The access token
    travels in the query, so the answer is neither cached nor sent as Referer."""
    response = HttpResponseRedirect(
        login.complete(request.GET.dict(), ip=client_ip(request), user_agent=user_agent(request))
    )
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_GET
def saml_metadata(request: HttpRequest, connection_id: UUID) -> HttpResponse:
    """A SAML connection's SP metadata (docs/saml.md#the-values-to-copy), public like any metadata: its
    IdP reads the entity id, the ACS and the NameID format from it."""
    connection = SsoConnection.objects.filter(pk=connection_id, protocol=SsoConnection.Protocol.SAML).first()
    if connection is None:
        return error_response(404, "sso connection not found")
    return HttpResponse(saml.sp_metadata(connection), content_type="application/samlmetadata+xml")


@csrf_exempt  # the IdP's page posts here from its own origin; the RelayState binds the response instead
@require_POST
def saml_acs(request: HttpRequest, connection_id: UUID) -> HttpResponseRedirect:
    """A SAML connection's assertion consumer service (HTTP-POST binding): the browser arrives from the IdP
    and is sent on (303) to the client app, as from the OpenID callback."""
    target = saml_login.complete(
        connection_id, request.POST.dict(), ip=client_ip(request), user_agent=user_agent(request)
    )
    response = HttpResponseRedirect(target, status=303)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
