"""docs/api.md#quotas-and-budgets: no tenant can make the service slow for another. One tenant sends its
heaviest allowed requests at full speed from a few threads (lists at limit 1000 over records at their size
limits, within its quotas: permissions of 16 KiB meta, 4 KiB description and 50 tags, roles holding all of
them) while another tenant's `projects/list` and `clients/validate` are timed: their p95 stays under one
second and nothing answers 5xx. `make bench` prints the same figure (its `neighbour` part, bench/lists.py)."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.api import META, add_member, create_client, create_workspace, ok, unique

PERMISSIONS = 200  # ~24 KB each serialized: a role holding them all is past the page budget by itself
ROLES = 5
HEAVY_THREADS = 3
SECONDS = 8


def max_meta(seed: str) -> dict:
    """A `meta` of just under 16 KiB serialized (the docs/api.md#validation limit), in many small keys."""
    meta, size, index = dict(META), len(json.dumps(META, separators=(",", ":"))), 0
    while True:
        key, value = f"{seed}-{index}", f"value-{index:06}"
        size += len(key) + len(value) + 6  # the quotes, `:` and `,`
        if size > 16 * 1024 - 40:
            return meta
        meta[key] = value
        index += 1


def heavy_permission(n: int) -> dict:
    return {
        "name": f"resource{n:04}:{'a' * 100}",
        "description": "d" * 4096,
        "tags": [f"{k:02}" + "t" * 62 for k in range(50)],
        "meta": max_meta(f"k{n}"),
    }


@pytest.fixture(scope="module")
def heavy(live) -> dict:
    """A self-registered tenant with records at their size limits, made over HTTP within its quotas."""
    token = live.register()["access_token"]
    workspace = create_workspace(live, token)["id"]

    def permission(n: int) -> str:
        return ok(live.post("/permissions/create", heavy_permission(n), token=token, workspace=workspace))[
            "id"
        ]

    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(permission, range(PERMISSIONS)))
    for _ in range(ROLES):
        body = {"name": unique("role"), "permission_ids": ids, "tags": [], "meta": max_meta("role")}
        ok(live.post("/roles/create", body, token=token, workspace=workspace))
    return {"token": token, "workspace": workspace}


@pytest.fixture(scope="module")
def neighbour(live) -> dict:
    """Another tenant: a workspace with a project, a client and an active member."""
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    body = {"name": "p", "code": "p", "config": META, "tags": [], "meta": META}
    ok(live.post("/projects/create", body, token=operator, workspace=workspace))
    client = create_client(live, operator, workspace)
    member = live.register()
    add_member(live, operator, workspace, member["account"]["id"])
    return {"token": operator, "workspace": workspace, "client": client, "member": member}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def test_a_heavy_tenant_does_not_slow_another(live, heavy, neighbour):
    stop = threading.Event()
    heavy_statuses: list[int] = []
    heavy_sizes: list[int] = []

    def hammer(thread: int) -> None:
        paths = ["/roles/list", "/permissions/list"]
        index = thread
        while not stop.is_set():
            response = live.post(
                paths[index % 2],
                {"options": {"limit": 1000}},
                token=heavy["token"],
                workspace=heavy["workspace"],
                timeout=60,
            )
            heavy_statuses.append(response.status_code)
            heavy_sizes.append(len(response.content))
            index += 1

    validate_body = {
        "client_id": neighbour["client"]["id"],
        "client_secret": neighbour["client"]["secret"],
        "token": neighbour["member"]["access_token"],
    }
    timings: dict[str, list[float]] = {"projects/list": [], "clients/validate": []}
    statuses: list[int] = []
    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(HEAVY_THREADS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)  # the heavy requests are under way
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            for name, call in (
                (
                    "projects/list",
                    lambda: live.post(
                        "/projects/list", {}, token=neighbour["token"], workspace=neighbour["workspace"]
                    ),
                ),
                ("clients/validate", lambda: live.post("/clients/validate", validate_body)),
            ):
                started = time.monotonic()
                response = call()
                timings[name].append(time.monotonic() - started)
                statuses.append(response.status_code)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert statuses and all(status == 200 for status in statuses), statuses
    assert heavy_statuses and all(status == 200 for status in heavy_statuses), heavy_statuses
    # The heavy tenant's pages stay within the budget (4 MiB, plus one record past it at most).
    assert max(heavy_sizes) < 4 * 1024 * 1024 + PERMISSIONS * 30 * 1024
    for name, values in timings.items():
        assert p95(values) < 1.0, (name, f"p95 {p95(values):.3f} s over {len(values)} requests")
