"""The HTTP machinery every app's endpoints build on: the endpoint base (`endpoint.py`), the
one list implementation (`list_endpoint.py`), errors, the JSON parser, strict request fields, the
serializer bases and the streaming encoder, middleware, the OpenAPI schema and `/docs`, the service's
own views, and the admin's base classes and site."""
