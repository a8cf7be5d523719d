"""Exact totals under concurrent writes (iam.counts, issue 14 item 3): memberships created, suspended and
deleted in one workspace by concurrent requests on gunicorn's two processes all succeed, and the totals the
counts give (no filter, or `status`) equal the ones counted from the rows (the same filter with
`workspace_id` added, which no count holds)."""

from collections import Counter

from tests.live.api import META, create_workspace, ok
from tests.live.test_races import CONCURRENCY, race


def test_concurrent_membership_writes_keep_the_totals_exact(live):
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]

    def post(path: str, body: dict):
        return live.post(path, body, token=token, workspace=workspace)

    def total(fields: dict) -> int:
        return ok(post("/memberships/list", {"filter": {"fields": fields}, "options": {"limit": 1}}))[
            "metadata"
        ]["total"]

    def assert_exact() -> None:
        for fields in ({}, {"status": "active"}, {"status": "invited"}, {"status": "suspended"}):
            assert total(fields) == total({**fields, "workspace_id": workspace}), fields

    accounts = [live.register()["account"]["id"] for _ in range(CONCURRENCY)]
    created = race(
        lambda i: post(
            "/memberships/create",
            {
                "account_id": accounts[i],
                "scope": "workspace",
                "status": "active" if i % 2 else "invited",
                "role_ids": [],
                "tags": [],
                "meta": META,
            },
        )
    )
    memberships = [ok(response)["id"] for response in created]
    assert_exact()

    changed = race(
        lambda i: (
            post("/memberships/delete", {"id": memberships[i]})
            if i % 4 == 0
            else post("/memberships/update", {"id": memberships[i], "status": "suspended"})
        )
    )
    assert Counter(response.status_code for response in changed) == {200: CONCURRENCY}, [
        response.text[:200] for response in changed if response.status_code != 200
    ]
    assert total({"status": "suspended"}) == CONCURRENCY - CONCURRENCY // 4
    assert_exact()
