# Servers in processes of their own, for tests of what a command line does.
from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["DEMO_KINDS", "demo_serve_command", "serving_demo", "start_until"]

#: The ways the conformance tests serve the demo: on each HTTP server, and as two workers
#: sharing a Redis session store (issue 21).
DEMO_KINDS = ["trio-mcp", "hypercorn", "workers+redis"]


def stop(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """End ``proc``: asked to (SIGTERM), then killed if it has not ended in ``timeout``
    seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def demo_serve_command(request: pytest.FixtureRequest) -> list[str]:
    """`python -m trio_mcp serve --port 0` for the kind of server ``request.param`` names
    (one of DEMO_KINDS); with workers, on the test session's Redis."""
    if request.param == "workers+redis":
        redis = request.getfixturevalue("shared_redis")
        options = ["--workers", "2", "--store", redis.url]
    else:
        options = ["--server", request.param]
    return [sys.executable, "-m", "trio_mcp", "serve", "--port", "0", "--log-level", "warning",
            *options]


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


@contextlib.contextmanager
def serving_demo(request: pytest.FixtureRequest, *, cwd: Path) -> Iterator[str]:
    """The demo served as ``demo_serve_command`` says, while the block runs: the URL it
    prints. Its later output is drained by a thread, so that a full pipe can never stall
    it; it is stopped after."""
    proc, match, lines = start_until(
        demo_serve_command(request), r"serving (?:\S+ )?at (http://\S+)", cwd=cwd,
    )
    assert proc.stdout is not None
    drain = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)
    drain.start()
    try:
        yield match.group(1)
    finally:
        stop(proc)
        drain.join(timeout=5)
