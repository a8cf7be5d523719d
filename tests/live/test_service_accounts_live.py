"""A service account's API key (docs/api.md#api-keys, docs/security.md#service-accounts) over HTTP on two
gunicorn processes sharing nothing but PostgreSQL and Redis: a key revoked through one process is refused
at once by the other, on Bearer calls and in `clients/validate`, however warm each process's cache was;
with Redis flushed, and with Redis down, a revoked key stays refused (the database is the truth). An
application's client credentials token (docs/oidc.md#client-credentials) validated by one client of the
root workspace for the service account's workspace, refused on both once the service account is
disabled; the token endpoint, with the application cached in every worker, refusing its old secret, its
disabled service account and its deleted application at once in both processes."""

import socket

import pytest
import requests

from tests.live.api import META, create_client, create_role, create_workspace, err, ok

REQUESTS = 16
UNAUTHORIZED = "Authentication required or invalid credentials."


@pytest.fixture(scope="module")
def tiers(live):
    other = live.start_web(workers=1)
    yield [live.url, other.url]
    other.stop()


def each(tiers, n: int = REQUESTS):
    for i in range(n):
        yield tiers[i % len(tiers)]


@pytest.fixture
def machine(live):
    """A workspace, its client, and a service account whose role holds `projects:*`."""
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    client = create_client(live, operator, workspace)
    permission = ok(
        live.post(
            "/permissions/create",
            {"name": "projects:*", "tags": [], "meta": META},
            token=operator,
            workspace=workspace,
        )
    )
    role = create_role(live, operator, workspace, [permission["id"]])
    body = {"name": "ci", "role_ids": [role["id"]], "tags": [], "meta": META}
    service_account = ok(live.post("/service-accounts/create", body, token=operator, workspace=workspace))
    return {"operator": operator, "workspace": workspace, "client": client, "id": service_account["id"]}


def new_key(live, machine, base=None) -> dict:
    body = {"id": machine["id"], "name": "prod"}
    return ok(
        live.post(
            "/service-accounts/create-key",
            body,
            token=machine["operator"],
            workspace=machine["workspace"],
            base=base,
        )
    )


def revoke(live, machine, key, base) -> None:
    body = {"id": machine["id"], "key_id": key["id"]}
    answer = ok(
        live.post(
            "/service-accounts/revoke-key",
            body,
            token=machine["operator"],
            workspace=machine["workspace"],
            base=base,
        )
    )
    assert answer == {"id": key["id"], "revoked": True}


def validate(live, machine, key, base) -> dict:
    body = {
        "client_id": machine["client"]["id"],
        "client_secret": machine["client"]["secret"],
        "token": key["key"],
    }
    return ok(live.post("/clients/validate", body, base=base))


def warm(live, machine, key, tiers) -> None:
    """Every worker of both processes reads (and keeps in its memory) the key as good."""
    for base in each(tiers):
        ok(live.post("/projects/list", {}, token=key["key"], base=base))
        answer = validate(live, machine, key, base)
        assert answer["authorized"] is True, answer
        assert answer["service_account"]["id"] == machine["id"]


def refused_everywhere(live, machine, key, tiers) -> None:
    for base in each(tiers):
        err(live.post("/projects/list", {}, token=key["key"], base=base), 401, UNAUTHORIZED)
        answer = validate(live, machine, key, base)
        assert (answer["authorized"], answer["reason"]) == (False, "invalid_token"), answer


def flush(live) -> None:
    with socket.create_connection(("127.0.0.1", live.redis_port), timeout=5) as sock:
        sock.sendall(b"FLUSHALL\r\n")
        assert sock.recv(16).startswith(b"+OK")


def test_a_key_revoked_through_one_process_is_refused_at_once_by_the_other(live, tiers, machine):
    key, other = new_key(live, machine), new_key(live, machine)
    warm(live, machine, key, tiers)
    warm(live, machine, other, tiers)
    revoke(live, machine, key, base=tiers[1])
    refused_everywhere(live, machine, key, tiers)
    flush(live)  # whatever the cache held or lost: the database answers
    refused_everywhere(live, machine, key, tiers)
    warm(live, machine, other, tiers)  # the service account's other key goes on


def test_a_key_revoked_while_redis_is_down_is_refused_by_every_process(live, tiers, machine):
    key = new_key(live, machine)
    warm(live, machine, key, tiers)
    live.redis_stop()
    try:
        revoke(live, machine, key, base=tiers[0])
        refused_everywhere(live, machine, key, tiers)
    finally:
        live.redis_start()
    refused_everywhere(live, machine, key, tiers)


def test_a_client_credentials_token_and_a_root_client_across_processes(live, tiers, machine):
    """A backend gets its service account's token from `/oauth2/token` (docs/oidc.md#client-credentials)
    and calls the API with it on either process; one client of the root workspace validates it for the
    service account's workspace (docs/integration.md#one-backend-for-many-workspaces); disabling the
    service account refuses the token at once on both."""
    operator, workspace = machine["operator"], machine["workspace"]
    body = {
        "name": "ci-runner",
        "type": "web",
        "redirect_uris": [],
        "grant_types": ["client_credentials"],
        "service_account_id": machine["id"],
        "tags": [],
        "meta": META,
    }
    app = ok(live.post("/applications/create", body, token=operator, workspace=workspace))
    answer = requests.post(
        f"{tiers[1]}/oauth2/token",
        data={"grant_type": "client_credentials"},
        auth=(app["client_id"], app["client_secret"]),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    root = ok(live.post("/workspace/describe", {"slug": "root"}, token=operator))["id"]
    backend = create_client(live, operator, root)

    def validate(base: str, workspace_id: str) -> dict:
        body = {
            "client_id": backend["id"],
            "client_secret": backend["secret"],
            "token": token,
            "workspace_id": workspace_id,
        }
        return ok(live.post("/clients/validate", body, base=base))

    for base in each(tiers):
        ok(live.post("/projects/list", {}, token=token, base=base))
        answer = validate(base, workspace)
        assert answer["authorized"] is True and answer["service_account"]["id"] == machine["id"], answer
        assert validate(base, root)["reason"] == "not_a_member"
    ok(
        live.post(
            "/service-accounts/update",
            {"id": machine["id"], "enabled": False},
            token=operator,
            workspace=workspace,
        )
    )
    for base in each(tiers):
        err(live.post("/projects/list", {}, token=token, base=base), 401, UNAUTHORIZED)
        assert validate(base, workspace)["reason"] == "account_disabled"


def test_an_applications_new_secret_and_its_delete_are_refused_at_once_by_every_process(live, tiers, machine):
    """The token endpoint reads the application from each worker's memory (oidc/application_cache.py):
    a secret regenerated, a service account disabled and an application deleted through one process are
    refused at once by every worker of both."""
    operator, workspace = machine["operator"], machine["workspace"]
    body = {
        "name": "ci-runner",
        "type": "web",
        "redirect_uris": [],
        "grant_types": ["client_credentials"],
        "service_account_id": machine["id"],
        "tags": [],
        "meta": META,
    }
    app = ok(live.post("/applications/create", body, token=operator, workspace=workspace))

    def grant(base: str, secret: str) -> requests.Response:
        return requests.post(
            f"{base}/oauth2/token",
            data={"grant_type": "client_credentials"},
            auth=(app["client_id"], secret),
            timeout=30,
        )

    for base in each(tiers):
        assert grant(base, app["client_secret"]).status_code == 200
    renewed = ok(
        live.post("/applications/regenerate-secret", {"id": app["id"]}, token=operator, workspace=workspace)
    )
    for base in each(tiers):
        assert grant(base, app["client_secret"]).status_code == 401
        assert grant(base, renewed["client_secret"]).status_code == 200
    disable = {"id": machine["id"], "enabled": False}
    ok(live.post("/service-accounts/update", disable, token=operator, workspace=workspace, base=tiers[1]))
    for base in each(tiers):
        assert grant(base, renewed["client_secret"]).json()["error"] == "invalid_grant"
    ok(live.post("/applications/delete", {"id": app["id"]}, token=operator, workspace=workspace))
    for base in each(tiers):
        assert grant(base, renewed["client_secret"]).status_code == 401
