"""Waiting on the network (docs/api.md#waiting-on-the-network): every call a request makes to a nameserver
or an OpenID provider draws on one budget for the whole request, and at most two requests of one
workspace wait at once, whichever web process serves them; another workspace's requests are not held."""

import socket
import threading
import time
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import pytest

from iam.platform import upstream
from sso import services
from sso.models import SsoConnection
from tests.conftest import err, ok
from tests.factories import WorkspaceFactory

from .conftest import connection_body
from .test_login import _public_urls, connect, to_provider  # noqa: F401 (the autouse fixture)

BUSY = "too many requests waiting on the network for this workspace"
PROCESS_BUSY = "too many requests waiting on the network"


@pytest.fixture(autouse=True)
def _threads(settings):
    """A web process of many threads: its own limit is tested on its own."""
    settings.IAM_NETWORK_REQUESTS_PER_PROCESS = 16


@contextmanager
def requests_in_flight(workspace_id, count: int = 2):
    """`count` requests of the workspace waiting on the network meanwhile, as other threads (or other
    processes: the slots are in the shared cache) would be."""
    entered, release = threading.Barrier(count + 1), threading.Event()

    def wait():
        with upstream.waiting(workspace_id):
            entered.wait()
            release.wait(30)

    threads = [threading.Thread(target=wait) for _ in range(count)]
    for thread in threads:
        thread.start()
    entered.wait(5)
    try:
        yield
    finally:
        release.set()
        for thread in threads:
            thread.join()


def verify(api, connection_id: str) -> object:
    return api.call("/sso/verify-domain", {"id": connection_id, "domain": "acme.test"})


@pytest.fixture
def beta(member_of, idp, other_idp):
    """Another workspace, with its admin and a connection of its own."""
    workspace = WorkspaceFactory()
    _, api = member_of(workspace, "*")
    connection = ok(api.call("/sso/create", connection_body(other_idp, domains=["beta.test"])))
    return workspace, api, connection


def test_two_waiting_requests_of_a_workspace_hold_it_and_no_other(
    admin, workspace, idp, other_idp, beta, dns_server
):
    created = ok(admin.call("/sso/create", connection_body(idp)))
    _, beta_api, beta_connection = beta
    token = created["domains"][0]["verification_token"]
    dns_server.records["_iam-verification.acme.test"] = [token]
    dns_server.records["_iam-verification.beta.test"] = [beta_connection["domains"][0]["verification_token"]]

    with requests_in_flight(workspace.pk):
        response = verify(admin, created["id"])
        err(response, 429, BUSY)
        assert response["Retry-After"] == "5"
        err(admin.call("/sso/create", connection_body(idp, name="Second", domains=[])), 429, BUSY)
        err(admin.call("/sso/update", {"id": created["id"], "issuer": idp.issuer}), 429, BUSY)
        assert not SsoConnection.objects.filter(name="Second").exists()
        # The other workspace's requests wait as usual.
        body = {"id": beta_connection["id"], "domain": "beta.test"}
        assert ok(beta_api.call("/sso/verify-domain", body))["domains"][0]["verified"] is True
        ok(beta_api.call("/sso/update", {"id": beta_connection["id"], "issuer": other_idp.issuer}))

    with requests_in_flight(workspace.pk, count=1):  # one of two: a request still gets in
        assert ok(verify(admin, created["id"]))["domains"][0]["verified"] is True


def test_a_login_while_its_workspace_waits_twice_fails_and_another_goes_on(
    api, admin, workspace, idp, other_idp, beta
):
    connect(admin, idp)
    _, _, beta_connection = beta
    other_idp.claims = {"sub": "bob", "email": "bob@beta.test", "email_verified": True}
    services.verify_domain(
        SsoConnection.objects.get(pk=beta_connection["id"]), "beta.test", actor=None, by=services.BY_OPERATOR
    )
    callback = to_provider(api, email="alice@acme.test")
    beta_callback = to_provider(api, email="bob@beta.test")
    with requests_in_flight(workspace.pk):
        assert query_of(api.get(callback)) == {"error": "sso_failed"}
        assert set(query_of(api.get(beta_callback))) == {"access_token"}
    assert set(query_of(api.get(to_provider(api, email="alice@acme.test")))) == {"access_token"}


def query_of(response) -> dict:
    assert response.status_code == 302
    query = dict(parse_qsl(urlsplit(response["Location"]).query))
    query.pop("app_nonce", None)
    return query


def test_a_process_keeps_a_thread_for_requests_that_wait_on_nothing(admin, workspace, beta, dns_server,
                                                                    settings):  # fmt: skip
    """With two threads, one request waits on the network at a time; the other thread serves the rest."""
    settings.IAM_NETWORK_REQUESTS_PER_PROCESS = 1
    _, beta_api, beta_connection = beta
    body = {"id": beta_connection["id"], "domain": "beta.test"}
    with requests_in_flight(workspace.pk, count=1):
        response = beta_api.call("/sso/verify-domain", body)
        err(response, 429, PROCESS_BUSY)
        assert response["Retry-After"] == "5"
        ok(beta_api.call("/sso/describe", {"id": beta_connection["id"]}))
    ok(beta_api.call("/sso/verify-domain", body))


def test_a_slot_whose_request_died_frees_itself(admin, workspace, idp, dns_server, settings):
    """A process killed while waiting never gives its slot back: the slot expires (twice the budget)."""
    settings.IAM_NETWORK_BUDGET_SECONDS = 0.5
    created = ok(admin.call("/sso/create", connection_body(idp)))
    for _ in range(2):
        upstream._take_slot(workspace.pk)  # taken, never given back
    err(verify(admin, created["id"]), 429, BUSY)
    time.sleep(1.1)
    ok(verify(admin, created["id"]))


def test_the_callbacks_provider_calls_share_one_budget(api, admin, idp, settings):
    """The token and the JWKS answer each well within a call's own timeout; together, past the budget."""
    connect(admin, idp)
    idp.delays = {"/token": 0.8, "/jwks": 0.8}
    settings.IAM_NETWORK_BUDGET_SECONDS = 1.2
    assert query_of(api.get(to_provider(api, email="alice@acme.test"))) == {"error": "sso_failed"}
    settings.IAM_NETWORK_BUDGET_SECONDS = 5
    assert set(query_of(api.get(to_provider(api, email="alice@acme.test")))) == {"access_token"}


def test_an_issuer_whose_name_never_resolves_fails_within_the_budget(admin, idp, settings, monkeypatch):
    """The system resolver cannot be interrupted: the request goes on without it at the budget's end."""
    settings.IAM_NETWORK_BUDGET_SECONDS = 0.5
    system = socket.getaddrinfo

    def hanging(host, port, *args, **kwargs):
        if host == "slow.idp.test":
            time.sleep(2)
            return system("127.0.0.1", port, *args, **kwargs)
        return system(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    body = connection_body(idp, issuer="https://slow.idp.test")
    failed = err(
        admin.call("/sso/create", body), 400, "issuer discovery failed: provider unreachable (TimeoutError)"
    )
    assert failed["field"] == "issuer"
