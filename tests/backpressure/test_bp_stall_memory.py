# The stall detector in memory, under trio's MockClock: the whole runtime (manager, session,
# view, writer) serves responders whose reader drains a set number of bytes per second
# (tests/support/slow.py), so "cut at the stall budget" is checked to the quarter second of
# trio time, with no sockets and no waiting.
from __future__ import annotations

import json

import pytest
import trio
from support.fixtures import wait_until
from support.slow import MemoryServer, PacedResponder, make_server, numbered

from trio_mcp import ServerConfig
from trio_mcp.runtime.backpressure._view import View
from trio_mcp.runtime.backpressure._writer import RATE_LOOKBACK, ConnectionWriter
from trio_mcp.runtime.legacy._session import Session

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: The polling step of these tests, in trio time.
POLL = 0.01


def assert_delivered_whole(
    mem: MemoryServer, responder: PacedResponder, message: dict[str, object], n: int
) -> None:
    """Never cut: the response ended, with the n notifications in order, then the answer."""
    assert 0 == mem.stats()["streams_stalled"]
    assert responder.ended
    assert list(range(n)) == [numbered(m) for m in responder.messages()[:-1]]
    assert message["id"] == responder.messages()[-1]["id"]


def request_view(session: Session) -> View:
    [view] = [v for s, v in session.views.items() if s != 0]
    return view


async def cut_time(mem: MemoryServer, before: int = 0) -> float:
    """The trio time at which the next stall is declared."""
    await wait_until(lambda: mem.stats()["streams_stalled"] > before, poll=POLL)
    return trio.current_time()


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("rate", [0, 512, 1024, 2000])
async def test_reader_below_min_rate_is_cut_at_the_stall_budget(
    autojump_clock: trio.abc.Clock, rate: float
) -> None:
    """A reader that drains below min_read_rate while the server has data for it is cut
    once the writer has been busy for stall_budget: not before, and no later than one
    check interval after. The connection is closed, not ended as a complete response."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(120):
            start = trio.current_time()
            responder, _ = mem.call(
                sid, "stream", {"n": 200, "size": 2000, "tag": "s"}, PacedResponder(rate)
            )
            cut = await cut_time(mem)
            await responder.connection_closed.wait()

        assert config.stall_budget <= cut - start <= config.stall_budget + CHECK + POLL
        assert 1 == mem.stats()["streams_cut"]
        assert not responder.ended
        assert "s" not in record.cancelled


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("factor", [1.25, 2.0, None])
@pytest.mark.parametrize("size", [2000, 64_000])
async def test_reader_above_min_rate_is_never_cut(
    autojump_clock: trio.abc.Clock, factor: float | None, size: int
) -> None:
    """A reader that keeps up with min_read_rate (here 1.25x and 2x of it, and unlimited)
    is never cut, however long the stream and however large its events: a 64 KB event is
    more than min_read_rate x stall_budget, yet a reader taking it at 2.5 KB/s is healthy."""
    server, _record = make_server()
    config = ServerConfig()
    rate = None if factor is None else factor * config.min_read_rate
    n = 60 if size == 2000 else 4
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(600):
            responder, message = mem.call(
                sid, "stream", {"n": n, "size": size, "tag": "s"}, PacedResponder(rate)
            )
            await responder.connection_closed.wait()

        assert_delivered_whole(mem, responder, message, n)


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("rate", "buffer"), [(0, 65536), (100, 0)])
async def test_idle_stream_is_never_cut(
    autojump_clock: trio.abc.Clock, rate: float, buffer: int
) -> None:
    """A stream with nothing to send is never cut, whatever its reader does: the drain rate
    is measured only while the writer has work. Here a standalone GET stream and a POST
    stream whose handler is quiet stay open for an hour of trio time, with a reader that
    stopped (behind a socket buffer) or one that takes 100 bytes a second; only keep-alive
    comments go out."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        get = mem.get(sid, responder=PacedResponder(rate, buffer=buffer))
        post, _ = mem.call(
            sid, "wait", {"seconds": 3600, "tag": "w"}, PacedResponder(rate, buffer=buffer)
        )
        with trio.fail_after(4000):
            await trio.sleep(3590)
            session = mem.session(sid)
            assert 2 == len(session.views)
            await post.connection_closed.wait()

        assert 0 == mem.stats()["streams_stalled"]
        assert not get.connection_closed.is_set()
        keepalives = [e for _, e in get.events if e.comment == "keep-alive"]
        assert len(keepalives) >= 3590 // config.keepalive_interval // 2
        [priming] = [e for _, e in get.events if e.comment is None]
        assert "" == priming.data
        assert "w" in record.finished


@pytest.mark.spec("TM-BP-SIGNAL", "T-PSSE-4")
async def test_signal_names_the_last_event_the_connection_took(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The last thing on a cut connection is a named event `resumption-required` whose
    data names, as lastEventId, the id of the last event the connection took before it,
    with the retry it also carries as an SSE `retry` field; it has no id of its own, so a
    client's cursor stays on the last real event."""
    server, _record = make_server()
    config = ServerConfig(signal_timeout=5.0)
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(120):
            responder, _ = mem.call(
                sid, "stream", {"n": 100, "size": 2000, "tag": "s"},
                PacedResponder(1024, buffer=4096),
            )
            await responder.connection_closed.wait()

        events = [e for _, e in responder.events if e.comment is None]
        [signal] = responder.named("resumption-required")
        assert signal is events[-1]
        details = json.loads(signal.data or "")
        last_id = [e.id for e in events if e.id][-1]
        assert last_id == details["lastEventId"]
        assert config.retry_ms == details["retry"] == signal.retry
        assert signal.id is None
        assert details["reason"]


@pytest.mark.spec("TM-BP-SIGNAL")
async def test_signal_waits_at_most_signal_timeout(autojump_clock: trio.abc.Clock) -> None:
    """A cut connection whose reader takes nothing more is closed signal_timeout after the
    cut, signal or no signal."""
    server, _record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(120):
            responder, _ = mem.call(
                sid, "stream", {"n": 100, "size": 2000, "tag": "s"}, PacedResponder(0)
            )
            cut = await cut_time(mem)
            await responder.connection_closed.wait()
            closed = trio.current_time()

        assert closed - cut <= config.signal_timeout + POLL
        assert [] == responder.named("resumption-required")


@pytest.mark.spec("TM-BP-STALL", "TM-BP-PRODUCER", "T-PSSE-12")
async def test_handler_keeps_running_after_the_cut_and_resume_gets_the_rest(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The cut ends the connection, not the request: the handler runs on, at once and
    without waiting for the reader it lost, and a GET with Last-Event-ID from the last id
    the client received delivers every later notification exactly once, in order, then
    the result."""
    server, record = make_server()
    config = ServerConfig()
    n = 200
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(300):
            slow, message = mem.call(
                sid, "stream", {"n": n, "size": 1000, "tag": "s"}, PacedResponder(1024)
            )
            cut = await cut_time(mem)
            await wait_until(lambda: "s" in record.finished, poll=POLL)
            finished = trio.current_time()
            await slow.connection_closed.wait()
            last_id = slow.ids()[-1]
            fast = mem.get(sid, last_id)
            await fast.connection_closed.wait()

        assert "s" not in record.cancelled
        assert finished - cut <= CHECK
        got = [numbered(m) for m in slow.messages()] + [numbered(m) for m in fast.messages()]
        assert [*range(n), None] == got
        assert message["id"] == fast.messages()[-1]["id"]
        assert fast.ended


@pytest.mark.spec("TM-BP-RELEASE", "TM-RES-PIN")
async def test_write_cut_by_a_stall_is_not_counted_as_taken(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Only what the connection took before it was abandoned counts as written: a write
    that returns after the cut (hypercorn reports a write to a connection it closed as
    done) neither advances the stream's written mark nor unpins a response."""
    server, record = make_server()
    config = ServerConfig(signal_timeout=0.5)
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        session = mem.session(sid)
        with trio.fail_after(120):
            slow, _ = mem.call(
                sid, "stream", {"n": 50, "size": 3000, "tag": "s"}, PacedResponder(600)
            )
            await wait_until(lambda: bool(session.views) and 0 != max(session.views), poll=POLL)
            stream = max(session.views)
            await slow.connection_closed.wait()
            await wait_until(lambda: "s" in record.finished, poll=POLL)
            await trio.sleep(1)

        received = slow.messages()
        state = session.log.stream(stream)
        assert state is not None
        assert len(received) == session.statistics().events_written - 1  # the initialize response
        codec = mem.runtime.codec
        cursor = codec.decode(sid, slow.ids()[-1])
        assert cursor is not None
        assert cursor.seq == state.written_through


@pytest.mark.spec("TM-BP-STALL")
async def test_drain_rate_counts_only_busy_time(autojump_clock: trio.abc.Clock) -> None:
    """ConnectionWriter measures its reader only while it has work: a writer idle for a
    minute is not stalled, and one busy for less than its window is not stalled yet."""
    responder = PacedResponder(0)
    writer = ConnectionWriter(responder, window=10.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        await trio.sleep(60)

        assert 0.0 == writer.stalled_for(trio.current_time(), 2048)

        writer.submit(b"x" * 1000)
        await trio.sleep(9.9)

        assert 0.0 == writer.stalled_for(trio.current_time(), 2048)

        await trio.sleep(0.2)

        assert writer.stalled_for(trio.current_time(), 2048) >= 10.0
        responder.client_leaves()
        writer.close()
        await writer.finished.wait()


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("factor", [1.1, 1.25, 2.0, 4.0])
async def test_healthy_reader_behind_large_socket_buffers_is_never_cut(
    autojump_clock: trio.abc.Clock, factor: float
) -> None:
    """A reader above min_read_rate (1.1x to 4x) behind 256 KB of socket buffers that wake
    a blocked write only when a third of them is free: the writer sees no progress for 10
    to 38 s at a time, longer than the lookback can average, yet the reader is never cut
    over ten minutes of trio time: each wait is shorter than its burst would take at the
    minimum rate."""
    server, _record = make_server()
    config = ServerConfig()
    rate = factor * config.min_read_rate
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(700):
            responder, _ = mem.call(
                sid, "stream", {"n": 3000, "size": 2000, "tag": "s", "delay": 0.2},
                PacedResponder(rate, buffer=256 * 1024, wake=1 / 3),
            )
            await trio.sleep(600)

        assert 0 == mem.stats()["streams_stalled"]
        assert not responder.connection_closed.is_set()


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("progress", [False, True], ids=["log", "progress"])
async def test_healthy_reader_behind_large_buffers_of_a_handler_that_pauses_is_never_cut(
    autojump_clock: trio.abc.Clock, progress: bool
) -> None:
    """A reader at 1.125x min_read_rate behind 256 KB of socket buffers, whose handler
    sends a 7 KB message every half second: faster than the reader reads, so the buffers
    fill and each wait for room lasts about 37 s; but once room opens the handler, not the
    reader, sets the pace, and the writer idles between messages. The burst that ends a
    wait is all that went out until the next wait, not one message: the reader is never
    cut, and gets every message and the response. (Found by Hypothesis: with bursts ended
    by idle gaps, it was cut at 78 s.)"""
    server, _record = make_server()
    config = ServerConfig()
    n = 53
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(600):
            responder, message = mem.call(
                sid, "stream", {"n": n, "size": 7358, "tag": "s", "delay": 0.5},
                PacedResponder(1.125 * config.min_read_rate, buffer=256 * 1024, wake=1 / 3),
                progress=progress,
            )
            await responder.connection_closed.wait()

        assert_delivered_whole(mem, responder, message, n)


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("rate", "buffer"), [(1024, 16 * 1024), (0, 64 * 1024), (1024, 0)])
async def test_slow_reader_behind_socket_buffers_is_cut_within_the_lookback(
    autojump_clock: trio.abc.Clock, rate: float, buffer: int
) -> None:
    """A reader below min_read_rate behind socket buffers that wake a blocked write in
    bursts is still cut: not before stall_budget, and no later than the rate's lookback
    (RATE_LOOKBACK stall budgets), however its progress comes in bursts."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        with trio.fail_after(600):
            start = trio.current_time()
            _responder, _ = mem.call(
                sid, "stream", {"n": 2000, "size": 2000, "tag": "s"},
                PacedResponder(rate, buffer=buffer, wake=1 / 3),
            )
            cut = await cut_time(mem)

        took = cut - start
        assert config.stall_budget <= took <= RATE_LOOKBACK * config.stall_budget + CHECK + POLL
        assert "s" not in record.cancelled
