"""`applications/create|describe|list|update|delete|regenerate-secret` (docs/api.md#applications): the relying
parties of the `X-Workspace` workspace, listed by path in oidc/urls.py."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from iam.http.serializers import changes_of
from rbac.api.access import get_object

from .. import serializers, services
from ..models import Application

EXAMPLE_ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def applications_in(request: Request) -> QuerySet:
    return Application.objects.in_workspace(request.workspace)


class ApplicationCreate(Endpoint):
    """Registers an application whose users sign in through this service (OpenID Connect). `type`:
    `web` (a server that keeps a secret: the answer carries its `client_secret`, shown this once), `spa`
    or `native` (public: PKCE, no secret). `redirect_uris` are compared exactly: `https`, or `http` on
    127.0.0.1, [::1] or localhost (a `native` application's loopback URI matches on any port). An
    application of the root workspace is first party: it signs in any account without asking consent.
    Any other signs in only its workspace's active members, each asked to consent once."""

    summary = "Register an application (OpenID Connect relying party)"
    permission = "applications:create"
    workspace_scoped = True
    request_serializer = serializers.ApplicationCreateRequest
    response_serializer = serializers.ApplicationWithSecret
    example_request = {
        "name": "Billing dashboard",
        "type": "web",
        "redirect_uris": ["https://billing.example.com/auth/callback"],
        "post_logout_redirect_uris": ["https://billing.example.com/"],
        "tags": ["billing"],
        "meta": {"schema_version": "1"},
    }

    def handle(self, request: Request, data: dict) -> dict:
        application, secret = services.create_application(request.workspace, **data, actor=request.user)
        application.client_secret = secret
        return self.serialize(application)


class ApplicationDescribe(Endpoint):
    """An application of the `X-Workspace` workspace by `id`; never its secret."""

    summary = "Describe an application"
    permission = "applications:describe"
    workspace_scoped = True
    read_only = True
    request_serializer = serializers.ApplicationRef
    response_serializer = serializers.ApplicationSerializer
    example_request = {"id": EXAMPLE_ID}

    def handle(self, request: Request, data: dict) -> dict:
        application = get_object(request, applications_in(request), permission=self.permission, pk=data["id"])
        return self.serialize(application)


class ApplicationList(ListEndpoint):
    """The applications of the `X-Workspace` workspace, without their secrets."""

    summary = "List the workspace's applications"
    permission = "applications:list"
    workspace_scoped = True
    list_key = "applications"
    response_serializer = serializers.ApplicationSerializer
    filter_fields = {
        "id": "id",
        "workspace_id": "workspace",
        "name": "name",
        "type": "type",
        "first_party": "first_party",
    }
    example_request = {"filter": {"fields": {"type": "web"}}, "options": {"limit": 10}}

    def get_queryset(self, request: Request) -> QuerySet:
        return applications_in(request)


class ApplicationUpdate(Endpoint):
    """Changes an application named by `id`: its name, redirect and post-logout redirect URIs, grant
    types, tags and meta; only what is sent changes. Its type and secret stay."""

    summary = "Update an application"
    permission = "applications:update"
    workspace_scoped = True
    request_serializer = serializers.ApplicationUpdateRequest
    response_serializer = serializers.ApplicationSerializer
    example_request = {"id": EXAMPLE_ID, "redirect_uris": ["https://billing.example.com/auth/callback"]}

    def handle(self, request: Request, data: dict) -> dict:
        application = get_object(request, applications_in(request), permission=self.permission, pk=data["id"])
        changes = changes_of(data, "id")
        return self.serialize(services.update_application(application, **changes, actor=request.user))


class ApplicationDelete(Endpoint):
    """Deletes an application named by `id`: the tokens it holds stop at once, its consents go with it.
    Answers its `id`."""

    summary = "Delete an application"
    permission = "applications:delete"
    workspace_scoped = True
    request_serializer = serializers.ApplicationRef
    response_serializer = serializers.ApplicationDeleted
    example_request = {"id": EXAMPLE_ID}

    def handle(self, request: Request, data: dict) -> dict:
        application = get_object(request, applications_in(request), permission=self.permission, pk=data["id"])
        return services.delete_application(application, actor=request.user)


class ApplicationRegenerateSecret(Endpoint):
    """A new secret for a `web` application named by `id`, answered with the application this once; the
    old secret stops at once."""

    summary = "Regenerate a web application's secret"
    permission = "applications:regenerate-secret"
    workspace_scoped = True
    request_serializer = serializers.ApplicationRef
    response_serializer = serializers.ApplicationWithSecret
    example_request = {"id": EXAMPLE_ID}

    def handle(self, request: Request, data: dict) -> dict:
        application = get_object(request, applications_in(request), permission=self.permission, pk=data["id"])
        application.client_secret = services.regenerate_secret(application, actor=request.user)
        return self.serialize(application)
