# trio_mcp.Client against the TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0
# with @modelcontextprotocol/node 2.1.2: the benchmarks' peer, benchmarks/servers/
# ts_sdk_v2_bench.py), over a real socket on 127.0.0.1: the client finds 2026-07-28 by
# server/discover and calls tools, with progress; against tests/support/ts_features.mjs (the
# same SDK), resources, prompts, an elicitation round and a cancellation too.
from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from support.fixtures import free_port
from support.node import ts_peer, ts_peer_launcher

from trio_mcp import Client
from trio_mcp.client import ClientEra

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ts_url() -> Iterator[str]:
    """The TypeScript peer on a free port, until the module's tests are done."""
    with ts_peer() as url:
        yield url


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


TS_FEATURES = ROOT / "tests" / "support" / "ts_features.mjs"


@pytest.fixture(scope="module")
def ts_features_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """tests/support/ts_features.mjs on a free port, run from a folder of its own whose
    node_modules is the benchmarks' pinned install (node finds packages beside the script),
    until the module's tests are done."""
    import shutil

    from support.node import listening, node, node_env

    modules = ts_peer_launcher().install()
    folder = tmp_path_factory.mktemp("ts-features")
    shutil.copy(TS_FEATURES, folder / TS_FEATURES.name)
    (folder / "node_modules").symlink_to(modules, target_is_directory=True)
    port = free_port()
    command = [str(node()), str(folder / TS_FEATURES.name), "--port", str(port)]
    with listening(command, port, cwd=folder, env=node_env()) as url:
        yield url


@pytest.mark.spec("TM-CLIENT-ERA", "TM-CLIENT-ASK", "TM-CLIENT-CANCEL")
async def test_every_client_feature_against_the_typescript_server(ts_features_url: str) -> None:
    """Against the TypeScript SDK v2 server in 2026-07-28: tools (with progress, each
    notification once), a resource read, a prompt, an elicitation answered by the callback
    in an input_required round, and a call cancelled by its scope, which the SDK's handler
    sees aborted."""
    asked: list[dict[str, Any]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(params: Mapping[str, Any]) -> dict[str, Any]:
        asked.append(dict(params))
        return {"action": "accept", "content": {"name": "Ada"}}

    said = ""
    with trio.fail_after(60):
        async with Client(ts_features_url, on_elicit=elicit) as client:
            era = client.era
            echoed = await client.call_tool("echo", {"text": "hi"})
            counted = await client.call_tool(
                "count", {"n": 3}, on_progress=lambda p, t, m: progress.append((p, t, m)))
            resources = await client.list_resources()
            read = await client.read_resource("test://greeting")
            prompts = await client.list_prompts()
            prompt = await client.get_prompt("review", {"code": "x = 1"})
            greeted = await client.call_tool("greet")
            with trio.move_on_after(1) as waited:
                await client.call_tool("slow", {"tag": "cut"})
            # The server hears of it (the closed request) a moment later: ask until it says so.
            for _ in range(200):
                said = (await client.call_tool("cancelled"))["content"][0]["text"]
                if "cut" in said.split(","):
                    break
                await trio.sleep(0.05)

    assert ClientEra.MODERN == era
    assert "hi" == echoed["content"][0]["text"]
    assert "counted 3" == counted["content"][0]["text"]
    assert [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")] == progress
    assert ["test://greeting"] == [r["uri"] for r in resources]
    assert "hello from the TypeScript SDK" == read["contents"][0]["text"]
    assert ["review"] == [p["name"] for p in prompts]
    assert "Please review: x = 1" == prompt["messages"][0]["content"]["text"]
    assert "hello Ada" == greeted["content"][0]["text"]
    assert ["Who are you?"] == [a["message"] for a in asked]
    assert waited.cancelled_caught
    assert ["cut"] == said.split(",")
