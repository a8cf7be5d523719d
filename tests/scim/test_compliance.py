"""A SCIM client this team did not write checks the service against RFC 7643/7644: `scim2-tester`
(discovery, then create, read, query, replace, patch and delete of every resource type it finds),
through `scim2-client`'s WSGI engine, in this process. The live layer runs the same checker over HTTP
(tests/live/test_scim_live.py)."""

import uuid
from typing import Annotated

import pytest
from django.core.wsgi import get_wsgi_application
from pydantic import Field
from scim2_client.engines.wsgi import WSGISCIMClient
from scim2_models import Mutability, Required, ScimProvider, Uniqueness
from scim2_tester import Status, check_server

from .conftest import new_token, verify_domain

# A User's `userName` is its e-mail address here, in a domain the workspace has verified. The checker
# fills attributes with random strings, or with one of the examples a model's field gives: these.
DOMAIN = "checker.example.com"


def directory_models(client, domain: str = DOMAIN) -> ScimProvider:
    """The models the service publishes (its /Schemas and /ResourceTypes), as the checker would build
    them, with e-mail addresses of `domain` as the examples of `userName`."""
    addresses = [f"{uuid.uuid4().hex}@{domain}" for _ in range(20_000)]
    client.discover()
    discovered = client.provider
    user = next(model for model in discovered.models if model.__name__ == "User")

    class DirectoryUser(user):
        user_name: Annotated[str | None, Uniqueness.server, Required.true, Mutability.immutable] = Field(
            None, examples=addresses
        )

    DirectoryUser.__name__ = "User"
    models = [DirectoryUser if model is user else model for model in discovered.models]
    return ScimProvider(models, discovered.resource_types, discovered.config)


def checker(app, base_url: str, token: str):
    client = WSGISCIMClient(app, base_url=base_url, headers={"Authorization": f"Bearer {token}"})
    client.provider = directory_models(client, DOMAIN)
    return client


def failures(results) -> list[tuple[str, str]]:
    return [
        (result.title, result.reason)
        for result in results
        if result.status not in (Status.SUCCESS, Status.SKIPPED)
    ]


@pytest.mark.django_db(transaction=True)
def test_scim2_tester_finds_nothing_wrong(workspace):
    verify_domain(workspace, DOMAIN)
    client = checker(
        get_wsgi_application(), f"http://testserver/scim/v2/{workspace.pk}", new_token(workspace)
    )
    results = check_server(client)
    assert len(results) > 20
    assert not failures(results), "\n".join(f"{title}: {reason}" for title, reason in failures(results))
