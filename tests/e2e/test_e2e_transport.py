# The Streamable HTTP transport end to end: real hypercorn on loopback, driven by the raw
# h11 client in tests/support/client.py, so every status line, header and SSE field the
# server writes is what the assertions see.
from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio
import trio.testing
from support.client import (
    McpSession,
    Response,
    notification,
    open_session,
    open_stream,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.client import dumps as json_body
from support.fixtures import StartServer, wait_until

from trio_mcp import Context, ResponseMode, Server, ServerConfig, ToolError
from trio_mcp.protocol import STANDALONE_STREAM

TIMEOUT = 10

INITIALIZE_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "e2e", "version": "0"},
}


def initialize_body(version: str = "2025-11-25") -> bytes:
    return json_body(rpc_request("initialize", dict(INITIALIZE_PARAMS, protocolVersion=version)))


def countdown_call(n: int, interval: float, *, rid: str) -> dict[str, Any]:
    return rpc_request(
        "tools/call",
        {
            "name": "countdown",
            "arguments": {"n": n, "interval": interval},
            "_meta": {"progressToken": f"{rid}-progress"},
        },
        id=rid,
    )


def error_code(response: Any) -> int:
    """The JSON-RPC error code of a refused HTTP request's body."""
    assert response.content_type == "application/json", response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    code: int = body["error"]["code"]
    return code


# -- sessions ------------------------------------------------------------------------------


@pytest.mark.spec("T-SESS-1", "T-SESS-2", "T-SESS-3", "T-SEC-9", "T-SEC-10")
async def test_initialize_assigns_a_secure_visible_ascii_session_id(
    live_server: StartServer,
) -> None:
    """The HTTP response that carries the InitializeResult carries an MCP-Session-Id made
    only of visible ASCII (0x21-0x7E), long enough to hold at least 128 random bits, and
    different for every session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        ids = [(await open_session(live.url)).id for _ in range(3)]

    for sid in ids:
        assert all(0x21 <= ord(c) <= 0x7E for c in sid), sid
        # base64url carries 6 bits per character: 22 characters hold 132 bits.
        assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", sid), sid
    assert len(set(ids)) == 3


@pytest.mark.spec("T-SESS-7", "T-SESS-9", "TM-SESS-DELETE")
async def test_delete_ends_the_session_and_its_id_then_gets_404(live_server: StartServer) -> None:
    """DELETE with the session id ends the session (204 No Content); afterwards every request
    that carries that id, POST, GET or DELETE, is answered 404 Not Found."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)

        deleted = await session.delete()
        post = await session.post(rpc_request("ping"))
        async with session.open_get() as get:
            get_status = get.status
        again = await session.delete()

    assert deleted.status == 204
    assert deleted.body == b""
    assert session.id not in live.table.sessions
    assert post.status == 404
    assert error_code(post) == -32600
    assert get_status == 404
    assert again.status == 404


@pytest.mark.spec("TM-SESS-DELETE", "T-PSSE-9")
async def test_delete_closes_the_sessions_open_streams(live_server: StartServer) -> None:
    """Ending a session closes its connections: an open GET stream of the session is
    finished properly (its chunked body ends) right after the DELETE."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        async with session.open_get() as get:
            await get.next_event()  # priming
            deleted = await session.delete()
            with trio.fail_after(2):
                rest = [e async for e in get.events()]

    assert deleted.status == 204
    assert get.ended and not get.truncated
    assert all(e.data is None or e.data == "" for e in rest), rest


@pytest.mark.spec("T-SESS-7", "TM-SESS-UNKNOWN")
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_unknown_session_id_gets_404(live_server: StartServer, method: str) -> None:
    """A session id this server never issued is answered like a terminated one: 404, so the
    client starts a new session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = McpSession(
            url=live.url,
            id="never-issued-0123456789abcdef",
            protocol_version="2025-11-25",
            initialize_result={},
        )
        if method == "POST":
            response = await session.post(rpc_request("ping"))
        elif method == "DELETE":
            response = await session.delete()
        else:
            async with session.open_get() as get:
                response_status = get.status
                body = await get.read_body()
            assert response_status == 404
            assert json.loads(body)["error"]["code"] == -32600
            return

    assert response.status == 404
    assert error_code(response) == -32600


@pytest.mark.spec("T-SESS-6")
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_missing_session_id_gets_400_and_allocates_nothing(
    live_server: StartServer, method: str
) -> None:
    """A request other than initialize that carries no MCP-Session-Id is answered 400 Bad
    Request with a JSON-RPC error, and the server allocates no session for it."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        await open_session(live.url)
        before = (len(live.table.sessions), live.stats()["sessions_created"])
        if method == "POST":
            headers = post_headers(protocol_version="2025-11-25")
            response = await request(live.url, "POST", headers, json_body(rpc_request("ping")))
        elif method == "GET":
            headers = [("accept", "text/event-stream"), ("mcp-protocol-version", "2025-11-25")]
            response = await request(live.url, "GET", headers)
        else:
            response = await request(live.url, "DELETE", [("mcp-protocol-version", "2025-11-25")])

    assert response.status == 400
    assert error_code(response) == -32600
    assert (len(live.table.sessions), live.stats()["sessions_created"]) == before


@pytest.mark.spec("T-SESS-7", "T-PSSE-9", "TM-SESS-DELETE")
@pytest.mark.parametrize("mode", [ResponseMode.SSE, ResponseMode.JSON])
async def test_ending_a_session_ends_its_pending_posts_promptly(
    live_server: StartServer, mode: ResponseMode
) -> None:
    """When a session ends (here by DELETE) while a POST waits for a long request, that POST
    is finished at once: its SSE stream ends without a response, or, answered as JSON, it
    gets the 404 that every request of an ended session gets. Nothing waits for the
    cancelled handler."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(response_mode=mode))
        session = await open_session(live.url)
        answers: list[Response] = []

        async def post_long_call() -> None:
            answers.append(await session.post(countdown_call(100, 0.1, rid="long")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(post_long_call)
            state = live.table.sessions[session.id]
            await wait_until(lambda: "long" in state.inflight)
            deleted = await session.delete()
            with trio.fail_after(2):
                await wait_until(lambda: bool(answers))

    [post] = answers
    assert deleted.status == 204
    if mode is ResponseMode.JSON:
        assert post.status == 404
        assert error_code(post) == -32600
    else:
        assert post.status == 200
        assert not post.truncated
        assert [m for m in rpc_messages(post) if m.get("id") == "long"] == []


# -- POST --------------------------------------------------------------------------------


@pytest.mark.spec("T-PSSE-1")
async def test_sse_responses_start_with_a_priming_event(live_server: StartServer) -> None:
    """In a 2025-11-25 session an SSE response starts with an event that has an id and an
    empty data field, before any message: the initialize response and later ones alike."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        init = await request(live.url, "POST", post_headers(), initialize_body())
        session = await open_session(live.url)
        ping = await session.post(rpc_request("ping"))

    for response in (init, ping):
        assert response.content_type == "text/event-stream"
        first, *rest = [e for e in response.events() if e.comment is None]
        assert first.id
        assert first.data == ""
        assert [json.loads(e.data)["result"] is not None for e in rest if e.data] == [True]


@pytest.mark.spec("T-PSSE-1")
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
async def test_no_priming_event_for_clients_older_than_2025_11_25(
    live_server: StartServer, version: str
) -> None:
    """Clients of the revisions before 2025-11-25 break on an event with empty data, so
    their sessions' SSE streams, POST and GET alike, have no priming event: every event
    carries a message."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(keepalive_interval=0.2))
        init = await request(live.url, "POST", post_headers(), initialize_body(version))
        session = await open_session(live.url, protocol_version=version)
        ping = await session.post(rpc_request("ping"))
        async with session.open_get() as get:
            first_on_get = await get.next_event()

    for response in (init, ping):
        events = [e for e in response.events() if e.comment is None]
        assert events
        assert all(e.data for e in events), events
    # Nothing but a keep-alive comment arrives on the idle GET stream.
    assert first_on_get is not None and first_on_get.comment is not None


@pytest.mark.spec("T-POST-7", "MT-SSE-5")
async def test_sse_responses_are_event_streams_that_proxies_must_not_buffer(
    live_server: StartServer,
) -> None:
    """A request answered by SSE gets Content-Type text/event-stream, and the stream carries
    X-Accel-Buffering: no so that reverse proxies pass events through at once."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        response = await session.post(rpc_request("tools/list"))
        async with session.open_get() as get:
            get_headers = (get.content_type, get.header("x-accel-buffering"))

    assert response.status == 200
    assert response.content_type == "text/event-stream"
    assert response.header("x-accel-buffering") == "no"
    assert get_headers == ("text/event-stream", "no")


@pytest.mark.spec("T-POST-7", "TM-HTTP-MODE")
async def test_json_response_mode_answers_with_one_json_object(live_server: StartServer) -> None:
    """With ResponseMode.JSON every request, initialize included, is answered with a single
    application/json object: the JSON-RPC response."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(response_mode=ResponseMode.JSON))
        init = await request(live.url, "POST", post_headers(), initialize_body())
        session = await open_session(live.url)
        message = rpc_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        response = await session.post(message)

    assert init.content_type == "application/json"
    assert init.header("mcp-session-id")
    assert init.json()["result"]["protocolVersion"] == "2025-11-25"
    assert response.status == 200
    assert response.content_type == "application/json"
    body = response.json()
    assert body["id"] == message["id"]
    assert body["result"]["content"] == [{"type": "text", "text": "hi"}]


@pytest.mark.spec("T-POST-4", "J-NOTIF-1")
async def test_notification_post_gets_202_with_no_body(live_server: StartServer) -> None:
    """A POST whose body is an accepted notification is answered 202 Accepted with an empty
    body: no JSON-RPC response, not even {}."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, send_initialized=False)
        initialized = await session.notify("notifications/initialized")
        other = await session.notify("notifications/roots/list_changed")

    for response in (initialized, other):
        assert response.status == 202
        assert response.body == b""


@pytest.mark.spec("T-POST-4")
async def test_response_post_gets_202_with_no_body(live_server: StartServer) -> None:
    """A POST whose body is a JSON-RPC response (result or error) is answered 202 with no
    body, even when it answers no request the server is waiting for."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        result = await session.post({"jsonrpc": "2.0", "id": 4242, "result": {}})
        error = await session.post(
            {"jsonrpc": "2.0", "id": 4243, "error": {"code": -32601, "message": "nope"}}
        )

    for response in (result, error):
        assert response.status == 202
        assert response.body == b""


# -- GET -----------------------------------------------------------------------------------


@pytest.mark.spec("T-GET-3", "TM-GET-ONE", "T-MULTI-2")
async def test_get_opens_the_standalone_stream_and_a_second_fresh_get_takes_it_over(
    live_server: StartServer,
) -> None:
    """GET answers with a text/event-stream (primed in a 2025-11-25 session). While it is
    open, a second GET without Last-Event-ID is answered with a stream too, and takes the
    standalone stream over: the first connection ends, one stream never has two."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        async with session.open_get() as first:
            priming = await first.next_event()
            async with session.open_get() as second:
                second_head = (second.status, second.content_type)
                first_rest = await first.read_body()
                state = live.table.sessions[session.id]
                views = list(state.views)

    assert first.status == 200
    assert first.content_type == "text/event-stream"
    assert priming is not None and priming.id and priming.data == ""
    assert (200, "text/event-stream") == second_head
    assert b"data:" not in first_rest
    assert [STANDALONE_STREAM] == views


@pytest.mark.spec("TM-HTTP-KEEPALIVE", "T-GET-3", "J-MSG-1")
async def test_idle_stream_gets_keepalive_comments(live_server: StartServer) -> None:
    """An idle SSE stream receives periodic SSE comments, which keep intermediaries from
    timing it out and which clients ignore: no data event is invented to fill the silence."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(keepalive_interval=0.2))
        session = await open_session(live.url)
        async with session.open_get() as stream:
            priming = await stream.next_event()
            later = [await stream.next_event() for _ in range(2)]

    assert priming is not None and priming.data == ""
    assert [e.comment if e is not None else None for e in later] == ["keep-alive"] * 2


@pytest.mark.spec("U-TOOL-2", "T-GET-4", "T-GET-5")
async def test_tools_list_changed_arrives_on_the_get_stream(live_server: StartServer) -> None:
    """When a tool is added at runtime, the server sends notifications/tools/list_changed on
    the session's standalone GET stream (it relates to no request), and the new tool is
    listed afterwards."""
    server = Server("list-changed")

    @server.tool()
    async def first() -> str:
        """The first tool."""
        return "1"

    async def second() -> str:
        """The second tool."""
        return "2"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        session = await open_session(live.url)
        assert session.initialize_result["capabilities"]["tools"]["listChanged"] is True
        async with session.open_get() as stream:
            await stream.next_event()  # priming
            server.add_tool(second)
            message = await stream.next_message()
        tools = await session.result("tools/list")

    assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert [t["name"] for t in tools["tools"]] == ["first", "second"]


# -- headers: version, Origin, Host ----------------------------------------------------


@pytest.mark.spec("T-VER-3", "TM-VER-SESSION")
async def test_absent_protocol_version_header_is_accepted(live_server: StartServer) -> None:
    """A request without MCP-Protocol-Version is served (under the session's negotiated
    version): the header's absence is not an error."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        headers = post_headers(session_id=session.id)
        response = await request(live.url, "POST", headers, json_body(rpc_request("ping")))

    assert response.status == 200
    [answer] = [m for m in rpc_messages(response) if "id" in m]
    assert answer["result"] == {}


@pytest.mark.spec("TM-VER-SESSION", "TM-RPC-BATCH", "TM-RES-PRIME")
@pytest.mark.parametrize(
    ("negotiated", "header"), [("2025-11-25", "2025-03-26"), ("2025-03-26", "2025-11-25")]
)
async def test_session_behaviour_follows_the_negotiated_version_not_the_header(
    live_server: StartServer, negotiated: str, header: str
) -> None:
    """A request is served under its session's negotiated version: another supported
    version in MCP-Protocol-Version is accepted but changes nothing (a 2025-11-25 session
    still primes its streams and refuses batches; a 2025-03-26 one still takes batches
    and sends no priming event)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version=negotiated)
        extra = [("mcp-protocol-version", header)]
        single = await session.post(rpc_request("ping"), headers=extra)
        batch = await session.post([rpc_request("ping"), rpc_request("ping")], headers=extra)

    primed = any(e.data == "" for e in single.events())
    if negotiated == "2025-11-25":
        assert primed
        assert batch.status == 400
    else:
        assert not primed
        assert batch.status == 200
        assert len(rpc_messages(batch)) == 2


@pytest.mark.spec("T-VER-4")
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "banana"])
async def test_unsupported_protocol_version_header_gets_400(
    live_server: StartServer, method: str, version: str
) -> None:
    """A request whose MCP-Protocol-Version names no version this session can be served
    under is answered 400 Bad Request with a JSON-RPC error, and the session is untouched."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        headers = [("mcp-session-id", session.id), ("mcp-protocol-version", version)]
        if method == "POST":
            headers = post_headers(extra=headers)
            response = await request(live.url, "POST", headers, json_body(rpc_request("ping")))
        elif method == "GET":
            response = await request(live.url, "GET", [("accept", "text/event-stream"), *headers])
        else:
            response = await request(live.url, "DELETE", headers)
        still = await session.result("ping")

    assert response.status == 400
    assert error_code(response) == -32600
    assert still == {}


@pytest.mark.spec("T-SEC-1", "T-SEC-2", "T-SEC-3", "TM-SEC-ORIGIN")
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example",
        "http://127.evil.example:8080",
        "file://",
    ],
)
async def test_foreign_origin_gets_403_on_every_method(
    live_server: StartServer, method: str, origin: str
) -> None:
    """Origin is validated on every request: a present Origin that is not allowed gets 403
    Forbidden (with a JSON-RPC error body that has no id), whatever the method, and the
    session is unaffected. DNS names that merely start like a loopback address are
    foreign."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        foreign = [("origin", origin)]
        if method == "POST":
            response = await session.post(rpc_request("ping"), headers=foreign)
        elif method == "GET":
            headers = [("accept", "text/event-stream"), ("mcp-session-id", session.id), *foreign]
            response = await request(live.url, "GET", headers)
        else:
            response = await request(live.url, "DELETE", [("mcp-session-id", session.id), *foreign])
        still = await session.result("ping")

    assert response.status == 403
    assert error_code(response) == -32600
    assert "id" not in response.json()
    assert still == {}


@pytest.mark.spec("T-SEC-1", "T-SEC-2", "MT-SEC-1")
@pytest.mark.parametrize("case", ["wrong-path", "body-too-large"])
async def test_a_foreign_origin_gets_403_before_anything_else_is_answered(
    live_server: StartServer, case: str
) -> None:
    """Origin is checked first: a foreign page gets 403 for a request to a path that is not
    the endpoint (not 404) and for a body over the limit (not 413), so it learns nothing
    else about the server."""
    config = ServerConfig(max_body_bytes=1024)
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=config)
        url = live.url + "-elsewhere" if case == "wrong-path" else live.url
        body = json_body(rpc_request("ping")) if case == "wrong-path" else b"x" * 4096
        foreign = await request(
            url, "POST", [*post_headers(), ("origin", "http://evil.example")], body
        )
        ours = await request(url, "POST", post_headers(), body)

    assert 403 == foreign.status and -32600 == error_code(foreign)
    assert (404 if case == "wrong-path" else 413) == ours.status


@pytest.mark.spec("T-SEC-1", "TM-SEC-ORIGIN")
@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443"]
)
async def test_loopback_origin_is_accepted(live_server: StartServer, origin: str) -> None:
    """A loopback server accepts requests from loopback origins (a local web client)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, headers=[("origin", origin)])
        response = await session.post(rpc_request("ping"), headers=[("origin", origin)])

    assert response.status == 200


@pytest.mark.spec("TM-SEC-ORIGIN", "T-SEC-1")
async def test_configured_origins_are_accepted_and_others_still_refused(
    live_server: StartServer,
) -> None:
    """Origins listed in ServerConfig.allowed_origins are accepted besides loopback ones;
    every other origin still gets 403, and a request without Origin is accepted."""
    with trio.fail_after(TIMEOUT):
        config = ServerConfig(allowed_origins=frozenset({"https://app.example"}))
        live = await live_server(config=config)
        session = await open_session(live.url, headers=[("origin", "https://app.example")])
        listed = await session.post(
            rpc_request("ping"), headers=[("origin", "https://app.example")]
        )
        other = await session.post(
            rpc_request("ping"), headers=[("origin", "https://app.example:8443")]
        )
        absent = await session.post(rpc_request("ping"))

    assert listed.status == 200
    assert other.status == 403
    assert absent.status == 200


@pytest.mark.spec("T-SEC-1", "TM-SEC-HOST")
@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:80",
        "10.0.0.1",
        "127.0.0.1.evil.example",
        "127.evil.example:80",
        "localhost.evil.example",
    ],
)
async def test_foreign_host_on_a_loopback_bind_gets_421(
    live_server: StartServer, host: str
) -> None:
    """A server bound to loopback refuses a Host header that names another machine (a DNS
    rebinding attack reaches it under a foreign name): 421 Misdirected Request, and no
    session is created."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        response = await request(
            live.url, "POST", post_headers(extra=[("host", host)]), initialize_body()
        )

    assert response.status == 421
    assert error_code(response) == -32600
    assert response.header("mcp-session-id") is None
    assert live.table.sessions == {}


# -- lifecycle and version negotiation -------------------------------------------------


@pytest.mark.spec("TM-SEC-HOST")
@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.0.0.2", "[::1]", "LOCALHOST"])
async def test_loopback_host_names_are_accepted(live_server: StartServer, host: str) -> None:
    """A loopback server accepts every Host header that names loopback, with any port."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        headers = post_headers(extra=[("host", f"{host}:{live.port}")])
        response = await request(live.url, "POST", headers, initialize_body())

    assert response.status == 200
    assert response.header("mcp-session-id")


@pytest.mark.spec("L-VER-2", "TM-VER-SET")
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_supported_requested_version_is_echoed(
    live_server: StartServer, version: str
) -> None:
    """An initialize that requests a version the server supports is answered with the same
    version."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version=version)

    assert session.protocol_version == version
    assert live.table.sessions[session.id].version == version


@pytest.mark.spec("L-VER-3", "L-VER-4", "TM-VER-SET")
@pytest.mark.parametrize("version", ["2024-11-05", "1999-01-01", "2026-07-28", "draft"])
async def test_unsupported_requested_version_gets_the_latest(
    live_server: StartServer, version: str
) -> None:
    """An initialize that requests a version the server does not speak is not an error: the
    server answers with its latest supported version, 2025-11-25."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version=version)

    assert session.protocol_version == "2025-11-25"


@pytest.mark.spec("T-SESS-6", "T-VER-4")
async def test_server_discover_probe_gets_a_prompt_json_rpc_error(
    live_server: StartServer,
) -> None:
    """A dual-era client's first probe, server/discover with MCP-Protocol-Version 2026-07-28
    and no session, is refused at once with a 4xx and a JSON-RPC error (so the client falls
    back to initialize); it does not hang and allocates no session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        headers = post_headers(protocol_version="2026-07-28")
        message = rpc_request("server/discover", {})
        response = await request(live.url, "POST", headers, json_body(message))

    assert 400 <= response.status < 500
    assert "error" in response.json()
    assert live.table.sessions == {}


@pytest.mark.spec("J-ERR-2", "TM-HTTP-INBAND")
async def test_server_discover_in_a_legacy_session_is_method_not_found(
    live_server: StartServer,
) -> None:
    """Inside a 2025-11-25 session server/discover is an unknown method: a JSON-RPC error
    -32601 answering the request's id."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        answer = await session.call("server/discover", {})

    assert answer["error"]["code"] == -32601
    assert isinstance(answer["error"]["message"], str)


@pytest.mark.spec("L-PING-1")
async def test_ping_returns_an_empty_result(live_server: StartServer) -> None:
    """ping is answered with exactly an empty result object, before and after the
    initialized notification."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        early = await open_session(live.url, send_initialized=False)
        answer_early = await early.call("ping")
        session = await open_session(live.url)
        message = rpc_request("ping", id="ping-1")
        answer = [m for m in rpc_messages(await session.post(message)) if "id" in m]

    assert answer_early == {"jsonrpc": "2.0", "id": answer_early["id"], "result": {}}
    assert answer == [{"jsonrpc": "2.0", "id": "ping-1", "result": {}}]


# -- batches ---------------------------------------------------------------------------


@pytest.mark.spec("J-BATCH-1", "TM-RPC-BATCH")
async def test_2025_03_26_batch_is_answered_on_one_sse_stream(live_server: StartServer) -> None:
    """A 2025-03-26 session may POST a JSON array of requests and notifications: one SSE
    stream carries a response for each request, and none for the notification."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version="2025-03-26")
        batch = [
            rpc_request("ping", id="a"),
            notification("notifications/roots/list_changed"),
            rpc_request("tools/call", {"name": "echo", "arguments": {"text": "b"}}, id="b"),
        ]
        response = await session.post(batch)

    assert response.status == 200
    assert response.content_type == "text/event-stream"
    answers = {m["id"]: m for m in rpc_messages(response)}
    assert sorted(answers) == ["a", "b"]
    assert answers["a"]["result"] == {}
    assert answers["b"]["result"]["content"] == [{"type": "text", "text": "b"}]


@pytest.mark.spec("J-BATCH-1", "TM-HTTP-MODE")
async def test_2025_03_26_batch_in_json_mode_gets_a_json_array(live_server: StartServer) -> None:
    """In JSON response mode a 2025-03-26 batch of requests is answered with a JSON array
    holding one response per request."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(response_mode=ResponseMode.JSON))
        session = await open_session(live.url, protocol_version="2025-03-26")
        response = await session.post([rpc_request("ping", id=1), rpc_request("ping", id=2)])

    assert response.status == 200
    assert response.content_type == "application/json"
    body = response.json()
    assert isinstance(body, list)
    assert sorted(m["id"] for m in body) == [1, 2]
    assert all(m["result"] == {} for m in body)


@pytest.mark.spec("J-BATCH-1", "T-POST-4")
async def test_2025_03_26_batch_of_notifications_gets_202(live_server: StartServer) -> None:
    """A 2025-03-26 batch with no request in it (notifications and responses) needs no
    answer: 202 Accepted with an empty body."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(
            live.url, protocol_version="2025-03-26", send_initialized=False
        )
        response = await session.post(
            [
                notification("notifications/initialized"),
                notification("notifications/roots/list_changed"),
                {"jsonrpc": "2.0", "id": 77, "result": {}},
            ]
        )

    assert response.status == 202
    assert response.body == b""


@pytest.mark.spec("TM-RPC-BATCH")
async def test_initialize_is_never_accepted_in_a_batch(live_server: StartServer) -> None:
    """A batch holding an initialize is refused with 400 and -32600, with or without a
    session, and creates no session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version="2025-03-26")
        created = live.stats()["sessions_created"]
        batch = [rpc_request("initialize", dict(INITIALIZE_PARAMS, protocolVersion="2025-03-26"))]
        alone = await request(live.url, "POST", post_headers(), json_body(batch))
        inside = await session.post([*batch, rpc_request("ping")])

    for response in (alone, inside):
        assert response.status == 400
        assert error_code(response) == -32600
    assert live.stats()["sessions_created"] == created


@pytest.mark.spec("T-POST-3", "J-BATCH-1", "TM-RPC-BATCH")
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
async def test_batch_is_refused_from_2025_06_18_on(live_server: StartServer, version: str) -> None:
    """From 2025-06-18 on a POST body is a single message: a JSON array gets 400 with a
    JSON-RPC error, and none of its requests run."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url, protocol_version=version)
        requests_before = live.table.sessions[session.id].statistics().requests
        response = await session.post([rpc_request("ping"), rpc_request("ping")])

    assert response.status == 400
    assert error_code(response) == -32600
    assert live.table.sessions[session.id].statistics().requests == requests_before


# -- tools ---------------------------------------------------------------------------------


@pytest.mark.spec("U-PAGE-1", "U-PAGE-2", "TM-PAGE-ORDER")
async def test_tools_list_pages_with_opaque_cursors(live_server: StartServer) -> None:
    """tools/list returns pages of the server's size and a nextCursor while more remain;
    following the cursors lists every tool exactly once, and the last page has no
    nextCursor."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(page_size=4))
        session = await open_session(live.url)
        pages = []
        params: dict[str, Any] = {}
        while True:
            page = await session.result("tools/list", params)
            pages.append(page)
            if "nextCursor" not in page:
                break
            assert isinstance(page["nextCursor"], str)
            params = {"cursor": page["nextCursor"]}

    names = [t["name"] for page in pages for t in page["tools"]]
    assert names == sorted(live.server.tools)
    assert len(names) == len(set(names))
    assert all(len(page["tools"]) <= 4 for page in pages)
    assert len(pages) == -(-len(names) // 4)


@pytest.mark.spec("U-PAGE-4", "U-PAGE-2")
@pytest.mark.parametrize("cursor", ["not-a-cursor", "", "eyJrIjoicHJvbXB0cyIsImEiOiJ4In0=", 42])
async def test_invalid_cursor_gets_invalid_params(live_server: StartServer, cursor: Any) -> None:
    """A cursor the server did not issue for this list (garbage, empty, another list's, not a
    string) is answered with JSON-RPC error -32602."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        answer = await session.call("tools/list", {"cursor": cursor})

    assert answer["error"]["code"] == -32602


@pytest.mark.spec("U-TOOL-7")
async def test_unknown_tool_is_a_protocol_error(live_server: StartServer) -> None:
    """Calling a tool that does not exist is a protocol error: JSON-RPC error -32602, not a
    result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        answer = await session.call("tools/call", {"name": "no_such_tool", "arguments": {}})

    assert "result" not in answer
    assert answer["error"]["code"] == -32602


@pytest.mark.spec("U-TOOL-7", "U-TOOL-8")
@pytest.mark.parametrize(
    "arguments", [{}, {"a": "one", "b": 2}, {"a": 1, "b": 2, "c": 3}, {"a": None, "b": 2}]
)
async def test_invalid_tool_arguments_are_a_tool_error(
    live_server: StartServer, arguments: dict[str, Any]
) -> None:
    """Arguments that fail the tool's inputSchema are reported in the result with isError
    true and a message the model can read, not as a protocol error."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        result = await session.result("tools/call", {"name": "add", "arguments": arguments})

    assert result["isError"] is True
    assert result["content"][0]["type"] == "text"
    assert result["content"][0]["text"]
    assert "structuredContent" not in result


@pytest.mark.spec("U-TOOL-7", "TM-TOOL-RAISE", "U-TOOL-8")
async def test_tool_error_is_a_result_with_is_error(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A ToolError raised by a tool is a result with isError true carrying its message; an
    unexpected exception is too, but its text stays in the server log, under the reference
    the result names; and the session keeps working."""
    server = Server("errors")

    @server.tool()
    async def refuse() -> str:
        """Always refuses."""
        raise ToolError("refused on purpose")

    @server.tool()
    async def crash() -> str:
        """Always crashes."""
        raise RuntimeError("boom: /srv/secret.db")

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        session = await open_session(live.url)
        refused = await session.result("tools/call", {"name": "refuse", "arguments": {}})
        crashed = await session.result("tools/call", {"name": "crash", "arguments": {}})
        pong = await session.result("ping")

    assert refused == {
        "content": [{"type": "text", "text": "refused on purpose"}],
        "isError": True,
    }
    [block] = crashed["content"]
    shown = re.fullmatch(
        r"Tool crash failed with an unexpected error \(reference ([0-9a-f]{8})\)\.",
        block["text"],
    )
    assert shown is not None and crashed["isError"] is True, crashed
    assert "secret" not in json.dumps(crashed)
    [logged] = [r for r in caplog.records if shown.group(1) in r.getMessage()]
    assert logged.exc_info is not None and "boom: /srv/secret.db" in str(logged.exc_info[1])
    assert pong == {}


@pytest.mark.spec("U-TOOL-6", "U-TOOL-5", "TM-TOOL-WRAP")
async def test_structured_output_matches_the_output_schema(live_server: StartServer) -> None:
    """A tool with an outputSchema returns structuredContent conforming to it, and its
    value as JSON in a text block (a number wrapped as {"result": ...} is the number there,
    TM-TOOL-WRAP)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        listed = await session.result("tools/list")
        result = await session.result("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})

    [add] = [t for t in listed["tools"] if t["name"] == "add"]
    assert add["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "number"}},
        "required": ["result"],
    }
    assert result["structuredContent"] == {"result": 5}
    assert result.get("isError", False) is False
    [text] = result["content"]
    assert 5 == json.loads(text["text"])


@pytest.mark.spec("TM-TOOL-SCHEMA", "U-TOOL-6")
async def test_result_breaking_its_own_output_schema_is_an_internal_error(
    live_server: StartServer,
) -> None:
    """A tool whose structured result does not match its own outputSchema is never sent as
    a result: the call gets JSON-RPC error -32603, and the session keeps working."""
    server = Server("schema")

    @server.tool()
    async def liar() -> int:
        """Claims to return an integer."""
        return "not an integer"  # type: ignore[return-value]

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        session = await open_session(live.url)
        [tool] = (await session.result("tools/list"))["tools"]
        answer = await session.call("tools/call", {"name": "liar", "arguments": {}})
        pong = await session.result("ping")

    assert tool["outputSchema"]["properties"]["result"]["type"] == "integer"
    assert "result" not in answer
    assert answer["error"]["code"] == -32603
    assert pong == {}


# -- disconnects, polling and resumption ----------------------------------------------------


@pytest.mark.spec("T-PSSE-12", "T-RESUME-4", "T-RESUME-5", "T-RESUME-7")
async def test_dropped_post_stream_is_not_cancelled_and_resumes_by_get(
    live_server: StartServer,
) -> None:
    """When the client drops a POST's SSE connection mid-request, the request keeps running
    (a disconnect is not a cancellation). A GET with the last event id it saw as
    Last-Event-ID resumes that stream: it replays exactly the messages after that id, and
    the response arrives there."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        call = countdown_call(4, 0.1, rid="drop-1")
        async with open_stream(live.url, "POST", session.headers(), json_body(call)) as post:
            priming = await post.next_event()
            assert priming is not None and priming.id and priming.data == ""
            first = await post.next_event(comments=False)
            assert first is not None and first.id and first.data
            await post.aclose()
        state = live.table.sessions[session.id]
        await wait_until(lambda: not state.views)
        assert "drop-1" in state.inflight

        resumed: list[dict[str, Any]] = []
        async with session.open_get([("last-event-id", first.id)]) as get:
            assert get.status == 200
            while not resumed or "id" not in resumed[-1]:
                resumed.append(await get.next_message())
            ended = await get.next_event()

    progress = [m["params"]["progress"] for m in resumed if "method" in m]
    seen = json.loads(first.data)["params"]["progress"]
    assert seen == 1
    assert progress == [2, 3, 4]
    assert resumed[-1] == {
        "jsonrpc": "2.0",
        "id": "drop-1",
        "result": {"content": [{"type": "text", "text": "liftoff"}]},
    }
    assert ended is None  # the resumed request stream ends after its response


@pytest.mark.spec("T-PSSE-2", "T-PSSE-4", "T-RESUME-7")
async def test_server_closed_connection_sends_retry_and_is_resumable(
    live_server: StartServer,
) -> None:
    """A server that closes a POST's connection before the response (SSE polling) has sent
    an event id first and sends a retry field before closing; resuming with GET and that
    id delivers the response."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        session = await open_session(live.url)
        call = rpc_request("tools/call", {"name": "test_reconnection", "arguments": {}})
        async with open_stream(live.url, "POST", session.headers(), json_body(call)) as post:
            events = [e async for e in post.events(comments=False)]
        # The server ends the response properly (final chunk), then closes.
        assert post.ended and not post.truncated
        [priming, retry] = events
        assert priming.id and priming.data == ""
        assert retry.retry == live.app.config.retry_ms and retry.data is None

        async with session.open_get([("last-event-id", priming.id)]) as get:
            answer = await get.next_message()

    assert answer["id"] == call["id"]
    assert answer["result"]["content"][0]["text"] == "Reconnection test completed successfully"


@pytest.mark.spec("T-RESUME-5", "T-GET-8", "TM-GET-FRESH")
async def test_get_stream_messages_sent_while_disconnected_are_replayed(
    live_server: StartServer,
) -> None:
    """A message for the standalone stream that is produced while no GET is connected is
    delivered when the client resumes the GET stream with Last-Event-ID."""
    server = Server("replay")

    async def later() -> str:
        """Added later."""
        return "later"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        session = await open_session(live.url)
        async with session.open_get() as get:
            priming = await get.next_event()
            assert priming is not None and priming.id
        state = live.table.sessions[session.id]
        await wait_until(lambda: not state.views)
        server.add_tool(later)
        async with session.open_get([("last-event-id", priming.id)]) as get:
            message = await get.next_message()

    assert message["method"] == "notifications/tools/list_changed"


@pytest.mark.spec("T-MULTI-2", "T-GET-5", "T-GET-6", "T-PSSE-8")
async def test_each_message_goes_on_exactly_one_stream(live_server: StartServer) -> None:
    """With a POST stream and the GET stream open at once, request-related progress goes
    only on the POST stream and a list change only on the GET stream: nothing is
    broadcast to both."""
    server = Server("multi")

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Reports progress, then waits to be released."""
        await ctx.report_progress(1, 2)
        await release.wait()
        await ctx.report_progress(2, 2)
        return "done"

    async def extra() -> str:
        """Added while the others run."""
        return "extra"

    release = trio.Event()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        session = await open_session(live.url)
        call = rpc_request(
            "tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}}
        )
        async with (
            session.open_get() as get,
            open_stream(live.url, "POST", session.headers(), json_body(call)) as post,
        ):
            await get.next_event()  # priming
            first = await post.next_message()
            server.add_tool(extra)
            on_get = await get.next_message()
            release.set()
            rest = [json.loads(e.data) async for e in post.events(comments=False) if e.data]
            await get.aclose()

    on_post = [first, *rest]
    assert [m.get("method") for m in on_post] == [
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert on_post[-1]["result"]["content"] == [{"type": "text", "text": "done"}]
    assert on_get == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


# -- limits --------------------------------------------------------------------------------


@pytest.mark.spec("TM-SESS-CAP", "T-SESS-7")
async def test_session_cap_evicts_the_least_recently_used_idle_session(
    live_server: StartServer,
) -> None:
    """At max_sessions, a new initialize ends the least recently used idle session (whose
    id then gets 404); when no session is idle, initialize is refused with 503 and
    Retry-After, and the open sessions are kept."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(max_sessions=2))
        oldest = await open_session(live.url)
        newer = await open_session(live.url)
        await newer.result("ping")
        third = await open_session(live.url)
        evicted = await oldest.post(rpc_request("ping"))
        async with newer.open_get() as g1, third.open_get() as g2:
            await g1.next_event()
            await g2.next_event()
            busy = await request(live.url, "POST", post_headers(), initialize_body())
            assert sorted(live.table.sessions) == sorted([newer.id, third.id])
            await g1.aclose()
            await g2.aclose()

    assert evicted.status == 404
    assert busy.status == 503
    assert busy.header("retry-after")
    assert "error" in busy.json()
    assert busy.header("mcp-session-id") is None


@pytest.mark.spec("TM-SESS-INFLIGHT")
async def test_requests_beyond_the_inflight_limit_get_503(live_server: StartServer) -> None:
    """A session may have at most max_inflight_requests requests running; a POST beyond
    that is answered 503 with Retry-After: 1 and error -31002, and is accepted again once
    the running ones finish."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(max_inflight_requests=2))
        session = await open_session(live.url)
        state = live.table.sessions[session.id]
        async with trio.open_nursery() as nursery:
            for i in range(2):
                nursery.start_soon(session.post, countdown_call(3, 0.1, rid=f"busy-{i}"))
            await wait_until(lambda: len(state.inflight) == 2)
            refused = await session.post(rpc_request("ping"))
        accepted = await session.result("ping")

    assert refused.status == 503
    assert refused.header("retry-after") == "1"
    assert error_code(refused) == -31002
    assert accepted == {}


@pytest.mark.spec("TM-SESS-IDLE", "T-SESS-7")
async def test_idle_sessions_expire_and_busy_ones_do_not(
    live_server: StartServer, jumping_clock: trio.testing.MockClock
) -> None:
    """A session with nothing in flight and no open connection ends after session_idle_ttl
    (its id then gets 404); a session holding an open GET stream is not idle and lives
    on."""
    # A TTL longer than any machine takes to open the busy session's stream (with 0.3 s, a
    # process waiting for a CPU could let that session expire first); the clock jumps over
    # it once the stream is open.
    ttl = 60.0
    with trio.fail_after(TIMEOUT + ttl):
        live = await live_server(config=ServerConfig(session_idle_ttl=ttl))
        idle = await open_session(live.url)
        busy = await open_session(live.url)
        async with busy.open_get() as get:
            await get.next_event()
            jumping_clock.jump(ttl)
            await wait_until(lambda: idle.id not in live.table.sessions)
            expired = await idle.post(rpc_request("ping"))
            alive = await busy.result("ping")

    assert expired.status == 404
    assert alive == {}
    assert live.stats()["sessions_expired"] >= 1


@pytest.mark.spec("TM-SESS-IDLE")
async def test_sessions_never_initialized_expire_sooner(live_server: StartServer) -> None:
    """A session whose client never sent notifications/initialized ends after the shorter
    uninitialized_ttl; an initialized one is kept until session_idle_ttl."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(uninitialized_ttl=0.3))
        silent = await open_session(live.url, send_initialized=False)
        polite = await open_session(live.url)
        await wait_until(lambda: silent.id not in live.table.sessions)
        expired = await silent.post(rpc_request("ping"))
        alive = await polite.result("ping")

    assert expired.status == 404
    assert alive == {}
