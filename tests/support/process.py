# Servers in processes of their own, for tests of what a command line does.
from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["start_until"]


def start_until(
    cmd: Sequence[str], pattern: str, *, cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[str], re.Match[str], list[str]]:
    """Start ``cmd`` (stdout and stderr together) and read its lines until one matches
    ``pattern``: the process, the match and the lines read. A process that ends first is
    an AssertionError carrying what it wrote."""
    proc = subprocess.Popen(
        list(cmd), cwd=cwd, env=None if env is None else dict(env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        match = re.search(pattern, line)
        if match:
            return proc, match, lines
    proc.kill()
    raise AssertionError(f"{cmd[0]} did not start:\n" + "".join(lines))
