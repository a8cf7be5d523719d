"""docs/architecture.md#the-outbox-side-effects-after-commit against the running service: the order list is
bounded, and an outbox handler that hits a database error counts a failed attempt instead of leaving its
message pending forever."""

import json
import uuid

import pytest
import requests

from tests.endpoints import ENDPOINTS, LISTS
from tests.live.api import create_client, create_workspace, err, ok
from tests.live.conftest import PASSWORD


def test_every_list_refuses_more_than_eight_order_keys(live):
    """Item 5: 90,000 `order_bys` took 1.9 s a request; now 9 or more are a 400 at once, on every list."""
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    for path in LISTS:
        scoped = ENDPOINTS[path].workspace_scoped
        field = ENDPOINTS[path].order_fields[0]
        for count in (9, 60_000):  # 60,000 keys stay under the 1 MiB body limit
            body = {"options": {"order_bys": [field] * count}}
            response = live.post(path, body, token=token, workspace=workspace if scoped else None)
            answer = err(response, 400, "order_bys must have at most 8 items")
            assert answer["field"] == "options.order_bys", path
        ok(
            live.post(
                path,
                {"options": {"order_bys": [field] * 8}},
                token=token,
                workspace=workspace if scoped else None,
            )
        )


def outbox_row(live, message_id: str) -> dict:
    code = (
        "import json; from iam.models import OutboxMessage as M; "
        f"m = M.objects.get(pk='{message_id}'); "
        "print(json.dumps({'status': m.status, 'attempts': m.attempts, 'error': m.last_error, "
        "'retry_in': (m.next_attempt_at - m.created_at).total_seconds()}))"
    )
    done = live.manage("shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_database_error_in_a_handler_is_a_failed_attempt_with_backoff(live, receiver):
    """Item 6: the fan-out of an event whose `type` outgrows its column raises a database error inside
    the worker's transaction. Before, that aborted the transaction: no attempt counted, the message
    pending and re-published by every sweep, forever. Now the handler runs in a savepoint."""
    _, _, token = live.bootstrap_operator()
    workspace = create_workspace(live, token)["id"]
    create_client(live, token, workspace, endpoint=receiver.url)
    message_id = str(uuid.uuid4())
    payload = {
        "id": str(uuid.uuid4()),
        "type": "x" * 100,  # Delivery.event_type holds 64 characters: PostgreSQL refuses the insert
        "workspace_id": workspace,
        "occurred_at": "2026-11-23T00:00:00Z",
        "data": {"account_ids": [], "resource": {"type": "membership", "id": str(uuid.uuid4())}},
    }
    code = (
        "from datetime import timedelta; from django.utils import timezone; "
        "from iam.models import OutboxMessage as M; now = timezone.now(); "
        f"M.objects.create(id='{message_id}', topic='push.event', payload={payload!r}, "
        "next_attempt_at=now, deadline=now + timedelta(hours=1))"
    )
    done = live.manage("shell", "-c", code)
    assert done.returncode == 0, done.stderr
    # The sweeper publishes it (the message was written without a publish), the worker runs it.
    row = live.wait_for(
        lambda: (found := outbox_row(live, message_id))["attempts"] >= 1 and found,
        timeout=60,
        what="the failed attempt to be counted",
    )
    assert row["status"] == "pending" and row["retry_in"] > 0, row
    assert "too long" in row["error"] or "value" in row["error"], row
    assert receiver.events == []


def chunks(body: bytes, size: int = 1000):
    """A generator: requests sends it with `Transfer-Encoding: chunked` and no `Content-Length`."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_chunked_body_is_read_whole_within_the_limit(live):
    """Django read a chunked body as empty (no `Content-Length`): the login below answered 400 `email and
    password required`. gunicorn decodes the chunks; the service reads them, up to 1 MiB."""
    account = live.register()["account"]
    body = json.dumps({"email": account["email"], "password": PASSWORD}).encode()
    response = requests.post(f"{live.url}/auth/login", data=chunks(body, 7), timeout=30)
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.request.headers
    assert ok(response)["account"]["id"] == account["id"]
    padded = json.dumps({"email": account["email"], "password": "wrong"}).ljust(1024 * 1024).encode()
    err(requests.post(f"{live.url}/auth/login", data=chunks(padded), timeout=30), 401, "invalid credentials")
    over = padded + b" "
    err(requests.post(f"{live.url}/auth/login", data=chunks(over), timeout=30), 413, "request body too large")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("POST", "/metrics", "GET"),
        ("POST", "/auth/oauth/idp_a/callback", "GET"),
        ("POST", "/health-check", "GET"),
        ("GET", "/roles/list", "POST"),
        ("PUT", "/auth/login", "POST"),
    ],
)
def test_a_wrong_method_is_405_saying_which_to_use(live, method, path, allow):
    """POST /metrics and POST to the OAuth callback answered CSRF's 403; a GET on an endpoint without a
    token answered 401."""
    response = live.request(method, path)
    err(response, 405, f"use {allow}")
    assert response.headers["Allow"] == allow
