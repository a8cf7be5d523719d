from django.http import HttpRequest, HttpResponseRedirect
from django.views.decorators.http import require_GET
from rest_framework.request import Request

from authn import oauth_state, throttling
from iam.addresses import client_ip, user_agent
from iam.api import Endpoint
from iam.errors import ApiError
from iam.serializers import prefetch
from rbac.api import RecordEndpoint, RecordList, changes_of
from rbac.models import Role
from rbac.policy import EndpointPermission
from rbac.services import resolve

from . import login, services
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

RELATED = ("domain_rows", "default_roles", "default_roles__permissions")


class SsoEndpoint(RecordEndpoint):
    """An SSO connection of the workspace, named by `id`: never its client secret."""

    model = SsoConnection
    related = RELATED
    ref = SsoConnectionRef
    response_serializer = SsoConnectionSerializer
    reload = True

    def changes(self, request: Request, data: dict) -> dict:
        changes = changes_of(super().changes(request, data), "default_role_ids")
        if "default_role_ids" in data:
            roles = Role.objects.in_workspace(request.workspace)
            changes["default_roles"] = resolve(roles, data["default_role_ids"], field="default_role_ids")
        return changes


class SsoCreate(SsoEndpoint, route="sso/create"):
    """Connects an OpenID Connect provider to the `X-Workspace` workspace. The issuer's discovery document
    (`{issuer}/.well-known/openid-configuration`) is read now and must name the same issuer; the
    client secret is stored encrypted and never answered. Each domain gets a verification token: it
    routes logins and links accounts only once verified. Whoever logs in through the connection becomes
    an active member with `default_role_ids`, which must be roles of this workspace whose permissions
    the caller holds."""

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

    creates = True
    request_serializer = SsoConnectionCreateRequest
    service = services.create_connection


class SsoDescribe(SsoEndpoint, route="sso/describe"):
    """An SSO connection of the `X-Workspace` workspace by `id`, with its domains and their verification
    state; never its client secret."""

    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}

    read_only = True


class SsoList(RecordList, route="sso/list"):
    """The SSO connections of the `X-Workspace` workspace, with their domains; never their secrets."""

    example_request = {"filter": {"fields": {"enabled": True}}, "options": {"limit": 10}}

    model = SsoConnection
    related = RELATED
    page_prefetch = (prefetch("domain_rows"),)  # a reverse foreign key: the page's encoder reads the rest
    list_key = "sso_connections"
    filter_fields = {
        "id": "id",
        "workspace_id": "workspace",
        "name": "name",
        "issuer": "issuer",
        "client_id": "client_id",
        "enabled": "enabled",
    }
    response_serializer = SsoConnectionSerializer


class SsoUpdate(SsoEndpoint, route="sso/update"):
    """Changes an SSO connection named by `id`; only what is sent changes. A new `issuer` is discovered
    again, a new `client_secret` replaces the stored one, `domains` replaces the list (domains kept stay
    verified, new ones start unverified), `default_role_ids` replaces the default roles."""

    example_request = {
        "id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f",
        "domains": ["acme.com", "acme.io"],
        "enabled": True,
    }

    request_serializer = SsoConnectionUpdateRequest
    service = services.update_connection


class SsoDelete(SsoEndpoint, route="sso/delete"):
    """Deletes an SSO connection named by `id` with its domains: nobody logs in through it any more.
    Accounts that did keep their memberships. Answers its `id`."""

    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f"}

    response_serializer = SsoConnectionDeleted
    service = services.delete_connection


class SsoVerifyDomain(Endpoint, route="sso/verify-domain"):
    """Checks now that the DNS TXT record `_iam-verification.<domain>` holds the domain's
    `verification_token`, and answers the connection: the domain is `verified` when it does. A domain
    another workspace verified first cannot be claimed (409)."""

    example_request = {"id": "5d2c8e1a-3f4b-4a6d-9e7c-1b2a3c4d5e6f", "domain": "acme.com"}

    permission = "sso:update"
    workspace_scoped = True
    permission_classes = [EndpointPermission]
    request_serializer = VerifyDomainRequest
    response_serializer = SsoConnectionSerializer

    def handle(self, request: Request, data: dict) -> dict:
        connection = services.get_connection(request.workspace, id=data["id"])
        services.verify_domain(connection, data["domain"], actor=request.user)
        fresh = SsoDescribe().get_queryset(request).get(pk=connection.pk)
        return self.serialize(fresh)


class SsoInitiate(Endpoint, route="auth/sso/initiate"):
    """Starts a login through a workspace's own OpenID provider: by `email` (the enabled connection
    holding that address's verified domain) or by `connection_id`. Answers the URL to send the browser
    to; the callback goes on to `redirect_url` (an allowed client URL) with the session, or with
    `error=invalid_state` or `error=sso_failed`. For an account with an authenticator (TOTP) it carries
    an `mfa_token` instead of the session: `auth/mfa/verify` completes the login with a code."""

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
    """Not JSON: the browser comes back from the provider and goes on to the client app. The tokens travel
    in the query, so the answer is neither cached nor sent as Referer."""
    response = HttpResponseRedirect(
        login.complete(request.GET.dict(), ip=client_ip(request), user_agent=user_agent(request))
    )
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
