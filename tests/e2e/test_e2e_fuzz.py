# Hypothesis over whole HTTP exchanges, end to end (real hypercorn, raw h11 client): any
# method, any mix of MCP headers, any body, from raw bytes to well-formed JSON-RPC with the
# wrong shapes inside, in either era (a 2026-07-28 envelope in _meta, mostly well-formed, and
# its Mcp-Method / Mcp-Name headers, mostly agreeing with the body). The hand-picked cases of
# test_e2e_bad_input.py and tests/modern/ say what each refusal is; this says that no input
# at all gets a 500, a malformed answer, a hang, a logged error, or a disturbed neighbour.
from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.client import (
    Response,
    SSEStream,
    dumps,
    open_session,
    open_stream,
)
from support.examples import examples
from support.fixtures import HTTP_SERVERS
from support.resume import serve_in

from trio_mcp import Context, Server, ServerConfig

server = Server("fuzz")


@server.tool()
async def echo(text: str) -> str:
    """Return the text.

    Args:
        text: what to return.
    """
    return text


@server.tool()
async def tally(items: list[str], ctx: Context, weight: float = 1.0, tag: int | None = None) -> str:
    """Count the items, logging each.

    Args:
        items: what to count.
        weight: multiplies the count.
        tag: an optional label.
    """
    for item in items[:3]:
        await ctx.log("info", {"item": item})
    return f"{len(items) * weight} {tag}"


@server.resource("fuzz://item/{name}")
async def item(name: str) -> str:
    return name


@server.prompt()
async def advise(topic: str, tone: str = "plain") -> str:
    """Advice on a topic.

    Args:
        topic: what about.
        tone: how.
    """
    return f"{tone} advice on {topic}"


METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "server/discover",
    "subscriptions/listen",
]

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Parameters shaped like the real ones, with the wrong types and names mixed in.
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["echo", "tally", "advise", "nope", ""]) | JSON,
        "arguments": st.fixed_dictionaries(
            {}, optional={"text": JSON, "items": JSON, "weight": JSON, "tag": JSON, "topic": JSON}
        )
        | JSON,
        "uri": st.sampled_from(["fuzz://item/a", "fuzz://item/", "nope://x", ""]) | JSON,
        "protocolVersion": st.sampled_from(["2025-11-25", "2025-03-26", "1999-01-01"]) | JSON,
        "capabilities": JSON,
        "clientInfo": JSON,
        "level": st.sampled_from(["debug", "info", "emergency", "loud"]) | JSON,
        "requestId": JSON,
        "progressToken": JSON,
        "ref": JSON,
        "argument": JSON,
        "notifications": st.fixed_dictionaries(
            {}, optional={"toolsListChanged": st.booleans() | JSON, "resourceSubscriptions": JSON}
        )
        | JSON,
        "inputResponses": JSON,
        "requestState": JSON,
        "_meta": JSON,
    },
)
#: A 2026-07-28 envelope for params._meta: its fields mostly right, sometimes wrong or absent.
ENVELOPE = st.fixed_dictionaries(
    {"io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28"]) | JSON},
    optional={
        "io.modelcontextprotocol/clientCapabilities": st.just({}) | JSON,
        "io.modelcontextprotocol/clientInfo": st.just({"name": "fuzz", "version": "0"}) | JSON,
        "io.modelcontextprotocol/logLevel": st.sampled_from(["debug", "loud"]) | JSON,
        "progressToken": JSON,
    },
)
ABSENT = object()


@st.composite
def field(draw: st.DrawFn, usual: st.SearchStrategy[Any]) -> Any:
    """A message field: well-formed nine times in twelve, else any JSON or absent."""
    roll = draw(st.integers(0, 11))
    return draw(usual) if roll < 9 else draw(JSON) if roll < 11 else ABSENT


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON-RPC message, mostly well-formed, with wrong parts mixed in; a third of them
    carry a 2026-07-28 envelope."""
    fields = {
        "jsonrpc": draw(field(st.just("2.0"))),
        "id": draw(field(st.integers(-5, 5) | st.text(max_size=4))),
        "method": draw(field(st.sampled_from(METHODS))),
        "params": draw(field(PARAMS)),
    }
    params = fields.get("params")
    if isinstance(params, dict) and draw(st.integers(0, 2)) == 0:
        fields["params"] = {**params, "_meta": draw(ENVELOPE)}
    if str(fields.get("method")).startswith("notifications/") and draw(st.integers(0, 2)):
        fields.pop("id", None)  # mostly a notification, then
    if draw(st.integers(0, 9)) == 0:
        fields[draw(st.sampled_from(["result", "error"]))] = draw(JSON)
    return {k: v for k, v in fields.items() if v is not ABSENT}


MESSAGE = messages()
# Mostly one message (2025-11-25 has no batches), sometimes anything at all.
BODY = st.integers(0, 9).flatmap(
    lambda roll: MESSAGE.map(dumps)
    if roll < 7
    else st.lists(MESSAGE, max_size=3).map(dumps)
    if roll == 7
    else JSON.map(dumps)
    if roll == 8
    else st.binary(max_size=64)
)
# Each header: right seven times in eight (so that the body is what gets judged most of the
# time), else absent or wrong.
@st.composite
def header(draw: st.DrawFn, right: str | None, *wrong: str | None) -> str | None:
    return right if draw(st.integers(0, 7)) else draw(st.sampled_from(wrong))


SESSION = header("own", "none", "bogus", "empty")
VERSION = header("2025-11-25", None, "2025-06-18", "2026-07-28", "1999-01-01", "")
#: Mcp-Method and Mcp-Name: what the body says ("body"), nothing, or something else.
ROUTING = header("body", None, "other", "=?base64?body?=")
ACCEPT = header(
    "application/json, text/event-stream",
    None,
    "application/json",
    "text/event-stream",
    "*/*",
)
CONTENT_TYPE = header("application/json", None, "text/plain", "application/json; x=1")
HTTP_METHOD = header("POST", "GET", "GET", "DELETE", "PUT", "OPTIONS")
# Header values h11 will send: visible ASCII.
LAST_EVENT_ID = (
    st.none()
    | st.none()
    | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20)
    | st.sampled_from(["0", "s1.1", "x.y.z"])
)



@attrs.frozen
class Attempt:
    """One HTTP exchange with the endpoint."""

    method: str
    session: str
    """Which MCP-Session-Id: none, the client's own, a bogus one or an empty one."""
    version: str | None
    accept: str | None
    content_type: str | None
    last_event_id: str | None
    body: bytes
    routing: str | None
    """Mcp-Method and Mcp-Name: the body's values ("body", or "=?base64?body?=" encoded),
    none, or another value (h11 sends no padded values: tests/modern cover those)."""


ATTEMPTS = st.builds(
    Attempt,
    method=HTTP_METHOD,
    session=SESSION,
    version=VERSION,
    accept=ACCEPT,
    content_type=CONTENT_TYPE,
    last_event_id=LAST_EVENT_ID,
    body=BODY,
    routing=ROUTING,
)

#: Statuses an MCP endpoint may answer (T-POST-*, T-GET-*, T-SESS-*; 405 for other methods;
#: MT-HDR-4's 404 for an unknown modern method).
ALLOWED = {200, 202, 204, 400, 404, 405, 406, 413, 415}
TIMEOUT = 5.0
#: How long a GET's open stream is read before it is dropped.
GET_WAIT = 0.3


class ErrorLog(logging.Handler):
    """Collects what the server logs at ERROR or above while attached."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def no_server_errors() -> Iterator[None]:
    """Fail if the server logs an error (an unexpected exception) within the block."""
    handler = ErrorLog()
    logger = logging.getLogger("trio_mcp")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []


async def read_all(stream: SSEStream, method: str, listen: bool) -> Response | None:
    """The whole response; or None for a GET, or a subscriptions/listen POST, whose SSE
    stream is still open after GET_WAIT (those streams stay open; it is dropped here). Any
    other POST's stream must end: every tool of this server returns at once."""
    with trio.move_on_after(GET_WAIT if method == "GET" or listen else TIMEOUT):
        body = await stream.read_body()
        return Response(
            status=stream.status, headers=stream.headers, body=body, truncated=stream.truncated
        )
    assert method == "GET" or listen, "a POST's stream did not end"
    assert stream.status == 200 and (dict(stream.headers).get("content-type") or "").startswith(
        "text/event-stream"
    ), (stream.status, stream.headers)
    return None


def check_answer(response: Response) -> None:
    """A refusal carries a JSON-RPC error; an SSE body holds only JSON-RPC messages."""
    assert response.status in ALLOWED, (response.status, response.body)
    assert not response.truncated, response
    if response.status >= 400:
        assert response.content_type == "application/json", response
        body = response.json()
        assert body["jsonrpc"] == "2.0"
        assert type(body["error"]["code"]) is int
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert "result" not in body
    elif response.content_type == "text/event-stream":
        for sse in response.events():
            if sse.data:
                message = json.loads(sse.data)
                if "result" in message:
                    event("a result")
                assert message["jsonrpc"] == "2.0"
    elif response.content_type == "application/json":
        decoded = response.json()
        for message in decoded if isinstance(decoded, list) else [decoded]:
            assert message["jsonrpc"] == "2.0"
            if "result" in message:
                event("a result")
    else:
        assert response.body == b"", response


@pytest.mark.slow
@pytest.mark.spec("T-POST-5", "T-POST-6", "J-ERR-3", "MT-POST-6", "MJ-ERR-3", "TM-ERA-BODY")
@settings(
    max_examples=examples(150),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@pytest.mark.parametrize("http_server", HTTP_SERVERS)
@given(attempt=ATTEMPTS)
async def test_no_request_gets_a_500_a_malformed_answer_or_disturbs_a_neighbour(
    http_server: str, attempt: Attempt,
) -> None:
    """Whatever the method, headers and body, the server answers with a status an MCP
    endpoint may give, a refusal carries a JSON-RPC error object, a stream carries only
    JSON-RPC messages, nothing is logged as an error, and another session of the same server
    goes on working."""
    with no_server_errors(), trio.fail_after(4 * TIMEOUT):
        async with trio.open_nursery() as nursery:
            # A server per example: Hypothesis runs each in a trio run of its own.
            url, _ = await serve_in(
                nursery, server, ServerConfig(session_idle_ttl=60), http_server=http_server
            )
            await exchange(url, attempt)
            nursery.cancel_scope.cancel()


def routing_values(body: bytes) -> tuple[str | None, str | None]:
    """The method, and the name or URI, of a body that is one JSON-RPC message."""
    try:
        message = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(message, dict):
        return None, None
    method = message.get("method")
    params = message.get("params")
    target = None
    if isinstance(params, dict):
        target = params.get("uri") if method == "resources/read" else params.get("name")
    return (
        method if isinstance(method, str) else None,
        target if isinstance(target, str) else None,
    )


def routed(routing: str | None, value: str | None) -> str | None:
    """A routing header for ``value`` as the attempt asks: h11 sends visible ASCII only, so
    a value that is not is sent Base64-encoded, as clients do (MT-HDR-21)."""
    if routing is None or value is None:
        return None
    if routing == "other":
        return "other"
    text = value if value.isascii() and value.isprintable() else None
    if routing == "=?base64?body?=" or text is None:
        encoded = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")
        return f"=?base64?{encoded}?="
    return text


async def exchange(url: str, attempt: Attempt) -> None:
    bystander = await open_session(url)
    own = await open_session(url)
    headers: list[tuple[str, str]] = []
    sid = {"none": None, "own": own.id, "bogus": "not-a-session", "empty": ""}[attempt.session]
    method, name = routing_values(attempt.body)
    modern = b"io.modelcontextprotocol/protocolVersion" in attempt.body
    version = "2026-07-28" if modern and attempt.version == "2025-11-25" else attempt.version
    for header_name, value in (
        ("mcp-session-id", sid),
        ("mcp-protocol-version", version),
        ("accept", attempt.accept),
        ("content-type", attempt.content_type),
        ("last-event-id", attempt.last_event_id),
        ("mcp-method", routed(attempt.routing, method)),
        ("mcp-name", routed(attempt.routing, name)),
    ):
        if value is not None:
            headers.append((header_name, value))
    event("modern envelope" if modern else "no modern envelope")
    listen = method == "subscriptions/listen"
    async with open_stream(url, attempt.method, headers, attempt.body) as stream:
        response = await read_all(stream, attempt.method, listen)
    if response is None:
        event("an open stream")
    else:
        event(f"status {response.status}")
        check_answer(response)
    assert await bystander.result("ping") == {}
    echoed = await bystander.result(
        "tools/call", {"name": "echo", "arguments": {"text": "still here"}}
    )
    assert echoed["content"] == [{"type": "text", "text": "still here"}]

