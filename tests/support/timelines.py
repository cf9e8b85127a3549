# Recorded timelines (issue 23): scenarios that drive a real server over loopback, as the
# tests do, with a TraceRecorder installed, so that the sequence diagrams of spec/ and the
# docs are drawn from what the runtime did, not by hand.
#
# Each scenario moves one step at a time: a tool waits on a Gate, and the driver waits for
# what it expects (the client read an event, the server saw the connection go) before the
# next step. Only then is a trace the same from one run to the next; trio's scheduler is
# made deterministic for the run too (`deterministic_scheduling`), and the trace file keeps
# order, not time. `regenerate()` is what `python docs/diagrams.py` runs, and what
# tests/diagrams/test_diagrams_fresh.py compares with the committed files.
from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import trio
from trio.testing import MockClock

from support.client import McpSession, open_session, rpc_request
from support.fixtures import LiveServer, start_live, wait_until
from support.modern import call_tool, post
from support.resume import Gate, Wire, open_call, read_until, resume
from support.slow import MemoryServer, PacedResponder, make_server
from trio_mcp import Context, Server, ServerConfig
from trio_mcp.base._trace import TraceKind, TraceRecord, TraceRecorder, dumps_trace
from trio_mcp.cli._diagram import render_svg
from trio_mcp.runtime.legacy._session import Session

__all__ = [
    "DOCS",
    "SCENARIOS",
    "Scenario",
    "deterministic_scheduling",
    "record",
    "regenerate",
]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TIMEOUT = 20

server = Server("timelines")
GATES: dict[str, Gate] = {}


@server.tool()
async def stepped(key: str, n: int, ctx: Context) -> str:
    """Report progress n times, each when the driver allows it; return when released.

    Args:
        key: names the gate the driver holds.
        n: how many progress notifications at most.
    """
    gate = GATES[key]
    for i in range(n):
        if not await gate.turn(i):
            break
        await ctx.report_progress(i + 1, n)
        gate.sent = i + 1
        gate.poke()
    await gate.wait_for(lambda: gate.finish)
    return "done"


@server.tool()
async def ask_twice(ctx: Context) -> str:
    """Ask the user two questions, one after the other."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    city = await ctx.elicit("Which city?", schema, key="city")
    day = await ctx.elicit("Which day?", schema, key="day")
    return f"{city.content['answer']} on {day.content['answer']}"


def _gate() -> tuple[str, Gate]:
    key = f"g{len(GATES)}"
    GATES[key] = Gate()
    return key, GATES[key]


def _call(key: str, n: int) -> dict[str, Any]:
    params = {"name": "stepped", "arguments": {"key": key, "n": n}, "_meta": {"progressToken": 1}}
    return rpc_request("tools/call", params)


def _session_of(live: LiveServer, session: McpSession) -> Session:
    return live.table.sessions[session.id]


async def drop_and_resume(live: LiveServer, recorder: TraceRecorder) -> None:
    """A POST whose SSE stream drops after an event the client never read; the handler
    runs on; GET with Last-Event-ID re-attaches the stream and nothing is lost."""
    session = await open_session(live.url)
    state = _session_of(live, session)
    key, gate = _gate()
    wire = Wire()
    recorder.paused = False
    async with open_call(session, _call(key, 4)) as stream:
        priming = await stream.next_event()
        assert priming is not None
        wire.take(priming)
        for _ in range(2):
            await gate.allow(1)
            await read_until(stream, wire, messages=1)
        # The third goes out on the wire, but the client leaves before reading it.
        await gate.allow(1)
        [view] = state.views.values()
        log = state.log.stream(view.stream)
        assert log is not None
        sent = log.last_seq
        await wait_until(lambda: view.delivered >= sent)
        cursor = wire.last_id
        assert cursor is not None
        read = cursor.split(".")
        recorder.record(TraceRecord(
            kind=TraceKind.CLIENT,
            detail=f"has read up to {read[0]}.{read[1]}; closes the connection",
        ))
    await wait_until(lambda: not state.views)
    # The handler runs on (T-PSSE-12): one more notification, then its response.
    await gate.allow(1)
    gate.release()
    await wait_until(lambda: not state.inflight)
    assert cursor is not None
    async with resume(session, cursor) as again:
        ended = await read_until(again, wire)
        assert ended
    assert [m.get("params", {}).get("progress") for m in wire.messages[:-1]] == [1, 2, 3, 4]


async def delete_cancels(live: LiveServer, recorder: TraceRecorder) -> None:
    """Two calls run in one session; DELETE ends the session, and its nursery's
    cancellation ends both handlers and closes both connections."""
    session = await open_session(live.url)
    state = _session_of(live, session)
    recorder.paused = False
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        for _ in range(2):
            key, _ = _gate()
            stream = await stack.enter_async_context(open_call(session, _call(key, 1)))
            assert await stream.next_event() is not None  # the priming event
            await wait_until(lambda: len(state.views) == len(streams) + 1)
            streams.append(stream)
        answer = await session.delete()
        assert answer.status == 204
        for stream in streams:
            await read_until(stream, Wire())
        # A cancelled handler leaves no trace in the session but the recorder's.
        await wait_until(
            lambda: recorder.kinds().count(TraceKind.HANDLER_END) == 2 and not state.views
        )


async def mrtr_rounds(live: LiveServer, recorder: TraceRecorder) -> None:
    """A 2026-07-28 call that asks twice: each question ends a round with input_required,
    and the retry runs the handler again from its first line with the answers so far."""
    recorder.paused = False
    answers: dict[str, Any] = {}
    state: str | None = None
    caps: dict[str, Any] = {"elicitation": {}}
    for _ in range(3):
        extra: dict[str, Any] = {}
        if answers:
            extra = {"inputResponses": answers, "requestState": state}
        reply = await post(live.url, call_tool("ask_twice", capabilities=caps, **extra))
        result = reply.json()["result"]
        if result.get("resultType") != "input_required":
            assert result["content"][0]["text"] == "Paris on Monday", result
            return
        state = result["requestState"]
        [key] = result["inputRequests"]
        value = {"city": "Paris", "day": "Monday"}[key]
        answers = {key: {"action": "accept", "content": {"answer": value}}}
        recorder.record(TraceRecord(
            kind=TraceKind.CLIENT, detail=f"asks its user {key}: {value}; retries with it"
        ))
    raise AssertionError("no complete result after three rounds")


async def stall_cut(recorder: TraceRecorder) -> None:
    """A reader that drains 256 bytes a second while its call streams is cut after the
    stall budget and, given a signal_timeout of 30 s, told where to resume; it resumes at
    full speed and gets the rest. In memory, under trio's MockClock: what a slow reader gets
    before the cut depends on time and rates only, so the trace is the same on any machine."""
    slow_server, _ = make_server("timelines-stall")
    # A signal_timeout long enough for a reader this slow to take the signal behind the
    # write in progress (the default, 0.5 s, closes its connection without it: TM-BP-SIGNAL).
    config = ServerConfig(tracer=recorder, stall_budget=2.0, retry_ms=500, signal_timeout=30.0)
    async with MemoryServer.open(slow_server, config) as memory:
        session_id = await memory.initialize()
        recorder.paused = False
        slow = PacedResponder(rate=256, buffer=4096)
        memory.call(session_id, "stream", {"n": 6, "size": 1500, "tag": "s"}, slow,
                    progress=True)
        await slow.connection_closed.wait()
        [signal] = slow.named("resumption-required")
        cursor = json.loads(signal.data)["lastEventId"]
        recorder.record(TraceRecord(
            kind=TraceKind.CLIENT,
            detail=f"resumes after {'.'.join(cursor.split('.')[:2])}, reading at full speed",
        ))
        fast = memory.get(session_id, cursor)
        await fast.connection_closed.wait()
        got = [m.get("params", {}).get("progress") for m in slow.messages() + fast.messages()]
        assert got[:-1] == [1, 2, 3, 4, 5, 6], got
        assert "result" in fast.messages()[-1]


@attrs.frozen
class Scenario:
    name: str
    title: str
    run: Callable[[LiveServer, TraceRecorder], Awaitable[None]] | None = None
    """Drives a real server over loopback; or, with ``in_memory``, the runtime alone."""
    in_memory: Callable[[TraceRecorder], Awaitable[None]] | None = None
    config: dict[str, Any] = attrs.field(factory=dict)


SCENARIOS = (
    Scenario(
        "drop-and-resume",
        "A POST stream dropped and re-attached with Last-Event-ID: nothing lost",
        drop_and_resume,
    ),
    Scenario(
        "delete-cancels",
        "DELETE ends the session: its nursery cancels both handlers, its connections close",
        delete_cancels,
    ),
    Scenario(
        "mrtr-rounds",
        "2026-07-28: a tool that asks twice, in three rounds of input_required",
        mrtr_rounds,
    ),
    Scenario(
        "stall-cut",
        "A reader too slow for too long is cut, told where to resume, and resumes",
        in_memory=stall_cut,
    ),
)


@contextlib.contextmanager
def deterministic_scheduling(seed: int = 0) -> Iterator[None]:
    """Make trio run each batch of runnable tasks in an order fixed by ``seed`` (as
    pytest-trio does under Hypothesis), rather than a random one, for the block. The
    scenarios step so that their traces do not depend on it (a run without it records the
    same files); it only narrows what a loaded machine could vary. A trio without these
    private names gets no such help."""
    from trio._core import _run

    if not hasattr(_run, "_ALLOW_DETERMINISTIC_SCHEDULING") or not hasattr(_run, "_r"):
        yield
        return
    before = _run._ALLOW_DETERMINISTIC_SCHEDULING
    state = _run._r.getstate()
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    _run._r.seed(seed)
    try:
        yield
    finally:
        _run._ALLOW_DETERMINISTIC_SCHEDULING = before  # type: ignore[misc]
        _run._r.setstate(state)


async def _record(scenario: Scenario) -> TraceRecorder:
    recorder = TraceRecorder(clock=trio.current_time, paused=True)
    if scenario.in_memory is not None:
        await scenario.in_memory(recorder)
        return recorder
    assert scenario.run is not None
    config = ServerConfig(tracer=recorder, **scenario.config)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            live = await start_live(nursery, server, config, http_server="trio-mcp")
            await scenario.run(live, recorder)
            # What the runtime records as the last connections close, then no more.
            await trio.sleep(0.05)
            recorder.paused = True
            nursery.cancel_scope.cancel()
    return recorder


def record(scenario: Scenario) -> tuple[str, str]:
    """Run ``scenario`` in a trio run of its own: its trace file and its SVG, as text."""
    clock = MockClock(autojump_threshold=0) if scenario.in_memory is not None else None
    with deterministic_scheduling():
        recorder = trio.run(_record, scenario, clock=clock)
    trace = recorder.trace()
    return dumps_trace(trace, title=scenario.title), render_svg(trace, title=scenario.title)


def outputs(scenario: Scenario) -> tuple[Path, Path]:
    return (
        DOCS / "traces" / f"{scenario.name}.jsonl",
        DOCS / "diagrams" / f"{scenario.name}.svg",
    )


def regenerate(*, check: bool = False) -> list[str]:
    """Record every scenario and write its trace and diagram under docs/; with ``check``,
    write nothing and return the files that differ from what was just recorded."""
    stale = []
    for scenario in SCENARIOS:
        for path, text in zip(outputs(scenario), record(scenario), strict=True):
            old = path.read_text(encoding="utf-8") if path.exists() else None
            if old == text:
                continue
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    return stale
