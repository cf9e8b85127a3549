"""The project's own quality gates, run as tests so that the README's one test command
covers them: mypy in strict mode on the package, and ruff on everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_package_type_checks_under_mypy_strict() -> None:
    """`mypy --strict trio_mcp` reports no error."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "trio_mcp"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )

    assert 0 == proc.returncode, proc.stdout + proc.stderr


def test_code_is_ruff_clean() -> None:
    """`ruff check` finds nothing in the package, the tests or the benchmarks."""
    paths = [p for p in ("trio_mcp", "tests", "benchmarks") if (ROOT / p).exists()]
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *paths],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )

    assert 0 == proc.returncode, proc.stdout + proc.stderr


def test_no_file_holds_a_merge_conflicts_markers() -> None:
    """No tracked text file keeps a merge's conflict markers (one docstring did, where no
    parser looks)."""
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    marked = []
    for name in files:
        path = ROOT / name
        if name.startswith("benchmarks/results/") or not path.is_file():
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        marked += [f"{name}:{i}" for i, line in enumerate(lines, 1)
                   if line.startswith(("<<<<<<< ", ">>>>>>> "))]
    assert [] == marked
