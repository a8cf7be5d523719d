"""Comments cite rules a reader of this repository can open: every `docs/<page>.md#<section>` the code and
the docs name exists, and no comment cites a document or tracker that is not in the repository."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"docs/([\w.-]+\.md)(#[\w-]+)?")
LINKED = re.compile(r"\]\(([\w.-]+\.md)(#[\w-]+)?\)")  # a docs page's link to another page (or itself)
OUTSIDE = re.compile(r"\b(?:CONTRACT|SPEC) \d|\b[Ii]ssue \d")


def tracked(*patterns: str) -> list[Path]:
    names = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True).stdout
    return [ROOT / name for name in names.split()]


def sections(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    for line in page.read_text().splitlines():
        if heading := re.match(r"#{1,6} (.+)", line):
            found.add("#" + re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return found


def citations() -> list[tuple[str, str, str | None]]:
    found = []
    for path in tracked("*.py", "*.md"):
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        found += [(where, page, section) for page, section in CITED.findall(text)]
        if where.startswith("docs/"):
            found += [(where, page, section) for page, section in LINKED.findall(text)]
    return found


def test_every_cited_docs_section_exists():
    missing = [
        f"{where}: docs/{page}{section}"
        for where, page, section in citations()
        if not (ROOT / "docs" / page).exists() or (section and section not in sections(ROOT / "docs" / page))
    ]
    assert citations(), "the walk found no citation at all"
    assert not missing, "cited, but no such page or heading:\n" + "\n".join(sorted(set(missing)))


@pytest.mark.parametrize("pattern", ["*.py", "docs/*.md", "README.md"])
def test_no_comment_cites_a_document_outside_the_repository(pattern):
    """CONTRACT and SPEC live outside the repository and an issue number opens nothing: cite docs/ or an
    RFC instead."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:90]}"
        for path in tracked(pattern)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if OUTSIDE.search(line) and path.name != Path(__file__).name
    ]
    assert not found, "\n".join(found)
