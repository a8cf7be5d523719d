"""Machine identities in `make bench` (the `machines` part): a service account's API key as Bearer beside
a person's session token on the same call, and `clients/validate` by one client of the root workspace
naming the workspace (`workspace_id`) beside that workspace's own client. Each pair is measured in
alternating rounds on the same server, so its ratio is what the key or the root client costs."""

import json
import statistics
from pathlib import Path

from bench.common import ROUNDS, notes, rows
from bench.web import load_cpu

META = {"schema_version": "1"}


def machine_figures(base: str, *, workspace, role, member, validate_body: str, workdir: Path) -> None:
    from authn.sessions import issue_session
    from clients.services import create_client
    from rbac.services.service_accounts import create_key, create_service_account
    from tenancy.workspace_cache import root_workspace

    service_account = create_service_account(
        workspace, name="bench", roles=[role], tags=[], meta=META, actor=None
    )
    _, key = create_key(service_account, name="bench", actor=None)
    session = issue_session(member, amr=["pwd"])["access_token"]
    scoped = {"X-Workspace": str(workspace.pk)}
    by_session = {"Authorization": f"Bearer {session}", **scoped}
    by_key = {"Authorization": f"Bearer {key}", **scoped}
    backend, secret = create_client(root_workspace(), name="bench-root", tags=[], meta=META, actor=None)
    rooted = json.dumps(
        {
            **json.loads(validate_body),
            "client_id": str(backend.pk),
            "client_secret": secret,
            "workspace_id": str(workspace.pk),
        }
    )

    runs: dict[str, list[dict]] = {"session": [], "key": [], "own": [], "root": []}
    for _ in range(ROUNDS):  # alternate, so drifting load on a shared machine hits all alike
        runs["session"].append(load_cpu(base, "/projects/list", "{}", workdir, by_session))
        runs["key"].append(load_cpu(base, "/projects/list", "{}", workdir, by_key))
        runs["own"].append(load_cpu(base, "/clients/validate", validate_body, workdir))
        runs["root"].append(load_cpu(base, "/clients/validate", rooted, workdir))
    rps = {name: statistics.median(run["rps"] for run in results) for name, results in runs.items()}
    cpu = {name: statistics.median(run["cpu_us"] for run in results) for name, results in runs.items()}
    rows.append(
        (
            "API key Bearer / session Bearer: `projects/list` req/s",
            f"{rps['key']:,.0f} / {rps['session']:,.0f} = {rps['key'] / rps['session']:.2f} "
            f"(server CPU per request {cpu['key']:.0f} / {cpu['session']:.0f} us)",
            "within noise of 1.00",
        )
    )
    rows.append(
        (
            "root client naming the workspace / the workspace's own client: `clients/validate` req/s",
            f"{rps['root']:,.0f} / {rps['own']:,.0f} = {rps['root'] / rps['own']:.2f} "
            f"(server CPU per request {cpu['root']:.0f} / {cpu['own']:.0f} us)",
            "within noise of 1.00",
        )
    )
    errors = sum(run["errors"] for results in runs.values() for run in results)
    if errors:
        notes.append(f"{errors} non-2xx answers during the machine identities runs")
