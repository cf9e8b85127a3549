# trio_mcp.Client against the official Python SDK's server (mcp 2.3.0, MCPServer under
# uvicorn, with the bounded event store of benchmarks/servers/sdk_bench.py), over a real
# socket on 127.0.0.1: in a 2025-11-25 session and in 2026-07-28 (the SDK serves both); the
# benchmarks' server for tools and progress, tests/support/sdk_features.py for the rest.
from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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


SDK_FEATURES = ROOT / "tests" / "support" / "sdk_features.py"


@pytest.fixture(scope="module")
def sdk_features_url() -> Iterator[str]:
    """The SDK's server with a resource, a prompt, an elicitation and a slow tool
    (tests/support/sdk_features.py), until the module's tests are done."""
    yield from running(SDK_FEATURES)


async def every_feature(url: str, mode: str) -> dict[str, Any]:
    """Through one client: a tool, a tool with progress, a resource, a prompt, an
    elicitation round and a cancelled call; what each gave."""
    asked: list[dict[str, Any]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(params: Mapping[str, Any]) -> dict[str, Any]:
        asked.append(dict(params))
        return {"action": "accept", "content": {"name": "Ada"}}

    tag = f"cancel-{mode}"
    with trio.fail_after(60):
        async with Client(url, mode=mode, on_elicit=elicit) as client:
            got: dict[str, Any] = {"era": client.era}
            got["echo"] = await client.call_tool("echo", {"text": "hi"})
            got["count"] = await client.call_tool(
                "count", {"n": 3}, on_progress=lambda p, t, m: progress.append((p, t, m)))
            got["resources"] = await client.list_resources()
            got["read"] = await client.read_resource("test://greeting")
            got["prompts"] = await client.list_prompts()
            got["prompt"] = await client.get_prompt("review", {"code": "x = 1"})
            got["greet"] = await client.call_tool("greet")
            with trio.move_on_after(1) as waited:
                await client.call_tool("slow", {"tag": tag})
            got["slow_cut"] = waited.cancelled_caught
            # The server hears of it (a notifications/cancelled, or the closed request) a
            # moment later: ask until it says so (the server is in another process).
            for _ in range(200):
                said = (await client.call_tool("cancelled"))["content"][0]["text"]
                if tag in said.split(","):
                    break
                await trio.sleep(0.05)
            got["cancelled"] = said.split(",")
    got["asked"], got["progress"] = asked, progress
    return got


@pytest.mark.spec("TM-CLIENT-ERA", "TM-CLIENT-ASK", "TM-CLIENT-CANCEL")
@pytest.mark.parametrize(("mode", "era"), [("legacy", ClientEra.LEGACY),
                                           ("auto", ClientEra.MODERN)])
async def test_every_client_feature_against_the_sdk_server(
    sdk_features_url: str, mode: str, era: ClientEra
) -> None:
    """Against the SDK's server, in a session with its event store and in 2026-07-28: tools
    (with progress, each notification once), a resource read, a prompt, an elicitation
    answered by the callback (a request mid-call, or an input_required round), and a call
    cancelled by its scope, which the SDK's handler sees cancelled."""
    got = await every_feature(sdk_features_url, mode)

    assert era == got["era"]
    assert "hi" == got["echo"]["content"][0]["text"]
    assert "counted 3" == got["count"]["content"][0]["text"]
    assert [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")] == got["progress"]
    assert ["test://greeting"] == [r["uri"] for r in got["resources"]]
    assert "hello from the SDK" == got["read"]["contents"][0]["text"]
    assert ["review"] == [p["name"] for p in got["prompts"]]
    assert "Please review: x = 1" == got["prompt"]["messages"][0]["content"]["text"]
    assert "hello Ada" == got["greet"]["content"][0]["text"]
    assert ["Who are you?"] == [a["message"] for a in got["asked"]]
    assert got["slow_cut"] is True
    assert f"cancel-{mode}" in got["cancelled"]
