"""Rules that cut across the layers: the default bind, what a session id is not, reserved
`_meta` keys, the default JSON Schema dialect, the whole base protocol in one exchange, and
the JSON-mode answer to a cancelled request. Real hypercorn on loopback, raw h11 client."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, request, rpc_request
from support.fixtures import StartServer

from trio_mcp import Context, ResponseMode, Server, ServerConfig, serve
from trio_mcp._cli import build_parser

TIMEOUT = 10


@pytest.mark.spec("T-SEC-4")
async def test_default_bind_is_loopback_only(live_server: StartServer) -> None:
    """Unless told otherwise, the server binds 127.0.0.1 and never all interfaces: both the
    embedding API and the command line default to loopback."""
    serve_default = inspect.signature(serve).parameters["host"].default
    cli_default = build_parser().parse_args(["serve"]).host

    assert "127.0.0.1" == serve_default
    assert "127.0.0.1" == cli_default


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


@pytest.mark.spec("TM-CANCEL-JSON", "T-POST-7")
async def test_json_mode_cancelled_request_still_gets_a_json_body(
    live_server: StartServer,
) -> None:
    """In JSON response mode, a request the client cancels is answered 200 application/json
    with a -31003 error (the POST of a request must get a body; the client ignores it),
    not 202 and not a hang."""
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
            answer["body"] = response.json()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await started.wait()
            cancel = await session.notify(
                "notifications/cancelled", {"requestId": message["id"], "reason": "test"}
            )

    assert 202 == cancel.status
    assert 200 == answer["status"]
    assert "application/json" == answer["type"]
    assert message["id"] == answer["body"]["id"]
    assert -31003 == answer["body"]["error"]["code"]


