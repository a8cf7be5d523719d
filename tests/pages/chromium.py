"""Debian's Chromium (`IAM_CHROMIUM`, default /usr/bin/chromium, installed by .ci/install-browser) driven
by Playwright, with axe-core (tests/browser: `npm ci` there installs it from the lock file) to check the
pages. Outside CI a machine without them skips; in CI (CI=true) a missing piece fails the run."""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("IAM_CHROMIUM", "/usr/bin/chromium")
NODE_PROJECT = Path(__file__).resolve().parents[1] / "browser"
AXE = NODE_PROJECT / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")  # the impacts that fail a page (WCAG 2.1 AA and axe's best practices)


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the browser tests: see .ci/install-browser and tests/browser)")
    pytest.skip(reason)


def launch(playwright):
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set IAM_CHROMIUM)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)


def axe_script() -> Path:
    """axe.min.js, installed with `npm ci` in tests/browser when missing (once, whatever the xdist
    workers: a file lock)."""
    if AXE.exists():
        return AXE
    if shutil.which("npm") is None:
        unavailable("axe-core is not installed and npm is missing (cd tests/browser && npm ci)")
    with (NODE_PROJECT / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not AXE.exists():
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=NODE_PROJECT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if done.returncode != 0:
                unavailable(f"npm ci in tests/browser failed: {done.stderr[-500:]}")
    return AXE


def violations(page) -> list[dict]:
    """axe-core over the page as it is: the serious and critical violations, each with its nodes."""
    page.add_script_tag(path=str(axe_script()))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        {
            "id": violation["id"],
            "impact": violation["impact"],
            "help": violation["help"],
            "nodes": [node["html"] for node in violation["nodes"]][:5],
        }
        for violation in found
        if violation["impact"] in BLOCKING
    ]
