"""Small helpers for live tests: the docs/api.md#errors envelope, and the few records most tests need, made
over HTTP as a client would."""

import re
import uuid
from pathlib import Path

import requests

META = {"schema_version": "1"}


def ok(response: requests.Response) -> dict:
    assert response.status_code == 200, (response.status_code, response.text[:2000])
    body = response.json()
    assert body["success"] is True and body["status"] == 200, body
    return body["data"]


def err(response: requests.Response, status: int, message: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:2000])
    body = response.json()
    assert body["success"] is False and body["status"] == status, body
    if message is not None:
        assert body["message"] == message, body
    return body


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_workspace(live, token: str) -> dict:
    slug = unique("ws")
    body = {"name": slug, "slug": slug, "config": META, "tags": [], "meta": META}
    return ok(live.post("/workspace/create", body, token=token))


def create_client(live, token: str, workspace: str, endpoint: str | None = None) -> dict:
    body = {"name": unique("client"), "endpoint": endpoint, "tags": [], "meta": META}
    return ok(live.post("/clients/create", body, token=token, workspace=workspace))


def create_role(live, token: str, workspace: str, permission_ids: list[str] = ()) -> dict:
    body = {"name": unique("role"), "permission_ids": list(permission_ids), "tags": [], "meta": META}
    return ok(live.post("/roles/create", body, token=token, workspace=workspace))


def add_member(
    live, token: str, workspace: str, account_id: str, role_ids: list[str] = (), status: str = "active"
) -> dict:
    """As an operator: the membership is `active` at once (docs/api.md#invitations), or `invited` when
    asked."""
    body = {
        "account_id": account_id,
        "scope": "workspace",
        "status": status,
        "role_ids": list(role_ids),
        "tags": [],
        "meta": META,
    }
    return ok(live.post("/memberships/create", body, token=token, workspace=workspace))


def validating_tenant(live) -> dict:
    """Another tenant: a workspace with a client validating its active member's token (the body of a
    `clients/validate` call)."""
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    client = create_client(live, operator, workspace)
    member = live.register()
    add_member(live, operator, workspace, member["account"]["id"])
    return {"client_id": client["id"], "client_secret": client["secret"], "token": member["access_token"]}


def worker_pid(web) -> int:
    """The one worker process of a web tier started with `workers=1`."""
    master = web.process.pid
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak resident) of a process, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {key: int(value) * 1024 for key, value in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}
