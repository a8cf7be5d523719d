"""`scim-tokens/create|list|delete`: the tokens a workspace's directory uses to reach the workspace's SCIM
service (`scim/api/`). A token is answered once, at creation, and stored as its keyed digest."""

from django.db.models import QuerySet
from rest_framework.request import Request

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint
from rbac.api.access import get_object

from .. import serializers, services
from ..models import ScimToken


class ScimTokenCreate(Endpoint):
    """A new SCIM token of the `X-Workspace` workspace, for its directory (Okta, Microsoft Entra ID, ...)
    to provision people at `/scim/v2/<workspace id>/`. The token is in this answer only: it is stored
    hashed. Its directory may give any role of the workspace to any member, so only a caller who holds
    every permission here (`*`) may create one (403 `cannot grant permissions you do not hold`)."""

    summary = "Create a SCIM token"
    example_request = {"name": "Okta"}

    permission = "scim-tokens:create"
    workspace_scoped = True
    request_serializer = serializers.ScimTokenCreateRequest
    response_serializer = serializers.ScimTokenCreated

    def handle(self, request: Request, data: dict) -> dict:
        token, raw = services.create_token(request.workspace, name=data["name"], actor=request.user)
        return self.serialize(
            {"id": token.pk, "name": token.name, "token": raw, "created_at": token.created_at}
        )


class ScimTokenList(ListEndpoint):
    """The SCIM tokens of the `X-Workspace` workspace, with when each was last used; never the tokens."""

    summary = "List the workspace's SCIM tokens"
    example_request = {"filter": {"fields": {"name": "Okta"}}, "options": {"limit": 10}}

    permission = "scim-tokens:list"
    workspace_scoped = True
    list_key = "scim_tokens"
    filter_fields = {"id": "id", "name": "name"}
    order_fields = ("created_at", "last_used_at")
    response_serializer = serializers.ScimTokenSerializer

    def get_queryset(self, request: Request) -> QuerySet:
        return ScimToken.objects.in_workspace(request.workspace)


class ScimTokenDelete(Endpoint):
    """Deletes a SCIM token of the `X-Workspace` workspace by `id`: its directory is refused from now on.
    Answers its `id`."""

    summary = "Delete a SCIM token"
    example_request = {"id": "2b7e4c1d-9a3f-4e6b-8d2c-5f1a7e9b3c40"}

    permission = "scim-tokens:delete"
    workspace_scoped = True
    request_serializer = serializers.ScimTokenRef
    response_serializer = serializers.ScimTokenDeleted

    def handle(self, request: Request, data: dict) -> dict:
        tokens = ScimToken.objects.in_workspace(request.workspace)
        token = get_object(request, tokens, permission=self.permission, pk=data["id"])
        return self.serialize(services.delete_token(token, actor=request.user))
