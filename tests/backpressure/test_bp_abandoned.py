# Abandoned sessions, a small version of benchmarks/bench_memory.py (a): a hundred clients
# each start a long streaming call, read a few events and vanish for good. What the server
# keeps for them is bounded by sessions x window, and it all goes when the sessions expire.
# The server runs in this process, so tracemalloc sees exactly its Python allocations (RSS
# would mostly show what the allocator keeps cached, not what the server holds).
from __future__ import annotations

import gc
import tracemalloc

import pytest
import trio
import trio.testing
from support.client import McpSession, open_session, open_stream, rpc_request
from support.client import dumps as json_body
from support.fixtures import StartServer, wait_until
from support.slow import make_server

from trio_mcp import ServerConfig
from trio_mcp.protocol import Retention
from trio_mcp.runtime.legacy._session import SESSION_FOOTPRINT

SESSIONS = 100
#: The sessions' idle time to live, in the test's clock (which jumps over it).
TTL = 600.0


async def vanish_after_a_few_events(session: McpSession, tag: str) -> None:
    call = rpc_request(
        "tools/call", {"name": "stream", "arguments": {"n": 200, "size": 2000, "tag": tag}}
    )
    async with open_stream(session.url, "POST", session.headers(), json_body(call)) as stream:
        for _ in range(3):
            assert await stream.next_event() is not None
        await stream.aclose()


@pytest.mark.slow
@pytest.mark.spec("TM-BP-BOUNDED", "TM-RES-WINDOW", "TM-SESS-IDLE", "TM-SESS-RELEASE")
async def test_abandoned_sessions_hold_at_most_their_windows_then_nothing(
    live_server: StartServer, jumping_clock: trio.testing.MockClock
) -> None:
    """A hundred sessions whose clients each started a 400 KB streaming call, read three
    events and closed the connection: their calls run to the end (no reader, no waiting),
    the server then holds no more than 100 x the window's bytes (which count each entry's
    bookkeeping, and leave the session's own to it), and once the idle TTL has passed every
    session is gone and memory is back within 400 KB of where it started."""
    server, record = make_server()
    window = Retention(max_events=64, max_bytes=128 * 1024)
    # The sessions must outlive their calls for what they hold to be measured: with 100 of
    # them at once under tracemalloc, a busy machine took over 3 s between a session's
    # initialize and its call (the session had expired: 404), and under parallel test
    # workers over 12 s. So the TTL is longer than any machine takes, and the clock jumps
    # over it once they are measured.
    config = ServerConfig(retention=window, session_idle_ttl=TTL)
    live = await live_server(server, config)
    tracemalloc.start()
    try:
        with trio.fail_after(TTL + 120):
            warm = await open_session(live.url)
            await vanish_after_a_few_events(warm, "warm")
            await wait_until(lambda: "warm" in record.finished)
            await warm.delete()
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]

            async def client(tag: str) -> None:
                # Each client calls right after initialize: no session sits idle before it.
                await vanish_after_a_few_events(await open_session(live.url), tag)

            async with trio.open_nursery() as nursery:
                for k in range(SESSIONS):
                    nursery.start_soon(client, f"s{k}")
            await wait_until(lambda: len(record.finished) == SESSIONS + 1)
            await wait_until(lambda: live.stats()["streams_open"] == 0)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            stats = live.stats()

            jumping_clock.jump(TTL)  # the idle TTL passes
            await wait_until(lambda: live.stats()["sessions_open"] == 0)
            for _ in range(3):
                await trio.sleep(0.05)
                gc.collect()
            after = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    assert SESSIONS == stats["sessions_open"]
    assert stats["bytes_retained"] <= SESSIONS * (window.max_bytes - SESSION_FOOTPRINT)
    assert held <= SESSIONS * window.max_bytes, (held, stats)
    assert SESSIONS == live.stats()["sessions_expired"]
    # What stays is the HTTP server's more than ours: about 120 KB on trio-mcp's own, and
    # 280-304 KB under hypercorn (benchmarks/BACKPRESSURE-NOTES.md), which is the bound
    # here: a session that left 4 KB behind would pass it by 400 KB.
    assert after <= 400_000, (held, after)
    assert not record.cancelled
