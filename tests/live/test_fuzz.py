"""schemathesis over openapi.yaml against the live service: every operation the document
describes, with generated valid and invalid bodies, as an operator in the root workspace and anonymously;
the check is the docs/api.md#errors "no request produces a 500". Run alone with `make fuzz`; `.ci/run` runs
it."""

import os
import subprocess

import pytest

from tests.live.api import ok
from tests.live.conftest import BASE_DIR, BIN

pytestmark = pytest.mark.fuzz

# Cases per operation: about 50 operations x 2 identities stay well under a minute on 2 cores.
MAX_EXAMPLES = int(os.environ.get("IAM_FUZZ_MAX_EXAMPLES", "10"))


@pytest.mark.parametrize("identity", ["operator", "anonymous"])
def test_no_generated_request_gets_a_server_error(live, identity, tmp_path):
    command = [
        str(BIN / "schemathesis"),
        "run",
        str(BASE_DIR / "openapi.yaml"),
        "--url",
        live.url,
        "--checks",
        "not_a_server_error",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--workers",
        "2",
        "--request-timeout",
        "30",
        # Generated bodies, valid and invalid. The coverage phase's thousands of boundary cases are left to
        # tests/live/test_endpoints.py, which sends hostile ones on purpose; the stateful phase would feed
        # the operator's own account and workspace to the deletes.
        "--phases",
        "fuzzing",
        "--generation-with-security-parameters",
        "false",
        "--generation-database",
        "none",
        "--no-color",
        "--report",
        "ndjson",
        "--report-dir",
        str(tmp_path),
    ]
    if identity == "operator":
        _, _, token = live.bootstrap_operator()
        root = ok(live.post("/workspace/describe", {"slug": "root"}, token=token))["id"]
        command += ["-H", f"Authorization: Bearer {token}", "-H", f"X-Workspace: {root}"]
        # What would end the operator's session for the rest of the run; the anonymous run sends them.
        command += ["--exclude-path-regex", "^/auth/revoke$|^/accounts/(delete|update)$|^/workspace/delete$"]
    else:
        # Without a token the protected operations stop at 401: fuzz what anyone may call.
        command += ["--include-path-regex", "^/auth/|^/clients/validate$|^/health-check$|^/$"]
    run = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False, env=live.env
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    print(run.stdout[-3000:])
