# Hostile and broken input, end to end over real hypercorn. Every test checks three things:
# the refusal has the right 4xx status and a JSON-RPC error body with the right code (never
# a 500), and another healthy session of the same server still works afterwards. An autouse
# fixture also fails any test during which the server logged an error.
from __future__ import annotations

import json
from typing import Any

import attrs
import h11
import pytest
import trio
from support.client import (
    McpSession,
    Response,
    dumps,
    open_session,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.fixtures import LiveServer, StartServer, wait_until

from trio_mcp import ResponseMode, ServerConfig

TIMEOUT = 10

# Every test here fails if the server logged an error while it ran.
pytestmark = pytest.mark.usefixtures("no_server_errors")

INITIALIZE = rpc_request(
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bad-input", "version": "0"},
    },
)


@attrs.frozen
class Env:
    live: LiveServer
    victim: McpSession
    """The session the bad input is sent to (when it names one)."""
    healthy: McpSession
    """A bystander session that must not notice anything."""

    async def check_undisturbed(self, *, victim_alive: bool = True) -> None:
        """The bystander (and, unless it was meant to end, the victim) still works."""
        sessions = [self.healthy, self.victim] if victim_alive else [self.healthy]
        for session in sessions:
            assert await session.result("ping") == {}
            echoed = await session.result(
                "tools/call", {"name": "echo", "arguments": {"text": "still here"}}
            )
            assert echoed["content"] == [{"type": "text", "text": "still here"}]


async def make_env(live_server: StartServer, config: ServerConfig | None = None) -> Env:
    live = await live_server(config=config)
    return Env(live=live, victim=await open_session(live.url), healthy=await open_session(live.url))


@pytest.fixture
async def env(live_server: StartServer) -> Env:
    with trio.fail_after(TIMEOUT):
        return await make_env(live_server)


def assert_refused(response: Response, status: int, code: int) -> dict[str, Any]:
    """``response`` refuses the request with ``status`` and a JSON-RPC error ``code``."""
    assert response.status == status, (response.status, response.body)
    assert response.content_type == "application/json"
    body: dict[str, Any] = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == code, body
    assert type(body["error"]["code"]) is int  # J-ERR-3
    message = body["error"]["message"]
    # J-ERR-4 (SHOULD): one concise sentence.
    assert isinstance(message, str) and message.endswith(".")
    assert "\n" not in message and ". " not in message[:-1], message
    assert "result" not in body
    return body


async def post_raw(
    session: McpSession, body: bytes, headers: list[tuple[str, str]] | None = None
) -> Response:
    return await request(session.url, "POST", headers or session.headers(), body)


# -- the body ----------------------------------------------------------------------------


@pytest.mark.spec("T-POST-5", "T-POST-6")
@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
        b"",
        b"nul",
        b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark is not JSON
        b"[" * 100_000,  # nesting deep enough to overflow a recursive parser
    ],
    ids=["brace", "truncated", "empty", "bare-word", "bom", "deep-nesting"],
)
async def test_malformed_json_gets_parse_error(env: Env, body: bytes) -> None:
    """A body that is not JSON is refused with 400 and JSON-RPC error -32700 (Parse error),
    whose id is absent because none could be read."""
    with trio.fail_after(TIMEOUT):
        response = await post_raw(env.victim, body)
        await env.check_undisturbed()

    refused = assert_refused(response, 400, -32700)
    assert "id" not in refused


@pytest.mark.spec("T-GEN-1", "T-POST-5")
@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\xff"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "\xc3\x28"}',
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'.encode("utf-16"),
    ],
    ids=["stray-byte", "bad-sequence", "utf-16"],
)
async def test_invalid_utf8_gets_parse_error(env: Env, body: bytes) -> None:
    """JSON-RPC messages are UTF-8: a body that is not valid UTF-8 is refused with 400 and
    -32700."""
    with trio.fail_after(TIMEOUT):
        response = await post_raw(env.victim, body)
        await env.check_undisturbed()

    assert_refused(response, 400, -32700)


@pytest.mark.spec("T-POST-3", "T-POST-5", "J-MSG-1", "J-ERR-3", "J-ERR-4")
@pytest.mark.parametrize(
    "message",
    [
        42,
        "ping",
        None,
        True,
        {},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "result": {}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "x"}},
        {"jsonrpc": "2.0", "id": 1, "result": [1]},
    ],
    ids=[
        "number",
        "string",
        "null",
        "bool",
        "empty-object",
        "no-jsonrpc",
        "jsonrpc-1.0",
        "method-not-string",
        "method-empty",
        "params-array",
        "request-and-response",
        "neither",
        "result-and-error",
        "error-code-not-int",
        "result-not-object",
    ],
)
async def test_body_that_is_not_a_message_gets_invalid_request(env: Env, message: Any) -> None:
    """A body that is JSON but not one valid JSON-RPC message is refused with 400 and
    -32600 (Invalid Request)."""
    with trio.fail_after(TIMEOUT):
        response = await env.victim.post(message)
        await env.check_undisturbed()

    assert_refused(response, 400, -32600)


@pytest.mark.spec("J-ID-1", "J-ID-2")
@pytest.mark.parametrize("rid", [None, True, 1.5, [1], {"a": 1}])
async def test_request_id_that_is_not_string_or_integer_is_refused(env: Env, rid: Any) -> None:
    """Request ids are strings or integers and never null: any other id is refused with 400
    and -32600, and no handler runs."""
    with trio.fail_after(TIMEOUT):
        state = env.live.table.sessions[env.victim.id]
        before = state.statistics().requests
        response = await env.victim.post({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        await env.check_undisturbed()

    refused = assert_refused(response, 400, -32600)
    assert "id" not in refused
    assert state.statistics().requests == before + 2  # only the two of check_undisturbed


@pytest.mark.spec("J-NOTIF-1", "J-NOTIF-2", "T-POST-4")
async def test_request_shaped_message_without_id_is_a_notification(env: Env) -> None:
    """A message with a method and no id is a notification, whatever its method: it gets 202
    with no body, and no response is ever sent for it."""
    with trio.fail_after(TIMEOUT):
        response = await env.victim.post({"jsonrpc": "2.0", "method": "tools/list"})
        await env.check_undisturbed()

    assert response.status == 202
    assert response.body == b""


@pytest.mark.spec("J-ERR-2", "J-RES-1", "TM-HTTP-INBAND")
async def test_unknown_method_gets_method_not_found(env: Env) -> None:
    """A request for a method the server does not have is answered (as a JSON-RPC response
    with the request's id) with error -32601."""
    with trio.fail_after(TIMEOUT):
        answer = await env.victim.call("no/such/method", {})
        await env.check_undisturbed()

    assert answer["error"]["code"] == -32601
    assert "result" not in answer


@pytest.mark.spec("J-ERR-2", "U-LOG-4", "TM-HTTP-INBAND")
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {}),
        ("tools/call", {"name": 5}),
        ("tools/call", {"name": "echo", "arguments": [1]}),
        ("tools/list", {"cursor": {"x": 1}}),
        ("logging/setLevel", {"level": "loud"}),
        ("logging/setLevel", {}),
    ],
    ids=["no-name", "name-not-string", "arguments-array", "cursor-object", "bad-level", "no-level"],
)
async def test_invalid_params_get_invalid_params(
    env: Env, method: str, params: dict[str, Any]
) -> None:
    """A known method called with unusable params is answered with error -32602."""
    with trio.fail_after(TIMEOUT):
        answer = await env.victim.call(method, params)
        await env.check_undisturbed()

    assert answer["error"]["code"] == -32602


@pytest.mark.spec("T-POST-5", "TM-HTTP-SIZE")
async def test_body_over_the_limit_gets_413(live_server: StartServer) -> None:
    """A POST body larger than max_body_bytes is refused with 413 Payload Too Large."""
    with trio.fail_after(TIMEOUT):
        env = await make_env(live_server, ServerConfig(max_body_bytes=2048))
        big = rpc_request("tools/call", {"name": "echo", "arguments": {"text": "x" * 4096}})
        response = await env.victim.post(big)
        await env.check_undisturbed()

    assert_refused(response, 413, -32600)


@pytest.mark.spec("T-POST-5", "TM-HTTP-SIZE")
async def test_endless_chunked_body_gets_413_before_it_ends(live_server: StartServer) -> None:
    """A chunked POST body that grows past max_body_bytes is refused with 413 as soon as the
    limit is passed, while the client is still sending: the server neither waits for the
    end of the body nor buffers it."""
    with trio.fail_after(TIMEOUT):
        env = await make_env(live_server, ServerConfig(max_body_bytes=1000))
        sock = await trio.open_tcp_stream(env.live.host, env.live.port)
        async with sock:
            conn = h11.Connection(h11.CLIENT)
            headers = [
                ("host", f"{env.live.host}:{env.live.port}"),
                ("transfer-encoding", "chunked"),
                *env.victim.headers(),
            ]
            await sock.send_all(
                conn.send(h11.Request(method="POST", target="/mcp", headers=headers))
            )
            for _ in range(3):
                await sock.send_all(conn.send(h11.Data(data=b" " * 600)) or b"")
            # No EndOfMessage: the body never ends.
            events: list[Any] = []
            while not events or not isinstance(events[-1], h11.EndOfMessage):
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await sock.receive_some(65536))
                else:
                    events.append(event)
        await env.check_undisturbed()

    [head, *data, _] = events
    response = Response(
        status=head.status_code,
        headers=tuple((k.decode(), v.decode()) for k, v in head.headers),
        body=b"".join(bytes(d.data) for d in data),
    )
    assert_refused(response, 413, -32600)


# -- headers -------------------------------------------------------------------------------


@pytest.mark.spec("T-POST-5", "TM-HTTP-CTYPE")
@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"],
)
async def test_wrong_content_type_gets_415(env: Env, content_type: str | None) -> None:
    """A POST whose body is not declared as JSON in UTF-8 is refused with 415 Unsupported
    Media Type."""
    headers = [h for h in env.victim.headers() if h[0] != "content-type"]
    if content_type is not None:
        headers.append(("content-type", content_type))
    with trio.fail_after(TIMEOUT):
        response = await post_raw(env.victim, dumps(rpc_request("ping")), headers)
        await env.check_undisturbed()

    assert_refused(response, 415, -32600)


@pytest.mark.spec("T-POST-2", "T-POST-5", "TM-HTTP-ACCEPT")
@pytest.mark.parametrize(
    "accept",
    [
        None,
        "application/json",
        "text/event-stream",
        "text/html",
        "application/json, text/event-stream;q=0",
    ],
)
async def test_post_accept_without_both_types_gets_406(env: Env, accept: str | None) -> None:
    """A POST whose Accept header does not list both application/json and text/event-stream
    is refused with 406 Not Acceptable."""
    headers = [h for h in env.victim.headers() if h[0] != "accept"]
    if accept is not None:
        headers.append(("accept", accept))
    with trio.fail_after(TIMEOUT):
        response = await post_raw(env.victim, dumps(rpc_request("ping")), headers)
        await env.check_undisturbed()

    assert_refused(response, 406, -32600)


@pytest.mark.spec("T-GET-2", "T-GET-3", "TM-HTTP-ACCEPT")
@pytest.mark.parametrize("accept", [None, "application/json", "text/plain"])
async def test_get_accept_without_event_stream_gets_406(env: Env, accept: str | None) -> None:
    """A GET whose Accept header does not list text/event-stream is refused with 406 and
    opens no stream."""
    headers = [("mcp-session-id", env.victim.id)]
    if accept is not None:
        headers.append(("accept", accept))
    with trio.fail_after(TIMEOUT):
        response = await request(env.live.url, "GET", headers)
        await env.check_undisturbed()

    assert_refused(response, 406, -32600)
    assert env.live.table.sessions[env.victim.id].views == {}


@pytest.mark.spec("T-EP-1", "TM-HTTP-METHOD")
@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS"])
async def test_other_http_methods_get_405(env: Env, method: str) -> None:
    """The endpoint serves POST, GET and DELETE; other methods get 405 Method Not Allowed
    with an Allow header."""
    with trio.fail_after(TIMEOUT):
        response = await request(env.live.url, method, env.victim.headers(), b"{}")
        await env.check_undisturbed()

    assert_refused(response, 405, -32600)
    allow = {m.strip() for m in (response.header("allow") or "").split(",")}
    assert allow == {"GET", "POST", "DELETE"}


# -- sessions and lifecycle ------------------------------------------------------------


@pytest.mark.spec("T-SESS-6", "L-INIT-1")
@pytest.mark.parametrize("method", ["tools/list", "ping"])
async def test_request_before_initialize_gets_400_and_no_session(env: Env, method: str) -> None:
    """A request sent before any initialize (so with no session id) is refused with 400; the
    response carries no MCP-Session-Id and no session is created."""
    created = env.live.stats()["sessions_created"]
    with trio.fail_after(TIMEOUT):
        response = await request(
            env.live.url, "POST", post_headers(), dumps(rpc_request(method, id="early"))
        )
        await env.check_undisturbed()

    refused = assert_refused(response, 400, -32600)
    assert refused["id"] == "early"
    assert response.header("mcp-session-id") is None
    assert env.live.stats()["sessions_created"] == created
    assert len(env.live.table.sessions) == 2


@pytest.mark.spec("L-INIT-1", "TM-LIFE-REINIT")
async def test_second_initialize_on_a_session_is_refused(env: Env) -> None:
    """initialize happens once per session: a second one on a live session is refused with
    400 and a JSON-RPC error that answers its id; the session keeps its negotiated state."""
    with trio.fail_after(TIMEOUT):
        again = dict(INITIALIZE, id="again")
        response = await env.victim.post(again)
        await env.check_undisturbed()

    refused = assert_refused(response, 400, -32600)
    assert refused["id"] == "again"
    assert response.header("mcp-session-id") is None
    assert env.live.table.sessions[env.victim.id].version == "2025-11-25"


@pytest.mark.spec("L-INIT-2", "TM-LIFE-INIT")
@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"protocolVersion": 20251125, "capabilities": {}, "clientInfo": {}},
        {"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": {}},
    ],
    ids=["no-params", "empty", "version-not-string", "capabilities-array"],
)
async def test_initialize_with_bad_params_gets_invalid_params(
    env: Env, params: dict[str, Any] | None
) -> None:
    """An initialize without a string protocolVersion, an object capabilities and an object
    clientInfo is answered in-band, HTTP 200 with a -32602 JSON-RPC error, and creates no
    session."""
    created = env.live.stats()["sessions_created"]
    with trio.fail_after(TIMEOUT):
        response = await request(
            env.live.url, "POST", post_headers(), dumps(rpc_request("initialize", params, id=9))
        )
        await env.check_undisturbed()

    refused = assert_refused(response, 200, -32602)
    assert refused["id"] == 9
    assert response.header("mcp-session-id") is None
    assert env.live.stats()["sessions_created"] == created


@pytest.mark.spec("TM-LIFE-INIT", "L-INIT-3")
async def test_initialize_without_capabilities_or_client_info_counts_them_empty(
    env: Env,
) -> None:
    """An initialize that has a protocolVersion but leaves out capabilities and clientInfo
    is served, as if both were empty objects."""
    with trio.fail_after(TIMEOUT):
        message = rpc_request("initialize", {"protocolVersion": "2025-11-25"}, id="bare")
        response = await request(env.live.url, "POST", post_headers(), dumps(message))
        await env.check_undisturbed()

    assert response.status == 200
    assert response.header("mcp-session-id")
    [answer] = [m for m in rpc_messages(response) if m.get("id") == "bare"]
    assert answer["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.spec("T-SESS-7", "TM-SESS-UNKNOWN", "TM-HTTP-PARSER")
@pytest.mark.parametrize(
    "session_id", ["unknown", "x" * 32, "../../etc/passwd", "\x7fdel", "é-latin1"]
)
async def test_unknown_session_id_gets_404(env: Env, session_id: str) -> None:
    """A session id the server never issued (or cannot have issued) gets 404; one with a
    control character (DEL) is no field value at all (RFC 9110 §5.5), and trio-mcp's own
    server's parser refuses the request with 400 before any session is looked up
    (TM-HTTP-PARSER: where h11 lets it pass, the stricter answer is kept)."""
    headers = post_headers(session_id=session_id, protocol_version="2025-11-25")
    with trio.fail_after(TIMEOUT):
        response = await request(env.live.url, "POST", headers, dumps(rpc_request("ping")))
        await env.check_undisturbed()

    parser_refuses = "\x7f" in session_id and env.live.http_server == "trio-mcp"
    assert_refused(response, 400 if parser_refuses else 404, -32600)


@pytest.mark.spec("T-POST-4", "U-CANCEL-9")
@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 999, "error": {"code": -32603, "message": "no"}},
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}},
        {"jsonrpc": "2.0", "id": "zzz", "result": {"anything": 1}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled"},
    ],
    ids=[
        "error",
        "error-no-id",
        "error-null-id",
        "result",
        "cancel-unknown",
        "cancel-malformed",
        "cancel-no-params",
    ],
)
async def test_stray_responses_and_notifications_are_accepted_and_ignored(
    env: Env, message: dict[str, Any]
) -> None:
    """A response (result or error) to a request the server never sent, and a cancellation
    of an unknown request, are accepted with 202 and no body, and otherwise ignored."""
    with trio.fail_after(TIMEOUT):
        response = await env.victim.post(message)
        await env.check_undisturbed()

    assert response.status == 202
    assert response.body == b""


@pytest.mark.spec("J-ID-3", "TM-RPC-DUPID")
async def test_request_id_reused_while_in_flight_is_refused(env: Env) -> None:
    """A request id that is still in flight in the session cannot be reused: the second
    request is refused with an error, and the first one still gets its own response."""
    with trio.fail_after(TIMEOUT):
        first = rpc_request("tools/call", {"name": "countdown", "arguments": {"n": 3}}, id="dup")
        async with trio.open_nursery() as nursery:
            results: dict[str, Response] = {}

            async def send_first() -> None:
                results["first"] = await env.victim.post(first)

            nursery.start_soon(send_first)
            state = env.live.table.sessions[env.victim.id]
            await wait_until(lambda: "dup" in state.inflight)
            results["second"] = await env.victim.post(rpc_request("ping", id="dup"))
        await env.check_undisturbed()

    assert_refused(results["second"], 400, -32600)
    [answer] = [m for m in rpc_messages(results["first"]) if m.get("id") == "dup"]
    assert answer["result"]["content"] == [{"type": "text", "text": "liftoff"}]
    # The refused POST left nothing behind: no stream waits for a response that never comes.
    assert all(not s.open_requests for s in state.log.streams.values())


@pytest.mark.spec("J-ID-3", "J-BATCH-1", "TM-RPC-DUPID")
@pytest.mark.parametrize("mode", [ResponseMode.SSE, ResponseMode.JSON])
async def test_batch_repeating_a_request_id_is_refused(
    live_server: StartServer, mode: ResponseMode
) -> None:
    """A 2025-03-26 batch holding two requests with the same id is refused as a whole with
    400 and -32600: their responses could not be told apart. Neither request runs."""
    with trio.fail_after(TIMEOUT):
        env = await make_env(live_server, ServerConfig(response_mode=mode))
        session = await open_session(env.live.url, protocol_version="2025-03-26")
        state = env.live.table.sessions[session.id]
        before = (state.statistics().requests, len(state.log.streams))
        echo = {"name": "echo", "arguments": {"text": "x"}}
        response = await session.post(
            [rpc_request("ping", id=1), rpc_request("tools/call", echo, id=1)]
        )
        after = (state.statistics().requests, len(state.log.streams))
        assert await session.result("ping") == {}
        await env.check_undisturbed()

    refused = assert_refused(response, 400, -32600)
    assert refused["id"] == 1
    assert after == before


# -- GET -----------------------------------------------------------------------------------


@pytest.mark.spec("T-RESUME-5", "TM-RES-MALFORMED")
@pytest.mark.parametrize("last_event_id", ["garbage", "", "0", "1-1", "x" * 5000])
async def test_garbage_last_event_id_gets_400(env: Env, last_event_id: str) -> None:
    """A GET whose Last-Event-ID is not an event id this server issued for this session is
    refused with 400 and a JSON-RPC error; no stream is attached."""
    with trio.fail_after(TIMEOUT):
        async with env.victim.open_get([("last-event-id", last_event_id)]) as stream:
            status = stream.status
            body = json.loads(await stream.read_body())
        await env.check_undisturbed()

    assert status == 400
    assert body["error"]["code"] == -32600
    assert env.live.table.sessions[env.victim.id].views == {}


@pytest.mark.spec("T-RESUME-6", "T-SEC-11", "TM-RES-MALFORMED")
async def test_last_event_id_of_another_session_gets_400(env: Env) -> None:
    """An event id issued in one session does not resume anything in another: the GET is
    refused with 400, and no event of the other session is sent."""
    with trio.fail_after(TIMEOUT):
        response = await env.healthy.post(rpc_request("ping"))
        [priming_id] = [e.id for e in response.events() if e.id and e.data == ""]
        async with env.victim.open_get([("last-event-id", priming_id)]) as stream:
            status = stream.status
            body = json.loads(await stream.read_body())
        await env.check_undisturbed()

    assert status == 400
    assert body["error"]["code"] == -32600
