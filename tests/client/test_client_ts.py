# trio_mcp.Client against the TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0
# with @modelcontextprotocol/node 2.1.2: the benchmarks' peer, benchmarks/servers/
# ts_sdk_v2_bench.py), over a real socket on 127.0.0.1: the client finds 2026-07-28 by
# server/discover and calls tools, with progress.
from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import trio
from support.fixtures import free_port

from trio_mcp import Client
from trio_mcp.client import ClientEra

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "benchmarks" / "servers" / "ts_sdk_v2_bench.py"


def _launcher() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ts_sdk_v2_bench", LAUNCHER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ts_url() -> Iterator[str]:
    """The TypeScript peer on a free port, until the module's tests are done."""
    import socket
    import time

    _launcher().install()
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the TypeScript peer ended"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the TypeScript peer did not listen"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.spec("TM-CLIENT-ERA")
async def test_the_client_calls_the_typescript_server_in_2026_07_28(ts_url: str) -> None:
    """mode="auto" finds 2026-07-28 on the TypeScript SDK v2 server; tools are listed and
    called, and a call's progress reaches its callback once."""
    seen: list[float] = []
    with trio.fail_after(30):
        async with Client(ts_url) as client:
            tools = {tool["name"] for tool in await client.list_tools()}
            echoed = await client.call_tool("echo", {"text": "hi"})
            progressed = await client.call_tool("echo_progress", {"text": "p"},
                                                on_progress=lambda p, t, m: seen.append(p))
            era = client.era

    assert ClientEra.MODERN == era
    assert {"echo", "echo_progress"} <= tools
    assert "hi" == echoed["content"][0]["text"]
    assert "p" == progressed["content"][0]["text"]
    assert [1.0] == seen
