"""The SAML login through the HTTP API, as the SAML tests drive it: a connection made by `sso/create`,
`auth/sso/initiate` read back into its AuthnRequest, and the browser's POST to the ACS read into the
client app's query."""

from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from iam.models import AuditEntry
from sso import services
from sso.models import SsoConnection
from tests.conftest import ok

from .conftest import META
from .saml_idp import Sent, TestIdp, read_redirect

APP = "https://app.example.com/after-login?app_nonce=n1"
INITIATE = "/auth/sso/initiate"


@pytest.fixture(autouse=True)
def _public_urls(settings):
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example.com"]
    settings.IAM_PUBLIC_URL = "http://testserver"


def saml_body(idp: TestIdp, **overrides) -> dict:
    body = {
        "name": "Acme SAML",
        "protocol": "saml",
        "idp_metadata_xml": idp.metadata(),
        "domains": ["acme.test"],
        "default_role_ids": [],
        "tags": ["sso"],
        "meta": META,
    }
    return {**body, **overrides}


def connect_saml(admin, idp: TestIdp, *, verified=("acme.test",), **overrides) -> dict:
    """A SAML connection made through the API, its `verified` domains verified by an operator's word."""
    overrides.setdefault("domains", list(verified))
    created = ok(admin.call("/sso/create", saml_body(idp, **overrides)))
    connection = SsoConnection.objects.get(pk=created["id"])
    for domain in verified:
        services.verify_domain(connection, domain, actor=None, by=services.BY_OPERATOR)
    return created


def start(api, **body) -> Sent:
    body.setdefault("redirect_url", APP)
    return read_redirect(ok(api.call(INITIATE, body))["authorization_url"])


def post_acs(api, connection: dict, saml_response: str | None, relay_state: str | None) -> dict:
    """The browser's POST to the connection's ACS: the client app's query it is sent on with (303)."""
    form = {}
    if saml_response is not None:
        form["SAMLResponse"] = saml_response
    if relay_state is not None:
        form["RelayState"] = relay_state
    response = api.post(
        f"/saml/{connection['id']}/acs", urlencode(form), content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 303, response.content[:300]
    assert response["Cache-Control"] == "no-store" and response["Referrer-Policy"] == "no-referrer"
    target = urlsplit(response["Location"])
    # the login's redirect_url, or the first allowed origin when the RelayState names none
    assert f"{target.scheme}://{target.netloc}{target.path}" in (
        "https://app.example.com/after-login",
        "https://app.example.com",
    )
    query = dict(parse_qsl(target.query))
    assert query.pop("app_nonce", None) in ("n1", None)  # the app's own parameters are kept
    return query


def login(api, idp: TestIdp, connection: dict, *, sign: str = "assertion", **changes) -> dict:
    """A whole login by connection: initiate, the IdP's response (`changes` to its `Spec`), the ACS."""
    sent = start(api, connection_id=connection["id"])
    spec = idp.spec(connection, sent.request_id, **changes)
    return post_acs(api, connection, idp.response(spec, sign=sign), sent.relay_state)


def failures(connection: dict) -> list[dict]:
    """The `sso.login_failed` entries of the connection, oldest first: their `changes`."""
    entries = AuditEntry.objects.filter(action="sso.login_failed", resource_id=connection["id"])
    return [entry.changes for entry in entries.order_by("occurred_at")]


def refused(query: dict, connection: dict, reason: str) -> None:
    """The browser saw `error=sso_failed` and nothing else; the audit entry names the reason."""
    assert query == {"error": "sso_failed"}, query
    last = failures(connection)[-1]
    assert last["connection_id"] == connection["id"]
    assert reason in last["reason"], last["reason"]
