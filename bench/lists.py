"""The `lists` and `neighbour` parts: the list cases over 1M rows with their queries' own time and plans,
and a noisy neighbour's heaviest lists beside another tenant's requests."""

import concurrent.futures
import json
import statistics
import threading
import time

from bench.common import LIST_REQUESTS, LIST_WARMUP, SECONDS, Api, notes, percentile, rows

LIST_CASES = [
    ("`accounts/list` first page over 1M accounts, exact total", "/accounts/list", {}, False, 50),
    (
        "`accounts/list` filtered by `name` (1 match in 1M)",
        "/accounts/list",
        {"filter": {"fields": {"name": "User " + "c4ca4238a0b923820dcc509a6f75849b"}}},
        False,
        50,
    ),
    ("`accounts/list` sorted by `name`", "/accounts/list", {"options": {"order_bys": ["name"]}}, False, 50),
    ("`accounts/list` at offset 500,000", "/accounts/list", {"options": {"offset": 500_000}}, False, 100),
    ("`memberships/list` first page, one workspace with 1M members", "/memberships/list", {}, True, 50),
    (
        "`memberships/list` filtered by `status`",
        "/memberships/list",
        {"filter": {"fields": {"status": "invited"}}},
        True,
        50,
    ),
    (
        "`memberships/list` at offset 500,000",
        "/memberships/list",
        {"options": {"offset": 500_000}},
        True,
        100,
    ),
]


def list_figures(api: Api, token: str, workspace) -> dict[str, float]:
    """The p50 of each list case, by label (`explain` sets its queries' own time beside it)."""
    medians = {}
    for label, path, body, scoped, goal in LIST_CASES:
        headers = {"Authorization": f"Bearer {token}"}
        if scoped:
            headers["X-Workspace"] = str(workspace.pk)
        # Warm-up (and a check of the answer): requests on several connections at once, so that each
        # gunicorn worker (sync: one request at a time) has served the case before it is timed; a
        # worker's first request opens its database and Redis connections.
        with concurrent.futures.ThreadPoolExecutor(LIST_WARMUP) as pool:
            calls = [pool.submit(Api(api.base).post, path, body, headers) for _ in range(LIST_WARMUP)]
            answers = [call.result() for call in calls]
        data = answers[0][0]
        total = data["metadata"]["total"]
        timings = [api.post(path, body, headers)[1] for _ in range(LIST_REQUESTS)]
        medians[label] = percentile(timings, 0.5)
        rows.append(
            (
                label,
                f"p95 {percentile(timings, 0.95):.0f} ms (p50 {medians[label]:.0f}, total {total:,})",
                f"p95 <= {goal} ms",
            )
        )
    return medians


NEIGHBOUR_PERMISSIONS = 200  # ~24 KB each: a role holding them all is past the 4 MiB page by itself
NEIGHBOUR_ROLES = 5
NEIGHBOUR_THREADS = 3


def _max_meta(seed: str) -> dict:
    """Just under 16 KiB of `meta` (the docs/api.md#validation limit) in many small keys."""
    meta, size, index = {"schema_version": "1"}, 24, 0
    while size + len(seed) + 20 < 16 * 1024 - 40:
        meta[f"{seed}-{index}"] = f"value-{index:06}"
        size += len(seed) + 20
        index += 1
    return meta


def neighbour_figures(base: str, token: str, workspace, validate_body: str) -> None:
    """A tenant at its size limits sends its heaviest lists at full speed; another
    tenant's `projects/list` and `clients/validate` are timed meanwhile (goal: p95 under one second)."""
    from accounts.models import Account
    from authn.sessions import issue_session
    from rbac.models import Permission, Role
    from rbac.services.workspaces import create_workspace

    owner = Account.objects.create(email="heavy@bench.example", name="Heavy", verified=True)
    heavy = create_workspace(
        owner=owner,
        actor=owner,
        name="Heavy",
        slug="heavy",
        config={"schema_version": "1"},
        tags=[],
        meta={"schema_version": "1"},
    )
    tags = [f"{n:02}" + "t" * 62 for n in range(50)]
    permissions = Permission.objects.bulk_create(
        Permission(
            workspace=heavy,
            name=f"resource{n:04}:{'a' * 100}",
            description="d" * 4096,
            tags=tags,
            meta=_max_meta(f"k{n}"),
        )
        for n in range(NEIGHBOUR_PERMISSIONS)
    )
    for n in range(NEIGHBOUR_ROLES):
        role = Role.objects.create(workspace=heavy, name=f"heavy-{n}", tags=tags, meta=_max_meta("role"))
        role.permissions.set(permissions)
    heavy_headers = {
        "Authorization": f"Bearer {issue_session(owner, amr=['pwd'])['access_token']}",
        "X-Workspace": "heavy",
    }
    stop = threading.Event()
    heavy_calls: list[tuple[float, int]] = []

    def hammer(thread: int) -> None:
        api = Api(base)
        paths = ["/roles/list", "/permissions/list"]
        index = thread
        while not stop.is_set():
            data, elapsed = api.post(paths[index % 2], {"options": {"limit": 1000}}, heavy_headers)
            heavy_calls.append((elapsed, data["metadata"]["count"]))
            index += 1

    threads = [threading.Thread(target=hammer, args=(n,), daemon=True) for n in range(NEIGHBOUR_THREADS)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    other = Api(base)
    scoped = {"Authorization": f"Bearer {token}", "X-Workspace": str(workspace.pk)}
    timings: dict[str, list[float]] = {"projects/list": [], "clients/validate": []}
    deadline = time.monotonic() + 2 * SECONDS
    while time.monotonic() < deadline:
        timings["projects/list"].append(other.post("/projects/list", {}, scoped)[1])
        timings["clients/validate"].append(other.post("/clients/validate", json.loads(validate_body))[1])
    stop.set()
    for thread in threads:
        thread.join()
    for name, values in timings.items():
        p95, p50 = percentile(values, 0.95), percentile(values, 0.5)
        figure = f"p95 {p95:.0f} ms (p50 {p50:.0f}, {len(values)} requests)"
        rows.append((f"noisy neighbour: the other tenant's `{name}`", figure, "p95 < 1000 ms"))
    heavy_ms = [elapsed for elapsed, _ in heavy_calls]
    per_page = sum(count for _, count in heavy_calls) / max(len(heavy_calls), 1)
    notes.append(
        f"noisy neighbour: {NEIGHBOUR_THREADS} threads of the heavy tenant made {len(heavy_calls)} lists at "
        f"limit 1000 (p50 {percentile(heavy_ms, 0.5):.0f} ms, {per_page:.0f} records a page within the 4 MiB "
        f"budget) over {NEIGHBOUR_PERMISSIONS} permissions and {NEIGHBOUR_ROLES} roles at their size limits"
    )


def explain(token: str, workspace, medians: dict[str, float]) -> None:
    """Where each list case's time goes: its queries' own time (each run alone, the median of 5, no
    EXPLAIN overhead) against the request's p50, and the plan of each query (the `EXPLAIN ANALYZE`
    summary line), from the same code path (Django's test client, in this process)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1")
    for label, path, body, scoped, _ in LIST_CASES:
        headers = {"Authorization": f"Bearer {token}"}
        if scoped:
            headers["X-Workspace"] = str(workspace.pk)
        with CaptureQueriesContext(connection) as captured:
            response = client.post(path, json.dumps(body), content_type="application/json", headers=headers)
        assert response.status_code == 200, response.content
        plans, spent = [], 0.0
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                sql = query["sql"]
                if not sql.startswith("SELECT") or "operator@" in sql:
                    continue  # the caller's own account, read by authentication
                runs = []
                for _ in range(5):
                    started = time.perf_counter()
                    cursor.execute(sql)
                    cursor.fetchall()
                    runs.append((time.perf_counter() - started) * 1000)
                spent += statistics.median(runs)
                if "accounts_account" not in sql and "rbac_membership" not in sql:
                    continue
                if '"rbac_membership_roles"' in sql:
                    continue
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS OFF) " + sql)
                lines = [line for (line,) in cursor.fetchall()]
                kind = "count" if "COUNT(*)" in sql or "iam_row_count" in sql else "page"
                node = lines[0].split("  (cost")[0].strip()
                timing = next(line for line in lines if line.startswith("Execution Time"))
                plans.append(f"    {kind}: {node} ... {timing}")
        notes.append(
            f"{label}: its {len(captured.captured_queries)} queries take {spent:.1f} ms of the request's "
            f"p50 {medians[label]:.0f} ms\n" + "\n".join(plans)
        )
