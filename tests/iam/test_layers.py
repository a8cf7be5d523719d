"""The tiers and layers of pyproject.toml's import-linter contracts (`make lint` runs `lint-imports`): only
the HTTP tier (endpoints, serializers, admin, urls) imports the HTTP tier, and it may use the domain tier
of any app; the domain tier's apps depend one way, `scim -> sso -> clients -> authn -> rbac -> tenancy ->
accounts -> iam`; iam imports no app."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("iam", "accounts", "tenancy", "rbac", "authn", "clients", "sso", "scim")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the project's Python sources and its pyproject.toml, to break on purpose."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for app in APPS:
        shutil.copytree(ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp_path


def test_the_project_keeps_its_layers(tree):
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def add(tree: Path, module: str, source: str) -> None:
    """Adds `source` to `module` of the copy (a new module, or the end of an existing one)."""
    path = tree / module
    path.write_text((path.read_text() if path.exists() else "") + source)


@pytest.mark.parametrize(
    ("module", "source", "broken", "counts"),
    [
        # The domain tier depends one way.
        (
            "tenancy/upward.py",
            "from rbac import policy\n",
            "tenancy is not allowed to import rbac",
            "2 kept, 1 broken",
        ),
        (
            "accounts/upward.py",
            "import authn.services\n",
            "accounts is not allowed to import authn",
            "2 kept, 1 broken",
        ),
        (
            "iam/upward.py",
            "def later():\n    from clients import models\n",
            "iam is not allowed to import clients",
            "1 kept, 2 broken",
        ),
        # The domain tier never imports the HTTP tier, its own app's included.
        ("rbac/services/roles.py", "from rbac import serializers\n", "rbac.serializers", "2 kept, 1 broken"),
        ("tenancy/quotas.py", "from tenancy.api import WorkspaceCreate\n", "tenancy.api", "2 kept, 1 broken"),
        # iam's HTTP machinery imports no app either.
        (
            "iam/http/endpoint.py",
            "from rbac import policy\n",
            "iam is not allowed to import rbac",
            "1 kept, 2 broken",
        ),
    ],
)
def test_a_bad_import_breaks_the_contract(tree, module, source, broken, counts):
    add(tree, module, source)
    result = lint(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert counts in result.stdout
    assert broken in result.stdout


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("tenancy/api/workspaces.py", "from clients import services as clients\n"),
        ("accounts/admin.py", "from sso import services as sso\n"),
        ("rbac/serializers.py", "from tenancy.api import WorkspaceCreate\n"),
    ],
)
def test_the_http_tier_may_use_any_app(tree, module, source):
    add(tree, module, source)
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_migrations_import_no_live_code():
    """A migration says what it did when it was written: its SQL is frozen in it, so a later change to the
    code (iam/platform/counts.py, say) never changes an old migration. The one import of ours Django itself
    writes is a model module's callable default (`clients.models.retry_deadline`)."""
    offenders = []
    for migration in sorted(ROOT.glob("*/migrations/0*.py")):
        for node in ast.walk(ast.parse(migration.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{migration.relative_to(ROOT)}: {name}"
                for name in names
                if name.split(".")[0] in APPS and not name.endswith(".models")
            ]
    assert offenders == []
