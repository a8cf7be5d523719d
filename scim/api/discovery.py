"""SCIM discovery (RFC 7644 section 4): `ServiceProviderConfig`, `ResourceTypes` and
`Schemas`."""

from django.http import HttpRequest, HttpResponse

from .. import messages
from ..services import ScimError
from .endpoint import ScimView, list_response, scim_response


class ServiceProviderConfigView(ScimView):
    def get(self, request: HttpRequest) -> HttpResponse:
        return scim_response(messages.service_provider_config(self.base))


class ResourceTypes(ScimView):
    def get(self, request: HttpRequest, name: str | None = None) -> HttpResponse:
        found = messages.resource_types(self.base)
        if name is None:
            return list_response(len(found), 1, found)
        for item in found:
            if item["id"] == name:
                return scim_response(item)
        raise ScimError(404, "resource type not found")


class Schemas(ScimView):
    def get(self, request: HttpRequest, urn: str | None = None) -> HttpResponse:
        found = messages.schemas(self.base)
        if urn is None:
            return list_response(len(found), 1, found)
        for item in found:
            if item["id"] == urn:
                return scim_response(item)
        raise ScimError(404, "schema not found")
