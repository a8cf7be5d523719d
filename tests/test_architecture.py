"""docs/architecture.md's walk of `POST /roles/update` is the code's: every file it names exists, defines
every symbol the row names, and is reached the way the row says (an import of an earlier row's file, a
setting, the Procfile, an `include`, a signal connected in an app's `ready`, a Celery task's name). A move,
a rename or a new hop that the table does not follow fails here."""

import ast
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (\d+) \| `([^`]+)` \|([^|]*)\|([^|]*)\|")


def walk() -> list[tuple[int, str, list[str], str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## One request and its event: `POST /roles/update`", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines()]
    return [
        (int(m.group(1)), m.group(2), re.findall(r"`(\w+)`", m.group(3)), m.group(4).strip())
        for m in rows
        if m
    ]


def module_of(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def defined(path: str) -> set[str]:
    names = set()
    for node in ast.parse((ROOT / path).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def imported(path: str) -> set[str]:
    """Every module a file imports (lazy imports inside functions too), as absolute names."""
    module = module_of(path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def setting_names(value) -> list[str]:
    if isinstance(value, dict):
        return [name for item in value.values() for name in setting_names(item)]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in setting_names(item)]
    return [value] if isinstance(value, str) else []


ROWS = walk()


def test_the_walk_is_read():
    assert [number for number, *_ in ROWS] == list(range(1, len(ROWS) + 1))
    assert len(ROWS) > 20


@pytest.mark.parametrize(("number", "path", "symbols", "reached"), ROWS, ids=[row[1] for row in ROWS])
def test_each_step_is_where_the_walk_says(number, path, symbols, reached):
    assert (ROOT / path).is_file(), f"row {number}: {path} does not exist"
    earlier = [row[1] for row in ROWS[: number - 1] if row[1].endswith(".py")]
    if path.endswith(".py"):
        missing = [symbol for symbol in symbols if symbol not in defined(path)]
        assert not missing, f"row {number}: {path} does not define {missing}"
    module = module_of(path)
    if reached == "import" or reached.startswith("import "):
        assert any(module in imported(other) for other in earlier), (
            f"row {number}: no earlier row imports {module}"
        )
    elif reached.startswith("Procfile"):
        procfile = (ROOT / "Procfile").read_text()
        named = {f"{module}.{symbol}" for symbol in symbols} | {
            path,
            f"{module}:{symbols[0]}",
            f"-A {module.removesuffix('.celery')}",  # Celery finds `<project>.celery` by its name
        }
        assert any(name in procfile for name in named), f"row {number}: the Procfile does not name {path}"
    elif reached.startswith("setting "):
        name = reached.split()[1].strip("`")
        value = setting_names(getattr(settings, name))
        wanted = {f"{module}.{symbol}" for symbol in symbols} | {module, module.split(".")[0]}
        assert wanted & set(value), f"row {number}: settings.{name} does not name {path}"
    elif reached.startswith("`include"):
        assert any(f'include("{module}")' in (ROOT / other).read_text() for other in earlier), f"row {number}"
    elif reached.startswith("signal"):
        signal = re.search(r"`(\w+)`", reached).group(1)
        connect = re.compile(rf"{signal}\.connect\(\w+\.{symbols[0]}\b")
        assert any(connect.search((ROOT / other).read_text()) for other in earlier), f"row {number}"
    elif reached.startswith("task name"):
        task = re.search(r"`([\w.]+)`", reached).group(1)
        assert f'name="{task}"' in (ROOT / path).read_text(), f"row {number}: no task named {task}"
    else:
        assert number == 1, f"row {number}: reached by what? {reached!r}"


def test_no_module_of_the_service_passes_500_lines():
    """A module past 500 lines holds more than one thing: split it by what it holds (tests and bench/, the
    benchmark's harness, are not the service)."""
    names = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    long = [
        f"{name}: {count} lines"
        for name in names
        if not name.startswith(("tests/", "bench/"))
        and "/migrations/" not in name
        and (count := len((ROOT / name).read_text().splitlines())) > 500
    ]
    assert not long, "\n".join(long)
