"""The API reference served at /docs: Swagger UI, from the static files of drf-spectacular-sidecar (the
page loads nothing from another site), over the OpenAPI document at /docs/schema."""

import threading
from typing import ClassVar

from django.http import HttpResponse
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView


class ApiSchema(SpectacularAPIView):
    """The OpenAPI document (YAML; JSON with `?format=json`), generated and rendered once per process and
    format: it depends on the code only, and generating it takes most of a second of CPU, which anonymous
    callers must not be able to make the service spend at will."""

    _rendered: ClassVar[dict[str, bytes]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs) -> HttpResponse:
        renderer = request.accepted_renderer
        with self._lock:
            if renderer.media_type not in self._rendered:
                schema = self.generator_class().get_schema(request=None, public=True)
                self._rendered[renderer.media_type] = renderer.render(schema, renderer_context={})
        response = HttpResponse(
            self._rendered[renderer.media_type], content_type=f"{renderer.media_type}; charset=utf-8"
        )
        response["Content-Disposition"] = f'inline; filename="{spectacular_settings.TITLE}.{renderer.format}"'
        return response


class ApiReference(SpectacularSwaggerView):
    """Swagger UI over `ApiSchema`."""

    url_name = "openapi-schema"
    title = "IAM service API"
