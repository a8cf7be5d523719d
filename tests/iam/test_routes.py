"""`iam.api.routes`: an endpoint names its path once, on its class, and the app's urls.py serves it."""

import sys

from iam.api import Endpoint, routes
from tests.endpoints import ENDPOINTS


class Routed(Endpoint, route="test/one"):
    pass


class Base(Endpoint):
    pass


class Child(Routed):
    """A subclass of a routed class does not inherit its path: it is not served twice."""


class Second(Base, route="test/two"):
    pass


def test_routes_serves_the_endpoints_a_module_defines_with_a_route_in_order():
    patterns = routes(sys.modules[__name__])
    served = [(str(pattern.pattern), pattern.callback.view_class) for pattern in patterns]
    # Not `Base` nor `Child` (no route of their own), nor the imported `Endpoint`.
    assert served == [("test/one", Routed), ("test/two", Second)]
    assert Child.route is None and Base.route is None


def test_every_endpoint_is_served_at_the_route_its_class_declares():
    """An endpoint listed by its path in its app's urls.py (`path("scim-tokens/create", ...)`, the way
    new endpoints are written) declares no route of its own; one that does is served there."""
    assert len(ENDPOINTS) > 50
    for path, endpoint in ENDPOINTS.items():
        assert endpoint.route is None or path == f"/{endpoint.route}", endpoint
    assert ENDPOINTS["/scim-tokens/create"].route is None
