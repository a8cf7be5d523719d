"""The statement timeout against the running service (docs/api.md#quotas-and-budgets): a request whose
statement waits past `IAM_STATEMENT_TIMEOUT_MS` (here on a row lock another connection holds) answers 503
`request took too long`, writes nothing, and the worker that served it goes on serving."""

import time

import psycopg
import pytest

from tests.live.api import create_workspace, err, ok

TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def short_timeout(live):
    """A web tier of its own whose requests' statements time out after TIMEOUT_MS."""
    web = live.start_web(workers=1, env={"IAM_STATEMENT_TIMEOUT_MS": str(TIMEOUT_MS)})
    yield web.url
    web.stop()


def test_a_request_past_the_statement_timeout_answers_503_and_writes_nothing(live, short_timeout):
    token = live.register()["access_token"]
    workspace = create_workspace(live, token)
    update = {"id": workspace["id"], "name": "renamed while locked"}
    with psycopg.connect(live.env["DATABASE_URL"]) as holder:
        holder.execute("SELECT id FROM tenancy_workspace WHERE id = %s FOR UPDATE", (workspace["id"],))
        started = time.monotonic()
        err(
            live.post("/workspace/update", update, token=token, base=short_timeout),
            503,
            "request took too long",
        )
        waited = time.monotonic() - started
        holder.rollback()
    assert TIMEOUT_MS / 1000 <= waited < 10
    described = ok(live.post("/workspace/describe", {"id": workspace["id"]}, token=token, base=short_timeout))
    assert described["name"] == workspace["name"]  # nothing written
    renamed = ok(live.post("/workspace/update", update, token=token, base=short_timeout))
    assert renamed["name"] == "renamed while locked"  # the same worker serves the next request
