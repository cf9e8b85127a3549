# trio_mcp.Client against the official Python SDK's server (mcp 2.3.0, MCPServer under
# uvicorn, with the bounded event store of benchmarks/servers/sdk_bench.py), over a real
# socket on 127.0.0.1: in a 2025-11-25 session and in 2026-07-28 (the SDK serves both).
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from support.sdk_dropping import running

from trio_mcp import Client
from trio_mcp.client import ClientEra

ROOT = Path(__file__).resolve().parents[2]
SDK_SERVER = ROOT / "benchmarks" / "servers" / "sdk_bench.py"


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    """The SDK's server in a process of its own, until the module's tests are done."""
    yield from running(SDK_SERVER, "--port")


@pytest.mark.spec("TM-CLIENT-ERA", "TM-CLIENT-ONCE")
@pytest.mark.parametrize(("mode", "era"), [("legacy", ClientEra.LEGACY),
                                           ("auto", ClientEra.MODERN)])
async def test_the_client_calls_the_sdk_server_with_progress(
    sdk_url: str, mode: str, era: ClientEra
) -> None:
    """Against the SDK's server the client lists tools and calls one with progress: each
    of 20 notifications reaches the callback once, in order, and the result arrives."""
    seen: list[float] = []
    with trio.fail_after(30):
        async with Client(sdk_url, mode=mode) as client:
            tools = {tool["name"] for tool in await client.list_tools()}
            echoed = await client.call_tool("echo", {"text": "hi"})
            result = await client.call_tool("stream", {"n": 20, "size": 10},
                                            on_progress=lambda p, t, m: seen.append(p))
            await client.ping()
            got_era = client.era

    assert era == got_era
    assert {"echo", "stream"} <= tools
    assert "hi" == echoed["content"][0]["text"]
    assert [float(i) for i in range(1, 21)] == seen
    assert "sent 20" == result["content"][0]["text"]
