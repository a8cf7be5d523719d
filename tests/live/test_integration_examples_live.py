"""docs/integration.md's backend examples, run as the page prints them against the live service: a job
calling the API with a service account's key (docs/integration.md#call-the-api-from-a-backend-api-keys),
and one client of the root workspace validating the tokens of two tenants' workspaces
(docs/integration.md#one-backend-for-many-workspaces). A change to the page that breaks its code fails
here."""

import re
from pathlib import Path

import pytest

from tests.live.api import META, create_client, create_role, create_workspace, ok

DOC = Path(__file__).resolve().parents[2] / "docs" / "integration.md"


def python_of(heading: str) -> str:
    """The first Python block of the page's section `heading`."""
    section = DOC.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


def permission(live, token: str, workspace: str, name: str) -> str:
    body = {"name": name, "tags": [], "meta": META}
    return ok(live.post("/permissions/create", body, token=token, workspace=workspace))["id"]


def test_a_job_calls_the_api_with_its_key(live, monkeypatch):
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    auditor = create_role(live, operator, workspace, [permission(live, operator, workspace, "audit:list")])
    body = {"name": "nightly-report", "role_ids": [auditor["id"]], "tags": [], "meta": META}
    service_account = ok(live.post("/service-accounts/create", body, token=operator, workspace=workspace))
    body = {"id": service_account["id"], "name": "prod"}
    key = ok(live.post("/service-accounts/create-key", body, token=operator, workspace=workspace))["key"]
    body = {"id": auditor["id"], "name": "auditors"}  # what the job looks for: a `role.update`
    ok(live.post("/roles/update", body, token=operator, workspace=workspace))

    monkeypatch.setenv("IAM_URL", live.url)
    monkeypatch.setenv("IAM_API_KEY", key)
    example: dict = {}
    exec(python_of("Call the API from a backend: API keys"), example)  # the page's own code

    assert [entry["action"] for entry in example["entries"]["entries"]] == ["role.update"]
    monkeypatch.setenv("IAM_API_KEY", key[:-1] + ("A" if key[-1] != "A" else "B"))
    example = {}
    with pytest.raises(RuntimeError, match="revoked, expired"):
        exec(python_of("Call the API from a backend: API keys"), example)


def test_one_root_client_authorizes_the_tokens_of_two_tenants(live):
    _, _, operator = live.bootstrap_operator()
    root = ok(live.post("/workspace/describe", {"slug": "root"}, token=operator))["id"]
    backend = create_client(live, operator, root)
    tenants = []
    for _ in range(2):  # each tenant's owner holds `*` in their own workspace only
        owner = live.register()["access_token"]
        tenants.append((owner, create_workspace(live, owner)["id"]))
    (ada, acme), (bob, globex) = tenants

    example: dict = {}
    exec(python_of("One backend for many workspaces"), example)  # the page's own code
    example["IAM"] = live.url
    example["ROOT_CLIENT"] = {"client_id": backend["id"], "client_secret": backend["secret"]}
    authorize = example["authorize"]

    assert authorize(ada, acme, "projects:create")["workspace_id"] == acme
    assert authorize(bob, globex, "projects:create")["workspace_id"] == globex
    for token, other in ((ada, globex), (bob, acme)):  # a tenant's token, routed to the other tenant
        with pytest.raises(PermissionError, match="not_a_member"):
            authorize(token, other, "projects:create")
