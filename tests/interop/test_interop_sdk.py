# Interoperability with an independent client: the official MCP Python SDK (`mcp` 2.3.0,
# its v2 `Client` API) against the live demo server over real hypercorn. The SDK runs on
# anyio, which runs under trio, so these are ordinary pytest-trio tests.
#
# The legacy era: mode="legacy" does the 2025-11-25 initialize handshake directly. The SDK's
# default mode ("auto") probes server/discover and ends up in the 2026-07-28 era against this
# dual-era server: tests/interop/test_interop_modern.py covers it.
from __future__ import annotations

import json
import warnings
from typing import Any

import mcp.types
import pytest
import trio
from mcp import Client
from support.fixtures import StartServer

from trio_mcp import ServerConfig

TIMEOUT = 10

MODES = pytest.mark.parametrize("mode", ["legacy"])


def text_of(result: Any) -> str:
    [block] = result.content
    assert block.type == "text"
    text: str = block.text
    return text


@pytest.mark.spec("L-INIT-3", "L-VER-2", "T-SESS-1")
@MODES
async def test_sdk_client_initializes_a_session(live_server: StartServer, mode: str) -> None:
    """The SDK client connects, negotiates 2025-11-25 and receives the server's identity,
    capabilities and instructions; the server holds one session for it."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode) as client:
            version = client.protocol_version
            info = client.server_info
            capabilities = client.server_capabilities
            instructions = client.instructions
            sessions = dict(live.table.sessions)

    assert version == "2025-11-25"
    assert info is not None and info.name == "trio-mcp-demo"
    assert capabilities.tools is not None and capabilities.tools.list_changed is True
    assert instructions
    [session] = sessions.values()
    assert session.version == "2025-11-25"


@pytest.mark.spec("U-TOOL-1", "U-TOOL-3")
@MODES
async def test_sdk_client_lists_the_demo_tools(live_server: StartServer, mode: str) -> None:
    """tools/list through the SDK yields every demo tool, each with an object inputSchema
    the SDK's models accept."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode) as client:
            listed = await client.list_tools()

    names = {t.name for t in listed.tools}
    assert names == set(live.server.tools)
    assert all(t.input_schema["type"] == "object" for t in listed.tools)


@pytest.mark.spec("U-PAGE-1", "U-PAGE-3")
async def test_sdk_client_follows_pagination_cursors(live_server: StartServer) -> None:
    """With a small page size the SDK client pages through tools/list with the server's
    opaque cursors and sees every tool once."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(page_size=3))
        names: list[str] = []
        async with Client(live.url, mode="legacy") as client:
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break

    assert sorted(names) == sorted(live.server.tools)


@pytest.mark.spec("U-TOOL-5", "U-TOOL-6")
@MODES
async def test_sdk_client_calls_echo_and_add(live_server: StartServer, mode: str) -> None:
    """echo returns its text; add returns structured content that matches its outputSchema
    (which the SDK validates) and the same JSON as text."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode) as client:
            echoed = await client.call_tool("echo", {"text": "hello, trio"})
            added = await client.call_tool("add", {"a": 2, "b": 40})

    assert echoed.is_error is False
    assert text_of(echoed) == "hello, trio"
    assert added.is_error is False
    assert added.structured_content == {"result": 42}
    assert json.loads(text_of(added)) == 42


@pytest.mark.spec("U-TOOL-7")
@MODES
async def test_sdk_client_sees_tool_errors_as_results(live_server: StartServer, mode: str) -> None:
    """A tool that fails reports it in the result (isError true), which the SDK returns
    rather than raising; the session keeps working afterwards."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode) as client:
            failed = await client.call_tool("test_error_handling", {})
            after = await client.call_tool("echo", {"text": "fine"})

    assert failed.is_error is True
    assert "intentionally" in text_of(failed)
    assert text_of(after) == "fine"


@pytest.mark.spec("L-PING-1")
async def test_sdk_client_pings(demo_url: str) -> None:
    """The SDK's ping (legacy connections only) gets an empty result."""
    with trio.fail_after(TIMEOUT):
        async with Client(demo_url, mode="legacy") as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = await client.send_ping()

    assert result.model_dump(exclude_none=True) == {}


@pytest.mark.spec("U-PROG-3", "U-PROG-4", "T-PSSE-7")
async def test_sdk_client_receives_progress_on_the_request_stream(
    live_server: StartServer,
) -> None:
    """Progress notifications for a tools/call ride that request's SSE stream, in increasing
    order, and reach the SDK's progress callback before the result."""
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode="legacy") as client:
            result = await client.call_tool(
                "countdown", {"n": 3, "interval": 0.01}, progress_callback=on_progress
            )

    assert text_of(result) == "liftoff"
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.spec("T-SESS-9", "T-SESS-7")
@MODES
async def test_sdk_client_deletes_its_session_on_exit(live_server: StartServer, mode: str) -> None:
    """Leaving the SDK client's context sends DELETE: the session disappears from the
    server, and the server counts it as deleted (not expired)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode):
            during = list(live.table.sessions)
        after = list(live.table.sessions)
        stats = live.stats()

    assert len(during) == 1
    assert after == []
    assert stats["sessions_deleted"] == 1
    assert stats["sessions_created"] == 1


@pytest.mark.spec("T-PSSE-7", "T-PSSE-8", "L-INIT-6")
async def test_sdk_client_answers_a_sampling_request_on_the_request_stream(
    live_server: StartServer,
) -> None:
    """A tool may send the client a request (sampling/createMessage) on its call's SSE
    stream; the SDK answers it with a POST, and the tool's result uses the answer."""
    prompts: list[str] = []

    async def sample(
        context: Any, params: mcp.types.CreateMessageRequestParams
    ) -> mcp.types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, mcp.types.TextContent)
        prompts.append(content.text)
        return mcp.types.CreateMessageResult(
            role="assistant",
            content=mcp.types.TextContent(type="text", text="a haiku"),
            model="test-model",
        )

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode="legacy", sampling_callback=sample) as client:
            result = await client.call_tool("test_sampling", {"prompt": "write a haiku"})

    assert prompts == ["write a haiku"]
    assert text_of(result) == "LLM response: a haiku"


@pytest.mark.spec("U-LOG-3", "TM-LOG-DEFAULT", "T-PSSE-7")
async def test_sdk_client_receives_log_messages_of_a_tool(live_server: StartServer) -> None:
    """Log messages a tool sends at the default level (info) reach the SDK's logging
    callback, in order, before the tool's result."""
    logged: list[tuple[str, Any]] = []

    async def on_log(params: mcp.types.LoggingMessageNotificationParams) -> None:
        logged.append((params.level, params.data))

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode="legacy", logging_callback=on_log) as client:
            result = await client.call_tool("test_tool_with_logging", {})

    assert text_of(result) == "Tool with logging executed successfully"
    assert logged == [
        ("info", "Tool execution started"),
        ("info", "Tool processing data"),
        ("info", "Tool execution completed"),
    ]


@pytest.mark.spec("T-PSSE-2", "T-PSSE-4", "T-RESUME-7")
async def test_sdk_client_resumes_after_the_server_closes_the_connection(
    live_server: StartServer,
) -> None:
    """When the server closes a call's SSE connection early (SSE polling), the SDK waits the
    retry it was sent, resumes with GET and Last-Event-ID, and gets the result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(retry_ms=50))
        async with Client(live.url, mode="legacy") as client:
            result = await client.call_tool("test_reconnection", {})

    assert result.is_error is False
    assert text_of(result) == "Reconnection test completed successfully"
