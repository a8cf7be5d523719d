"""docs/api.md#quotas-and-budgets against the running service: quotas are exact under concurrent requests. A
web tier of its own runs with small quotas (the rest of the layer keeps the defaults); ten creates fired
together at the edge of a quota of five end as exactly five records and five 403s, never six, never a 500."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.api import META, ok, unique

CONCURRENCY = 10
LIMIT = 5


@pytest.fixture(scope="module")
def small_quotas(live):
    web = live.start_web(
        workers=2, env={"IAM_QUOTA_PROJECTS": str(LIMIT), "IAM_QUOTA_WORKSPACES": str(LIMIT)}
    )
    yield web.url
    web.stop()


def race(make_request) -> list:
    start = threading.Barrier(CONCURRENCY)

    def run(i: int):
        start.wait()
        return make_request(i)

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(run, range(CONCURRENCY)))


def outcome(responses) -> Counter:
    return Counter((response.status_code, response.json().get("message")) for response in responses)


def new_workspace(live, token: str, base: str) -> str:
    slug = unique("ws")
    body = {"name": slug, "slug": slug, "config": META, "tags": [], "meta": META}
    return ok(live.post("/workspace/create", body, token=token, base=base))["id"]


def test_parallel_project_creates_at_the_edge_of_the_quota(live, small_quotas):
    # a self-registered account, as in docs/api.md#quotas-and-budgets
    tenant = live.register()["access_token"]
    workspace = new_workspace(live, tenant, small_quotas)

    def create(i: int):
        body = {"name": f"p{i}", "code": f"p{i}", "config": META, "tags": [], "meta": META}
        return live.post("/projects/create", body, token=tenant, workspace=workspace, base=small_quotas)

    assert outcome(race(create)) == {
        (200, None): LIMIT,
        (403, f"quota reached: projects ({LIMIT})"): CONCURRENCY - LIMIT,
    }
    listed = ok(live.post("/projects/list", {}, token=tenant, workspace=workspace, base=small_quotas))
    assert listed["metadata"]["total"] == LIMIT
    # Another tenant's workspace has its whole quota.
    neighbour = live.register()["access_token"]
    theirs = new_workspace(live, neighbour, small_quotas)
    for i in range(LIMIT):
        body = {"name": f"p{i}", "code": f"p{i}", "config": META, "tags": [], "meta": META}
        ok(live.post("/projects/create", body, token=neighbour, workspace=theirs, base=small_quotas))


def test_parallel_workspace_creates_at_the_edge_of_the_account_quota(live, small_quotas):
    tenant = live.register()["access_token"]

    def create(i: int):
        slug = unique(f"race{i}")
        body = {"name": slug, "slug": slug, "config": META, "tags": [], "meta": META}
        return live.post("/workspace/create", body, token=tenant, base=small_quotas)

    assert outcome(race(create)) == {
        (200, None): LIMIT,
        (403, f"quota reached: workspaces ({LIMIT})"): CONCURRENCY - LIMIT,
    }
    mine = ok(live.post("/workspace/list", {}, token=tenant, base=small_quotas))
    assert mine["metadata"]["total"] == LIMIT


def test_operators_pass_the_quota_under_the_same_race(live, small_quotas):
    _, _, operator = live.bootstrap_operator()
    workspace = new_workspace(live, operator, small_quotas)

    def create(i: int):
        body = {"name": f"p{i}", "code": f"p{i}", "config": META, "tags": [], "meta": META}
        return live.post("/projects/create", body, token=operator, workspace=workspace, base=small_quotas)

    assert outcome(race(create)) == {(200, None): CONCURRENCY}
