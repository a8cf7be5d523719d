import pytest

from tests.factories import RoleFactory

from .saml_idp import TestIdp
from .stand_ins import DnsServer, OpenIdProvider

META = {"schema_version": "1"}


@pytest.fixture
def idp():
    provider = OpenIdProvider()
    yield provider
    provider.close()


@pytest.fixture
def other_idp():
    provider = OpenIdProvider(client_id="other-client", client_secret="other-secret", path="/realms/b")
    yield provider
    provider.close()


@pytest.fixture
def saml_idp() -> TestIdp:
    """A SAML IdP whose responses the test writes and signs (tests/sso/saml_idp.py)."""
    return TestIdp()


@pytest.fixture
def dns_server(settings):
    server = DnsServer()
    settings.IAM_DNS_NAMESERVERS = [server.address]
    yield server
    server.close()


@pytest.fixture
def viewer_role(workspace):
    return RoleFactory(workspace=workspace, name="viewer", permissions=["projects:list"])


def connection_body(idp, **overrides) -> dict:
    body = {
        "name": "Acme Okta",
        "issuer": idp.issuer,
        "client_id": idp.client_id,
        "client_secret": idp.client_secret,
        "domains": ["acme.test"],
        "default_role_ids": [],
        "tags": ["sso"],
        "meta": META,
    }
    return {**body, **overrides}
