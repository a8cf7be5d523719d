"""Exact totals under concurrent writes (iam.platform.counts, docs/performance.md): memberships created,
suspended and deleted in one workspace by concurrent requests on gunicorn's two processes all succeed, and the
totals the counts give (no filter, or `status`) equal the ones counted from the rows (the same filter with
`workspace_id` added, which no count holds). Registrations (an account, then its root-workspace
membership) racing account deletes (the memberships, then the account) touch the two counted tables in
opposite orders: none of them waits on a counter row, so none deadlocks."""

from collections import Counter

import psycopg

from iam.platform import counts
from tests.live.api import META, create_workspace, ok, unique
from tests.live.conftest import PASSWORD
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


def test_concurrent_registrations_and_account_deletes_never_fail_and_keep_the_counts_exact(live):
    _, _, token = live.bootstrap_operator()
    for _ in range(3):  # rounds: each races CONCURRENCY // 2 registrations against as many deletes
        doomed = [live.register()["account"]["id"] for _ in range(CONCURRENCY // 2)]
        answers = race(
            lambda i, doomed=doomed: (
                live.post("/auth/register", {"email": f"{unique('racer')}@example.com", "password": PASSWORD})
                if i % 2
                else live.post("/accounts/delete", {"id": doomed[i // 2]}, token=token)
            )
        )
        assert Counter(response.status_code for response in answers) == {200: CONCURRENCY}, [
            response.text[:200] for response in answers if response.status_code != 200
        ]

    with psycopg.connect(live.env["DATABASE_URL"]) as db:
        stored = db.execute(
            "SELECT table_name, tenant, field, value, sum(n) FROM iam_row_count GROUP BY 1, 2, 3, 4 "
            "HAVING sum(n) <> 0"
        ).fetchall()
        actual = []
        for table, counted in counts.COUNTED.items():
            tenant = "''" if counted.tenant is None else f"{counted.tenant}::text"
            for field in ("", *counted.fields):
                value = f"{field}::text" if field else "''"
                actual += db.execute(
                    f"SELECT %s, {tenant}, %s, {value}, count(*) FROM {table} GROUP BY 2, 4", [table, field]
                ).fetchall()
        accounts = db.execute("SELECT count(*) FROM accounts_account").fetchone()[0]
    assert sorted(stored) == sorted(actual)
    listed = live.post("/accounts/list", {"options": {"limit": 1}}, token=token)
    assert ok(listed)["metadata"]["total"] == accounts
