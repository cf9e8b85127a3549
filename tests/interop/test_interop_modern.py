# Interoperability with an independent client in the 2026-07-28 era: the official MCP Python
# SDK (`mcp` 2.3.0, its v2 `Client` API) against the live demo server over real hypercorn.
# The SDK runs on anyio, which runs under trio, so these are ordinary pytest-trio tests.
#
# Two ways in: mode="auto" (the SDK's default) probes server/discover and must end up modern
# against this dual-era server; mode="2026-07-28" is pinned and sends nothing at connect.
# Either way no legacy session may be created. The legacy era is tests/interop/
# test_interop_sdk.py.
from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import mcp.types as types
import pytest
import trio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import PromptsListChanged, ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError
from support.fixtures import LiveServer, StartServer, wait_until

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.demo import PNG_1X1, watched

TIMEOUT = 5
MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

MODES = pytest.mark.parametrize("mode", ["auto", MODERN])


def text_of(result: Any) -> str:
    [block] = result.content
    assert block.type == "text"
    text: str = block.text
    return text


def assert_modern(client: Client, live: LiveServer) -> None:
    """The connection is in the 2026-07-28 era, and the server holds no legacy session."""
    assert MODERN == client.protocol_version
    assert client.session.discover_result is not None
    assert client.session.initialize_result is None
    assert {} == dict(live.table.sessions)


def stats(live: LiveServer) -> Any:
    return live.app.runtime.modern.stats


@attrs.frozen
class Exchange:
    """One HTTP exchange the SDK made, as the server answered it."""

    method: str
    mcp_method: str | None
    version: str | None
    session_id: str | None
    status: int
    content_type: str


@asynccontextmanager
async def modern_client(
    live: LiveServer, mode: str, *, wire: list[Exchange] | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    """A Client of the live server, checked to be modern on the way in and the way out.
    With ``wire``, every HTTP exchange the SDK makes is appended to it."""

    async def record(response: httpx2.Response) -> None:
        if wire is not None:
            request = response.request
            wire.append(
                Exchange(
                    method=request.method,
                    mcp_method=request.headers.get("mcp-method"),
                    version=request.headers.get("mcp-protocol-version"),
                    session_id=response.headers.get("mcp-session-id"),
                    status=response.status_code,
                    content_type=response.headers.get("content-type", "").split(";")[0],
                )
            )

    async with httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [record]}
    ) as http:
        transport = streamable_http_client(live.url, http_client=http)
        async with Client(transport, mode=mode, cache=None, **kwargs) as client:
            assert_modern(client, live)
            yield client
            assert_modern(client, live)


# -- connecting: the era and the wire --------------------------------------------------------------


@pytest.mark.spec(
    "ML-VER-2", "ML-DISC-1", "ML-COMPAT-1", "MU-TOOL-1", "MU-PROMPT-1", "U-COMP-1", "MU-LOG-2"
)
async def test_sdk_auto_mode_discovers_and_ends_up_modern(live_server: StartServer) -> None:
    """ML-VER-2: auto mode probes server/discover, finds 2026-07-28 and uses it, with no session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url) as client:
            assert_modern(client, live)
            discovered = client.session.discover_result
            info = client.server_info
            capabilities = client.server_capabilities
            instructions = client.instructions
        sessions = dict(live.table.sessions)
        created = live.stats()["sessions_created"]

    assert discovered is not None
    assert MODERN in discovered.supported_versions
    assert discovered.ttl_ms is not None and discovered.ttl_ms >= 0
    assert discovered.cache_scope in ("public", "private")
    assert info is not None and info.name == "trio-mcp-demo"
    assert capabilities.tools is not None
    assert capabilities.prompts is not None
    assert capabilities.resources is not None
    assert capabilities.completions is not None
    assert capabilities.logging is not None
    assert instructions
    assert {} == sessions
    assert 0 == created


@pytest.mark.spec(
    "ML-STATE-1", "ML-META-4", "MJ-RES-3", "ML-COMPAT-1", "ML-COMPAT-3", "TM-MOD-JSON"
)
@MODES
async def test_sdk_modern_client_calls_without_a_session(
    live_server: StartServer, mode: str
) -> None:
    """ML-STATE-1: only stand-alone POSTs at 2026-07-28, no session; results carry serverInfo."""
    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, wire=wire) as client:
            # Listed first: the SDK lists a tool it has not seen after its first call.
            await client.list_tools()
            echoed = await client.call_tool("echo", {"text": "no session"})
        created = live.stats()["sessions_created"]

    assert "complete" == echoed.result_type
    assert "no session" == text_of(echoed)
    assert echoed.meta is not None
    assert "trio-mcp-demo" == echoed.meta[SERVER_INFO]["name"]
    assert 0 == created
    calls = ["tools/list", "tools/call"]
    expected = calls if mode == MODERN else ["server/discover", *calls]
    assert expected == [e.mcp_method for e in wire]
    assert all(e.method == "POST" and e.version == MODERN for e in wire)
    assert all(e.session_id is None for e in wire)
    assert all((e.status, e.content_type) == (200, "application/json") for e in wire)


# -- tools -----------------------------------------------------------------------------------------


@pytest.mark.spec("MU-TOOL-3", "MU-CACHE-1", "TM-CACHE-DEFAULT", "U-TOOL-3", "TM-PAGE-ORDER")
@MODES
async def test_sdk_modern_client_lists_the_demo_tools(live_server: StartServer, mode: str) -> None:
    """MU-TOOL-3: tools/list has every demo tool in name order, with caching hints."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            listed = await client.list_tools()

    names = [t.name for t in listed.tools]
    assert sorted(live.server.tools) == names
    assert all(t.input_schema["type"] == "object" for t in listed.tools)
    assert 0 == listed.ttl_ms
    assert "private" == listed.cache_scope
    assert "complete" == listed.result_type


@pytest.mark.spec("MU-PAGE-1", "MU-CACHE-3", "U-PAGE-1", "U-PAGE-3")
@MODES
async def test_sdk_modern_client_follows_pagination_cursors(
    live_server: StartServer, mode: str
) -> None:
    """MU-CACHE-3: paging tools/list by cursor sees every tool once, one cacheScope."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(page_size=3))
        names: list[str] = []
        scopes: set[str | None] = set()
        async with modern_client(live, mode) as client:
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                scopes.add(page.cache_scope)
                cursor = page.next_cursor
                if cursor is None:
                    break

    assert sorted(live.server.tools) == names
    assert {"private"} == scopes


@pytest.mark.spec("U-TOOL-5", "U-TOOL-6", "MJ-RES-3")
@MODES
async def test_sdk_modern_client_calls_echo_and_add(live_server: StartServer, mode: str) -> None:
    """U-TOOL-6: echo answers text; add answers structuredContent matching its outputSchema."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            echoed = await client.call_tool("echo", {"text": "hello, trio"})
            added = await client.call_tool("add", {"a": 2, "b": 40})

    assert echoed.is_error is False
    assert "hello, trio" == text_of(echoed)
    assert added.is_error is False
    assert {"result": 42} == added.structured_content
    assert 42 == json.loads(text_of(added))


@pytest.mark.spec("U-TOOL-5", "U-TOOL-6")
@MODES
async def test_sdk_modern_client_gets_structured_weather(
    live_server: StartServer, mode: str
) -> None:
    """U-TOOL-6: weather's attrs result is structuredContent matching its outputSchema."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            forecast = await client.call_tool("weather", {"city": "Lyon", "unit": "fahrenheit"})

    expected = {"city": "Lyon", "temperature": 69.8, "conditions": "sunny"}
    assert forecast.is_error is False
    assert expected == forecast.structured_content
    assert expected == json.loads(text_of(forecast))


@pytest.mark.spec("U-TOOL-9", "MJ-RES-3")
@pytest.mark.parametrize(
    ("tool", "types_seen"),
    [
        ("test_simple_text", ["text"]),
        ("test_image_content", ["image"]),
        ("test_audio_content", ["audio"]),
        ("test_embedded_resource", ["resource"]),
        ("test_multiple_content_types", ["text", "image", "resource"]),
    ],
)
@MODES
async def test_sdk_modern_client_reads_every_content_type(
    live_server: StartServer, mode: str, tool: str, types_seen: list[str]
) -> None:
    """MJ-RES-3: text, image, audio and resource content pass the SDK's 2026 models."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            result = await client.call_tool(tool, {})

    assert result.is_error is False
    assert types_seen == [block.type for block in result.content]
    for block in result.content:
        if block.type == "image":
            assert PNG_1X1 == base64.b64decode(block.data)


@pytest.mark.spec("U-TOOL-7")
@MODES
async def test_sdk_modern_client_sees_tool_errors_as_results(
    live_server: StartServer, mode: str
) -> None:
    """U-TOOL-7: a failing tool is a complete result with isError, not a JSON-RPC error."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            failed = await client.call_tool("test_error_handling", {})

    assert failed.is_error is True
    assert "intentionally" in text_of(failed)


@pytest.mark.spec("U-TOOL-7")
@MODES
async def test_sdk_modern_client_calls_an_unknown_tool(live_server: StartServer, mode: str) -> None:
    """U-TOOL-7: a call of an unknown tool is a protocol error (-32602), not a tool result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("no_such_tool", {})

    assert -32602 == caught.value.code


@pytest.mark.spec("MT-HDR-7", "MT-HDR-10", "MT-HDR-12", "MT-HDR-21", "TM-MOD-B64")
@pytest.mark.parametrize("region", ["eu-west", "eu-west ü"])
@MODES
async def test_sdk_mirrors_a_tool_parameter_into_its_header(
    live_server: StartServer, mode: str, region: str
) -> None:
    """MT-HDR-12: region mirrored into Mcp-Param-Region (Base64 if non-ASCII) is accepted."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            listed = await client.list_tools()
            result = await client.call_tool("test_header_params", {"region": region, "count": 2})

    [tool] = [t for t in listed.tools if t.name == "test_header_params"]
    assert "Region" == tool.input_schema["properties"]["region"]["x-mcp-header"]
    assert result.is_error is False
    assert f"{region} {region}" == text_of(result)


# -- prompts ---------------------------------------------------------------------------------------


@pytest.mark.spec("MU-CACHE-1", "U-PROMPT-3", "MJ-RES-3")
@MODES
async def test_sdk_modern_client_lists_and_gets_prompts(
    live_server: StartServer, mode: str
) -> None:
    """U-PROMPT-3: prompts/list shows the arguments; prompts/get fills the prompt from them."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            listed = await client.list_prompts()
            got = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "one", "arg2": "two"}
            )

    by_name = {p.name: p for p in listed.prompts}
    assert set(live.server.prompts) == set(by_name)
    arguments = by_name["test_prompt_with_arguments"].arguments or []
    assert [("arg1", True), ("arg2", True)] == [(a.name, a.required) for a in arguments]
    assert listed.ttl_ms is not None
    [message] = got.messages
    assert "user" == message.role
    assert isinstance(message.content, types.TextContent)
    assert "Prompt with arguments: arg1='one', arg2='two'" == message.content.text


@pytest.mark.spec("U-PROMPT-3", "MJ-RES-3")
@pytest.mark.parametrize(
    ("prompt", "arguments", "kinds"),
    [
        ("test_simple_prompt", {}, ["text"]),
        ("test_prompt_with_image", {}, ["image", "text", "text"]),
        (
            "test_prompt_with_embedded_resource",
            {"resourceUri": "test://example-resource"},
            ["resource", "text"],
        ),
    ],
)
@MODES
async def test_sdk_modern_client_gets_every_prompt_shape(
    live_server: StartServer, mode: str, prompt: str, arguments: dict[str, str], kinds: list[str]
) -> None:
    """U-PROMPT-3: text, image and embedded-resource prompt messages pass the SDK's models."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            got = await client.get_prompt(prompt, arguments)

    assert kinds == [m.content.type for m in got.messages]
    assert "complete" == got.result_type


# -- resources -------------------------------------------------------------------------------------


@pytest.mark.spec("MU-RES-1", "U-RES-3", "MU-CACHE-1")
@MODES
async def test_sdk_modern_client_lists_and_reads_resources(
    live_server: StartServer, mode: str
) -> None:
    """MU-RES-1: resources and templates list; text, blob and templated reads."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            text = await client.read_resource("test://static-text")
            binary = await client.read_resource("test://static-binary")
            templated = await client.read_resource("test://template/42/data")

    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= {
        str(r.uri) for r in listed.resources
    }
    assert ["test://template/{id}/data"] == [t.uri_template for t in templates.resource_templates]
    assert templates.ttl_ms is not None

    [text_contents] = text.contents
    assert isinstance(text_contents, types.TextResourceContents)
    assert "This is the content of the static text resource." == text_contents.text
    assert text.ttl_ms is not None and text.cache_scope is not None

    [blob_contents] = binary.contents
    assert isinstance(blob_contents, types.BlobResourceContents)
    assert "image/png" == blob_contents.mime_type
    assert PNG_1X1 == base64.b64decode(blob_contents.blob)

    [json_contents] = templated.contents
    assert isinstance(json_contents, types.TextResourceContents)
    assert {"id": "42", "templateTest": True, "data": "Data for ID: 42"} == json.loads(
        json_contents.text
    )


@pytest.mark.spec("MU-RES-2", "MU-RES-3")
@MODES
async def test_sdk_modern_client_reads_a_missing_resource(
    live_server: StartServer, mode: str
) -> None:
    """MU-RES-2: reading a resource that does not exist is a -32602 error."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource("test://no-such-resource")

    assert -32602 == caught.value.code


# -- completion ------------------------------------------------------------------------------------


@pytest.mark.spec("U-COMP-1", "MJ-RES-3")
@MODES
async def test_sdk_modern_client_completes_a_prompt_argument(
    live_server: StartServer, mode: str
) -> None:
    """U-COMP-1: completion/complete returns the prompt argument's matching values."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            completed = await client.complete(
                types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
                {"name": "arg1", "value": "pa"},
            )

    assert ["paris", "park", "party"] == completed.completion.values
    assert "complete" == completed.result_type


# -- progress and logging --------------------------------------------------------------------------


@pytest.mark.spec("MU-PROG-1", "MU-PROG-2", "MT-SSE-1", "MT-SSE-7", "TM-MOD-JSON")
@MODES
async def test_sdk_modern_client_receives_progress(live_server: StartServer, mode: str) -> None:
    """MU-PROG-2: increasing progress reaches progress_callback on the call's SSE stream."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, wire=wire) as client:
            result = await client.call_tool(
                "countdown", {"n": 3, "interval": 0.01}, progress_callback=on_progress
            )
            before_result = list(seen)

    assert "liftoff" == text_of(result)
    assert [(1, 3, "2 to go"), (2, 3, "1 to go"), (3, 3, "0 to go")] == before_result
    assert 1 == stats(live).requests_streamed
    [call] = [e for e in wire if e.mcp_method == "tools/call"]
    assert (200, "text/event-stream") == (call.status, call.content_type)


@pytest.mark.spec("MU-PROG-3", "MU-PROG-4", "TM-MOD-JSON")
@MODES
async def test_sdk_modern_client_without_progress_token_gets_json(
    live_server: StartServer, mode: str
) -> None:
    """MU-PROG-3: without a progress token no progress is sent and the answer stays JSON."""
    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, wire=wire) as client:
            result = await client.call_tool("countdown", {"n": 3, "interval": 0.01})

    assert "liftoff" == text_of(result)
    assert 0 == stats(live).requests_streamed
    [call] = [e for e in wire if e.mcp_method == "tools/call"]
    assert (200, "application/json") == (call.status, call.content_type)


@pytest.mark.spec("MU-LOG-3", "MU-LOG-4", "MT-SSE-7")
@MODES
async def test_sdk_modern_client_with_a_log_level_gets_log_messages(
    live_server: StartServer, mode: str
) -> None:
    """MU-LOG-4: a request naming a log level gets the tool's log messages on its stream."""
    logged: list[tuple[str, Any, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append((params.level, params.data, params.logger))

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, logging_callback=on_log, log_level="info") as client:
            result = await client.call_tool("test_logging_tool", {})
            before_result = list(logged)

    assert "Logged three messages." == text_of(result)
    assert [
        ("info", "test_logging_tool started", "demo"),
        ("info", "test_logging_tool working", "demo"),
        ("info", "test_logging_tool done", "demo"),
    ] == before_result


@pytest.mark.spec("MU-LOG-3")
@MODES
async def test_sdk_modern_client_without_a_log_level_gets_no_log_messages(
    live_server: StartServer, mode: str
) -> None:
    """MU-LOG-3: a request naming no log level gets no log message at all."""
    logged: list[Any] = []
    notified: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async def on_message(message: Any) -> None:
        notified.append(message)

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(
            live, mode, logging_callback=on_log, message_handler=on_message
        ) as client:
            result = await client.call_tool("test_logging_tool", {})

    assert "Logged three messages." == text_of(result)
    assert [] == logged
    assert [] == notified
    assert 0 == stats(live).requests_streamed


@pytest.mark.spec("MU-LOG-3", "MU-LOG-4")
@MODES
async def test_sdk_modern_client_log_level_filters_by_severity(
    live_server: StartServer, mode: str
) -> None:
    """MU-LOG-3: messages below the request's log level (info < error) are not sent."""
    logged: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, logging_callback=on_log, log_level="error") as client:
            result = await client.call_tool("test_logging_tool", {})

    assert "Logged three messages." == text_of(result)
    assert [] == logged


@pytest.mark.spec("MU-LOG-5")
@MODES
async def test_sdk_unknown_per_request_log_level_is_refused(
    live_server: StartServer, mode: str
) -> None:
    """MU-LOG-5: an unknown per-request log level gets -32602."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool(
                    "test_logging_tool", {}, meta={"io.modelcontextprotocol/logLevel": "loud"}
                )

    assert -32602 == caught.value.code


# -- subscriptions/listen --------------------------------------------------------------------------


@pytest.mark.spec(
    "MU-SUB-2", "MU-SUB-3", "MU-SUB-6", "MU-SUB-7", "MU-SUB-8", "MU-TOOL-4", "U-TOOL-2"
)
@MODES
async def test_sdk_listen_hears_tools_list_changed(live_server: StartServer, mode: str) -> None:
    """MU-TOOL-4: a tools listener is acknowledged, then told of test_trigger_tool_change."""
    notified: list[Any] = []
    wire: list[Exchange] = []

    async def on_message(message: Any) -> None:
        notified.append(message)

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        try:
            async with (
                modern_client(live, mode, wire=wire, message_handler=on_message) as client,
                client.listen(tools_list_changed=True) as subscription,
            ):
                honored = subscription.honored
                subscription_id = subscription.subscription_id
                changed = await client.call_tool("test_trigger_tool_change", {})
                event = await anext(subscription)
                listed = await client.list_tools()
        finally:
            if "test_dynamic_tool" in live.server.tools:
                live.server.remove_tool("test_dynamic_tool")

    assert "Added test_dynamic_tool." == text_of(changed)
    assert honored is not None
    assert honored.tools_list_changed is True
    assert not honored.prompts_list_changed
    assert not honored.resources_list_changed
    assert isinstance(event, ToolsListChanged)
    assert "test_dynamic_tool" in {t.name for t in listed.tools}
    [listen] = [e for e in wire if e.mcp_method == "subscriptions/listen"]
    assert (200, "text/event-stream") == (listen.status, listen.content_type)
    # The SDK tees each listen event to message_handler: it names the subscription.
    tees = [m for m in notified if isinstance(m, types.ToolListChangedNotification)]
    assert tees
    assert all(
        m.params is not None
        and m.params.meta is not None
        and m.params.meta["io.modelcontextprotocol/subscriptionId"] == subscription_id
        for m in tees
    )


@pytest.mark.spec("MU-SUB-1", "MU-SUB-7", "MU-SUB-9")
@MODES
async def test_sdk_listen_for_prompts_only_hears_no_tools_change(
    live_server: StartServer, mode: str
) -> None:
    """MU-SUB-1: a prompts-only listener hears the prompt change, not the tool change."""
    notified: list[Any] = []

    async def on_message(message: Any) -> None:
        notified.append(message)

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        try:
            async with (
                modern_client(live, mode, message_handler=on_message) as client,
                client.listen(prompts_list_changed=True) as subscription,
            ):
                honored = subscription.honored
                await client.call_tool("test_trigger_tool_change", {})
                await client.call_tool("test_trigger_prompt_change", {})
                event = await anext(subscription)
                # Let anything else in flight on the stream arrive.
                await trio.sleep(0.1)
        finally:
            if "test_dynamic_tool" in live.server.tools:
                live.server.remove_tool("test_dynamic_tool")
            if "test_dynamic_prompt" in live.server.prompts:
                live.server.remove_prompt("test_dynamic_prompt")

    assert honored is not None
    assert honored.prompts_list_changed is True
    assert not honored.tools_list_changed
    assert isinstance(event, PromptsListChanged)
    assert [] == [m for m in notified if isinstance(m, types.ToolListChangedNotification)]
    assert [m for m in notified if isinstance(m, types.PromptListChangedNotification)]


@pytest.mark.spec("MU-SUB-10", "MU-SUB-3")
@MODES
async def test_sdk_listen_hears_a_resource_update(live_server: StartServer, mode: str) -> None:
    """MU-SUB-10: a listener of test://watched-resource is told resources/updated for it."""
    before = dict(watched)
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        try:
            async with (
                modern_client(live, mode) as client,
                client.listen(resource_subscriptions=["test://watched-resource"]) as subscription,
            ):
                honored = subscription.honored
                await client.call_tool("update_watched_resource", {"text": "version 2"})
                event = await anext(subscription)
                read = await client.read_resource("test://watched-resource")
        finally:
            watched.clear()
            watched.update(before)

    assert honored is not None
    assert ["test://watched-resource"] == list(honored.resource_subscriptions or [])
    assert ResourceUpdated(uri="test://watched-resource") == event
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert "version 2" == contents.text


@pytest.mark.spec("MU-SUB-4", "TM-MOD-SUBEND")
@MODES
async def test_sdk_listen_ends_gracefully_on_shutdown(live_server: StartServer, mode: str) -> None:
    """MU-SUB-4: a subscription the server ends closes with its result (a graceful end)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await wait_until(lambda: len(live.app.runtime.listeners.live) == 1)
                live.app.runtime.listeners.end_all()
                events = [event async for event in subscription]
            after = await client.call_tool("echo", {"text": "still here"})

    assert [] == events
    assert "still here" == text_of(after)
    assert 0 == stats(live).streams_cut


@pytest.mark.spec("MU-CANCEL-1")
@MODES
async def test_sdk_leaving_a_listen_ends_it_on_the_server(
    live_server: StartServer, mode: str
) -> None:
    """MU-CANCEL-1: leaving client.listen aborts its POST and the server drops the listener."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            async with client.listen(tools_list_changed=True):
                await wait_until(lambda: len(live.app.runtime.listeners.live) == 1)
            await wait_until(lambda: len(live.app.runtime.listeners.live) == 0)
            after = await client.call_tool("echo", {"text": "still here"})

    assert "still here" == text_of(after)


# -- cancellation by disconnect --------------------------------------------------------------------


@attrs.define
class Probe:
    started: trio.Event = attrs.Factory(trio.Event)
    cancelled: trio.Event = attrs.Factory(trio.Event)
    finished: bool = False


def waiting_server() -> tuple[Server, Probe]:
    """A server with one tool that waits until it is cancelled, and echo."""
    server = Server("interop-modern-cancel")
    probe = Probe()

    @server.tool()
    async def wait_for_cancel(ctx: Context, announce: bool = False) -> str:
        """Waits forever; tells the test it started (and, if asked, the client too)."""
        if announce:
            await ctx.report_progress(0, 1, "started")
        probe.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            probe.cancelled.set()
            raise
        finally:
            probe.finished = True
        return "never"

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server, probe


async def cancel_when(
    client: Client, call: Callable[[Client], Any], ready: Callable[[], Any]
) -> None:
    """Run `call` in a task and cancel that task once `ready()` (awaitable) returns."""
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            await call(client)
            raise AssertionError("the call returned instead of being cancelled")

        nursery.start_soon(run)
        await ready()
        nursery.cancel_scope.cancel()


@pytest.mark.spec("MU-CANCEL-1", "MU-CANCEL-3", "MT-CANCEL-1", "MT-CANCEL-2")
@MODES
async def test_sdk_cancel_before_any_byte_cancels_the_handler(
    live_server: StartServer, mode: str
) -> None:
    """MU-CANCEL-1: cancelling a pending (JSON) call disconnects; the handler gets Cancelled."""
    server, probe = waiting_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server=server)
        async with modern_client(live, mode) as client:
            await cancel_when(
                client,
                lambda c: c.call_tool("wait_for_cancel", {}),
                probe.started.wait,
            )
            await probe.cancelled.wait()
            await wait_until(lambda: stats(live).requests_cancelled == 1)
            after = await client.call_tool("echo", {"text": "still here"})

    assert probe.finished
    assert 1 == stats(live).requests_cancelled
    assert 0 == stats(live).requests_streamed
    assert "still here" == text_of(after)


@pytest.mark.spec("MU-CANCEL-1", "MU-CANCEL-3", "MT-CANCEL-1", "MT-CANCEL-2")
@MODES
async def test_sdk_cancel_of_a_streaming_call_cancels_the_handler(
    live_server: StartServer, mode: str
) -> None:
    """MT-CANCEL-1: cancelling a call whose answer is SSE closes it; the handler is cancelled."""
    server, probe = waiting_server()
    progressed = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progressed.set()

    with trio.fail_after(TIMEOUT):
        live = await live_server(server=server)
        async with modern_client(live, mode) as client:
            await cancel_when(
                client,
                lambda c: c.call_tool(
                    "wait_for_cancel", {"announce": True}, progress_callback=on_progress
                ),
                progressed.wait,
            )
            await probe.cancelled.wait()
            await wait_until(lambda: stats(live).requests_cancelled == 1)
            after = await client.call_tool("echo", {"text": "still here"})

    assert 1 == stats(live).requests_streamed
    assert 1 == stats(live).requests_cancelled
    assert "still here" == text_of(after)


@pytest.mark.spec("MU-CANCEL-1", "MT-CANCEL-1")
@MODES
async def test_sdk_cancel_of_the_demo_countdown(live_server: StartServer, mode: str) -> None:
    """MU-CANCEL-1: the demo's countdown, cancelled after its first progress, is stopped."""
    progressed = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progressed.set()

    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            await cancel_when(
                client,
                lambda c: c.call_tool(
                    "countdown", {"n": 2, "interval": 60}, progress_callback=on_progress
                ),
                progressed.wait,
            )
            await wait_until(lambda: stats(live).requests_cancelled == 1)
            running = len(live.app.runtime.modern.running)

    assert 0 == running


@pytest.mark.spec("MU-CANCEL-1", "MU-CANCEL-3")
@MODES
async def test_sdk_read_timeout_cancels_the_handler(live_server: StartServer, mode: str) -> None:
    """MU-CANCEL-1: the SDK's read timeout aborts the POST and the handler is cancelled."""
    server, probe = waiting_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server=server)
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("wait_for_cancel", {}, read_timeout_seconds=0.3)
            await probe.cancelled.wait()
            await wait_until(lambda: stats(live).requests_cancelled == 1)

    assert -32001 == caught.value.code
    assert probe.started.is_set()


# -- asking the client for input: multi round-trip requests ----------------------------------------


@attrs.define
class Asked:
    """What the client's callbacks were asked, by inputRequests key."""

    elicit: list[tuple[Any, str]] = attrs.Factory(list)
    sample: list[tuple[Any, str]] = attrs.Factory(list)
    roots: list[Any] = attrs.Factory(list)


def answering(asked: Asked, elicit_answers: dict[str, dict[str, Any]] | None = None) -> Any:
    """Callbacks that record what they were asked and answer: each elicitation by its
    message (accept with the content given), sampling with "Paris", roots with two."""

    async def elicitation_callback(
        ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        message = params.message
        asked.elicit.append((ctx.request_id, message))
        content = (elicit_answers or {}).get(message)
        if content is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    async def sampling_callback(
        ctx: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        asked.sample.append((ctx.request_id, content.text))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Paris"),
            model="test-model",
        )

    async def list_roots_callback(ctx: ClientRequestContext) -> types.ListRootsResult:
        asked.roots.append(ctx.request_id)
        return types.ListRootsResult(
            roots=[
                types.Root(uri="file:///work/a", name="a"),
                types.Root(uri="file:///work/b", name="b"),
            ]
        )

    return {
        "elicitation_callback": elicitation_callback,
        "sampling_callback": sampling_callback,
        "list_roots_callback": list_roots_callback,
    }


NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def asking_server() -> Server:
    """Handlers that ask for input after sending a notification, and a resource that asks."""
    server = Server("interop-modern-asking")

    @server.tool()
    async def progress_then_ask(ctx: Context) -> str:
        """Reports progress, then asks the user's name."""
        await ctx.report_progress(1, 2, "asking")
        answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
        await ctx.report_progress(2, 2, "answered")
        return f"Hello, {(answer.content or {}).get('name')}!"

    @server.resource("test://asking", mime_type="text/plain")
    async def asking(ctx: Context) -> str:
        """A resource whose content depends on the user's answer."""
        answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
        return f"Content for {(answer.content or {}).get('name')}."

    return server


@pytest.mark.spec("MU-TOOL-5", "MU-MRTR-2", "MU-MRTR-12", "MJ-PAT-1", "TM-MRTR-RERUN")
@MODES
async def test_sdk_answers_an_elicitation_input_request(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-12: elicitation comes as input_required; the SDK's answer completes the call."""
    asked = Asked()
    callbacks = answering(asked, {"What is your name?": {"name": "Ada"}})
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **callbacks) as client:
            result = await client.call_tool("test_input_required_result_elicitation", {})

    assert "Hello, Ada!" == text_of(result)
    assert [("user_name", "What is your name?")] == asked.elicit
    assert 1 == stats(live).input_required


@pytest.mark.spec("MU-TOOL-5", "MU-MRTR-2")
@MODES
async def test_sdk_declines_an_elicitation_input_request(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-2: a declined elicitation reaches the tool as a decline."""
    asked = Asked()
    callbacks = answering(asked, {})
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **callbacks) as client:
            result = await client.call_tool("test_input_required_result_elicitation", {})

    assert "No name given (decline)." == text_of(result)
    assert [("user_name", "What is your name?")] == asked.elicit


@pytest.mark.spec("MU-TOOL-5", "MU-MRTR-5", "MU-MRTR-12")
@MODES
async def test_sdk_answers_a_sampling_input_request(live_server: StartServer, mode: str) -> None:
    """MU-MRTR-5: sampling/createMessage as an input request, answered by sampling_callback."""
    asked = Asked()
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **answering(asked)) as client:
            result = await client.call_tool("test_input_required_result_sampling", {})

    assert "The model says: Paris" == text_of(result)
    assert [("capital_question", "What is the capital of France?")] == asked.sample
    assert [] == asked.elicit
    assert [] == asked.roots


@pytest.mark.spec("MU-TOOL-5", "MU-MRTR-5", "MU-MRTR-12")
@MODES
async def test_sdk_answers_a_roots_input_request(live_server: StartServer, mode: str) -> None:
    """MU-MRTR-5: roots/list as an input request, answered by list_roots_callback."""
    asked = Asked()
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **answering(asked)) as client:
            result = await client.call_tool("test_input_required_result_list_roots", {})

    assert "Roots: file:///work/a, file:///work/b" == text_of(result)
    assert ["client_roots"] == asked.roots


@pytest.mark.spec("MU-MRTR-2", "MU-MRTR-5", "MU-MRTR-6")
@MODES
async def test_sdk_answers_multiple_inputs_in_one_round(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-6: three questions under distinct keys in one round, answered in one retry."""
    asked = Asked()
    callbacks = answering(asked, {"What is your name?": {"name": "Ada"}})
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **callbacks) as client:
            result = await client.call_tool("test_input_required_result_multiple_inputs", {})

    assert "Ada; greeting received; roots: file:///work/a, file:///work/b" == text_of(result)
    assert [("user_name", "What is your name?")] == asked.elicit
    assert [("greeting", "Write a one-line greeting.")] == asked.sample
    assert ["client_roots"] == asked.roots
    assert 1 == stats(live).input_required


@pytest.mark.spec("MU-MRTR-2", "TM-MRTR-RERUN", "TM-MRTR-STATE")
@MODES
async def test_sdk_answers_two_rounds(live_server: StartServer, mode: str) -> None:
    """TM-MRTR-RERUN: two questions in sequence take two rounds; requestState carries the first."""
    asked = Asked()
    callbacks = answering(
        asked,
        {
            "What is your name?": {"name": "Ada"},
            "And your favourite colour?": {"color": "green"},
        },
    )
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **callbacks) as client:
            result = await client.call_tool("test_input_required_result_multi_round", {})

    assert "Ada likes green." == text_of(result)
    assert [
        ("step1", "What is your name?"),
        ("step2", "And your favourite colour?"),
    ] == asked.elicit
    assert 2 == stats(live).input_required


@pytest.mark.spec("MU-MRTR-13", "MU-MRTR-1")
@MODES
async def test_sdk_answers_an_input_request_of_a_prompt(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-13: prompts/get may answer input_required; get_prompt drives the round."""
    asked = Asked()
    callbacks = answering(asked, {"What should the prompt be about?": {"context": "trio"}})
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **callbacks) as client:
            got = await client.get_prompt("test_input_required_result_prompt", {})

    [message] = got.messages
    assert isinstance(message.content, types.TextContent)
    assert "Write about: trio" == message.content.text
    assert [("user_context", "What should the prompt be about?")] == asked.elicit


@pytest.mark.spec("MU-MRTR-13")
@MODES
async def test_sdk_answers_an_input_request_of_a_resource(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-13: resources/read may answer input_required; read_resource drives the round."""
    asked = Asked()
    callbacks = answering(asked, {"What is your name?": {"name": "Ada"}})
    with trio.fail_after(TIMEOUT):
        live = await live_server(server=asking_server())
        async with modern_client(live, mode, **callbacks) as client:
            read = await client.read_resource("test://asking")

    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert "Content for Ada." == contents.text
    assert [("user_name", "What is your name?")] == asked.elicit


@pytest.mark.spec("MU-MRTR-2", "MT-SSE-1", "MT-SSE-4", "TM-MOD-JSON")
@MODES
async def test_sdk_answers_an_input_request_that_follows_progress(
    live_server: StartServer, mode: str
) -> None:
    """MT-SSE-4: input_required after progress ends the SSE stream; the retry completes."""
    asked = Asked()
    callbacks = answering(asked, {"What is your name?": {"name": "Ada"}})
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server(server=asking_server())
        async with modern_client(live, mode, wire=wire, **callbacks) as client:
            result = await client.call_tool("progress_then_ask", {}, progress_callback=on_progress)

    assert "Hello, Ada!" == text_of(result)
    assert [("user_name", "What is your name?")] == asked.elicit
    assert (1, "asking") == seen[0]
    assert (2, "answered") == seen[-1]
    calls = [e for e in wire if e.mcp_method == "tools/call"]
    assert 2 == len(calls)
    assert all((e.status, e.content_type) == (200, "text/event-stream") for e in calls)


@pytest.mark.spec("TM-ERA-PORT", "TM-MRTR-LEGACY", "MU-MRTR-12")
@pytest.mark.parametrize("mode", ["legacy", "auto", MODERN])
async def test_sdk_same_questions_in_either_era(live_server: StartServer, mode: str) -> None:
    """TM-ERA-PORT: one ctx.ask tool is answered alike by requests (legacy) or input_required."""
    asked = Asked()
    callbacks = answering(asked, {"What is your name?": {"name": "Ada"}})
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode, cache=None, **callbacks) as client:
            version = client.protocol_version
            result = await client.call_tool("test_input_required_result_multiple_inputs", {})

    assert "Ada; greeting received; roots: file:///work/a, file:///work/b" == text_of(result)
    assert ["What is your name?"] == [message for _, message in asked.elicit]
    assert ["Write a one-line greeting."] == [text for _, text in asked.sample]
    assert 1 == len(asked.roots)
    if mode == "legacy":
        assert "2025-11-25" == version
        assert 0 == stats(live).input_required
    else:
        assert MODERN == version
        assert 1 == stats(live).input_required


# -- client capabilities a request needs -----------------------------------------------------------


@pytest.mark.spec("ML-META-3", "TM-ERA-CAPS")
@MODES
async def test_sdk_without_sampling_is_refused_a_tool_that_needs_it(
    live_server: StartServer, mode: str
) -> None:
    """ML-META-3: a tool requiring sampling, called without sampling, is refused with -32021."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("test_missing_capability", {})

    assert -32021 == caught.value.code
    assert isinstance(caught.value.data, dict)
    assert "sampling" in caught.value.data["requiredCapabilities"]
    assert 0 == stats(live).input_required


@pytest.mark.spec("ML-META-3", "MU-TOOL-5")
@MODES
async def test_sdk_with_sampling_may_call_a_tool_that_needs_it(
    live_server: StartServer, mode: str
) -> None:
    """ML-META-3: the same tool, called by a client declaring sampling, completes."""
    asked = Asked()
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode, **answering(asked)) as client:
            result = await client.call_tool("test_missing_capability", {})

    assert "LLM response: Paris" == text_of(result)
    assert 1 == len(asked.sample)


@pytest.mark.spec("ML-META-3", "TM-ERA-CAPS", "MU-ELIC-1")
@MODES
async def test_sdk_without_elicitation_is_refused_an_elicitation(
    live_server: StartServer, mode: str
) -> None:
    """TM-ERA-CAPS: an elicitation the client cannot answer is refused with 400 -32021."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with modern_client(live, mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("test_input_required_result_elicitation", {})

    assert -32021 == caught.value.code
    assert isinstance(caught.value.data, dict)
    assert "elicitation" in caught.value.data["requiredCapabilities"]
    assert 0 == stats(live).input_required


@pytest.mark.spec("ML-META-3", "TM-ERA-CAPS")
@MODES
async def test_sdk_missing_capability_after_progress_is_refused_in_band(
    live_server: StartServer, mode: str
) -> None:
    """TM-ERA-CAPS: a missing capability found after the stream began is -32021 in-band."""
    wire: list[Exchange] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    with trio.fail_after(TIMEOUT):
        live = await live_server(server=asking_server())
        async with modern_client(live, mode, wire=wire) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("progress_then_ask", {}, progress_callback=on_progress)

    assert -32021 == caught.value.code
    assert isinstance(caught.value.data, dict)
    assert "elicitation" in caught.value.data["requiredCapabilities"]
    [call] = [e for e in wire if e.mcp_method == "tools/call"]
    assert (200, "text/event-stream") == (call.status, call.content_type)


# -- driving the rounds by hand: what the server makes of the answers ------------------------------


NAME_ANSWER = types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.spec("MU-MRTR-2", "MU-MRTR-9", "MU-MRTR-10", "MU-MRTR-11")
@MODES
async def test_sdk_manual_rounds_ask_again_and_ignore_unknown_keys(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-10: a retry without the answer is asked again; unknown keys are ignored."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        # The callbacks only declare the capabilities: these tests answer by hand.
        async with modern_client(live, mode, **answering(Asked())) as client:
            session = client.session
            first = await session.call_tool(
                "test_input_required_result_elicitation", {}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            again = await session.call_tool(
                "test_input_required_result_elicitation",
                {},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(again, types.InputRequiredResult)
            done = await session.call_tool(
                "test_input_required_result_elicitation",
                {},
                input_responses={"user_name": NAME_ANSWER, "surplus": NAME_ANSWER},
                request_state=again.request_state,
                allow_input_required=True,
            )

    assert "input_required" == first.result_type
    assert ["user_name"] == list(first.input_requests or {})
    assert ["user_name"] == list(again.input_requests or {})
    assert isinstance(done, types.CallToolResult)
    assert "Hello, Ada!" == text_of(done)


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-ERRORS", "TM-MRTR-STATE")
@MODES
async def test_sdk_manual_round_with_a_tampered_state_is_refused(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-3: a tampered requestState is refused in-band with -32602 and a reason."""
    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        # The callbacks only declare the capabilities: these tests answer by hand.
        async with modern_client(live, mode, wire=wire, **answering(Asked())) as client:
            session = client.session
            first = await session.call_tool(
                "test_input_required_result_tampered_state", {}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state
            tampered = "x" + first.request_state[1:]
            if tampered == first.request_state:
                tampered = "y" + first.request_state[1:]
            with pytest.raises(MCPError) as caught:
                await session.call_tool(
                    "test_input_required_result_tampered_state",
                    {},
                    input_responses={
                        "confirm": types.ElicitResult(action="accept", content={"ok": True})
                    },
                    request_state=tampered,
                    allow_input_required=True,
                )

    assert -32602 == caught.value.code
    assert isinstance(caught.value.data, dict) and caught.value.data.get("reason")
    assert (200, "application/json") == (wire[-1].status, wire[-1].content_type)


@pytest.mark.spec("MU-MRTR-7", "TM-MRTR-STATE")
@MODES
async def test_sdk_manual_round_with_another_requests_state_is_refused(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-7: a requestState of another tool's call is refused with -32602."""
    answer = {"confirm": types.ElicitResult(action="accept", content={"ok": True})}
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        # The callbacks only declare the capabilities: these tests answer by hand.
        async with modern_client(live, mode, **answering(Asked())) as client:
            session = client.session
            first = await session.call_tool(
                "test_input_required_result_request_state", {}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            with pytest.raises(MCPError) as caught:
                await session.call_tool(
                    "test_input_required_result_tampered_state",
                    {},
                    input_responses=answer,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            own = await session.call_tool(
                "test_input_required_result_request_state",
                {},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )

    assert -32602 == caught.value.code
    assert isinstance(own, types.CallToolResult)
    assert "state-ok: confirmed" == text_of(own)


@pytest.mark.spec("MU-MRTR-4", "TM-MRTR-VALIDATE", "TM-MRTR-ERRORS")
@MODES
async def test_sdk_manual_round_with_an_answer_off_schema_is_refused(
    live_server: StartServer, mode: str
) -> None:
    """MU-MRTR-4: an answer breaking the requested schema is refused with -32602."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        # The callbacks only declare the capabilities: these tests answer by hand.
        async with modern_client(live, mode, **answering(Asked())) as client:
            session = client.session
            first = await session.call_tool(
                "test_input_required_result_elicitation", {}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            with pytest.raises(MCPError) as caught:
                await session.call_tool(
                    "test_input_required_result_elicitation",
                    {},
                    input_responses={
                        "user_name": types.ElicitResult(action="accept", content={"nom": "Ada"})
                    },
                    request_state=first.request_state,
                    allow_input_required=True,
                )

    assert -32602 == caught.value.code
    assert isinstance(caught.value.data, dict)
    assert "user_name" == caught.value.data.get("key")
