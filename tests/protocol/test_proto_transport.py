# Unit tests for trio_mcp.protocol._transport: what makes a POST, GET or DELETE acceptable,
# and the replies that refuse one.

from __future__ import annotations

import json

import pytest

from trio_mcp.protocol import (
    ErrorCode,
    Headers,
    HttpRequest,
    LocalProtocolError,
    Notification,
    OriginPolicy,
    Phase,
    ProtocolError,
    RemoteProtocolError,
    Request,
    Response,
    parse_message,
)
from trio_mcp.protocol._headers import check_content_type
from trio_mcp.protocol._jsonrpc import loads_body
from trio_mcp.protocol._lifecycle import admit
from trio_mcp.protocol._transport import (
    SSE_HEADERS,
    check_batch,
    error_reply,
    json_reply,
    method_not_allowed,
    plan_delete,
    plan_get,
    plan_post,
    session_not_found,
)
from trio_mcp.protocol._versions import effective_version

POST_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-session-id": "sid-1",
    "mcp-protocol-version": "2025-11-25",
}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
}
LIMIT = 1024


def _request(
    method: str, body: object = None, raw: bytes | None = None, **headers: str | None
) -> HttpRequest:
    merged = {**POST_HEADERS, **headers} if method == "POST" else dict(headers)
    pairs = [(k.encode(), v.encode()) for k, v in merged.items() if v is not None]
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    return HttpRequest(method=method, path="/mcp", headers=Headers(pairs), body=data)


def _post_error(req: HttpRequest) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        plan_post(req, max_body_bytes=LIMIT)
    return info.value


# -- POST ----------------------------------------------------------------------------------


def test_post_single_request_plan() -> None:
    """A valid POST yields its session id, version header and one parsed message."""
    plan = plan_post(
        _request("POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        max_body_bytes=LIMIT,
    )

    assert ("sid-1", "2025-11-25", False) == (plan.session_id, plan.version_header, plan.batch)
    assert (Request(id=1, method="tools/list"),) == plan.messages
    assert plan.requests == plan.messages
    assert not plan.is_initialize


@pytest.mark.spec("T-POST-4")
def test_post_notification_plan_has_no_requests() -> None:
    """A notification POST has no requests: the runtime answers it 202 with no body."""
    plan = plan_post(
        _request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        max_body_bytes=LIMIT,
    )

    assert (Notification(method="notifications/initialized"),) == plan.messages
    assert () == plan.requests


@pytest.mark.spec("T-POST-4")
def test_post_response_plan_has_no_requests() -> None:
    """A client's response to a server request is accepted as a message, not a request."""
    plan = plan_post(
        _request("POST", {"jsonrpc": "2.0", "id": "s1", "result": {}}), max_body_bytes=LIMIT
    )

    assert (Response(id="s1", result={}),) == plan.messages
    assert () == plan.requests


@pytest.mark.spec("T-VER-1", "T-SESS-6")
def test_initialize_needs_neither_session_nor_version_header() -> None:
    """The initialize POST is the one request without a session id or version header."""
    plan = plan_post(
        _request("POST", INIT, **{"mcp-session-id": None, "mcp-protocol-version": None}),
        max_body_bytes=LIMIT,
    )

    assert plan.is_initialize
    assert (None, None) == (plan.session_id, plan.version_header)


@pytest.mark.spec("L-INIT-1")
def test_initialize_with_session_id_keeps_it_for_the_session_to_refuse() -> None:
    """An initialize carrying a session id is a second initialize; the plan keeps the id."""
    plan = plan_post(_request("POST", INIT), max_body_bytes=LIMIT)

    assert (True, "sid-1") == (plan.is_initialize, plan.session_id)


def test_session_id_is_trimmed() -> None:
    """Whitespace around the session id header is not part of the id."""
    plan = plan_post(
        _request("POST", {"jsonrpc": "2.0", "method": "n"}, **{"mcp-session-id": " sid-2 "}),
        max_body_bytes=LIMIT,
    )

    assert "sid-2" == plan.session_id


@pytest.mark.spec("T-POST-2", "TM-HTTP-ACCEPT")
def test_post_without_both_accept_types_is_406() -> None:
    """A POST whose Accept lacks text/event-stream is refused with 406 before anything else."""
    exc = _post_error(_request("POST", raw=b"not json", accept="application/json"))

    assert 406 == exc.http_status


@pytest.mark.spec("TM-HTTP-CTYPE")
def test_post_with_wrong_content_type_is_415() -> None:
    """A POST body that is not declared as JSON is refused with 415."""
    exc = _post_error(
        _request("POST", {"jsonrpc": "2.0", "method": "n"}, **{"content-type": "text/plain"})
    )

    assert 415 == exc.http_status


@pytest.mark.spec("TM-HTTP-SIZE")
def test_post_body_over_the_limit_is_413() -> None:
    """A body larger than max_body_bytes is refused with 413 before it is parsed."""
    exc = _post_error(_request("POST", raw=b"[" * (LIMIT + 1)))

    assert 413 == exc.http_status


@pytest.mark.spec("TM-HTTP-SIZE")
def test_post_body_at_the_limit_is_parsed() -> None:
    """The limit is inclusive: a body of exactly max_body_bytes is accepted."""
    body = json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"p": ""}}).encode()
    body = body.replace(b'""', b'"' + b"x" * (LIMIT - len(body)) + b'"')

    assert LIMIT == len(body)
    plan_post(_request("POST", raw=body), max_body_bytes=LIMIT)


@pytest.mark.spec("T-GEN-1")
@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b""])
def test_unparseable_post_body_is_400_parse_error_without_id(raw: bytes) -> None:
    """A body that is not UTF-8 JSON gets 400 with -32700 and no id."""
    exc = _post_error(_request("POST", raw=raw))

    assert (400, ErrorCode.PARSE_ERROR, None) == (exc.http_status, exc.code, exc.request_id)


@pytest.mark.spec("J-ERR-1")
def test_invalid_message_error_carries_its_id() -> None:
    """A malformed message with a readable id gets a -32600 error naming that id."""
    exc = _post_error(_request("POST", {"jsonrpc": "2.0", "id": 5, "method": ""}))

    assert (400, ErrorCode.INVALID_REQUEST, 5) == (exc.http_status, exc.code, exc.request_id)


def test_empty_batch_is_invalid() -> None:
    """An empty JSON array is not a message."""
    exc = _post_error(_request("POST", []))

    assert (400, ErrorCode.INVALID_REQUEST) == (exc.http_status, exc.code)


@pytest.mark.spec("J-BATCH-1")
def test_batch_is_parsed_into_its_messages() -> None:
    """A JSON array is parsed message by message and marked as a batch (version decides)."""
    plan = plan_post(
        _request(
            "POST",
            [
                {"jsonrpc": "2.0", "id": 1, "method": "a"},
                {"jsonrpc": "2.0", "method": "b"},
                {"jsonrpc": "2.0", "id": 2, "method": "c"},
            ],
        ),
        max_body_bytes=LIMIT,
    )

    assert plan.batch
    assert (1, 2) == tuple(r.id for r in plan.requests)
    assert 3 == len(plan.messages)


def test_batch_with_a_malformed_member_is_invalid() -> None:
    """One malformed member refuses the whole batch."""
    exc = _post_error(
        _request("POST", [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0"}])
    )

    assert ErrorCode.INVALID_REQUEST == exc.code


@pytest.mark.spec("TM-RPC-BATCH", "L-INIT-7")
def test_initialize_in_a_batch_is_invalid() -> None:
    """2025-03-26 lifecycle § Initialization: initialize must not be part of a batch."""
    exc = _post_error(
        _request("POST", [INIT, {"jsonrpc": "2.0", "method": "n"}], **{"mcp-session-id": None})
    )

    assert (400, ErrorCode.INVALID_REQUEST) == (exc.http_status, exc.code)
    assert "batch" in exc.message


@pytest.mark.spec("T-SESS-6")
def test_request_without_session_is_400_naming_the_request() -> None:
    """A non-initialize request with no session id gets 400, answering its id."""
    exc = _post_error(
        _request(
            "POST", {"jsonrpc": "2.0", "id": "r9", "method": "tools/list"},
            **{"mcp-session-id": None},
        )
    )

    assert (400, ErrorCode.INVALID_REQUEST, "r9") == (exc.http_status, exc.code, exc.request_id)


@pytest.mark.spec("T-SESS-6")
@pytest.mark.parametrize("sid", ["", "  "])
def test_empty_session_header_counts_as_missing(sid: str) -> None:
    """An empty MCP-Session-Id names no session: 400 (missing), not 404 (unknown)."""
    exc = _post_error(
        _request("POST", {"jsonrpc": "2.0", "id": 3, "method": "m"}, **{"mcp-session-id": sid})
    )

    assert (400, 3) == (exc.http_status, exc.request_id)


@pytest.mark.spec("T-SESS-6")
def test_initialize_with_empty_session_header_starts_a_session() -> None:
    """An initialize with an empty MCP-Session-Id is a first initialize, not a second."""
    plan = plan_post(_request("POST", INIT, **{"mcp-session-id": ""}), max_body_bytes=LIMIT)

    assert (True, None) == (plan.is_initialize, plan.session_id)


@pytest.mark.spec("T-SESS-6")
def test_notification_without_session_is_400_without_id() -> None:
    """A notification with no session id gets 400; there is no id to answer."""
    exc = _post_error(
        _request("POST", {"jsonrpc": "2.0", "method": "n"}, **{"mcp-session-id": None})
    )

    assert (400, None) == (exc.http_status, exc.request_id)


@pytest.mark.spec("T-SESS-6")
def test_batch_without_session_is_400_without_id() -> None:
    """A batch with no session id gets 400 with no single id to answer."""
    exc = _post_error(
        _request(
            "POST",
            [
                {"jsonrpc": "2.0", "id": 1, "method": "a"},
                {"jsonrpc": "2.0", "id": 2, "method": "b"},
            ],
            **{"mcp-session-id": None},
        )
    )

    assert (400, None) == (exc.http_status, exc.request_id)


# -- batches by session version ------------------------------------------------------------


@pytest.mark.spec("J-BATCH-1", "T-POST-3", "TM-RPC-BATCH")
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batch_in_a_session_after_2025_03_26_is_refused(version: str) -> None:
    """Batching was removed in 2025-06-18: an array body in such a session gets 400."""
    plan = plan_post(_request("POST", [{"jsonrpc": "2.0", "method": "n"}]), max_body_bytes=LIMIT)

    with pytest.raises(RemoteProtocolError) as info:
        check_batch(plan, version)

    assert (400, ErrorCode.INVALID_REQUEST) == (info.value.http_status, info.value.code)


@pytest.mark.spec("J-BATCH-1", "TM-RPC-BATCH")
def test_batch_in_a_2025_03_26_session_is_allowed() -> None:
    """A 2025-03-26 session must accept batches."""
    plan = plan_post(_request("POST", [{"jsonrpc": "2.0", "method": "n"}]), max_body_bytes=LIMIT)

    check_batch(plan, "2025-03-26")


@pytest.mark.spec("T-POST-3")
@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_single_message_is_fine_in_every_version(version: str) -> None:
    """A single message passes the batch check in every version."""
    plan = plan_post(_request("POST", {"jsonrpc": "2.0", "method": "n"}), max_body_bytes=LIMIT)

    check_batch(plan, version)


# -- GET and DELETE ------------------------------------------------------------------------


def test_get_plan_carries_session_version_and_last_event_id() -> None:
    """A GET yields its session id, version header and Last-Event-ID."""
    plan = plan_get(
        _request(
            "GET",
            accept="text/event-stream",
            **{
                "mcp-session-id": "s",
                "mcp-protocol-version": "2025-11-25",
                "last-event-id": "0.1.x",
            },
        )
    )

    assert ("s", "2025-11-25", "0.1.x") == (
        plan.session_id,
        plan.version_header,
        plan.last_event_id,
    )


def test_fresh_get_has_no_last_event_id() -> None:
    """A GET without Last-Event-ID asks for a fresh standalone stream."""
    plan = plan_get(_request("GET", accept="text/event-stream", **{"mcp-session-id": "s"}))

    assert plan.last_event_id is None


@pytest.mark.spec("T-GET-2", "TM-HTTP-ACCEPT")
def test_get_without_event_stream_accept_is_406() -> None:
    """A GET that does not accept text/event-stream gets 406."""
    with pytest.raises(RemoteProtocolError) as info:
        plan_get(_request("GET", accept="application/json", **{"mcp-session-id": "s"}))

    assert 406 == info.value.http_status


@pytest.mark.spec("T-SESS-6")
@pytest.mark.parametrize("sid", [None, "", "   "])
def test_get_without_session_is_400(sid: str | None) -> None:
    """A GET with no (or an empty) session id gets 400."""
    with pytest.raises(RemoteProtocolError) as info:
        plan_get(_request("GET", accept="text/event-stream", **{"mcp-session-id": sid}))

    assert 400 == info.value.http_status


@pytest.mark.spec("T-SESS-9")
def test_delete_plan_carries_session_and_version() -> None:
    """A DELETE names the session to end; Accept does not matter."""
    plan = plan_delete(_request("DELETE", **{"mcp-session-id": "s", "mcp-protocol-version": "v"}))

    assert ("s", "v") == (plan.session_id, plan.version_header)


@pytest.mark.spec("T-SESS-6")
def test_delete_without_session_is_400() -> None:
    """A DELETE with no session id gets 400."""
    with pytest.raises(RemoteProtocolError) as info:
        plan_delete(_request("DELETE"))

    assert 400 == info.value.http_status


# -- replies -------------------------------------------------------------------------------


@pytest.mark.spec("T-POST-6", "T-SEC-3", "J-ERR-1")
def test_error_reply_without_id_has_status_and_id_less_error_body() -> None:
    """A refusal is its HTTP status with a JSON-RPC error body that has no id."""
    reply = error_reply(RemoteProtocolError("Bad thing.", http_status=400))

    assert 400 == reply.status
    assert ("content-type", "application/json") in reply.headers
    assert {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Bad thing."}} == json.loads(
        reply.body
    )


@pytest.mark.spec("J-ERR-1")
def test_error_reply_with_id_and_data() -> None:
    """When the request id was read, the error body answers it, with data if any."""
    exc = RemoteProtocolError(
        "Nope.", code=ErrorCode.INVALID_PARAMS, data={"why": 1}, request_id="r1"
    )

    assert {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -32602, "message": "Nope.", "data": {"why": 1}},
    } == json.loads(error_reply(exc).body)


def test_error_reply_carries_extra_headers() -> None:
    """Headers on the error (Allow, Retry-After) go on the reply."""
    exc = RemoteProtocolError("Busy.", http_status=503, headers=(("retry-after", "5"),))

    assert (("content-type", "application/json"), ("retry-after", "5")) == error_reply(exc).headers


def test_local_protocol_error_defaults_to_500_internal_error() -> None:
    """Our own caller's mistakes answer 500 with -32603."""
    reply = error_reply(LocalProtocolError("oops"))

    assert (500, -32603) == (reply.status, json.loads(reply.body)["error"]["code"])


def test_protocol_error_base_class_cannot_be_raised_directly() -> None:
    """Who broke the rules must be said: ProtocolError itself is abstract."""
    with pytest.raises(TypeError):
        ProtocolError("x")


@pytest.mark.spec("TM-HTTP-METHOD")
def test_method_not_allowed_is_405_with_allow_header() -> None:
    """Other HTTP methods get 405 with an Allow header naming POST, GET and DELETE."""
    exc = method_not_allowed()
    reply = error_reply(exc)

    assert 405 == reply.status
    allow = dict(reply.headers)["allow"]
    assert {"GET", "POST", "DELETE"} == {m.strip() for m in allow.split(",")}


@pytest.mark.spec("T-SESS-7")
def test_session_not_found_is_404() -> None:
    """An ended or unknown session id gets 404 Not Found."""
    reply = error_reply(session_not_found())

    assert 404 == reply.status
    assert "error" in json.loads(reply.body)


def test_json_reply_is_compact_json() -> None:
    """json_reply writes compact JSON with a JSON content type and extra headers."""
    reply = json_reply(200, [{"a": "ü"}], mcp_session_id="s")

    assert 200 == reply.status
    assert '[{"a":"ü"}]'.encode() == reply.body
    assert (("content-type", "application/json"), ("mcp-session-id", "s")) == reply.headers


@pytest.mark.spec("T-GEN-1")
def test_json_reply_with_lone_surrogate_is_valid_utf8() -> None:
    """A lone surrogate from a client id must not break the reply's UTF-8."""
    reply = json_reply(200, {"id": "\ud800"})

    assert {"id": "\ud800"} == json.loads(reply.body.decode("utf-8"))


@pytest.mark.spec("MT-SSE-5")
def test_sse_headers_disable_buffering_and_caching() -> None:
    """SSE responses say text/event-stream, no-cache, and X-Accel-Buffering: no."""
    assert {
        "content-type": "text/event-stream",
        "cache-control": "no-cache, no-transform",
        "x-accel-buffering": "no",
    } == dict(SSE_HEADERS)


@pytest.mark.spec("TM-RES-POST")
def test_last_event_id_on_a_post_is_ignored() -> None:
    """A POST with Last-Event-ID is planned exactly like one without: it opens a new stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    assert plan_post(_request("POST", body), max_body_bytes=LIMIT) == plan_post(
        _request("POST", body, **{"last-event-id": "0.3.AAAAAAAAAAAAAAAA"}), max_body_bytes=LIMIT
    )


def _refusals() -> list[ProtocolError]:
    attempts = [
        lambda: _post_error(_request("POST", raw=b"x", accept="text/html")),
        lambda: check_content_type("text/plain"),
        lambda: _post_error(_request("POST", raw=b"x" * (LIMIT + 1))),
        lambda: loads_body(b"\xff"),
        lambda: loads_body(b"{"),
        lambda: parse_message(1),
        lambda: parse_message({"jsonrpc": "1.0"}),
        lambda: parse_message({"jsonrpc": "2.0", "id": None, "method": "m"}),
        lambda: parse_message({"jsonrpc": "2.0", "id": 1, "method": ""}),
        lambda: parse_message({"jsonrpc": "2.0", "id": 1, "method": "m", "params": []}),
        lambda: parse_message({"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}}),
        lambda: parse_message({"jsonrpc": "2.0", "result": {}}),
        lambda: parse_message({"jsonrpc": "2.0", "id": 1, "result": 1}),
        lambda: parse_message({"jsonrpc": "2.0", "id": 1, "error": 1}),
        lambda: parse_message({"jsonrpc": "2.0"}),
        lambda: admit(Phase.CLOSED, Request(id=1, method="m")),
        lambda: admit(Phase.OPERATING, Request(id=1, method="initialize")),
        lambda: _post_error(_request("POST", [])),
        lambda: _post_error(_request("POST", [INIT])),
        lambda: _post_error(
            _request("POST", {"jsonrpc": "2.0", "method": "n"}, **{"mcp-session-id": None})
        ),
        lambda: check_batch(
            plan_post(_request("POST", [{"jsonrpc": "2.0", "method": "n"}]), max_body_bytes=LIMIT),
            "2025-11-25",
        ),
        lambda: plan_get(_request("GET", accept="application/json")),
        lambda: plan_delete(_request("DELETE")),
        lambda: effective_version("1999-01-01", None),
        lambda: OriginPolicy.for_bind(["127.0.0.1"]).check(
            Headers([(b"origin", b"https://evil.example")])
        ),
        lambda: OriginPolicy.for_bind(["127.0.0.1"]).check(Headers([(b"host", b"evil.example")])),
    ]
    errors: list[ProtocolError] = [method_not_allowed(), session_not_found()]
    for attempt in attempts:
        try:
            result = attempt()
        except ProtocolError as exc:
            errors.append(exc)
        else:
            assert isinstance(result, ProtocolError), attempt
            errors.append(result)
    return errors


@pytest.mark.spec("J-ERR-4")
def test_every_refusal_message_is_one_concise_sentence() -> None:
    """Each error the pure layer produces says what was wrong in one line and one sentence."""
    bad = [
        e.message
        for e in _refusals()
        if "\n" in e.message
        or not e.message.endswith(".")
        or ". " in e.message
        or len(e.message) > 160
    ]

    assert [] == bad
