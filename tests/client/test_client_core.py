# trio_mcp.Client against trio-mcp's own demo server: over real sockets on 127.0.0.1 (both
# HTTP servers, both eras) and in this process (Client(server), no socket), with the same
# methods everywhere: tools with progress, resources, templates, prompts, completion, the
# log level, ping, the server's questions and listen.
from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.docs import code_blocks
from support.fixtures import StartServer

import trio_mcp
from trio_mcp import Client, ErrorAnswer
from trio_mcp.client import ClientEra
from trio_mcp.demo import server as demo

ROOT = Path(__file__).resolve().parents[2]
MODES = ["auto", "legacy"]
ERAS = {"auto": ClientEra.MODERN, "legacy": ClientEra.LEGACY}


@pytest.fixture(params=["http", "memory"])
async def target(request: pytest.FixtureRequest, live_server: StartServer) -> Any:
    """Where the client goes: the demo over HTTP (on the run's HTTP server), or in process."""
    if request.param == "memory":
        return demo
    return (await live_server()).url


@pytest.fixture(params=MODES)
async def client(request: pytest.FixtureRequest, target: Any) -> AsyncIterator[Client]:
    async with Client(target, mode=request.param) as opened:
        assert ERAS[request.param] == opened.era
        yield opened


@pytest.mark.spec("TM-CLIENT-ERA")
async def test_the_same_methods_answer_in_both_eras(client: Client) -> None:
    """tools, resources, templates, prompts, completion, logging level and ping answer
    alike whichever era the client speaks, over HTTP and in process."""
    with trio.fail_after(30):
        tools = {tool["name"] for tool in await client.list_tools()}
        echoed = await client.call_tool("echo", {"text": "hi"})
        resources = await client.list_resources()
        # The first of the demo's test:// resources (its skill:// ones sort before them).
        read = await client.read_resource(
            next(r["uri"] for r in resources if r["uri"].startswith("test://")))
        templates = await client.list_resource_templates()
        templated = await client.read_resource("test://template/123/data")
        prompts = {prompt["name"] for prompt in await client.list_prompts()}
        prompt = await client.get_prompt("test_prompt_with_arguments",
                                         {"arg1": "one", "arg2": "two"})
        completion = await client.complete(
            {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "te")
        await client.set_logging_level("debug")
        await client.ping()

    assert {"echo", "countdown", "test_simple_text"} <= tools
    assert [{"type": "text", "text": "hi"}] == echoed["content"]
    assert "This is an example resource." == read["contents"][0]["text"]
    assert any("{id}" in t["uriTemplate"] for t in templates)
    assert "123" in templated["contents"][0]["text"]
    assert "test_simple_prompt" in prompts
    text = str(prompt["messages"])
    assert "one" in text and "two" in text
    assert isinstance(completion["values"], list)
    assert "trio-mcp-demo" == client.server_info["name"]


@pytest.mark.spec("TM-CLIENT-ONCE")
async def test_progress_reaches_the_callback_once_each_in_order(client: Client) -> None:
    """A call's progress notifications reach on_progress once each, in order, before the
    call returns its result."""
    seen: list[tuple[float, float | None]] = []

    async def show(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    with trio.fail_after(30):
        result = await client.call_tool("countdown", {"n": 5, "interval": 0.01},
                                        on_progress=show)

    assert [(float(i), 5.0) for i in range(1, 6)] == seen
    assert [{"type": "text", "text": "liftoff"}] == result["content"]


@pytest.mark.spec("TM-CLIENT-ONCE")
async def test_concurrent_calls_each_get_their_own_answer_and_progress(client: Client) -> None:
    """50 calls at once from as many tasks: each gets its own result and exactly its own
    progress notifications, in order."""
    seen: dict[int, list[float]] = {i: [] for i in range(50)}
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        result = await client.call_tool(
            "countdown", {"n": 1 + i % 4, "interval": 0.001},
            on_progress=lambda p, t, m: seen[i].append(p))
        results[i] = result["content"][0]["text"]

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(one, i)

    assert dict.fromkeys(range(50), "liftoff") == results
    assert {i: [float(k) for k in range(1, 2 + i % 4)] for i in range(50)} == seen


async def test_an_error_answer_raises_mcp_error(client: Client) -> None:
    """A JSON-RPC error answer is raised as ErrorAnswer with its code; a tool's own failure is
    a result with isError."""
    with trio.fail_after(30):
        with pytest.raises(ErrorAnswer) as caught:
            await client.get_prompt("no_such_prompt")
        failed = await client.call_tool("test_error_handling")

    assert -32602 == caught.value.code
    assert failed["isError"] is True


@pytest.mark.spec("TM-CLIENT-ASK")
async def test_the_servers_questions_are_answered_by_callbacks(
    target: Any, mode: str = "auto"
) -> None:
    """Elicitation, sampling and roots are answered by the client's callbacks: as requests
    on a session's stream (2025-11-25) and as input_required rounds with requestState
    (2026-07-28)."""
    asked: list[str] = []

    async def on_elicit(params: Any) -> dict[str, Any]:
        asked.append("elicit")
        return {"action": "accept", "content": _fill(params.get("requestedSchema", {}))}

    async def on_sample(params: Any) -> dict[str, Any]:
        asked.append("sample")
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"},
                "model": "test-model", "stopReason": "endTurn"}

    roots = [{"uri": "file:///tmp", "name": "tmp"}]
    results: dict[str, dict[str, Any]] = {}
    with trio.fail_after(30):
        async with Client(target, mode="legacy", on_elicit=on_elicit, on_sample=on_sample,
                          roots=roots) as legacy:
            results["legacy-elicit"] = await legacy.call_tool("test_elicitation",
                                                              {"message": "who?"})
            results["legacy-sample"] = await legacy.call_tool("test_sampling",
                                                              {"prompt": "hi"})
        async with Client(target, mode="2026-07-28", on_elicit=on_elicit, on_sample=on_sample,
                          roots=roots) as modern:
            for name in ("elicitation", "sampling", "list_roots", "request_state",
                         "multiple_inputs", "multi_round"):
                results[name] = await modern.call_tool(f"test_input_required_result_{name}")

    assert "elicit" in asked and "sample" in asked
    for name, result in results.items():
        assert result.get("resultType") != "input_required", name
        assert not result.get("isError"), (name, result)
        assert result["content"], name
    assert "sampled" in str(results["legacy-sample"]["content"])


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """An answer of the right type for each property of an elicitation's schema."""
    values = {"string": "ada", "boolean": True, "integer": 1, "number": 1.0}
    return {
        name: prop.get("default", (prop.get("enum") or [values.get(prop.get("type"), "ada")])[0])
        for name, prop in schema.get("properties", {}).items()
    }


@pytest.mark.spec("TM-CLIENT-LISTEN")
@pytest.mark.parametrize("mode", MODES)
async def test_listen_yields_list_changes(target: Any, mode: str) -> None:
    """``client.listen()`` is an async iterator of the server's list changes, from
    subscriptions/listen (2026-07-28) or the session's GET stream (2025-11-25)."""
    try:
        with trio.fail_after(30):
            async with Client(target, mode=mode) as client, client.listen() as changes:
                await client.call_tool("test_trigger_tool_change")
                async for note in changes:
                    if note.method == "notifications/tools/list_changed":
                        break
    finally:
        # The demo is one server for the whole worker: the tool the trigger added would
        # make the next test's trigger remove it instead.
        if "test_dynamic_tool" in demo.tools:
            demo.remove_tool("test_dynamic_tool")


def test_the_client_pages_example_prints_what_it_shows(tmp_path: Path) -> None:
    """docs/client.md's example (progress and a question, in process, in both eras) prints
    the output the page shows."""
    page = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    example = [b for b in code_blocks(page, "python") if "trio.run(main)" in b]
    [shown] = [b for b in code_blocks(page, "text") if "deploy" in b]
    script = tmp_path / "example.py"
    script.write_text(example[0])

    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)

    assert 0 == done.returncode, done.stderr
    assert shown == done.stdout


async def test_in_process_the_servers_settings_are_the_clients_config() -> None:
    """``Client(server, config=...)`` runs the server with those settings: a page size of 3
    gives the listing in pages, which the client follows to the end."""
    pages: list[int] = []

    async def count(method: str, key: str) -> None:
        cursor = None
        while True:
            result = await client.request(method, {"cursor": cursor} if cursor else None)
            pages.append(len(result[key]))
            cursor = result.get("nextCursor")
            if not cursor:
                return

    with trio.fail_after(30):
        async with Client(demo, config=trio_mcp.ServerConfig(page_size=3)) as client:
            tools = await client.list_tools()
            await count("tools/list", "tools")

    assert len(tools) == sum(pages)
    assert max(pages) == 3 and len(pages) > 1


@pytest.mark.spec("TM-CLIENT-ERA")
@pytest.mark.parametrize("mode", MODES)
async def test_a_server_answering_json_bodies_is_spoken_to_alike(
    live_server: StartServer, mode: str
) -> None:
    """A server in JSON response mode (one application/json body a request, no stream)
    answers the client's calls as a streaming one does, without progress."""
    live = await live_server(config=trio_mcp.ServerConfig(
        response_mode=trio_mcp.ResponseMode.JSON))
    seen: list[float] = []
    with trio.fail_after(30):
        async with Client(live.url, mode=mode) as client:
            result = await client.call_tool("countdown", {"n": 2, "interval": 0.01},
                                            on_progress=lambda p, t, m: seen.append(p))
            tools = await client.list_tools()

    assert [{"type": "text", "text": "liftoff"}] == result["content"]
    assert tools


def test_client_is_a_public_name() -> None:
    """``trio_mcp.Client`` is the client, from the package's lazy exports."""
    from trio_mcp.client import Client as direct

    assert direct is trio_mcp.Client


@pytest.mark.spec("TM-CLIENT-STANDALONE")
async def test_a_legacy_session_opens_its_get_stream_when_something_can_hear_it(
    live_server: StartServer,
) -> None:
    """A 2025-11-25 client with no callback opens no GET stream (the server holds none for
    it while it calls a tool); a listen block opens it; a client given a callback for what
    may come outside any request (here log messages) opens it at once."""
    server = await live_server()
    with trio.fail_after(30):
        async with Client(server.url, mode="legacy") as quiet:
            await quiet.call_tool("echo", {"text": "hi"})
            before = server.stats()["long_streams_open"]
            async with quiet.listen():
                listening = server.stats()["long_streams_open"]
        async with Client(server.url, mode="legacy", on_log=lambda params: None) as hearing:
            at_once = server.stats()["long_streams_open"]
            await hearing.call_tool("echo", {"text": "hi"})
    assert (0, 1, 1) == (before, listening, at_once)
