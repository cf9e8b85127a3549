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
