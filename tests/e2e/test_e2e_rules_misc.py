"""Rules that cut across the layers: the default bind, what a session id is not, reserved
`_meta` keys, the default JSON Schema dialect, the whole base protocol in one exchange, and
the JSON-mode answer to a cancelled request. Real hypercorn on loopback, raw h11 client."""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from support.client import McpSession, open_session, request, rpc_request
from support.fixtures import StartServer
from support.modern import modern_request, post

from trio_mcp import Context, ResponseMode, Server, ServerConfig, serve
from trio_mcp.cli._cli import build_parser
from trio_mcp.demo import server as demo

TIMEOUT = 10


@pytest.mark.spec("T-SEC-4", "MT-SEC-4")
async def test_default_bind_is_loopback_only(live_server: StartServer) -> None:
    """Unless told otherwise, the server binds 127.0.0.1 and never all interfaces: both the
    embedding API and the command line default to loopback."""
    serve_default = inspect.signature(serve).parameters["host"].default
    cli_default = build_parser().parse_args(["serve"]).host

    assert "127.0.0.1" == serve_default
    assert "127.0.0.1" == cli_default


@pytest.mark.spec("T-SEC-4", "MT-SEC-4")
async def test_serve_left_to_its_defaults_listens_on_loopback_alone_for_both_eras(
    nursery: trio.Nursery,
) -> None:
    """serve() given no host listens on 127.0.0.1 alone, and answers both eras there."""
    with trio.fail_after(TIMEOUT):
        [base] = await nursery.start(functools.partial(serve, demo, port=0))
        parts = urlsplit(base)
        url = base
        discover = modern_request("server/discover", id="bind-1")
        modern = await post(url, discover)
        legacy = await open_session(url)
        # Linux routes all of 127.0.0.0/8 to loopback: a socket bound to every interface
        # would accept a connection to 127.0.0.2 too; one bound to 127.0.0.1 refuses it.
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.2", parts.port or 0)

    assert "127.0.0.1" == parts.hostname
    assert 200 == modern.status
    assert "complete" == modern.json()["result"]["resultType"]
    assert legacy.id


@pytest.mark.spec("T-SEC-8", "T-SEC-1")
async def test_a_session_id_does_not_vouch_for_a_request(live_server: StartServer) -> None:
    """A valid session id is a routing key, not a credential: a request carrying one is
    checked like any other, so a foreign Origin is still refused with 403."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        response = await session.post(
            rpc_request("ping"), headers=[("origin", "http://evil.example.com")]
        )
        healthy = await session.result("ping")

    assert 403 == response.status
    assert {} == healthy


def _meta_server() -> Server:
    server = Server("meta")

    @server.tool()
    async def show_meta(ctx: Context) -> str:
        """Report what the handler sees of the request's _meta."""
        return json.dumps({"token": ctx.progress_token, "keys": sorted(ctx.meta)})

    return server


@pytest.mark.spec("J-META-1")
async def test_reserved_meta_keys_are_passed_through_uninterpreted(
    live_server: StartServer,
) -> None:
    """Keys under `_meta` reserved by MCP (an `io.modelcontextprotocol/` prefix) change
    nothing: the request is served, the handler sees them as they came, and only
    `progressToken` is read, as the spec defines it."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_meta_server())
        session = await open_session(live.url)
        meta = {
            "progressToken": "t1",
            "io.modelcontextprotocol/unknown": {"x": 1},
            "example.mcp/anything": True,
        }
        result = await session.result(
            "tools/call", {"name": "show_meta", "arguments": {}, "_meta": meta}
        )

    seen = json.loads(result["content"][0]["text"])
    assert "t1" == seen["token"]
    assert sorted(meta) == seen["keys"]


def _schema_server() -> Server:
    server = Server("schema")

    @server.tool()
    async def segment(start: tuple[int, int], end: tuple[int, int]) -> str:
        """Join two points.

        Args:
            start: x and y of the first point.
            end: x and y of the second point.
        """
        return f"{start}->{end}"

    return server


@pytest.mark.spec("J-SCHEMA-1")
async def test_schemas_without_a_dialect_are_2020_12(live_server: StartServer) -> None:
    """A tool's inputSchema carries no `$schema`, so it is JSON Schema 2020-12: fixed-length
    tuples use `prefixItems` (a 2020-12 keyword), and arguments are validated by it."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_schema_server())
        session = await open_session(live.url)
        listed = await session.result("tools/list")
        good = await session.result(
            "tools/call", {"name": "segment", "arguments": {"start": [0, 0], "end": [1, 2]}}
        )
        bad = await session.result(
            "tools/call", {"name": "segment", "arguments": {"start": [0], "end": [1, 2, 3]}}
        )

    [tool] = listed["tools"]
    schema = tool["inputSchema"]
    assert "$schema" not in schema
    start = schema["properties"]["start"]
    assert [{"type": "integer"}, {"type": "integer"}] == start["prefixItems"]
    assert not good.get("isError")
    assert bad.get("isError") is True


#: One schema read under three dialects: draft-07 knows `dependencies` (a needs b); 2020-12,
#: the default, replaced it by dependentRequired and so ignores it; the third is unknown.
PAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "dependencies": {"a": ["b"]},
}
DIALECTS = {
    "draft7": {"$schema": "http://json-schema.org/draft-07/schema#", **PAIR_SCHEMA},
    "default": PAIR_SCHEMA,
    "foreign": {"$schema": "https://example.com/schemas/my-dialect", **PAIR_SCHEMA},
}


def _dialect_server(ran: list[str]) -> Server:
    server = Server("dialects")

    def recording(name: str) -> Any:
        async def pair(a: int | None = None, b: int | None = None) -> str:
            ran.append(name)
            return f"{a},{b}"

        return pair

    for name, schema in DIALECTS.items():
        server.add_tool(
            recording(name), name=name, description="Take a and b.", input_schema=schema
        )
    return server


@pytest.mark.spec("J-SCHEMA-2", "TM-TOOL-INPUT")
async def test_hand_written_schemas_are_read_in_their_dialect(live_server: StartServer) -> None:
    """A declared dialect is followed, none means 2020-12, and an unknown one is refused."""
    ran: list[str] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server(_dialect_server(ran))
        session = await open_session(live.url)
        results = {
            name: await session.result("tools/call", {"name": name, "arguments": {"a": 1}})
            for name in DIALECTS
        }

    # draft-07's dependencies holds: a without b is refused before the tool runs.
    assert results["draft7"]["isError"] is True
    assert "'b' is a dependency of 'a'" in results["draft7"]["content"][0]["text"]
    # Without $schema it is 2020-12, where dependencies is no keyword: the tool runs.
    assert not results["default"].get("isError")
    assert [{"type": "text", "text": "1,None"}] == results["default"]["content"]
    # An unknown dialect is an error that says so, never a guess.
    assert results["foreign"]["isError"] is True
    text = results["foreign"]["content"][0]["text"]
    assert "https://example.com/schemas/my-dialect" in text and "not supported" in text
    assert ["default"] == ran


@pytest.mark.spec("L-GEN-1", "L-ERR-1")
async def test_whole_base_protocol_in_one_session(live_server: StartServer) -> None:
    """The base protocol and the lifecycle work end to end: an initialize offering an
    unknown version is answered with ours (not an error), then initialized, ping, a tool
    call, and DELETE; the ended session's id then gets 404."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version="1999-01-01")
        pong = await session.result("ping")
        echoed = await session.result(
            "tools/call", {"name": "echo", "arguments": {"text": "hi"}}
        )
        deleted = await session.delete()
        after = await session.post(rpc_request("ping"))

    assert "2025-11-25" == session.initialize_result["protocolVersion"]
    assert {} == pong
    assert "hi" == echoed["content"][0]["text"]
    assert 204 == deleted.status
    assert 404 == after.status


def _slow_server(started: trio.Event) -> Server:
    server = Server("slow")

    @server.tool()
    async def wait_forever() -> str:
        """Block until cancelled."""
        started.set()
        await trio.sleep_forever()
        return "unreachable"

    return server


@pytest.mark.spec("TM-CANCEL-JSON", "T-POST-7", "U-CANCEL-4")
async def test_json_mode_cancelled_request_gets_a_stream_that_ends_without_a_response(
    live_server: StartServer,
) -> None:
    """In JSON response mode, a request the client cancels is answered 200 with an SSE
    stream that ends with nothing in it: no response for the cancelled request (U-CANCEL-4),
    and still a JSON body or a stream for its POST (T-POST-7); not 202 and not a hang."""
    started = trio.Event()
    answer: dict[str, Any] = {}
    with trio.fail_after(TIMEOUT):
        live = await live_server(
            _slow_server(started), ServerConfig(response_mode=ResponseMode.JSON)
        )
        session: McpSession = await open_session(live.url)
        message = rpc_request("tools/call", {"name": "wait_forever", "arguments": {}})

        async def call() -> None:
            response = await request(
                live.url, "POST", session.headers(), json.dumps(message).encode()
            )
            answer["status"] = response.status
            answer["type"] = response.content_type
            answer["body"] = response.body

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await started.wait()
            cancel = await session.notify(
                "notifications/cancelled", {"requestId": message["id"], "reason": "test"}
            )

    assert 202 == cancel.status
    assert (200, "text/event-stream", b"") == (answer["status"], answer["type"], answer["body"])


