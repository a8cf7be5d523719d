"""Every `Endpoint` the URLconf serves, found once for the unit suite and the live layer, so each family
(and each new endpoint) is covered without a test of its own."""

from django.urls import URLResolver, get_resolver

from iam.http.endpoint import Endpoint
from iam.http.list_endpoint import ListEndpoint


def _endpoints(patterns=None, prefix: str = "") -> dict[str, type[Endpoint]]:
    found = {}
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.update(_endpoints(pattern.url_patterns, route))
        elif issubclass(getattr(pattern.callback, "view_class", object), Endpoint):
            found["/" + route] = pattern.callback.view_class
    return found


ENDPOINTS = _endpoints()
PATHS = sorted(ENDPOINTS)
LISTS = [path for path in PATHS if issubclass(ENDPOINTS[path], ListEndpoint)]
