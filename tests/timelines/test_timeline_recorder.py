# The trace recorder (trio_mcp.base._trace): what the runtime tells it while a real server serves
# a session over loopback, and how it turns that into a stable trace file.
from __future__ import annotations

import json

import attrs
import trio
from support.client import open_session, rpc_request
from support.fixtures import StartServer, wait_until
from support.resume import Wire, open_call, read_until

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.base._trace import (
    TraceKind,
    TraceRecord,
    TraceRecorder,
    anonymise,
    dumps_trace,
    loads_trace,
)

TIMEOUT = 10

server = Server("timeline-recorder")
RELEASE: dict[str, trio.Event] = {}


@server.tool()
async def twice(ctx: Context) -> str:
    """Report progress twice, then return."""
    await ctx.report_progress(1, 2)
    await ctx.report_progress(2, 2)
    return "done"


@server.tool()
async def hold(key: str) -> str:
    """Wait until the test releases it.

    Args:
        key: names the event the test sets.
    """
    await RELEASE.setdefault(key, trio.Event()).wait()
    return "released"


def _call(name: str, arguments: dict[str, object] | None = None) -> dict[str, object]:
    params = {"name": name, "arguments": arguments or {}, "_meta": {"progressToken": 1}}
    return rpc_request("tools/call", params)


def of(trace: list[TraceRecord], kind: TraceKind) -> list[int]:
    return [i for i, r in enumerate(trace) if r.kind is kind]


def test_no_tracer_is_installed_by_default() -> None:
    """ServerConfig().tracer is None: the runtime records nothing unless asked."""
    assert ServerConfig().tracer is None


async def test_a_handler_start_and_end_appear_once_around_its_appends(
    live_server: StartServer,
) -> None:
    """A call's handler start and end are each recorded once, the start before every
    event it appends and the end after its response; each delivery follows its append,
    the connection attaches before it delivers and detaches last."""
    recorder = TraceRecorder(clock=trio.current_time)
    live = await live_server(server, ServerConfig(tracer=recorder))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        recorder.raw.clear()
        async with open_call(session, _call("twice")) as stream:
            assert await read_until(stream, Wire())
        await wait_until(lambda: TraceKind.DETACH in recorder.kinds())
    trace = recorder.trace()

    [start] = of(trace, TraceKind.HANDLER_START)
    [end] = of(trace, TraceKind.HANDLER_END)
    appends = [trace[i] for i in of(trace, TraceKind.APPEND) if trace[i].detail != "priming"]
    assert [a.method for a in appends] == ["notifications/progress"] * 2 + [None]
    assert appends[-1].detail == "response"
    assert start < trace.index(appends[0]) and trace.index(appends[-1]) < end
    assert trace[end].detail == "returned"
    [attach] = of(trace, TraceKind.ATTACH)
    [detach] = of(trace, TraceKind.DETACH)
    assert trace[detach].detail == "complete" and detach == len(trace) - 1
    appended_at = {trace[i].seq: i for i in of(trace, TraceKind.APPEND)}
    for i in of(trace, TraceKind.DELIVER):
        assert attach < i < detach
        assert appended_at[trace[i].seq] < i


async def test_notifications_cancelled_is_recorded_before_the_handler_ends_cancelled(
    live_server: StartServer,
) -> None:
    """notifications/cancelled shows as a request on its own connection, a CANCEL of the
    request, then the handler's end as cancelled."""
    recorder = TraceRecorder()
    live = await live_server(server, ServerConfig(tracer=recorder))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        message = _call("hold", {"key": "never"})
        async with open_call(session, message) as stream:
            assert await stream.next_event() is not None
            await session.notify("notifications/cancelled", {"requestId": message["id"]})
            await wait_until(lambda: TraceKind.HANDLER_END in recorder.kinds())
    trace = recorder.trace()

    [cancel] = of(trace, TraceKind.CANCEL)
    [end] = of(trace, TraceKind.HANDLER_END)
    assert trace[cancel - 1].kind is TraceKind.REQUEST
    assert trace[cancel - 1].detail == "notifications/cancelled"
    assert cancel < end and trace[end].detail == "cancelled"
    assert trace[cancel].request == trace[end].request == "r2"


async def test_the_trace_names_no_raw_session_id_or_request_id(
    live_server: StartServer,
) -> None:
    """The written trace has s1, c1, r1... for the session's random id, the responders'
    identities and the client's JSON-RPC ids, and no wall-clock time."""
    recorder = TraceRecorder(clock=trio.current_time)
    live = await live_server(server, ServerConfig(tracer=recorder))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        message = _call("twice")
        async with open_call(session, message) as stream:
            assert await read_until(stream, Wire())
    text = dumps_trace(recorder.trace())

    assert session.id not in text
    assert f'"request":{message["id"]}' not in text
    assert '"at"' not in text
    records = [json.loads(line) for line in text.splitlines()[1:]]
    assert {r["session"] for r in records} == {"s1"}
    assert {r["conn"] for r in records if "conn" in r} <= {"c1", "c2", "c3"}


def test_a_new_request_gets_a_new_name_even_for_a_reused_identity() -> None:
    """An identity seen again on a REQUEST (an object freed and its id reused, a JSON-RPC
    id used again) is a new exchange: c1 then c2, r1 then r2."""
    raw = [
        TraceRecord(kind=TraceKind.REQUEST, session="x", conn=7, request=1),
        TraceRecord(kind=TraceKind.HANDLER_START, session="x", request=1),
        TraceRecord(kind=TraceKind.REPLY, session="x", conn=7, status=202),
        TraceRecord(kind=TraceKind.REQUEST, session="x", conn=7, request=1),
        TraceRecord(kind=TraceKind.HANDLER_START, session="x", request=1),
    ]

    trace = anonymise(raw)

    assert [(r.conn, r.request) for r in trace] == [
        ("c1", "r1"), (None, "r1"), ("c1", None), ("c2", "r2"), (None, "r2"),
    ]


def test_commuting_records_are_put_in_one_order_and_others_keep_theirs() -> None:
    """Adjacent handler ends and detaches (which trio may run in either order) come out
    sorted; an append between them is a boundary that nothing crosses."""
    def end(request: str) -> TraceRecord:
        return TraceRecord(kind=TraceKind.HANDLER_END, session="s", request=request)

    def detach(conn: int) -> TraceRecord:
        return TraceRecord(kind=TraceKind.DETACH, session="s", conn=conn)

    append = TraceRecord(kind=TraceKind.APPEND, session="s", stream=1, seq=1)
    one = [
        TraceRecord(kind=TraceKind.REQUEST, session="s", conn=1, request="a"),
        TraceRecord(kind=TraceKind.REQUEST, session="s", conn=2, request="b"),
        detach(2), end("b"), detach(1), end("a"), append, end("b"),
    ]
    other = [*one[:2], end("a"), detach(1), end("b"), detach(2), append, end("b")]

    assert anonymise(one) == anonymise(other)
    assert [r.kind for r in anonymise(one)][2:] == [
        TraceKind.HANDLER_END, TraceKind.HANDLER_END, TraceKind.DETACH, TraceKind.DETACH,
        TraceKind.APPEND, TraceKind.HANDLER_END,
    ]


def test_a_trace_file_round_trips_with_or_without_times() -> None:
    """dumps_trace and loads_trace give back the records and the title; without timing the
    times are left out, with it they are relative to the first record."""
    ticks = iter([100.0, 100.25])
    recorder = TraceRecorder(clock=lambda: next(ticks))
    recorder.record(TraceRecord(kind=TraceKind.SESSION_OPEN, session="secret"))
    recorder.record(TraceRecord(kind=TraceKind.SESSION_CLOSE, session="secret", detail="x"))

    title, timed = loads_trace(recorder.dumps(title="t", timing=True))
    _, untimed = loads_trace(recorder.dumps())

    assert title == "t"
    assert [r.at for r in timed] == [0.0, 0.25]
    assert timed == recorder.trace()
    assert untimed == [attrs.evolve(r, at=None) for r in timed]


def test_a_paused_recorder_keeps_nothing() -> None:
    """Records given while ``paused`` are dropped: a scenario sets up unrecorded."""
    recorder = TraceRecorder(paused=True)
    recorder.record(TraceRecord(kind=TraceKind.SESSION_OPEN, session="s"))
    recorder.paused = False
    recorder.record(TraceRecord(kind=TraceKind.SESSION_CLOSE, session="s"))

    assert recorder.kinds() == [TraceKind.SESSION_CLOSE]
