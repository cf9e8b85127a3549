# Producer backpressure in memory, under trio's MockClock: a handler that sends faster than
# its stream's reader drains is slowed to the reader's pace (bounded), so a healthy reader
# stays inside the replay window; with no reader attached nothing waits and the log evicts.
from __future__ import annotations

import itertools
import json

import pytest
import trio
from support.fixtures import wait_until
from support.slow import MemoryServer, PacedResponder, make_server, numbered

from trio_mcp import ServerConfig
from trio_mcp.protocol import ErrorCode


@pytest.mark.spec("TM-BP-PRODUCER", "TM-RES-WINDOW")
@pytest.mark.parametrize(("size", "n", "rate"), [(2000, 1000, 4096), (8000, 300, 8192)])
async def test_fast_handler_waits_for_a_healthy_slower_reader(
    autojump_clock: trio.abc.Clock, size: int, n: int, rate: float
) -> None:
    """A handler sending n notifications at once to a reader that is healthy (twice the
    minimum rate) but far slower than the handler is held back while the reader lags, so
    the reader never falls out of the replay window: every notification arrives, in order,
    then the result, with no resumption failure. This holds for large events too, whose
    lag fills the window's bytes before its count."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(3600):
            responder, message = mem.call(
                sid, "stream", {"n": n, "size": size, "tag": "s"}, PacedResponder(rate)
            )
            await responder.connection_closed.wait()

        assert [] == responder.named("resumption-failed")
        assert 0 == mem.stats()["streams_stalled"]
        assert list(range(n)) == [numbered(m) for m in responder.messages()[:-1]]
        assert message["id"] == responder.messages()[-1]["id"]
        # The handler ran at the reader's pace: it could not finish long before the reader.
        reading = responder.events[-1][0] - record.started["s"]
        assert record.finished["s"] - record.started["s"] >= 0.5 * reading


@pytest.mark.spec("TM-BP-PRODUCER")
async def test_handler_waits_at_most_producer_wait_per_message(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The wait is bounded: with a reader that takes nothing (and a stall budget long
    enough that it is not cut), each message past max_stream_lag waits producer_wait and
    then goes into the log anyway; the handler finishes."""
    server, record = make_server()
    config = ServerConfig(stall_budget=1000.0, producer_wait=2.0, max_stream_lag=4)
    n = 20
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(600):
            responder, _ = mem.call(
                sid, "stream", {"n": n, "size": 2000, "tag": "s", "timed": True},
                PacedResponder(0),
            )
            await wait_until(lambda: "s" in record.finished, poll=0.01)
            responder.client_leaves()

        times = record.sent_at["s"]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert max(gaps) <= config.producer_wait + 0.001
        assert sum(1 for g in gaps if g >= config.producer_wait - 0.001) >= n - 8


@pytest.mark.spec("TM-BP-PRODUCER", "TM-RES-WINDOW", "TM-RES-STALE")
async def test_without_a_reader_the_handler_runs_free_and_the_log_evicts(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With no reader attached a handler never waits: it sends 1000 notifications in no
    trio time at all, the session's log keeps no more than its window, and a later GET
    with Last-Event-ID from before the evicted part fails explicitly: a
    `resumption-failed` event and a JSON-RPC error for the request, not an empty stream."""
    server, record = make_server()
    config = ServerConfig()
    window = config.retention
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        session = mem.session(sid)
        with trio.fail_after(60):
            responder, message = mem.call(
                sid, "stream", {"n": 1000, "size": 2000, "tag": "s", "delay": 0.0},
                PacedResponder(None),
            )
            await wait_until(lambda: bool(responder.ids()), poll=0.001)
            priming_id = responder.ids()[0]
            responder.client_leaves()
            await wait_until(lambda: "s" in record.finished, poll=0.001)
            took = record.finished["s"] - record.started["s"]
            retained_events = session.log.retained_events
            retained_bytes = session.log.retained_bytes
            again = mem.get(sid, priming_id)
            await again.connection_closed.wait()

        assert took <= 0.01
        assert retained_events <= window.max_events
        # The window's bytes, plus the response, which stays pinned until delivered.
        assert retained_bytes <= window.max_bytes + 1024
        assert session.log.evicted >= 1000 - window.max_events
        [failed] = again.named("resumption-failed")
        assert priming_id == json.loads(failed.data or "")["lastEventId"]
        [error] = again.messages()
        assert message["id"] == error["id"]
        assert ErrorCode.RESUMPTION_FAILED == error["error"]["code"]
