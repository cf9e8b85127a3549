"""OpenTelemetry (spec/telemetry.md): one SERVER span per JSON-RPC request, following the MCP
semantic conventions, parented by the caller's trace context; the two duration metrics; the
runtime's notable events on the spans; and nothing of OpenTelemetry loaded when it is off.

Each test gives its servers providers of its own (``otel``, through ServerConfig): the
process's global providers stay unset, and the tests that need them (opentelemetry-instrument,
a provider set after the server started) run in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from support.client import dumps, open_session, open_stream, post_headers, rpc_request
from support.client import request as http_request
from support.fixtures import wait_until
from support.modern import call_tool, messages_of, modern_request, post
from support.slow import make_server, open_slow

from trio_mcp import Context, Server, ServerConfig, ToolError
from trio_mcp.edges._stdio import serve_stdio
from trio_mcp.protocol._tasks import TASKS_EXTENSION as TASKS

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
HEADER_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
HEADER_PARENT = f"00-{HEADER_TRACE_ID}-b7ad6b7169203331-01"


@attrs.define
class Otel:
    """A tracer and a meter provider of the SDK, with in-memory exporters, given to the
    servers of one test through their config (TM-OTEL-PROVIDERS): the process's global
    providers are never set here, so no other test (nor any server it starts) pays for them."""

    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def config(self, **settings: Any) -> ServerConfig:
        """A server config that reports to these providers."""
        return ServerConfig(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **settings
        )

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        found.extend(m.data.data_points)
        return found


@contextlib.contextmanager
def otel_providers() -> Iterator[Otel]:
    """Providers of this test's own, shut down when it ends (no exit hook keeps them)."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        yield Otel(exporter, reader, tracer_provider, meter_provider)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    """This test's providers (``otel.config()`` is a server config that reports to them)."""
    with otel_providers() as o:
        yield o


def traced_server() -> Server:
    server = Server("otel-tests")

    @server.tool()
    async def echo(text: str) -> str:
        """Says it back."""
        return text

    @server.tool()
    async def broken() -> str:
        """Always a tool error."""
        raise ToolError("no")

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks the client for its roots."""
        roots = await ctx.list_roots(timeout=5)
        return str(len(roots))

    @server.prompt()
    def greet(name: str) -> str:
        """A greeting."""
        return f"hello {name}"

    @server.resource("note://one")
    def one() -> str:
        """A note."""
        return "one"

    return server


def _over_loopback(session: Any) -> dict[str, str]:
    """The attributes a span of a message of ``session`` (HTTP/1.1 on 127.0.0.1) has,
    its client's port aside."""
    return {
        "mcp.session.id": session.id,
        "mcp.protocol.version": session.protocol_version,
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "network.protocol.version": "1.1",
        "client.address": "127.0.0.1",
        "server.address": "127.0.0.1",
    }


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.spec("TM-OTEL-SPAN", "TM-OTEL-PARENT")
async def test_a_tools_call_with_a_traceparent_in_meta_is_a_server_span_of_the_callers_trace(
    otel: Otel, live_server: Any
) -> None:
    """A 2025-11-25 tools/call whose _meta carries a traceparent is one SERVER span named
    "tools/call echo", child of the caller's span, with the MCP attributes."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    answer = await session.call(
        "tools/call",
        {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": TRACEPARENT}},
    )
    assert "result" in answer, answer

    [span] = otel.finished("tools/call echo")
    assert span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.is_remote
    attributes = _attrs(span)
    port = attributes.pop("client.port")
    assert isinstance(port, int) and 0 < port < 65536
    assert attributes == {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": str(answer["id"]),
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        **_over_loopback(session),
    }
    assert span.status.status_code is StatusCode.UNSET


@pytest.mark.spec("TM-OTEL-SPAN", "TM-OTEL-PARENT")
async def test_a_modern_tools_call_is_a_span_of_the_trace_in_its_meta(
    otel: Otel, live_server: Any
) -> None:
    """A 2026-07-28 tools/call is one SERVER span too, its version from its _meta, its parent
    the traceparent there (the HTTP header's is the fallback only)."""
    live = await live_server(traced_server(), otel.config())
    message = call_tool("echo", {"text": "hi"})
    message["params"]["_meta"]["traceparent"] = TRACEPARENT
    response = await post(live.url, message, extra=[("traceparent", HEADER_PARENT)])
    assert response.status == 200, response.body

    [span] = otel.finished("tools/call echo")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    attributes = _attrs(span)
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert attributes["gen_ai.tool.name"] == "echo"
    assert "mcp.session.id" not in attributes


@pytest.mark.spec("TM-OTEL-PARENT")
async def test_without_meta_context_the_http_traceparent_is_the_parent(
    otel: Otel, live_server: Any
) -> None:
    """A request whose _meta has no (valid) traceparent is parented by its HTTP request's
    traceparent header; a malformed one in _meta is ignored, not an error."""
    live = await live_server(traced_server(), otel.config())
    message = modern_request("prompts/get", {
        "name": "greet", "arguments": {"name": "x"}, "_meta": {"traceparent": "junk"},
    })
    response = await post(live.url, message, extra=[("traceparent", HEADER_PARENT)])
    assert response.status == 200, response.body

    [span] = otel.finished("prompts/get greet")
    assert format(span.context.trace_id, "032x") == HEADER_TRACE_ID
    assert _attrs(span)["gen_ai.prompt.name"] == "greet"


@pytest.mark.spec("TM-OTEL-SPAN")
async def test_errors_are_recorded_as_the_conventions_say(otel: Otel, live_server: Any) -> None:
    """A tool's isError result is error.type tool_error; a JSON-RPC error is its code in
    error.type and rpc.response.status_code, and an unknown tool's name (any client's
    choice) stays out of the span's name; a resource's URI is mcp.resource.uri."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    await session.call("tools/call", {"name": "broken", "arguments": {}})
    await session.call("tools/call", {"name": "nope" * 10, "arguments": {}})
    await session.call("resources/read", {"uri": "note://one"})

    [broken] = otel.finished("tools/call broken")
    assert _attrs(broken)["error.type"] == "tool_error"
    assert broken.status.status_code is StatusCode.ERROR
    [unknown] = otel.finished("tools/call")
    assert _attrs(unknown)["gen_ai.tool.name"] == "nope" * 10
    code = _attrs(unknown)["error.type"]
    assert code == _attrs(unknown)["rpc.response.status_code"]
    assert int(code) < 0
    [read] = otel.finished("resources/read")
    assert _attrs(read)["mcp.resource.uri"] == "note://one"
    # The unknown name is no series of the duration metric: any client could make many.
    named = {p.attributes.get("gen_ai.tool.name")
             for p in otel.points("mcp.server.operation.duration")}
    assert "broken" in named and "nope" * 10 not in named


@pytest.mark.spec("TM-OTEL-NOTIFY", "TM-OTEL-METRICS")
async def test_a_clients_notification_is_a_server_span_of_the_trace_in_its_meta(
    otel: Otel, live_server: Any
) -> None:
    """A 2025-11-25 session's notifications/initialized and a roots/list_changed whose _meta
    carries a traceparent are each a SERVER span named by their method, the second a child of
    the caller's span, with the session's attributes; each is counted in the duration metric."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url, capabilities={"roots": {"listChanged": True}})
    response = await session.notify("notifications/roots/list_changed",
                                    {"_meta": {"traceparent": TRACEPARENT}})
    assert response.status == 202

    [initialized] = otel.finished("notifications/initialized")
    [changed] = otel.finished("notifications/roots/list_changed")
    assert changed.kind is SpanKind.SERVER
    assert format(changed.context.trace_id, "032x") == TRACE_ID
    assert changed.parent is not None and format(changed.parent.span_id, "016x") == PARENT_ID
    attributes = _attrs(changed)
    assert isinstance(attributes.pop("client.port"), int)
    assert attributes == {
        "mcp.method.name": "notifications/roots/list_changed", **_over_loopback(session),
    }
    assert _attrs(initialized)["mcp.session.id"] == session.id
    methods = {p.attributes["mcp.method.name"]
               for p in otel.points("mcp.server.operation.duration")}
    assert {"notifications/initialized", "notifications/roots/list_changed"} <= methods


@pytest.mark.spec("TM-OTEL-NOTIFY")
async def test_a_notification_the_server_does_not_know_is_one_other_series(
    otel: Otel, live_server: Any
) -> None:
    """A thousand notifications of a thousand methods no table row names (a 100 KB name among
    them) are spans named _OTHER, the method, cut to 256 characters, in their attribute only,
    and one series of the duration metric, not a thousand."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    assert (await session.notify("notifications/" + "x" * 100_000)).status == 202
    for i in range(999):
        assert (await session.notify(f"notifications/made-up-{i}")).status == 202

    others = otel.finished("_OTHER")
    assert 1000 == len(others)
    assert max(len(_attrs(s)["mcp.method.name"]) for s in others) == 256
    methods = {p.attributes["mcp.method.name"]
               for p in otel.points("mcp.server.operation.duration")}
    assert {"_OTHER", "notifications/initialized"} == methods


@pytest.mark.spec("TM-OTEL-NOTIFY")
async def test_a_2026_07_28_notification_is_a_span_of_its_revision(
    otel: Otel, live_server: Any
) -> None:
    """A notification POSTed in 2026-07-28 (answered 202, dispatched to nothing) is a SERVER
    span too, its revision from its _meta, its parent the trace there, with no session."""
    live = await live_server(traced_server(), otel.config())
    message = modern_request("notifications/cancelled", {"requestId": 7,
                                                         "_meta": {"traceparent": TRACEPARENT}})
    del message["id"]
    response = await post(live.url, message)
    assert response.status == 202, response.body

    [span] = otel.finished("notifications/cancelled")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    attributes = _attrs(span)
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert "mcp.session.id" not in attributes


@pytest.mark.spec("TM-OTEL-PARENT")
async def test_a_hostile_meta_context_is_ignored(otel: Otel, live_server: Any) -> None:
    """A traceparent that is no string and a 1 MB baggage in _meta: the call is served, and
    its span starts a trace of its own."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    answer = await session.call("tools/call", {
        "name": "echo", "arguments": {"text": "x"},
        "_meta": {"traceparent": {"00": TRACEPARENT}, "baggage": "k=" + "v" * 1_000_000,
                  "tracestate": 5},
    })
    assert "result" in answer, answer
    [span] = otel.finished("tools/call echo")
    assert span.parent is None


@pytest.mark.spec("TM-OTEL-SPAN")
async def test_a_huge_tool_name_makes_a_bounded_span(otel: Otel, live_server: Any) -> None:
    """A 1 MB tool name is cut to 256 characters in the span's attributes."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    await session.call("tools/call", {"name": "x" * 1_000_000, "arguments": {}})

    [span] = otel.finished("tools/call")
    assert len(_attrs(span)["gen_ai.tool.name"]) == 256


@pytest.mark.spec("TM-OTEL-METRICS")
async def test_operation_and_session_durations_are_recorded(
    otel: Otel, live_server: Any
) -> None:
    """mcp.server.operation.duration counts each request with its method and tool;
    mcp.server.session.duration counts a session when it ends."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    await session.call("tools/call", {"name": "echo", "arguments": {"text": "a"}})
    before = sum(
        p.count for p in otel.points("mcp.server.session.duration")
    )
    assert (await session.delete()).status == 204

    ops = [
        p for p in otel.points("mcp.server.operation.duration")
        if p.attributes.get("gen_ai.tool.name") == "echo"
    ]
    assert ops and ops[0].attributes["mcp.method.name"] == "tools/call"
    with trio.fail_after(5):
        await wait_until(
            lambda: sum(p.count for p in otel.points("mcp.server.session.duration")) > before
        )


@pytest.mark.spec("TM-OTEL-INJECT")
async def test_a_request_to_the_client_carries_the_trace_context(
    otel: Otel, live_server: Any
) -> None:
    """roots/list sent from a tools/call's handler is a CLIENT span, child of the call's;
    its _meta carries that span's traceparent and the baggage the call brought (SEP-414)."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url, capabilities={"roots": {}})
    call = rpc_request("tools/call", {
        "name": "ask", "arguments": {},
        "_meta": {"traceparent": TRACEPARENT, "baggage": "tenant=acme"},
    })
    with trio.fail_after(10):
        async with open_stream(live.url, "POST", session.headers(), dumps(call)) as stream:
            asked = await stream.next_message()
            assert asked.get("method") == "roots/list", asked
            ack = await session.post({"jsonrpc": "2.0", "id": asked["id"],
                                      "result": {"roots": []}})
            assert ack.status == 202
            answer = await stream.next_message()
            assert answer.get("id") == call["id"] and "result" in answer, answer
    parent = asked["params"]["_meta"]["traceparent"]
    assert asked["params"]["_meta"]["baggage"] == "tenant=acme"
    assert parent.split("-")[1] == TRACE_ID
    [client] = otel.finished("roots/list")
    assert client.kind is SpanKind.CLIENT
    assert parent.split("-")[2] == format(client.context.span_id, "016x")
    assert _attrs(client)["jsonrpc.request.id"] == str(asked["id"])
    [span] = otel.finished("tools/call ask")
    assert client.parent is not None and client.parent.span_id == span.context.span_id


@pytest.mark.spec("TM-OTEL-EVENTS")
async def test_a_task_status_is_an_event_on_its_span(otel: Otel, live_server: Any) -> None:
    """A tool call that became a task runs as a span of the caller's trace; its task's
    status changing while it runs (here: cancelled) is an mcp.task.status event on it."""
    server = traced_server()

    @server.tool(task="required")
    async def slow() -> str:
        """Waits."""
        await trio.sleep(600)
        return "done"

    live = await live_server(server, otel.config())
    with_tasks = {"extensions": {TASKS: {}}}
    message = call_tool("slow", {}, capabilities=with_tasks)
    message["params"]["_meta"]["traceparent"] = TRACEPARENT
    response = await post(live.url, message)
    assert response.status == 200, response.body
    task_id = messages_of(response)[-1]["result"]["taskId"]
    runtime = live.app.runtime
    with trio.fail_after(10):
        await wait_until(lambda: runtime.tasks.runs[task_id].task is not None)
        cancel = modern_request("tasks/cancel", {"taskId": task_id}, capabilities=with_tasks)
        assert (await post(live.url, cancel)).status == 200
        await wait_until(lambda: bool(otel.finished("tools/call slow")))
    [span] = otel.finished("tools/call slow")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert _attrs(span)["error.type"] == "cancelled"
    events = [dict(e.attributes or {}) for e in span.events if e.name == "mcp.task.status"]
    assert {"mcp.task.id": task_id, "mcp.task.status": "cancelled"} in events


@pytest.mark.spec("TM-OTEL-EVENTS")
async def test_a_reattach_is_an_event_on_the_span_of_the_request_it_resumes(
    otel: Otel, live_server: Any
) -> None:
    """A client that left a tools/call's stream and resumes it with Last-Event-ID: the
    call's span has an mcp.stream.reattach event naming the stream and the cursor."""
    server = traced_server()
    release = trio.Event()

    @server.tool()
    async def wait() -> str:
        """Waits to be released."""
        await release.wait()
        return "released"

    live = await live_server(server, otel.config())
    session = await open_session(live.url)
    call = rpc_request("tools/call", {"name": "wait", "arguments": {}})
    with trio.fail_after(10):
        async with open_stream(live.url, "POST", session.headers(), dumps(call)) as stream:
            priming = await stream.next_event(comments=False)
            assert priming is not None and priming.id, priming
        async with session.open_get([("last-event-id", priming.id)]) as resumed:
            release.set()
            answer = await resumed.next_message()
            assert answer.get("id") == call["id"], answer
        await wait_until(lambda: bool(otel.finished("tools/call wait")))
    [span] = otel.finished("tools/call wait")
    [event] = [e for e in span.events if e.name == "mcp.stream.reattach"]
    assert event.attributes is not None and "mcp.stream.cursor" in event.attributes


@pytest.mark.spec("TM-OTEL-SPAN", "TM-OTEL-PARENT")
async def test_a_tools_call_over_stdio_is_a_span_over_a_pipe(
    otel: Otel, nursery: trio.Nursery
) -> None:
    """A host's tools/call on stdio is a span of the caller's trace too, its transport
    `pipe`, with no HTTP or address attributes."""
    to_server, stdin = trio.testing.lockstep_stream_one_way_pair()
    stdout, from_server = trio.testing.lockstep_stream_one_way_pair()
    nursery.start_soon(lambda: serve_stdio(
        traced_server(), config=otel.config(), stdin=stdin, stdout=stdout
    ))
    got = b""

    async def answer(request_id: int) -> dict[str, Any]:
        nonlocal got
        while True:
            while b"\n" not in got:
                got += await from_server.receive_some(65536)
            raw, _, got = got.partition(b"\n")
            message: dict[str, Any] = json.loads(raw)
            if message.get("id") == request_id:
                return message

    def send(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    with trio.fail_after(10):
        await to_server.send_all(send(rpc_request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}, id=1)))
        await answer(1)
        await to_server.send_all(send({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await to_server.send_all(send(rpc_request("tools/call", {
            "name": "echo", "arguments": {"text": "x"},
            "_meta": {"traceparent": TRACEPARENT}}, id=2)))
        assert "result" in await answer(2)
    [span] = otel.finished("tools/call echo")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    attributes = _attrs(span)
    assert attributes["network.transport"] == "pipe"
    assert not {
        "network.protocol.name", "network.protocol.version", "client.address", "client.port",
        "server.address",
    } & set(attributes)


_ABSENT = textwrap.dedent("""
    import json, os, sys
    if os.environ.get("BLOCK_OTEL"):
        sys.modules["opentelemetry"] = None  # as if it were not installed
    import trio
    from trio_mcp import Client, Server, ServerConfig
    server = Server("quiet")

    @server.tool()
    async def echo(text: str) -> str:
        "Says it back."
        return text

    async def main():
        config = ServerConfig(telemetry=os.environ.get("TELEMETRY") != "off")
        async with Client(server, config=config) as client:
            result = await client.call_tool("echo", {"text": "hi"})
        loaded = sorted(m for m in sys.modules if m and m.startswith("opentelemetry.")
                        or m == "trio_mcp.runtime._otelspans")
        print(json.dumps(loaded))

    trio.run(main)
""")


@pytest.mark.spec("TM-OTEL-OFF")
@pytest.mark.parametrize("how", ["absent", "config", "environment"])
def test_nothing_of_opentelemetry_is_imported_when_it_is_off(how: str) -> None:
    """Without opentelemetry (or with telemetry=False, or OTEL_SDK_DISABLED=true), serving a
    tools/call imports no module of it, nor our module that uses it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if how == "absent":
        env["BLOCK_OTEL"] = "1"
    elif how == "config":
        env["TELEMETRY"] = "off"
    else:
        env["OTEL_SDK_DISABLED"] = "true"
    proc = subprocess.run(
        [sys.executable, "-c", _ABSENT], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_when_on_the_module_is_loaded() -> None:
    """The check above can fail: with telemetry on, our module and the API are loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", _ABSENT], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "trio_mcp.runtime._otelspans" in loaded and "opentelemetry.trace" in loaded


async def test_the_http_header_context_alone_parents_a_legacy_request(
    otel: Otel, live_server: Any
) -> None:
    """A 2025-11-25 request with only the HTTP traceparent is of that trace."""
    live = await live_server(traced_server(), otel.config())
    session = await open_session(live.url)
    message = rpc_request("tools/list", {})
    response = await http_request(
        live.url, "POST",
        post_headers(session_id=session.id, protocol_version=session.protocol_version,
                     extra=[("traceparent", HEADER_PARENT)]),
        json.dumps(message).encode(),
    )
    assert response.status == 200
    [span] = otel.finished("tools/list")
    assert format(span.context.trace_id, "032x") == HEADER_TRACE_ID


def _probing_server() -> Server:
    """A server whose tool tells whether its handler runs in a span that records."""
    server = Server("probe")

    @server.tool()
    async def probe() -> str:
        """Whether this call runs in a recording span, and whether any span was made."""
        context = trace.get_current_span().get_span_context()
        return json.dumps([trace.get_current_span().is_recording(), context.is_valid])

    return server


@pytest.mark.spec("TM-OTEL-PROVIDERS")
async def test_each_server_reports_to_its_own_providers_and_leaves_the_globals_unset(
    live_server: Any,
) -> None:
    """Two servers in one process, each given its providers: each one's spans and metrics go
    to its own only. When those providers are gone the process's global providers are still
    the API's own, and a server started then with the defaults makes no span at all (its
    handler runs in none) and records nothing: no test's providers reach another's server."""
    with otel_providers() as a, otel_providers() as b:
        live_a = await live_server(_probing_server(), a.config())
        live_b = await live_server(_probing_server(), b.config())
        session_a = await open_session(live_a.url)
        session_b = await open_session(live_b.url)
        for session in (session_a, session_b, session_b):
            answer = await session.call("tools/call", {"name": "probe", "arguments": {}})
            assert json.loads(answer["result"]["content"][0]["text"]) == [True, True]
        assert [_attrs(s)["mcp.session.id"] for s in a.finished("tools/call probe")] == [
            session_a.id
        ]
        assert [_attrs(s)["mcp.session.id"] for s in b.finished("tools/call probe")] == [
            session_b.id
        ] * 2
        counts = [
            sum(p.count for p in o.points("mcp.server.operation.duration")
                if p.attributes.get("gen_ai.tool.name") == "probe")
            for o in (a, b)
        ]
        assert counts == [1, 2]

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert not isinstance(metrics.get_meter_provider(), MeterProvider)
    live = await live_server(_probing_server())
    session = await open_session(live.url)
    answer = await session.call("tools/call", {"name": "probe", "arguments": {}})
    assert json.loads(answer["result"]["content"][0]["text"]) == [False, False]
    telemetry = live.app.runtime.requests.telemetry
    assert telemetry is not None and telemetry.idle()
    assert len(a.finished("tools/call probe")) == 1 and len(b.finished("tools/call probe")) == 2


_LATE = textwrap.dedent("""
    import json, time
    import trio
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from trio_mcp import Client, Server

    server = Server("late")

    @server.tool()
    async def probe() -> str:
        "Whether this call runs in a recording span."
        return str(trace.get_current_span().is_recording())

    def counted(reader):
        data = reader.get_metrics_data()
        return sum(p.count for rm in (data.resource_metrics if data else ())
                   for sm in rm.scope_metrics for m in sm.metrics
                   if m.name == "mcp.server.operation.duration"
                   for p in m.data.data_points if p.attributes.get("gen_ai.tool.name") == "probe")

    async def call(client):
        result = await client.call_tool("probe", {})
        return result["content"][0]["text"]

    async def main():
        out = {}
        async with Client(server) as client:
            out["before"] = await call(client)
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            await trio.sleep(1.2)  # past LOOK_EVERY: the next request looks again
            out["meter set"] = await call(client)
            out["calls counted"] = counted(reader)
            spans = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(spans))
            trace.set_tracer_provider(provider)
            out["tracer set"] = await call(client)
            out["spans"] = [s.name for s in spans.get_finished_spans()]
        print(json.dumps(out))

    trio.run(main)
""")


@pytest.mark.slow
@pytest.mark.spec("TM-OTEL-OFF", "TM-OTEL-PROVIDERS")
def test_global_providers_set_after_the_server_started_are_found_within_a_second() -> None:
    """A server with the defaults makes no span while no global provider is set; a meter
    provider set globally later is found within a second (the call before it is not
    counted, the call after is), and a tracer provider set after that records the next
    call's span. In a subprocess: the global providers cannot be unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", _LATE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "before": "False", "meter set": "False", "calls counted": 1,
        "tracer set": "True", "spans": ["tools/call probe"],
    }


@pytest.mark.slow
@pytest.mark.spec("TM-OTEL-EVENTS", "TM-BP-STALL")
async def test_a_stall_cut_is_an_event_on_the_span_of_the_call_it_cuts(
    otel: Otel, live_server: Any
) -> None:
    """A client that sends a tools/call and never reads its stream: the server cuts the
    stream (TM-BP-STALL) while the call keeps running, and the call's span, which ends with
    it, has an mcp.stream.cut event naming the stream and the cursor reached."""
    server, record = make_server()
    live = await live_server(server, otel.config(stall_budget=1.0, signal_timeout=0.5))
    session = await open_session(live.url)
    message = rpc_request(
        "tools/call", {"name": "stream", "arguments": {"n": 300, "size": 2000, "tag": "x"}}
    )
    with trio.fail_after(30):
        cm = open_slow(("127.0.0.1", live.port), "POST", "/mcp", session.headers(),
                       dumps(message))
        async with cm as client:
            await client.read_head()
            await wait_until(lambda: live.stats()["streams_cut"] >= 1)
            await wait_until(lambda: "x" in record.finished)
        await wait_until(lambda: bool(otel.finished("tools/call stream")))
    [span] = otel.finished("tools/call stream")
    [event] = [e for e in span.events if e.name == "mcp.stream.cut"]
    attributes = dict(event.attributes or {})
    assert isinstance(attributes["mcp.stream.id"], int)
    assert isinstance(attributes["mcp.stream.cursor"], int)
