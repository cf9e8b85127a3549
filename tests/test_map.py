# The map cannot go stale (issue 38): every file a page of README, docs/ or spec/ names in
# backticks exists, and the architecture page's table of folders is the package's folders.
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trio_mcp"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "spec").glob("*.md"))]
#: Paths in the upstream repositories the rules quote (the specification's, the SEPs').
UPSTREAM = ("docs/docs/", "specification/", "seps/")
EXTENSIONS = ("py", "md", "json", "toml", "sh", "png", "svg", "txt", "js", "html", "cfg")
_CODE = re.compile(r"`([^`\s]+)`")
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*/[\w.-]+\.(?:" + "|".join(EXTENSIONS) + r")|"
                   r"(?:trio_mcp|tests|benchmarks|docs|spec)/[\w./-]*")


def named_paths(text: str) -> list[str]:
    """The repository paths a page names in backticks: a path with a known file extension,
    or anything under one of the project's folders (a test's ``::name`` cut off)."""
    found = []
    for match in _CODE.finditer(text):
        token = match.group(1).split("::")[0].rstrip(".,:;)")
        if (_PATH.fullmatch(token) and not token.startswith(UPSTREAM)
                and not any(c in token for c in "*<>{}$")):
            found.append(token)
    return found


def exists(page: Path, path: str) -> bool:
    """Named from the repository's root, the page's folder, or the package's."""
    return any((base / path).exists() for base in (ROOT, page.parent, PACKAGE))


def test_a_missing_path_is_caught(tmp_path: Path) -> None:
    """The check sees a path that is not there, and lets an upstream one and a method be."""
    page = tmp_path / "page.md"
    named = named_paths("see `tests/no_such_test.py::test_x`, `tools/call` and "
                        "`specification/draft/tasks.md`, and `trio_mcp/protocol/_sse.py`")
    assert ["tests/no_such_test.py", "trio_mcp/protocol/_sse.py"] == named
    assert [False, True] == [exists(page, path) for path in named]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: Path) -> None:
    """Each file or folder README.md, docs/*.md and spec/*.md name in backticks exists."""
    missing = [path for path in named_paths(page.read_text(encoding="utf-8"))
               if not exists(page, path)]

    assert [] == missing


def package_folders() -> set[str]:
    """Every folder of the package that holds modules, as ``trio_mcp/x/``."""
    return {
        str(init.parent.relative_to(ROOT)) + "/"
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    }


def test_the_readme_and_the_architecture_page_name_every_folder_of_the_package() -> None:
    """README.md says in a line what goes in each folder of trio_mcp, and the architecture
    page's table has a row for each: no folder missing, none that is gone."""
    folders = package_folders()
    readme = set(re.findall(r"^- `(trio_mcp/[\w/]+/)`:", (ROOT / "README.md").read_text(
        encoding="utf-8"), re.MULTILINE))
    table = set(re.findall(r"^\| `(trio_mcp/[\w/]+/)` \|", (ROOT / "docs" / "architecture.md")
                           .read_text(encoding="utf-8"), re.MULTILINE))

    assert sorted(folders) == sorted(readme)
    assert sorted(folders) == sorted(table)


def test_the_architecture_page_names_every_folder_of_the_tests() -> None:
    """The architecture page's row for tests/ names each of its folders, and no other."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    [row] = [line for line in page.splitlines() if line.startswith("| `tests/` |")]
    named = set(re.findall(r"`(\w+)/`", row.split("|")[2]))
    present = {p.name for p in (ROOT / "tests").iterdir()
               if p.is_dir() and not p.name.startswith((".", "__"))}

    assert sorted(present) == sorted(named)
