# How a 2026-07-28 request is answered, end to end over loopback: JSON until its handler sends
# a notification, then an SSE stream that keeps nothing (no ids, no retry, no priming); log
# messages only at the request's own level; the client's leaving, or its reader stalling, is
# the request's cancellation.
from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
import trio
from support.fixtures import StartServer, wait_until
from support.modern import (
    META_SERVER_INFO,
    call_tool,
    messages_of,
    modern_headers,
    modern_request,
    open_modern,
    open_raw,
    post,
    raw_events,
    read_to_eof,
    read_until,
)
from support.slow import open_slow

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.runtime._stats import as_dict

TIMEOUT = 10


def assert_data_only(body: bytes) -> list[dict[str, Any]]:
    """Every event of an SSE body is one ``data:`` line of JSON: no id, event, retry or
    comment, and no empty priming event. Returns the messages."""
    out = []
    for lines in raw_events(body):
        assert 1 == len(lines), lines
        [line] = lines
        assert line.startswith("data: "), line
        out.append(json.loads(line[len("data: "):]))
    return out


# -- JSON or SSE -------------------------------------------------------------------------------


@pytest.mark.spec("MT-POST-7", "TM-MOD-JSON", "MJ-RES-1", "MJ-RES-2", "MJ-RES-3", "ML-META-4")
async def test_a_tool_that_sends_nothing_is_answered_with_one_json_body(
    live_server: StartServer,
) -> None:
    """echo sends no notification: one application/json response with the complete result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        response = await post(live.url, call_tool("echo", {"text": "hello"}, id="j-1"))

    assert 200 == response.status
    assert "application/json" == response.content_type
    assert str(len(response.body)) == response.header("content-length")
    assert response.header("mcp-session-id") is None
    body = response.json()
    assert {"jsonrpc": "2.0", "id": "j-1", "result": {
        "content": [{"type": "text", "text": "hello"}],
        "resultType": "complete",
        "_meta": {META_SERVER_INFO: {"name": "trio-mcp-demo", "version": "0.1.0"}},
    }} == body
    stats = live.app.runtime.modern.stats
    assert (1, 0) == (stats.requests, stats.requests_streamed)


@pytest.mark.spec(
    "MT-POST-7", "MT-SSE-1", "MT-SSE-2", "MT-SSE-4", "MT-SSE-5", "MT-SSE-6", "MT-SSE-7",
    "TM-MOD-JSON", "MU-PROG-1", "MU-PROG-2", "MU-PROG-5", "MT-GEN-1", "MT-GEN-2", "MJ-NOTIF-2",
    "MJ-MSG-1",
)
@pytest.mark.parametrize("token", ["tok-1", "42", "progress/ü ✓ 7"])
async def test_progress_turns_the_answer_into_an_sse_stream_of_data_lines(
    live_server: StartServer, token: str
) -> None:
    """Progress makes the answer SSE: data-only events, token verbatim, result last."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        message = call_tool("test_tool_with_progress", id="s-1", progress_token=token)
        response = await post(live.url, message)
        # The same call read incrementally: the stream ends right after the result.
        async with open_modern(live.url, dict(message, id="s-2")) as stream:
            head = (stream.status, stream.content_type, stream.header("x-accel-buffering"))
            seen = [m async for m in _messages(stream)]
            ended, truncated = stream.ended, stream.truncated

    assert 200 == response.status
    assert "text/event-stream" == response.content_type
    assert "no" == response.header("x-accel-buffering")
    assert response.header("mcp-session-id") is None
    assert not response.truncated
    messages = assert_data_only(response.body)
    # MT-GEN-1: UTF-8 on the wire, the token's characters as they are.
    assert token.encode("utf-8") in response.body
    assert all("2.0" == m["jsonrpc"] for m in messages)
    # MT-GEN-2: notifications and the response, never a request of the server's.
    assert all(not ("method" in m and "id" in m) for m in messages)
    *progress, result = messages
    assert ["notifications/progress"] * 3 == [m["method"] for m in progress]
    for m in progress:
        assert token == m["params"]["progressToken"]
        assert isinstance(m["params"]["progressToken"], str)
        assert "id" not in m
    assert [0, 50, 100] == [m["params"]["progress"] for m in progress]
    assert "s-1" == result["id"]
    assert "complete" == result["result"]["resultType"]
    assert [{"type": "text", "text": token}] == result["result"]["content"]

    assert (200, "text/event-stream", "no") == head
    assert ["notifications/progress"] * 3 + [None] == [m.get("method") for m in seen]
    assert "s-2" == seen[-1]["id"]
    assert ended and not truncated
    assert 2 == live.app.runtime.modern.stats.requests_streamed


async def _messages(stream: Any) -> Any:
    while (event := await stream.next_event()) is not None:
        assert event.comment is None and event.id is None and event.retry is None, event
        yield json.loads(event.data)


@pytest.mark.spec("MU-LOG-3", "MU-LOG-4", "MT-SSE-7", "TM-MOD-JSON")
@pytest.mark.parametrize(
    ("level", "expected"),
    [(None, 0), ("debug", 3), ("info", 3), ("notice", 0), ("error", 0), ("emergency", 0)],
)
async def test_log_messages_come_only_at_or_above_the_requests_own_level(
    live_server: StartServer, level: str | None, expected: int
) -> None:
    """Log messages come only with _meta logLevel, and only at or above it."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        response = await post(
            live.url, call_tool("test_logging_tool", id="log", log_level=level)
        )

    assert 200 == response.status
    if expected:
        assert "text/event-stream" == response.content_type
        messages = assert_data_only(response.body)
    else:
        assert "application/json" == response.content_type
        messages = messages_of(response)
    *logs, result = messages
    assert expected == len(logs)
    for m in logs:
        assert "notifications/message" == m["method"]
        assert "info" == m["params"]["level"]
        assert "demo" == m["params"]["logger"]
    assert [
        "test_logging_tool started", "test_logging_tool working", "test_logging_tool done"
    ][:expected] == [m["params"]["data"] for m in logs]
    assert "log" == result["id"]
    assert "complete" == result["result"]["resultType"]


def _failing_server() -> Server:
    server = Server("failing")

    @server.prompt()
    async def broken_prompt() -> str:
        """Fails with an internal detail."""
        raise RuntimeError("password=hunter2 at /srv/app/db.py")

    @server.resource("test://broken", mime_type="text/plain")
    async def broken_resource() -> str:
        """Fails with an internal detail."""
        raise RuntimeError("password=hunter2 at /srv/app/db.py")

    return server


@pytest.mark.spec("MU-LOG-6", "TM-RPC-INTERNAL", "MU-RES-2")
@pytest.mark.parametrize(
    ("method", "params"),
    [("prompts/get", {"name": "broken_prompt"}), ("resources/read", {"uri": "test://broken"})],
    ids=["prompt", "resource"],
)
async def test_a_failing_handler_sends_no_log_message_and_no_internal_detail(
    live_server: StartServer, method: str, params: dict[str, Any]
) -> None:
    """At log level debug, a failing handler's answer is one bare -32603: no log, no trace."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_failing_server())
        message = modern_request(method, params, id="broken", log_level="debug")
        response = await post(live.url, message)

    # JSON, not a stream: no notifications/message went out before the answer.
    assert 200 == response.status
    assert "application/json" == response.content_type
    assert {"jsonrpc": "2.0", "id": "broken",
            "error": {"code": -32603, "message": "Internal error"}} == response.json()
    assert b"hunter2" not in response.body and b"/srv/app" not in response.body


# -- a test server whose handlers say what happened to them ---------------------------------


@attrs.define
class Held:
    started: trio.Event = attrs.Factory(trio.Event)
    started_at: float | None = None
    cancelled_at: float | None = None
    finished: bool = False
    sent_after_cancel: list[bool] = attrs.Factory(list)
    gate: trio.Event = attrs.Factory(trio.Event)
    progress_sent: int = 0


def holding_server() -> tuple[Server, dict[str, Held]]:
    """A server whose `hold` tool waits forever (after one progress report if asked),
    recording its start and its cancellation, and trying to send once more after it was
    cancelled; whose `gated` tool reports progress, then waits for its gate; and whose
    `flood` tool sends progress reports as fast as it may."""
    server = Server("hold-tests")
    held: dict[str, Held] = {}

    @server.tool()
    async def hold(ctx: Context, tag: str, report: bool = False) -> str:
        """Wait until cancelled.

        Args:
            tag: the name under which the test finds this call.
            report: report progress once first (the answer becomes a stream).
        """
        record = held.setdefault(tag, Held())
        record.started_at = trio.current_time()
        if report:
            await ctx.report_progress(1, None, "holding")
        record.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            record.cancelled_at = trio.current_time()
            with trio.CancelScope(shield=True):
                # MT-CANCEL-2: a cancelled request sends nothing more; the port refuses.
                record.sent_after_cancel.append(await ctx.report_progress(2, None, "late"))
                record.sent_after_cancel.append(await ctx.log("error", "late"))
            raise
        record.finished = True
        return "never"

    @server.tool()
    async def gated(ctx: Context, tag: str) -> str:
        """Report progress, then wait until the test opens the gate.

        Args:
            tag: the name under which the test finds this call.
        """
        record = held.setdefault(tag, Held())
        await ctx.report_progress(1, 2, "before the gate")
        record.started.set()
        await record.gate.wait()
        await ctx.report_progress(2, 2, "after the gate")
        record.finished = True
        return "through"

    @server.tool()
    async def flood(
        ctx: Context, tag: str, n: int = 1000, size: int = 4000, delay: float = 0.0
    ) -> str:
        """Send n progress reports of about size bytes each.

        Args:
            tag: the name under which the test finds this call.
            n: how many.
            size: padding per report.
            delay: seconds between reports (0: the reports are the only awaits).
        """
        record = held.setdefault(tag, Held())
        record.started.set()
        pad = "x" * size
        try:
            for i in range(n):
                await ctx.report_progress(i + 1, n, pad)
                record.progress_sent = i + 1
                if delay:
                    await trio.sleep(delay)
        except trio.Cancelled:
            record.cancelled_at = trio.current_time()
            raise
        record.finished = True
        return "flooded"

    return server, held


# -- disconnect is cancellation ------------------------------------------------------------------


@pytest.mark.spec(
    "MU-CANCEL-1", "MU-CANCEL-3", "MT-CANCEL-1", "MT-CANCEL-2", "MU-PROG-5", "TM-MOD-JSON",
)
@pytest.mark.parametrize("streamed", [False, True], ids=["json-phase", "sse-phase"])
async def test_dropping_the_connection_cancels_the_handler_at_once(
    live_server: StartServer, streamed: bool
) -> None:
    """Dropping the connection mid-request cancels the handler at once; nothing is left."""
    server, held = holding_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        # A token and a log level, so that the handler's sends after its cancellation
        # would go out but for the cancellation.
        message = call_tool("hold", {"tag": "a", "report": streamed}, id="c-1",
                            progress_token="p", log_level="debug")
        got = bytearray()
        async with open_raw(live.url, message) as sock:
            await held.setdefault("a", Held()).started.wait()
            if streamed:
                await read_until(sock, got, b"notifications/progress")
            assert 1 == len(runtime.modern.running)
            dropped_at = trio.current_time()
            await sock.aclose()
        await wait_until(lambda: not runtime.modern.running)
        emptied_at = trio.current_time()

    record = held["a"]
    assert record.cancelled_at is not None and not record.finished
    assert record.cancelled_at - dropped_at < 1.0
    assert emptied_at - dropped_at < 1.0
    assert [False, False] == record.sent_after_cancel
    stats = runtime.modern.stats
    assert (1, 1, int(streamed)) == (
        stats.requests, stats.requests_cancelled, stats.requests_streamed
    )
    assert 0 == as_dict(runtime.statistics())["modern_requests_running"]


@pytest.mark.spec("MU-CANCEL-1", "MU-CANCEL-3", "MT-CANCEL-1")
async def test_a_handler_that_only_sends_is_cancelled_when_its_client_leaves(
    live_server: StartServer,
) -> None:
    """A handler whose only awaits are its reports is cancelled when its client leaves."""
    # Ten rounds: where the handler is parked when its client leaves (in a report's
    # checkpoint, or waiting for the writer's room) varies from run to run.
    server, held = holding_server()
    n, rounds = 50_000, 10
    with trio.fail_after(TIMEOUT * 2):
        live = await live_server(server)
        runtime = live.app.runtime
        for r in range(rounds):
            message = call_tool("flood", {"tag": f"s{r}", "n": n, "size": 10}, id=f"c-{r}",
                                progress_token="s")
            got = bytearray()
            async with open_raw(live.url, message) as sock:
                await read_until(sock, got, b"notifications/progress")
                await sock.aclose()
            await wait_until(lambda: not runtime.modern.running)

    outcomes = [
        "cancelled" if held[f"s{r}"].cancelled_at is not None else
        f"ran on to report {held[f's{r}'].progress_sent}" for r in range(rounds)
    ]
    assert ["cancelled"] * rounds == outcomes
    assert rounds == runtime.modern.stats.requests_cancelled


@pytest.mark.spec("MU-CANCEL-1", "MT-CANCEL-1", "MT-CANCEL-2", "MU-PROG-5")
@pytest.mark.parametrize("streamed", [False, True], ids=["json-phase", "sse-phase"])
async def test_after_a_half_close_nothing_more_is_written_for_the_request(
    live_server: StartServer, streamed: bool
) -> None:
    """After the client half-closes, the server writes nothing more for the request."""
    # A half-closed client has left (the server sees EOF) but still reads: before the stream
    # began it gets no response at all; after, no further event and no terminating chunk.
    server, held = holding_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        message = call_tool("hold", {"tag": "h", "report": streamed}, id="c-2",
                            progress_token="p", log_level="debug")
        got = bytearray()
        async with open_raw(live.url, message) as sock:
            await held.setdefault("h", Held()).started.wait()
            if streamed:
                await read_until(sock, got, b"notifications/progress")
                await read_until(sock, got, b"\n\n")
            before = bytes(got)
            await sock.send_eof()
            rest = await read_to_eof(sock)
        await wait_until(lambda: not runtime.modern.running)

    assert held["h"].cancelled_at is not None and not held["h"].finished
    assert [False, False] == held["h"].sent_after_cancel
    assert b"" == rest, rest
    if streamed:
        head, _, body = before.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"notifications/progress" in body and b'"id"' not in body
    else:
        assert b"" == before
    assert 1 == runtime.modern.stats.requests_cancelled


@pytest.mark.spec("MU-CANCEL-4", "MU-CANCEL-1", "MT-CANCEL-2")
async def test_clients_leaving_at_any_moment_leave_the_server_sound(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Clients that leave at any moment, even as their answer completes, leave no error."""
    # Requests of every kind (JSON, streamed, input_required), each dropped at a different
    # point: at once, a little later, or once some of the answer came. Whichever wins the
    # race, the client's leaving or the answer, the server logs no error, keeps nothing
    # running, and answers the next client.
    with trio.fail_after(TIMEOUT * 3):
        live = await live_server()
        runtime = live.app.runtime
        messages = [
            call_tool("echo", {"text": "x"}),
            call_tool("test_tool_with_progress", progress_token="r"),
            call_tool("countdown", {"n": 3, "interval": 0.01}, progress_token="c"),
            call_tool("test_streaming_elicitation", capabilities={"elicitation": {}}),
            call_tool("test_logging_tool", log_level="info"),
        ]
        for i in range(60):
            message = messages[i % len(messages)]
            async with open_raw(live.url, message) as sock:
                if i % 3 == 1:
                    await trio.sleep(0.002 * (i % 7))
                elif i % 3 == 2:
                    got = bytearray()
                    with trio.move_on_after(0.5):
                        await read_until(sock, got, b"data: " if i % 2 else b"HTTP/1.1")
                await sock.aclose()
        await wait_until(lambda: not runtime.modern.running)
        after = await post(live.url, call_tool("echo", {"text": "still here"}, id="after"))

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [] == errors, [r.getMessage() for r in errors]
    stats = runtime.modern.stats
    assert 61 == stats.requests
    assert stats.requests_cancelled <= 60
    assert 200 == after.status and b"still here" in after.body


# -- keep-alive and stalls on a request's stream -------------------------------------------------


@pytest.mark.spec("TM-MOD-KEEPALIVE", "MT-SSE-4")
async def test_an_idle_request_stream_gets_keep_alive_comments(live_server: StartServer) -> None:
    """An idle request stream gets ': keep-alive' comments, then its result ends it."""
    server, held = holding_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server, ServerConfig(keepalive_interval=0.1))
        message = call_tool("gated", {"tag": "g"}, id="k-1", progress_token="k")
        async with open_modern(live.url, message) as stream:
            events = [await stream.next_event() for _ in range(3)]
            held["g"].gate.set()
            rest = [e async for e in stream.events()]
            ended, truncated = stream.ended, stream.truncated

    first, *comments = events
    assert first is not None and first.data and "before the gate" in first.data
    for comment in comments:
        assert comment is not None and "keep-alive" == comment.comment and comment.data is None
    data = [json.loads(e.data) for e in rest if e.data]
    assert ["notifications/progress", None] == [m.get("method") for m in data]
    assert "k-1" == data[-1]["id"] and "through" in json.dumps(data[-1]["result"])
    assert ended and not truncated


@pytest.mark.slow
@pytest.mark.spec("TM-BP-STALL", "TM-BP-RELEASE", "TM-BP-PRODUCER", "MU-CANCEL-3", "MT-CANCEL-2")
@pytest.mark.parametrize("delay", [0.0, 0.001], ids=["sends-only", "sleeps-between"])
async def test_a_request_stream_whose_reader_stops_is_cut_and_its_handler_cancelled(
    live_server: StartServer, delay: float
) -> None:
    """A request stream whose reader stops is cut by the stall rule; its handler cancelled."""
    # The client reads the head, then nothing, through a 4 KiB receive buffer. The handler,
    # held back by the lagging reader, must be cancelled whether or not it has awaits of its
    # own besides its reports; the client finds the connection closed without the result.
    server, held = holding_server()
    config = ServerConfig(stall_budget=1.0, min_read_rate=2048.0)
    with trio.fail_after(30):
        live = await live_server(server, config)
        runtime = live.app.runtime
        message = call_tool("flood", {"tag": "f", "n": 2000, "size": 4000, "delay": delay},
                            id="st-1", progress_token="f")
        async with open_slow(
            (live.host, live.port), "POST", "/mcp", modern_headers(message),
            json.dumps(message).encode(),
        ) as client:
            await client.read_head()
            opened = trio.current_time()
            await wait_until(lambda: runtime.modern.stats.streams_cut >= 1)
            cut_after = trio.current_time() - opened
            await wait_until(lambda: not runtime.modern.running)
            # Reading at last: what the socket buffers hold, then the end.
            await client.read(None)

    record = held["f"]
    assert record.cancelled_at is not None and not record.finished
    # The producer was held to the reader's pace: far fewer reports than asked for.
    assert record.progress_sent < 2000
    assert 1 == runtime.modern.stats.streams_cut
    assert 1 == runtime.modern.stats.requests_cancelled
    # Within a generous bound of the budget (the kernel's buffers are judged first).
    assert 1.0 <= cut_after <= 10.0, cut_after
    assert 200 == client.status
    assert client.eof or client.reset
    assert not client.ended
    assert all(m.get("id") is None for m in client.messages), "no result after a cut"




# -- shutdown ----------------------------------------------------------------------------------


@pytest.mark.spec("MJ-ERR-8", "TM-SESS-SHUTDOWN", "MT-POST-7")
async def test_a_request_the_shutdown_ends_is_answered_with_31002(
    live_server: StartServer,
) -> None:
    """Still running after the grace: 503 -31002, or -31002 ending its stream; later: 503."""
    server, held = holding_server()
    answers: dict[str, Any] = {}

    async def call(tag: str, report: bool) -> None:
        message = call_tool("hold", {"tag": tag, "report": report}, id=tag, progress_token="t")
        answers[tag] = await post(live.url, message)

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "quiet", False)
            nursery.start_soon(call, "chatty", True)
            await wait_until(lambda: {"quiet", "chatty"} <= held.keys())
            await held["quiet"].started.wait()
            await held["chatty"].started.wait()
            await runtime.shutdown(0.1)
        late = await post(live.url, call_tool("hold", {"tag": "late"}, id="late"))

    quiet, chatty = answers["quiet"], answers["chatty"]
    # Nothing was sent yet: the refusal is the whole answer, with the request's id.
    assert 503 == quiet.status
    assert "application/json" == quiet.content_type
    assert "quiet" == quiet.json()["id"]
    assert -31002 == quiet.json()["error"]["code"]
    # Progress went out first: the stream's last event is the error.
    assert 200 == chatty.status
    assert "text/event-stream" == chatty.content_type
    *before, last = assert_data_only(chatty.body)
    assert ["notifications/progress"] == [m["method"] for m in before]
    assert ("chatty", -31002) == (last["id"], last["error"]["code"])
    # A request that comes after the shutdown is refused before it runs.
    assert 503 == late.status
    assert -31002 == late.json()["error"]["code"]
    assert "late" not in held
