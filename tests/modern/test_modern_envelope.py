# The 2026-07-28 envelope end to end: real hypercorn on loopback, raw h11 requests built by
# tests/support/modern.py. What a modern request is answered before (or instead of) running
# anything: server/discover, the methods of the legacy era, GET, notifications, Origin, the
# request id in every error, Mcp-Param headers and missing client capabilities.
from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from support.client import Response, open_session, open_stream, request, rpc_request
from support.fixtures import StartServer
from support.modern import (
    CLIENT_INFO,
    META_SERVER_INFO,
    MODERN,
    b64_header,
    call_tool,
    messages_of,
    modern_headers,
    modern_meta,
    modern_notification,
    modern_request,
    post,
)

from trio_mcp import Context, InputRequest, Server, sampling_request
from trio_mcp.protocol import ErrorCode, RemoteProtocolError
from trio_mcp.runtime._stats import as_dict

TIMEOUT = 10

DEMO_INFO = {"name": "trio-mcp-demo", "version": "0.1.0"}


def error_of(response: Response, rid: Any) -> dict[str, Any]:
    """The JSON-RPC error of a complete JSON answer, checking that it echoes ``rid`` with its
    JSON type (1 and "1" are different ids)."""
    assert response.content_type == "application/json", (response.status, response.headers)
    body = response.json()
    assert "2.0" == body["jsonrpc"]
    assert "result" not in body, body
    assert rid == body["id"] and type(rid) is type(body["id"]), (rid, body)
    error: dict[str, Any] = body["error"]
    assert isinstance(error["code"], int) and isinstance(error["message"], str), error
    return error


def no_session(response: Response) -> None:
    assert response.header("mcp-session-id") is None, response.headers


# -- server/discover -----------------------------------------------------------------------------


@pytest.mark.spec(
    "ML-VER-2", "ML-DISC-1", "ML-META-4", "MJ-RES-3", "MU-CACHE-1", "MU-CACHE-2",
    "TM-CACHE-DEFAULT", "MU-LOG-2", "MU-TOOL-1", "MU-PROMPT-1", "ML-STATE-1",
)
async def test_discover_names_versions_capabilities_instructions_and_cache_hints(
    live_server: StartServer,
) -> None:
    """server/discover answers 200 JSON with the complete DiscoverResult of the demo."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = modern_request("server/discover", id="discover-1")
        response = await post(live.url, message)

    assert 200 == response.status
    assert "application/json" == response.content_type
    no_session(response)
    body = response.json()
    assert {"jsonrpc", "id", "result"} == set(body)
    assert "discover-1" == body["id"]
    result = body["result"]
    assert "complete" == result["resultType"]
    assert [MODERN] == result["supportedVersions"]
    assert {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
        "logging": {},
        # The demo has tools that may run as tasks (spec/tasks.md TK-DISCOVER), and serves
        # skills (spec/extensions.md SK-CAPABILITY).
        "extensions": {
            "io.modelcontextprotocol/tasks": {},
            "io.modelcontextprotocol/skills": {"directoryRead": True},
            # and has an app (spec/apps.md UI-CAP).
            "io.modelcontextprotocol/ui": {},
        },
    } == result["capabilities"]
    assert (
        "A demonstration server: small tools that each show one MCP feature."
        == result["instructions"]
    )
    assert 0 == result["ttlMs"] and isinstance(result["ttlMs"], int)
    assert "private" == result["cacheScope"]
    assert {META_SERVER_INFO: DEMO_INFO} == result["_meta"]
    assert {
        "resultType", "supportedVersions", "capabilities", "instructions", "ttlMs",
        "cacheScope", "_meta",
    } == set(result)


@pytest.mark.spec(
    "ML-COMPAT-1", "ML-COMPAT-3", "ML-STATE-1", "ML-STATE-2", "TM-ERA-BODY", "MT-EP-1",
)
async def test_no_modern_answer_carries_a_session_and_no_legacy_session_is_made(
    live_server: StartServer,
) -> None:
    """No modern answer of any kind names a session, and none creates a legacy session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        messages: list[dict[str, Any]] = [
            modern_request("server/discover"),
            modern_request("tools/list"),
            modern_request("prompts/list"),
            modern_request("resources/list"),
            modern_request("resources/read", {"uri": "test://static-text"}),
            call_tool("echo", {"text": "hi"}),
            call_tool("test_tool_with_progress", progress_token="p"),
            call_tool("test_streaming_elicitation", capabilities={"elicitation": {}}),
            call_tool("test_missing_capability"),
            modern_request("ping"),
            modern_request("initialize", {"protocolVersion": "2025-11-25"}),
            modern_notification("notifications/initialized"),
        ]
        responses = [await post(live.url, m) for m in messages]

    assert [200, 200, 200, 200, 200, 200, 200, 200, 400, 404, 404, 202] == [
        r.status for r in responses
    ]
    for response in responses:
        no_session(response)
    assert {} == dict(live.table.sessions)
    assert 0 == as_dict(live.app.runtime.statistics())["sessions_created"]


# -- what the modern era does not serve ------------------------------------------------------------


@pytest.mark.spec("MT-HDR-4", "TM-ERA-REMOVED", "MJ-ERR-1", "ML-COMPAT-3")
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": CLIENT_INFO}),
        ("ping", {}),
        ("logging/setLevel", {"level": "debug"}),
        ("resources/subscribe", {"uri": "test://watched-resource"}),
        ("resources/unsubscribe", {"uri": "test://watched-resource"}),
        ("tasks/list", {}),
        ("no/such/method", {}),
    ],
)
async def test_legacy_and_unknown_methods_get_404_method_not_found(
    live_server: StartServer, method: str, params: dict[str, Any]
) -> None:
    """A legacy-only or unknown method in a modern envelope is 404 with -32601."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = modern_request(method, params, id=f"m-{method}")
        response = await post(live.url, message)

    assert 404 == response.status
    assert -32601 == error_of(response, f"m-{method}")["code"]
    no_session(response)
    assert {} == dict(live.table.sessions)


@pytest.mark.spec("TM-ERA-GET", "MT-POST-1")
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_or_delete_with_a_modern_version_header_is_405_allow_post(
    live_server: StartServer, method: str
) -> None:
    """GET or DELETE with MCP-Protocol-Version 2026-07-28 and no session: 405, Allow: POST."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        headers = [("accept", "text/event-stream"), ("mcp-protocol-version", MODERN)]
        async with open_stream(live.url, method, headers) as stream:
            status, allow = stream.status, stream.header("allow")
            content_type = stream.content_type
            await stream.read_body()

    assert 405 == status
    assert "POST" == allow
    assert "application/json" == content_type


#: What a 2024-11-05 HTTP+SSE client tries: a GET that opens the SSE stream (on the endpoint
#: or a path of its own, with or without a version header) and the POST endpoint it is told.
OLD_SSE_TRANSPORT: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    ("get-endpoint", "GET", "/mcp", [("accept", "text/event-stream")], 400),
    ("get-endpoint-2024", "GET", "/mcp",
     [("accept", "text/event-stream"), ("mcp-protocol-version", "2024-11-05")], 400),
    ("get-endpoint-modern", "GET", "/mcp",
     [("accept", "text/event-stream"), ("mcp-protocol-version", MODERN)], 405),
    ("get-sse", "GET", "/sse", [("accept", "text/event-stream")], 404),
    ("post-messages", "POST", "/messages",
     [("accept", "application/json, text/event-stream"), ("content-type", "application/json")],
     404),
]


@pytest.mark.spec("MT-COMPAT-3")
@pytest.mark.parametrize(
    ("label", "method", "path", "headers", "status"),
    OLD_SSE_TRANSPORT,
    ids=[c[0] for c in OLD_SSE_TRANSPORT],
)
async def test_there_is_no_http_sse_transport(
    live_server: StartServer,
    label: str,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    status: int,
) -> None:
    """No GET without a session opens an SSE stream, and no HTTP+SSE endpoint exists."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        body = json.dumps(rpc_request("initialize", {})).encode() if method == "POST" else b""
        response = await request(f"{live.base_url}{path}", method, headers, body)

    # A refusal in JSON: no event stream, so no `endpoint` event to send the client on.
    assert status == response.status, (label, response.body)
    assert "application/json" == response.content_type
    assert -32600 == response.json()["error"]["code"]
    no_session(response)
    assert {} == dict(live.table.sessions)


@pytest.mark.spec("MT-POST-5", "TM-ERA-NOTIFY", "MJ-NOTIF-1", "TM-ERA-BODY")
@pytest.mark.parametrize(
    "method", ["notifications/cancelled", "notifications/initialized", "notifications/whatever"]
)
@pytest.mark.parametrize("claim", [True, False], ids=["meta-claim", "header-only"])
async def test_a_modern_notification_gets_202_and_an_empty_body(
    live_server: StartServer, method: str, claim: bool
) -> None:
    """A notification with the modern claim, or only the modern header, gets 202, no body."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        if claim:
            message = modern_notification(method, {"requestId": 1})
        else:
            message = {"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}}
        response = await post(live.url, message)

    assert 202 == response.status
    assert b"" == response.body
    assert response.header("content-type") is None
    no_session(response)
    assert {} == dict(live.table.sessions)


# -- errors ----------------------------------------------------------------------------------


def _bad_version_header(message: dict[str, Any]) -> list[tuple[str, str]]:
    return modern_headers(message, extra=[("mcp-protocol-version", "2025-11-25")])


def _no_method_header(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [h for h in modern_headers(message) if h[0] != "mcp-method"]


def _no_name_header(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [h for h in modern_headers(message) if h[0] != "mcp-name"]


def _wrong_name_header(message: dict[str, Any]) -> list[tuple[str, str]]:
    return modern_headers(message, extra=[("mcp-name", "add")])


def _no_meta(rid: Any) -> dict[str, Any]:
    return rpc_request("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion":
                                                     MODERN}}, id=rid)


#: (label, message factory, header factory or None, HTTP status, JSON-RPC code)
ERROR_CASES: list[tuple[str, Any, Any, int, int]] = [
    ("meta without capabilities", _no_meta, None, 400, -32602),
    ("bad log level",
     lambda rid: modern_request("tools/list", id=rid, log_level="verbose"), None, 400, -32602),
    ("version header mismatch",
     lambda rid: modern_request("tools/list", id=rid), _bad_version_header, 400, -32020),
    ("Mcp-Method missing",
     lambda rid: modern_request("tools/list", id=rid), _no_method_header, 400, -32020),
    ("Mcp-Name missing",
     lambda rid: call_tool("echo", {"text": "x"}, id=rid), _no_name_header, 400, -32020),
    ("Mcp-Name mismatch",
     lambda rid: call_tool("echo", {"text": "x"}, id=rid), _wrong_name_header, 400, -32020),
    ("unsupported version",
     lambda rid: modern_request("tools/list", id=rid, version="2099-01-01"),
     lambda m: modern_headers(m, version="2099-01-01"), 400, -32022),
    ("unknown method", lambda rid: modern_request("nope", id=rid), None, 404, -32601),
    ("missing capability",
     lambda rid: call_tool("test_missing_capability", id=rid), None, 400, -32021),
    ("Mcp-Param missing",
     lambda rid: call_tool("test_header_params", {"region": "eu"}, id=rid), None, 400, -32020),
    ("unknown tool", lambda rid: call_tool("no_such_tool", id=rid), None, 200, -32602),
    ("missing resource",
     lambda rid: modern_request("resources/read", {"uri": "test://missing"}, id=rid),
     None, 200, -32602),
    ("bad listen filter",
     lambda rid: modern_request("subscriptions/listen", {"notifications": []}, id=rid),
     None, 400, -32602),
    ("tampered requestState",
     lambda rid: call_tool("test_input_required_result_request_state", id=rid,
                           capabilities={"elicitation": {}}, requestState="x.y"),
     None, 200, -32602),
    ("inputResponses null",
     lambda rid: call_tool("test_input_required_result_request_state", id=rid,
                           capabilities={"elicitation": {}}, inputResponses=None),
     None, 200, -32602),
]


@pytest.mark.spec(
    "MJ-ERR-1", "MJ-ERR-2", "MJ-ERR-3", "MJ-ERR-5", "MJ-ERR-6", "MJ-MSG-1", "MJ-RES-1",
    "MT-POST-6", "ML-META-2", "MU-LOG-5",
    "MT-HDR-2", "MT-HDR-3", "MT-HDR-6", "MT-HDR-16", "MT-HDR-22", "MJ-ERR-7", "MU-RES-2",
)
@pytest.mark.parametrize("rid", ["req-α-1", 0, 987654321], ids=["string", "zero", "int"])
@pytest.mark.parametrize(
    ("label", "make", "headers", "status", "code"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES]
)
async def test_every_error_echoes_the_request_id(
    live_server: StartServer,
    rid: Any,
    label: str,
    make: Any,
    headers: Any,
    status: int,
    code: int,
) -> None:
    """Every error of a modern request, refused or in-band, carries the request's id."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = make(rid)
        response = await post(live.url, message, headers=headers(message) if headers else None)

    sent = error_of(response, rid)["code"]
    assert status == response.status, (label, response.body)
    assert code == sent, label
    no_session(response)
    assert not _reserved_code(sent), (label, sent)


def _reserved_code(code: int) -> bool:
    """MJ-ERR-5 / MJ-ERR-6: a code no modern answer may carry: the legacy implementation
    sub-range, or a code of -32020…-32099 the spec does not define."""
    return -32019 <= code <= -32000 or (-32099 <= code <= -32020
                                        and code not in (-32020, -32021, -32022))


#: Codes a handler may raise, from every part of the reserved range and around it.
RAISED_CODES = [-32000, -32001, -32002, -32010, -32019, -32020, -32021, -32022, -32023,
                -32042, -32050, -32099, -32100, -32603, -31001, -1, 42]


def _raising_server() -> Server:
    server = Server("raising")

    @server.tool()
    async def fail(code: int) -> str:
        """Fail with a JSON-RPC error of the given code."""
        raise RemoteProtocolError("Failed on purpose.", code=code)

    return server


@pytest.mark.spec("MJ-ERR-5", "MJ-ERR-6", "MJ-ERR-8")
async def test_no_modern_error_carries_a_reserved_code_whatever_a_handler_raises(
    live_server: StartServer,
) -> None:
    """A handler that raises a code of the legacy sub-range (-32000…-32019) or one of
    -32020…-32099 the spec does not define is answered -32603 in the modern era (a missing
    resource's -32002, -32602); -32020…-32022 and codes outside the reserved range are sent
    as raised. The same handler answers a legacy session with the code it raised, which
    2025-11-25 leaves to implementations."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_raising_server())
        modern = [await post(live.url, call_tool("fail", {"code": c}, id=f"c{c}"))
                  for c in RAISED_CODES]
        session = await open_session(live.url)
        legacy = [await session.call("tools/call", {"name": "fail", "arguments": {"code": c}})
                  for c in RAISED_CODES]

    sent = [error_of(r, f"c{c}")["code"] for r, c in zip(modern, RAISED_CODES, strict=True)]
    assert [] == [(c, s) for c, s in zip(RAISED_CODES, sent, strict=True) if _reserved_code(s)]
    expected = {-32002: -32602, **{c: -32603 for c in RAISED_CODES
                                    if c != -32002 and _reserved_code(c)}}
    assert [expected.get(c, c) for c in RAISED_CODES] == sent
    assert RAISED_CODES == [m["error"]["code"] for m in legacy]


def _url_elicitation_server() -> Server:
    server = Server("url-elicitation")

    @server.tool()
    async def needs_sign_in() -> str:
        """Fail the way a 2025-11-25 tool asks for a URL-mode elicitation first."""
        raise RemoteProtocolError(
            "This request requires more information.",
            code=ErrorCode.URL_ELICITATION_REQUIRED,
            data={"elicitations": [{"mode": "url", "elicitationId": "e-1",
                                    "url": "https://example.com/sign-in",
                                    "message": "Sign in, please."}]},
        )

    return server


@pytest.mark.spec("TM-MOD-URLELICIT", "MJ-ERR-7")
async def test_a_handlers_32042_is_32603_in_the_modern_era_only(live_server: StartServer) -> None:
    """A tool raising -32042 answers a modern call -32603 in-band, a legacy one -32042."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_url_elicitation_server())
        modern = await post(live.url, call_tool("needs_sign_in", id="url-1"))
        session = await open_session(live.url)
        legacy = await session.call("tools/call", {"name": "needs_sign_in", "arguments": {}})

    assert 200 == modern.status
    error = error_of(modern, "url-1")
    assert -32603 == error["code"]
    assert b"-32042" not in modern.body
    assert -32042 == legacy["error"]["code"]
    assert "elicitations" in legacy["error"]["data"]


@pytest.mark.spec("MT-SEC-1", "MT-SEC-2", "MT-SEC-3", "T-SEC-2")
async def test_a_foreign_origin_is_refused_with_403_before_anything_else(
    live_server: StartServer,
) -> None:
    """A bad Origin is 403 whatever else is wrong, and the request never runs."""
    server = Server("origin-tests")
    ran: list[str] = []

    @server.tool()
    async def touch() -> str:
        """Record that it ran."""
        ran.append("touch")
        return "touched"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        evil = [("origin", "http://evil.example")]
        good = call_tool("touch", id="o-1")
        attempts = [
            await post(live.url, good, extra=evil),
            # Everything else wrong too: the Origin is judged first.
            await post(live.url, modern_request("nope", id="o-2", version="1999-01-01"),
                       extra=evil),
            await post(live.url, good, headers=[("origin", "http://evil.example"),
                                                ("content-type", "text/plain")]),
            await post(live.url, modern_notification("notifications/cancelled"), extra=evil),
        ]
        async with open_stream(
            live.url, "GET", [("mcp-protocol-version", MODERN), *evil]
        ) as get:
            get_status = get.status
            await get.read_body()
        # The same request from an acceptable origin runs.
        allowed = await post(live.url, good, extra=[("origin", f"http://127.0.0.1:{live.port}")])

    for response in attempts:
        assert 403 == response.status, response.body
        assert "application/json" == response.content_type
        body = response.json()
        assert -32600 == body["error"]["code"]
        assert "result" not in body
    assert 403 == get_status
    assert 200 == allowed.status and "touched" in allowed.body.decode()
    assert ["touch"] == ran
    assert 1 == live.app.runtime.modern.stats.requests


# -- Mcp-Param headers (demo tool test_header_params: region -> Mcp-Param-Region) ----------------


PARAM_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]], int]] = [
    ("matching", {"region": "eu-west"}, [("mcp-param-region", "eu-west")], 200),
    ("name case-insensitive", {"region": "eu-west"}, [("MCP-PARAM-REGION", "eu-west")], 200),
    ("base64", {"region": "Zürich ✓"}, [("mcp-param-region", b64_header("Zürich ✓"))], 200),
    ("base64 of the sentinel", {"region": "=?base64?x?="},
     [("mcp-param-region", b64_header("=?base64?x?="))], 200),
    ("missing", {"region": "eu-west"}, [], 400),
    ("mismatched", {"region": "eu-west"}, [("mcp-param-region", "us-east")], 400),
    ("case differs", {"region": "eu-west"}, [("mcp-param-region", "EU-WEST")], 400),
    ("base64 of another value", {"region": "eu-west"},
     [("mcp-param-region", b64_header("us-east"))], 400),
    ("base64 not padded", {"region": "eu"}, [("mcp-param-region", "=?base64?ZXU?=")], 400),
    ("base64 outside the alphabet", {"region": "eu"},
     [("mcp-param-region", "=?base64?ZX*=?=")], 400),
    ("base64 marker upper case", {"region": "eu"},
     [("mcp-param-region", "=?BASE64?ZXU=?=")], 400),
    ("repeated", {"region": "eu"}, [("mcp-param-region", "eu"), ("mcp-param-region", "eu")], 400),
    ("header without argument", {}, [("mcp-param-region", "eu")], 400),
    ("control character", {"region": "e\x01u"}, [("mcp-param-region", "e\x01u")], 400),
]


@pytest.mark.spec(
    "MT-HDR-7", "MT-HDR-10", "MT-HDR-11", "MT-HDR-12", "MT-HDR-13", "MT-HDR-14", "MT-HDR-16",
    "MT-HDR-20", "MT-HDR-21", "TM-MOD-B64", "TM-HTTP-PARSER",
)
@pytest.mark.parametrize(
    ("label", "arguments", "extra", "status"), PARAM_CASES, ids=[c[0] for c in PARAM_CASES]
)
async def test_mcp_param_headers_must_agree_with_the_arguments(
    live_server: StartServer,
    label: str,
    arguments: dict[str, Any],
    extra: list[tuple[str, str]],
    status: int,
) -> None:
    """Mcp-Param-Region must be present, decodable and equal to the region argument."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = call_tool("test_header_params", arguments, id=f"hp-{label}")
        response = await post(live.url, message, extra=extra)

    assert status == response.status, (label, response.body)
    body = response.json()
    if label == "control character" and live.http_server == "trio-mcp":
        # TM-HTTP-PARSER: trio-mcp's own server's parser refuses a control character in a
        # field value (RFC 9110 §5.5) before the body is read, so without the request's id.
        assert "id" not in body and -32600 == body["error"]["code"], body
        return
    assert f"hp-{label}" == body["id"]
    if status == 200:
        assert "complete" == body["result"]["resultType"]
        assert [{"type": "text", "text": arguments["region"]}] == body["result"]["content"]
    else:
        assert -32020 == body["error"]["code"]
        assert 0 == live.app.runtime.modern.stats.requests


def _shard_server() -> Server:
    server = Server("param-tests")

    @server.tool(headers={"shard": "Shard", "dry_run": "Dry-Run", "note": "Note"})
    async def route(shard: int, dry_run: bool = False, note: str = "") -> str:
        """Say where the call went.

        Args:
            shard: the shard number (mirrored into Mcp-Param-Shard).
            dry_run: whether nothing is written (Mcp-Param-Dry-Run).
            note: an optional remark (Mcp-Param-Note).
        """
        return f"shard {shard} dry={dry_run} note={note}"

    return server


INT_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]], int]] = [
    ("int", {"shard": 42}, [("mcp-param-shard", "42")], 200),
    ("leading zero", {"shard": 42}, [("mcp-param-shard", "042")], 200),
    ("negative", {"shard": -7}, [("mcp-param-shard", "-7")], 200),
    # MT-HDR-15's own example: "42.0 and 42 are considered equal", either way round.
    ("body 42.0", {"shard": 42.0}, [("mcp-param-shard", "42")], 200),
    ("header 42.0", {"shard": 42}, [("mcp-param-shard", "42.0")], 200),
    ("other number", {"shard": 42}, [("mcp-param-shard", "43")], 400),
    ("not a number", {"shard": 42}, [("mcp-param-shard", "forty-two")], 400),
    ("bool true", {"shard": 1, "dry_run": True},
     [("mcp-param-shard", "1"), ("mcp-param-dry-run", "true")], 200),
    ("bool as 1", {"shard": 1, "dry_run": True},
     [("mcp-param-shard", "1"), ("mcp-param-dry-run", "1")], 400),
    ("bool capitalised", {"shard": 1, "dry_run": False},
     [("mcp-param-shard", "1"), ("mcp-param-dry-run", "False")], 400),
    ("null argument, no header", {"shard": 1, "note": None}, [("mcp-param-shard", "1")], 200),
    ("null argument with header", {"shard": 1, "note": None},
     [("mcp-param-shard", "1"), ("mcp-param-note", "x")], 400),
]


@pytest.mark.spec("MT-HDR-15", "MT-HDR-19", "MT-HDR-20", "MT-HDR-12", "MT-HDR-16")
@pytest.mark.parametrize(
    ("label", "arguments", "extra", "status"), INT_CASES, ids=[c[0] for c in INT_CASES]
)
async def test_integer_and_boolean_param_headers_compare_by_value(
    live_server: StartServer,
    label: str,
    arguments: dict[str, Any],
    extra: list[tuple[str, str]],
    status: int,
) -> None:
    """Integers compare numerically, booleans as true/false; null needs no header."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_shard_server())
        message = call_tool("route", arguments, id=label)
        response = await post(live.url, message, extra=extra)

    body = response.json()
    assert label == body["id"]
    if status == 200:
        # The headers passed; the call itself answers in-band (200).
        assert 200 == response.status, (label, body)
        assert body.get("error", {}).get("code") != -32020, body
    else:
        assert 400 == response.status, (label, body)
        assert -32020 == body["error"]["code"]


@pytest.mark.spec("MT-HDR-10", "MT-HDR-21")
async def test_a_base64_mcp_name_is_decoded_before_it_is_compared(
    live_server: StartServer,
) -> None:
    """Mcp-Name may carry the tool name Base64-encoded; it is decoded, then compared."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = call_tool("echo", {"text": "hi"}, id="b64-name")
        good = await post(live.url, message, extra=[("mcp-name", b64_header("echo"))])
        bad = await post(live.url, message, extra=[("mcp-name", b64_header("add"))])

    assert 200 == good.status
    assert [{"type": "text", "text": "hi"}] == good.json()["result"]["content"]
    assert 400 == bad.status
    assert -32020 == error_of(bad, "b64-name")["code"]


# -- client capabilities ---------------------------------------------------------------------


@pytest.mark.spec("ML-META-3", "TM-ERA-CAPS", "MJ-ERR-4", "ML-STATE-1")
async def test_a_tool_that_requires_sampling_is_refused_before_the_first_byte(
    live_server: StartServer,
) -> None:
    """test_missing_capability without sampling: 400 JSON -32021 before the tool runs."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        refused = await post(live.url, call_tool("test_missing_capability", id="cap-1"))
        stats_after_refusal = live.app.runtime.modern.stats.requests
        # Declaring other capabilities does not help.
        still = await post(
            live.url,
            call_tool("test_missing_capability", id="cap-2",
                      capabilities={"elicitation": {}, "roots": {}}),
        )
        accepted = await post(
            live.url,
            call_tool("test_missing_capability", id="cap-3", capabilities={"sampling": {}}),
        )

    for response, rid in ((refused, "cap-1"), (still, "cap-2")):
        assert 400 == response.status
        assert "application/json" == response.content_type
        error = error_of(response, rid)
        assert -32021 == error["code"]
        assert {"requiredCapabilities": {"sampling": {}}} == error["data"]
    # Refused before the request counted as started: the tool never ran.
    assert 0 == stats_after_refusal
    assert 200 == accepted.status
    result = accepted.json()["result"]
    assert "input_required" == result["resultType"]
    [(key, question)] = result["inputRequests"].items()
    assert "sampling/createMessage" == question["method"]
    assert key


def _asking_server() -> Server:
    server = Server("caps-tests")

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        """Ask the user's name with a form."""
        answer = await ctx.elicit(
            "Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="n"
        )
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool()
    async def progress_then_ask(ctx: Context) -> str:
        """Report progress, then ask the user's name."""
        await ctx.report_progress(1, 2, "working")
        answer = await ctx.elicit(
            "Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="n"
        )
        return f"hello {(answer.content or {}).get('name')}"

    return server


@pytest.mark.spec("ML-META-3", "TM-ERA-CAPS", "MU-MRTR-12", "MU-ELIC-1")
async def test_asking_for_elicitation_when_only_sampling_was_declared_is_400_32021(
    live_server: StartServer,
) -> None:
    """Eliciting from a client that declared only sampling: 400 -32021 naming elicitation."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_asking_server())
        response = await post(
            live.url, call_tool("ask_name", id="e-1", capabilities={"sampling": {}})
        )
        with_elicitation = await post(
            live.url, call_tool("ask_name", id="e-2", capabilities={"elicitation": {}})
        )

    assert 400 == response.status
    assert "application/json" == response.content_type
    error = error_of(response, "e-1")
    assert -32021 == error["code"]
    required = error["data"]["requiredCapabilities"]
    assert {"elicitation"} == set(required)
    assert isinstance(required["elicitation"], dict)
    assert 200 == with_elicitation.status
    assert "input_required" == with_elicitation.json()["result"]["resultType"]


@pytest.mark.spec("TM-ERA-CAPS", "ML-META-3")
async def test_a_capability_found_missing_after_the_stream_started_is_answered_in_band(
    live_server: StartServer,
) -> None:
    """Once progress went out (SSE, 200 sent), the -32021 error ends the stream in-band."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_asking_server())
        message = call_tool(
            "progress_then_ask", id="e-3", capabilities={"sampling": {}}, progress_token="t"
        )
        response = await post(live.url, message)

    assert 200 == response.status
    assert "text/event-stream" == response.content_type
    decoded = messages_of(response)
    assert ["notifications/progress", None] == [m.get("method") for m in decoded]
    assert "e-3" == decoded[-1]["id"]
    assert -32021 == decoded[-1]["error"]["code"]
    assert "elicitation" in decoded[-1]["error"]["data"]["requiredCapabilities"]


WEATHER_TOOLS = [{"name": "get_weather", "inputSchema": {"type": "object"}}]


def _hand_built_server() -> Server:
    server = Server("hand-built-questions")

    @server.tool()
    async def plan_with_a_tool(ctx: Context) -> str:
        """Ask the client's model, offering it a tool to call (tool-enabled sampling)."""
        question = sampling_request("What is the weather in Paris?", max_tokens=50)
        params = {**(question.params or {}), "tools": WEATHER_TOOLS}
        answers = await ctx.ask({"plan": InputRequest(question.method, params)})
        return str(answers["plan"])

    @server.tool()
    async def sign_in(ctx: Context) -> str:
        """Send the user to a page (URL-mode elicitation)."""
        question = InputRequest(
            "elicitation/create",
            {
                "mode": "url",
                "message": "Sign in, please.",
                "url": "https://example.com/sign-in",
                "elicitationId": "sign-in-1",
            },
        )
        answers = await ctx.ask({"sign_in": question})
        return str(answers["sign_in"])

    @server.tool()
    async def recall(ctx: Context, context: str = "thisServer") -> str:
        """Ask the client's model with the context of this server included, or not."""
        answer = await ctx.sample("What did we say?", 50, include_context=context or None,
                                  key="recall")
        return answer.text or ""

    return server


#: (label, tool, capabilities that fall short, capabilities that are enough, the question's
#: method, a params field the question carries and its value)
HAND_BUILT: list[tuple[str, str, dict[str, Any], dict[str, Any], str, str, Any]] = [
    ("sampling-tools", "plan_with_a_tool", {"sampling": {}},
     {"sampling": {"tools": {}}}, "sampling/createMessage", "tools", WEATHER_TOOLS),
    ("elicitation-url", "sign_in", {"elicitation": {}},
     {"elicitation": {"url": {}}}, "elicitation/create", "mode", "url"),
    ("sampling-context", "recall", {"sampling": {}},
     {"sampling": {"context": {}}}, "sampling/createMessage", "includeContext", "thisServer"),
]


@pytest.mark.spec("MU-SAMP-1", "MU-ELIC-1", "ML-META-3", "MU-MRTR-2", "MU-ELIC-3", "MU-SAMP-2")
@pytest.mark.parametrize(
    ("label", "tool", "short", "enough", "method", "field", "value"),
    HAND_BUILT,
    ids=[c[0] for c in HAND_BUILT],
)
async def test_a_hand_built_question_needs_the_part_of_the_capability_it_uses(
    live_server: StartServer,
    label: str,
    tool: str,
    short: dict[str, Any],
    enough: dict[str, Any],
    method: str,
    field: str,
    value: Any,
) -> None:
    """ctx.ask with tools (or URL mode), and ctx.sample with include_context, are -32021
    unless the client declares sampling.tools (elicitation.url, sampling.context); declared,
    the question goes out as asked."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_hand_built_server())
        refused = await post(live.url, call_tool(tool, id=f"{label}-1", capabilities=short))
        asked = await post(live.url, call_tool(tool, id=f"{label}-2", capabilities=enough))

    assert 400 == refused.status
    error = error_of(refused, f"{label}-1")
    assert -32021 == error["code"]
    assert {"requiredCapabilities": enough} == error["data"]
    assert 200 == asked.status, asked.body
    result = asked.json()["result"]
    assert "input_required" == result["resultType"]
    [question] = result["inputRequests"].values()
    assert method == question["method"]
    assert value == question["params"][field]


@pytest.mark.spec("MU-SAMP-2")
async def test_ctx_sample_leaves_include_context_out_by_default(live_server: StartServer) -> None:
    """A sampling question asked without include_context carries no includeContext (it
    defaults to "none"), and needs no sampling.context."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_hand_built_server())
        asked = await post(live.url, call_tool("recall", {"context": ""}, id="r",
                                               capabilities={"sampling": {}}))
    [question] = asked.json()["result"]["inputRequests"].values()
    assert "includeContext" not in question["params"]


# -- the envelope's other fields -------------------------------------------------------------------


@pytest.mark.spec("ML-META-1", "ML-META-5")
async def test_client_info_is_optional_and_changes_nothing(live_server: StartServer) -> None:
    """A request without clientInfo, or with another one, gets the same answer."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        answers = []
        for info in (None, CLIENT_INFO, {"name": "someone-else", "version": "9"}):
            params = {"_meta": modern_meta(client_info=info)}
            message = rpc_request("tools/list", params, id="same")
            response = await post(live.url, message)
            assert 200 == response.status, response.body
            answers.append(response.json())

    assert answers[0] == answers[1] == answers[2]


@pytest.mark.spec("ML-EXT-1")
async def test_an_extension_the_client_declares_changes_nothing(live_server: StartServer) -> None:
    """Capabilities of extensions the server lacks are ignored, and one it has changes
    nothing outside it: core behaviour, same answers."""
    variants: list[dict[str, Any]] = [
        {},
        {"extensions": {"io.example/not-supported": {}}},
        {
            "extensions": {"io.modelcontextprotocol/tasks": {"list": {}}},
            "experimental": {"io.example/other": {"on": True}},
        },
    ]
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        answers = []
        for caps in variants:
            batch = []
            for message in (
                modern_request("server/discover", id="x", capabilities=caps),
                modern_request("tools/list", id="x", capabilities=caps),
                call_tool("echo", {"text": "core"}, id="x", capabilities=caps),
            ):
                response = await post(live.url, message)
                assert 200 == response.status, (caps, response.body)
                batch.append(response.json())
            answers.append(batch)

    assert answers[0] == answers[1] == answers[2]
    discover, _, echo = answers[0]
    # The demo declares its extensions, tasks, skills and apps, whatever the client declares; echo
    # is no task tool, so declaring tasks does not change its call (spec/tasks.md TK-OPTIN).
    assert {
        "io.modelcontextprotocol/tasks": {},
        "io.modelcontextprotocol/skills": {"directoryRead": True},
        "io.modelcontextprotocol/ui": {},
    } == discover["result"]["capabilities"]["extensions"]
    assert [{"type": "text", "text": "core"}] == echo["result"]["content"]
