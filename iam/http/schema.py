"""OpenAPI generation (drf-spectacular) for `iam.http.endpoint` endpoints: request and response shapes come
from the endpoint's declarations, responses are wrapped in the docs/api.md#errors envelope, and errors share
one schema. The example request body shown for each operation is the endpoint's `example_request`."""

import inspect

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, inline_serializer
from rest_framework import serializers

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint


class ErrorBody(serializers.Serializer):
    success = serializers.BooleanField(default=False)
    status = serializers.IntegerField()
    message = serializers.CharField()
    field = serializers.CharField(required=False, help_text="the one request field at fault")
    hint = serializers.CharField(required=False, help_text="one sentence that teaches the fix")


class ListMetadata(serializers.Serializer):
    total = serializers.IntegerField()
    count = serializers.IntegerField()
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    order_bys = serializers.ListField(child=serializers.CharField())


def _envelope(name: str, data: serializers.Field) -> serializers.Serializer:
    return inline_serializer(
        name=f"{name}Response",
        fields={"success": serializers.BooleanField(), "status": serializers.IntegerField(), "data": data},
    )


class EndpointSchema(AutoSchema):
    def _endpoint(self) -> type[Endpoint] | None:
        return type(self.view) if isinstance(self.view, Endpoint) else None

    def map_parsers(self) -> list[str]:
        return ["application/json"]

    def get_description(self) -> str:
        """The endpoint's own docstring, then what its declarations say: the permission it needs and, for
        a list, the fields it filters and orders by."""
        endpoint = self._endpoint()
        lines = [inspect.cleandoc(type(self.view).__dict__.get("__doc__") or "")]
        if endpoint is not None and endpoint.permission:
            lines.append(
                f"Permission: `{endpoint.permission}`, held through a role of an active membership in the "
                "workspace (a `resource:*`, `*:action` or `*` permission covers it)."
            )
        if endpoint is not None and issubclass(endpoint, ListEndpoint):
            fields = ", ".join(f"`{name}`" for name in endpoint.filter_fields)
            more = ", ".join(f"`{name}`" for name in endpoint.order_fields)
            lines.append(f"`filter.fields` and `options.order_bys` take {fields}; `order_bys` also {more}.")
        return "\n\n".join(line for line in lines if line)

    def get_summary(self) -> str | None:
        """The endpoint's one line (`summary`), which /docs lists beside the path."""
        endpoint = self._endpoint()
        return endpoint.summary if endpoint is not None else super().get_summary()

    def get_examples(self) -> list[OpenApiExample]:
        endpoint = self._endpoint()
        examples = super().get_examples()
        if endpoint is not None and endpoint.example_request is not None:
            example = OpenApiExample("Example", value=endpoint.example_request, request_only=True)
            examples = [example, *examples]
        return examples

    def get_operation_id(self) -> str:
        return self.path.strip("/").replace("/", "_").replace("-", "_") or "index"

    def get_tags(self) -> list[str]:
        return [self.path.strip("/").split("/")[0] or "health"]

    def get_request_serializer(self):
        endpoint = self._endpoint()
        if endpoint is None:
            return super().get_request_serializer()
        return endpoint.request_serializer() if endpoint.request_serializer else None

    def get_response_serializers(self):
        endpoint = self._endpoint()
        if endpoint is None:
            return super().get_response_serializers()
        name = endpoint.__name__
        if issubclass(endpoint, ListEndpoint):
            data = inline_serializer(
                name=f"{name}Data",
                fields={
                    endpoint.list_key: endpoint.response_serializer(many=True),
                    "metadata": ListMetadata(),
                },
            )
        elif endpoint.response_serializer is not None:
            data = endpoint.response_serializer()
        else:
            data = serializers.JSONField()
        responses = {200: _envelope(name, data), 400: ErrorBody}
        if not endpoint.public:
            responses.update({401: ErrorBody, 403: ErrorBody, 404: ErrorBody})
        elif super().get_auth():  # public, with an optional Bearer (memberships/accept)
            responses.update({401: ErrorBody, 404: ErrorBody})
        # Statuses an endpoint answers beyond these (`error_statuses = (401, 410)`).
        responses.update(dict.fromkeys(getattr(endpoint, "error_statuses", ()), ErrorBody))
        return responses

    def get_auth(self):
        auth = super().get_auth()
        endpoint = self._endpoint()
        if endpoint is not None and endpoint.public and auth:
            auth.append({})  # a public endpoint that also reads a Bearer token: optional
        return auth

    def get_override_parameters(self):
        endpoint = self._endpoint()
        if endpoint is not None and endpoint.workspace_scoped:
            return [
                OpenApiParameter(
                    "X-Workspace",
                    str,
                    OpenApiParameter.HEADER,
                    required=True,
                    description="id or slug of the workspace the request acts in; the caller must hold "
                    "an active membership there",
                )
            ]
        return []


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "authn.authentication.BearerAuthentication"
    name = "bearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "access token"}


class SessionBearerScheme(BearerScheme):
    target_class = "authn.authentication.SessionTokenAuthentication"
    name = "bearerAccessOrRefresh"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "access or refresh token",
        }
