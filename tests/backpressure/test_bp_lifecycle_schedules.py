# Hypothesis over schedules of session lifecycles, in memory under trio's MockClock: sessions
# opened past the cap, calls that finish or never do, connections dropped, standalone streams
# held and closed, pings, DELETEs and time passing. A model written from the rules alone
# (spec/sessions.md) says, at every step, which sessions must be alive, which one an
# initialize evicts or whether it gets 503, and what the counters read; the server must agree.
#
# Timing is kept unambiguous: the expiry loop looks at whole seconds (a tenth of the shortest
# TTL), the test acts at half seconds, and calls end at quarter past or to.
from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.client import rpc_request
from support.examples import examples
from support.slow import MemoryServer, PacedResponder, Record, make_server, tasks_named

from trio_mcp import ResponseMode, ServerConfig

CAP = 3
IDLE_TTL = 20.0
UNINITIALIZED_TTL = 10.0
ABANDONED_TTL = 30.0
#: SessionTable._expire_loop's period: a tenth of the shortest TTL.
PERIOD = 1.0
#: How long a call runs (None: until its session ends). Never a whole or half second.
DURATIONS = (0.25, 2.75, 11.25, 25.75, None)


@attrs.define
class Call:
    ends: float | None
    """When the handler returns (None: never); for a cancelled call, when it was cancelled."""
    responder: PacedResponder
    request_id: int
    tag: str
    connected: bool = True
    cancelled: bool = False
    dropped: bool = False
    """The client dropped its connection while the call ran (and has not resumed since)."""


@attrs.define
class Model:
    """One session as the rules describe it, from the client's side."""

    id: str
    initialized: bool
    last_activity: float
    last_heard: float
    calls: list[Call] = attrs.Factory(list)
    get: PacedResponder | None = None
    ended: str | None = None
    ended_at: float | None = None

    def running(self, now: float) -> list[Call]:
        return [c for c in self.calls if not c.cancelled and (c.ends is None or c.ends > now)]

    def views(self, now: float) -> int:
        """Open connections: calls still running on a connection, and the GET stream."""
        return sum(c.connected for c in self.running(now)) + (self.get is not None)

    def idle(self, now: float) -> bool:
        """TM-SESS-IDLE: nothing in flight and no open connection."""
        return not self.running(now) and self.views(now) == 0

    def heard(self, now: float) -> None:
        self.last_activity = self.last_heard = now


@attrs.define
class World:
    sessions: list[Model] = attrs.Factory(list)
    counts: dict[str, int] = attrs.Factory(
        lambda: dict.fromkeys(("expired", "evicted", "deleted", "abandoned"), 0)
    )
    json_mode: bool = False
    """Requests answered as application/json: the POST itself waits for the handler."""
    now: float = 0.0
    refused: int = 0

    def alive(self) -> list[Model]:
        return [s for s in self.sessions if s.ended is None]

    def end(self, session: Model, reason: str, at: float | None = None) -> None:
        session.ended = reason
        session.ended_at = self.now if at is None else at
        self.counts[reason] += 1
        if reason == "abandoned":
            self.counts["expired"] += 1  # an abandoned session counts as expired too

    def advance(self, until: float) -> None:
        """What happens between now and ``until``: calls end, the expiry loop looks."""
        moments = sorted(
            {c.ends for s in self.alive() for c in s.calls if c.ends is not None}
            | {float(k) for k in range(math.floor(self.now) + 1, math.floor(until) + 1)}
        )
        for t in moments:
            if not self.now < t <= until:
                continue
            if t != int(t):
                for s in self.alive():
                    for c in s.calls:
                        if c.ends == t and not c.cancelled:
                            # The handler returns (touch), then its connection ends (heard).
                            s.last_activity = t
                            if c.connected:
                                c.connected = False
                                s.heard(t)
            else:
                self.expire(t)
        self.now = until

    def expire(self, t: float) -> None:
        for s in self.alive():
            if not s.idle(t):
                # TM-SESS-ABANDONED: work in flight, no connection, client not heard from.
                if s.views(t) == 0 and t - s.last_heard >= ABANDONED_TTL:
                    self.end(s, "abandoned", t)
                continue
            ttl = IDLE_TTL if s.initialized else min(IDLE_TTL, UNINITIALIZED_TTL)
            if t - s.last_activity >= ttl:
                self.end(s, "expired", t)


# One step of a schedule; a session is named by its index among those opened (modulo).
# Opens and calls come most often, so that the cap is reached with sessions busy.
KINDS = [
    "open", "open", "open", "call", "call", "call", "drop", "get", "close-get", "ping",
    "initialized", "delete", "cancel", "resume", "wait", "wait",
]


@st.composite
def steps(draw: st.DrawFn) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(KINDS))
    if kind == "open":
        return (kind, draw(st.booleans()))
    if kind == "wait":
        return (kind, draw(st.sampled_from([1, 2, 5, 9, 12, 21, 31])))
    return (kind, draw(st.integers(0, 4)), draw(st.sampled_from(range(len(DURATIONS)))))


STEPS = st.lists(steps(), min_size=5, max_size=40)


async def settle() -> None:
    # Everything the step set off, done: nothing is runnable, and no time has passed.
    await trio.testing.wait_all_tasks_blocked()


def answers(responder: PacedResponder) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, JSON or SSE."""
    reply = responder.reply_
    if reply is not None and reply.body and ("content-type", "application/json") in reply.headers:
        body = json.loads(reply.body)
        return body if isinstance(body, list) else [body]
    return responder.messages()


def initialize_request(mem: MemoryServer) -> dict[str, Any]:
    params = {
        "protocolVersion": mem.protocol_version,
        "capabilities": {},
        "clientInfo": {"name": "schedules", "version": "0"},
    }
    return rpc_request("initialize", params)


async def initialize(mem: MemoryServer, *, initialized: bool) -> str:
    responder, _ = await mem.complete(None, initialize_request(mem))
    assert responder.status == 200
    assert "result" in answers(responder)[-1]
    session_id = dict(responder.headers)["mcp-session-id"]
    if initialized:
        ack, _ = await mem.complete(
            session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert ack.status == 202
    return session_id


async def run_schedule(
    steps: list[tuple[Any, ...]], json_mode: bool = False, grace: float | None = None
) -> World:
    server, record = make_server()
    config = ServerConfig(
        max_sessions=CAP,
        session_idle_ttl=IDLE_TTL,
        uninitialized_ttl=UNINITIALIZED_TTL,
        abandoned_ttl=ABANDONED_TTL,
        release_memory_after=None,
        response_mode=ResponseMode.JSON if json_mode else ResponseMode.SSE,
        shutdown_grace=10.0 if grace is None else grace,
    )
    world = World(json_mode=json_mode)
    async with MemoryServer.open(server, config) as mem:
        table = mem.table
        # The expiry loop counts its periods from when it started: at 0 on the mock clock.
        assert trio.current_time() == 0.0
        await trio.sleep(0.5)
        world.now = 0.5
        for step in steps:
            await apply(mem, world, step)
            await settle()
            check(mem, world, record)
            # The next step half a second on at least, so no two moments coincide.
            await trio.sleep(0.5)
            world.advance(trio.current_time())
            await settle()
        if grace is not None:
            # Half a second on again: off the expiry loop's ticks and the calls' ends, as
            # every step is.
            await trio.sleep(0.5)
            world.advance(trio.current_time())
            await settle()
            await shut_down(mem, world, record, grace)
        del table
    return world


async def apply(mem: MemoryServer, world: World, step: tuple[Any, ...]) -> None:
    now = trio.current_time()
    kind = step[0]
    if kind == "wait":
        await trio.sleep(step[1])
        world.advance(trio.current_time())
        return
    if kind == "open":
        await open_session(mem, world, initialized=step[1])
        return
    if not world.sessions:
        return
    _, index, duration = step
    session = world.sessions[index % len(world.sessions)]
    if session.ended is not None:
        # T-SESS-7: an ended session's id gets 404, whatever the request.
        responder, _ = await mem.complete(session.id, rpc_request("ping"))
        assert responder.status == 404
        return
    if kind == "call":
        ends = DURATIONS[duration]
        seconds = -1.0 if ends is None else ends
        tag = f"c{sum(len(m.calls) for m in world.sessions)}"
        responder, message = mem.call(session.id, "wait", {"seconds": seconds, "tag": tag})
        await settle()
        # An SSE answer starts at once; a JSON one comes when the handler returns.
        assert responder.status == (None if world.json_mode else 200)
        session.calls.append(
            Call(None if ends is None else now + ends, responder, message["id"], tag)
        )
        session.heard(now)
    elif kind == "cancel":
        running = session.running(now)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": running[0].request_id if running else 10**9},
        }
        responder, _ = await mem.complete(session.id, cancel)
        assert responder.status == 202
        if running:
            # U-CANCEL-4: no response; the call's stream ends, its connection with it
            # (TM-CANCEL-JSON: as JSON, an error answers the POST that waits).
            running[0].cancelled, running[0].ends = True, now
            running[0].connected = False
        session.heard(now)
    elif kind == "resume":
        dropped = [c for c in session.calls if c.dropped and not c.cancelled]
        if world.json_mode:
            dropped = []  # a JSON answer has no stream to resume
        if dropped and dropped[0].responder.ids():
            call = dropped[0]
            # T-RESUME-5: re-attach the call's own stream after the last id the client got.
            responder = mem.get(session.id, last_event_id=call.responder.ids()[-1])
            await settle()
            assert responder.status == 200
            call.responder, call.dropped = responder, False
            if call in session.running(now):
                call.connected = True
            else:
                # Its response was waiting in the log; the stream ends with it.
                assert answers(responder)[-1]["id"] == call.request_id
                assert responder.connection_closed.is_set()
            session.heard(now)
    elif kind == "drop":
        running = [c for c in session.running(now) if c.connected]
        if running:
            running[0].responder.client_leaves()
            running[0].connected, running[0].dropped = False, True
            session.heard(now)
    elif kind == "get":
        if session.get is None:
            session.get = mem.get(session.id)
            await settle()
            assert session.get.status == 200
        else:
            # TM-GET-ONE: a second GET takes the standalone stream over; the first ends.
            old = session.get
            session.get = mem.get(session.id)
            await settle()
            assert session.get.status == 200
            assert old.connection_closed.is_set()
        session.heard(now)
    elif kind == "close-get":
        if session.get is not None:
            session.get.client_leaves()
            session.get = None
            session.heard(now)
    elif kind == "ping":
        responder, _ = await mem.complete(session.id, rpc_request("ping"))
        assert responder.status == 200 and answers(responder)[-1]["result"] == {}
        session.heard(now)
    elif kind == "initialized":
        responder, _ = await mem.complete(
            session.id, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert responder.status == 202
        session.initialized = True
        session.heard(now)
    elif kind == "delete":
        responder, _ = await mem.complete_delete(session.id)
        assert responder.status in (200, 204)
        world.end(session, "deleted")


async def open_session(mem: MemoryServer, world: World, *, initialized: bool) -> None:
    now = trio.current_time()
    alive = world.alive()
    victim = None
    if len(alive) >= CAP:
        idle = [s for s in alive if s.idle(now)]
        if not idle:
            # TM-SESS-CAP: every session busy: 503 with Retry-After, nothing evicted.
            responder, _ = await mem.complete(None, initialize_request(mem))
            assert responder.status == 503, responder.reply_
            assert dict(responder.headers).get("retry-after")
            world.refused += 1
            return
        # TM-SESS-CAP: the least recently used idle session makes room.
        victim = min(idle, key=lambda s: s.last_activity)
    session_id = await initialize(mem, initialized=initialized)
    if victim is not None:
        world.end(victim, "evicted")
    world.sessions.append(Model(session_id, initialized, now, now))


async def shut_down(mem: MemoryServer, world: World, record: Record, grace: float) -> None:
    """TM-SESS-SHUTDOWN: new requests get 503, every SSE connection is closed with a retry
    field, running handlers get ``grace`` to finish, then every session ends."""
    start = trio.current_time()
    sse: list[PacedResponder] = []
    waiting: list[tuple[Model, Call]] = []
    for s in world.alive():
        if s.get is not None:
            sse.append(s.get)
            s.get = None
            s.heard(start)
        for c in s.running(start):
            if not c.connected:
                continue
            if world.json_mode:
                waiting.append((s, c))
            else:
                sse.append(c.responder)
                c.connected = False
                s.heard(start)
    running = [(s, c) for s in world.alive() for c in s.running(start)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mem.table.shutdown, grace)
        await settle()
        for responder in sse:
            assert responder.connection_closed.is_set()
            assert any(e.retry is not None for _, e in responder.events)
        late, _ = await mem.complete(None, initialize_request(mem))
        assert late.status == 503
    await settle()
    took = trio.current_time() - start
    assert took <= grace
    # What the rules say happened meanwhile: expiry, abandonment, calls ending.
    world.advance(start + took)
    assert not mem.table.sessions
    assert not tasks_named("mcp:tools/call")
    for s, c in running:
        ended_first = s.ended_at is not None and s.ended_at < (c.ends or math.inf)
        if c.ends is not None and c.ends <= start + took and not ended_first:
            assert c.tag in record.finished, (c, s.ended, s.ended_at, took)
        else:
            assert c.tag in record.cancelled, (c, s.ended, s.ended_at, took)
    for _session, c in waiting:
        # A JSON answer waits for its handler: the result if it came, else 404 (its
        # session ended under it, T-SESS-7).
        assert c.responder.connection_closed.is_set()
        assert c.responder.status == (200 if c.tag in record.finished else 404)


def check(mem: MemoryServer, world: World, record: Record) -> None:
    now = trio.current_time()
    live = {sid for sid, s in mem.table.sessions.items() if not s.closed}
    expected = {s.id for s in world.alive()}
    assert live == expected, {
        s.id[:6]: (s.ended, s.last_activity, s.idle(now)) for s in world.sessions
    }
    stats = mem.stats()
    assert (stats["sessions_expired"], stats["sessions_evicted"], stats["sessions_deleted"]) == (
        world.counts["expired"],
        world.counts["evicted"],
        world.counts["deleted"],
    )
    assert stats["sessions_abandoned"] == world.counts["abandoned"]
    assert stats["sessions_created"] == len(world.sessions)
    # Ending a session cancels its handlers: the only calls still running are those of live
    # sessions the model says are running.
    running = sum(len(s.running(now)) for s in world.alive())
    assert len(tasks_named("mcp:tools/call")) == running
    for s in world.sessions:
        if s.ended is not None:
            # Its connections were closed: every one it had is finished.
            assert all(c.responder.connection_closed.is_set() for c in s.calls)
            if s.get is not None:
                assert s.get.connection_closed.is_set()


@pytest.mark.spec("TM-SESS-IDLE", "TM-SESS-CAP", "TM-SESS-ABANDONED", "T-SESS-7")
@settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=STEPS)
# Every session busy (a call that never returns, a held stream, an uninitialized one with a
# call): 503; then one goes idle and is evicted in favour of the next.
@example(
    steps=[
        ("open", True), ("open", True), ("open", False),
        ("call", 0, 4), ("get", 1, 0), ("call", 2, 1),
        ("open", True), ("close-get", 1, 0), ("wait", 1), ("open", True), ("ping", 1, 0),
    ]
)
# Work left running with nobody connected ends after the abandoned TTL; a held stream
# keeps its session however long.
@example(
    steps=[
        ("open", True), ("open", True), ("call", 0, 4), ("drop", 0, 0), ("get", 1, 0),
        ("wait", 21), ("wait", 12), ("ping", 0, 0), ("ping", 1, 0),
    ]
)
# A client that waits on its connection is never abandoned, however long the call runs,
# also when the answer is JSON and the POST itself is the connection (found by this test).
@example(steps=[("open", True), ("call", 0, 4), ("wait", 31), ("wait", 5), ("ping", 0, 0)])
# A repeated notifications/initialized changes nothing, but the client was heard: its
# session is no longer the least recently used (found by this test).
@example(
    steps=[
        ("open", False), ("initialized", 0, 0), ("open", False), ("open", False),
        ("initialized", 0, 0), ("open", False),
    ]
)
@pytest.mark.parametrize("json_mode", [False, True], ids=["sse", "json"])
def test_any_schedule_of_sessions_expires_evicts_and_refuses_as_the_rules_say(
    json_mode: bool, steps: list[tuple[Any, ...]]
) -> None:
    """Whatever sessions are opened, called, cancelled, dropped, resumed, held, pinged and
    deleted, and however time passes, with answers as SSE or as JSON: a session lives
    exactly as long as the rules say (idle for the TTL, or the shorter one before
    initialized; abandoned work ends after its own TTL; never while a connection is open,
    a JSON POST waiting for its answer included), an initialize at the cap evicts the
    least recently used idle session or, when every session is busy, gets 503 with
    Retry-After; an ended session's id gets 404, its handlers are cancelled and its
    connections closed, and the counters say how each ended."""
    world = trio.run(
        run_schedule, steps, json_mode, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    for reason, count in world.counts.items():
        if count:
            event(f"a session {reason}")
    if world.refused:
        event("an initialize refused with 503")


@pytest.mark.spec("TM-SESS-SHUTDOWN", "T-PSSE-4")
@settings(
    max_examples=examples(100),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=STEPS, grace=st.sampled_from([1, 3, 10, 40]))
@example(
    steps=[("open", True), ("open", True), ("call", 0, 2), ("call", 1, 4), ("get", 1, 0)],
    grace=10,
)
@pytest.mark.parametrize("json_mode", [False, True], ids=["sse", "json"])
def test_shutdown_after_any_schedule_closes_streams_then_bounds_handlers(
    json_mode: bool, steps: list[tuple[Any, ...]], grace: int
) -> None:
    """Whatever the sessions were doing, a graceful shutdown closes every SSE connection at
    once with a retry field, answers new requests 503, lets running handlers finish for the
    grace period (a JSON POST still gets its result), cancels the rest, and ends every
    session, within the grace period."""
    trio.run(
        run_schedule,
        steps,
        json_mode,
        float(grace),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
