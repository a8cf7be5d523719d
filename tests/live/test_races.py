"""Uniqueness races (docs/api.md#validation): 20 concurrent creates of one unique value, on
gunicorn's two processes and PostgreSQL, end as one 200 and the check's own answer for the rest (400 for
`/auth/register`, 409 elsewhere), never a 500."""

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.api import META, create_workspace, ok, unique

CONCURRENCY = 20


def race(make_request: Callable[[int], object]) -> list:
    """Runs `make_request(i)` for i in 0..19 from 20 threads released together."""
    start = threading.Barrier(CONCURRENCY)

    def run(i: int):
        start.wait()
        return make_request(i)

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(run, range(CONCURRENCY)))


@pytest.fixture(scope="module")
def owner(live) -> dict:
    _, _, token = live.bootstrap_operator()
    return {"token": token, "workspace": create_workspace(live, token)["id"]}


def scoped(live, owner, path: str, body: dict):
    return live.post(
        path, {"tags": [], "meta": META, **body}, token=owner["token"], workspace=owner["workspace"]
    )


RULES = {
    # rule: (conflict status, request for the i-th racer); every racer asks for the same unique value.
    "account email (register)": (
        400,
        lambda live, owner, value, i: live.post(
            "/auth/register", {"email": f"{value}@example.com", "password": f"pw-{value}-{i}"}
        ),
    ),
    "account email (accounts/create)": (
        409,
        lambda live, owner, value, i: live.post(
            "/accounts/create",
            {"email": f"{value}@example.com", "password": f"pw-{value}-{i}", "name": "racer"},
            token=owner["token"],
        ),
    ),
    "workspace slug": (
        409,
        lambda live, owner, value, i: live.post(
            "/workspace/create",
            {"name": f"racer {i}", "slug": value, "config": META, "tags": [], "meta": META},
            token=owner["token"],
        ),
    ),
    "project name": (
        409,
        lambda live, owner, value, i: scoped(
            live, owner, "/projects/create", {"name": value, "code": f"{value}-{i}", "config": META}
        ),
    ),
    "project code": (
        409,
        lambda live, owner, value, i: scoped(
            live, owner, "/projects/create", {"name": f"{value}-{i}", "code": value, "config": META}
        ),
    ),
    "role name": (
        409,
        lambda live, owner, value, i: scoped(
            live, owner, "/roles/create", {"name": value, "permission_ids": []}
        ),
    ),
    "permission name": (
        409,
        lambda live, owner, value, i: scoped(live, owner, "/permissions/create", {"name": f"{value}:read"}),
    ),
    "permission code": (
        409,
        lambda live, owner, value, i: scoped(
            live, owner, "/permissions/create", {"name": f"{value}-{i}:read", "code": f"{value}:code"}
        ),
    ),
    "client name": (
        409,
        lambda live, owner, value, i: scoped(live, owner, "/clients/create", {"name": value}),
    ),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_concurrent_creates_of_one_unique_value(live, owner, rule):
    conflict, request = RULES[rule]
    value = unique("race")
    responses = race(lambda i: request(live, owner, value, i))
    assert_one_winner(responses, conflict)


def test_concurrent_memberships_of_one_account(live, owner):
    account_id = live.register()["account"]["id"]
    body = {"account_id": account_id, "scope": "workspace", "status": "active", "role_ids": []}
    responses = race(lambda i: scoped(live, owner, "/memberships/create", body))
    assert_one_winner(responses, 409)
    found = ok(
        live.post(
            "/memberships/list",
            {"filter": {"fields": {"account_id": account_id}}},
            token=owner["token"],
            workspace=owner["workspace"],
        )
    )
    assert found["metadata"]["total"] == 1


def assert_one_winner(responses: list, conflict: int) -> None:
    statuses = Counter(response.status_code for response in responses)
    assert statuses == {200: 1, conflict: CONCURRENCY - 1}, (statuses, [r.text[:200] for r in responses])
    for response in responses:
        body = response.json()
        if response.status_code == conflict:
            assert body["success"] is False and body["status"] == conflict, body
            assert body["message"].endswith("already exists"), body
