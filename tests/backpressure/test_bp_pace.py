# Window pacing end to end (TM-BP-PACE): real hypercorn on loopback, raw clients with the
# kernel's default (autotuned) receive buffers, which take about 125 KB before a reader's
# window closes. Without pacing, a reader that stopped behind them looks like a slow one for
# tens of seconds; with it, it is cut within the stall budget, and readers above the minimum
# rate are left alone.
from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, open_stream, rpc_request
from support.client import dumps as json_body
from support.fixtures import StartServer, wait_until
from support.slow import (
    SlowClient,
    make_server,
    numbered,
    open_slow,
    request_writer,
    tasks_named,
)

import trio_mcp.edges._asgi
import trio_mcp.edges._http
from trio_mcp import ServerConfig
from trio_mcp.runtime.backpressure._judge import KernelJudge
from trio_mcp.runtime.backpressure._pacer import RELEASE_AT, WindowPacer
from trio_mcp.runtime.backpressure._writer import ConnectionWriter

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="pacing reads Linux's TCP_INFO"
)

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: Scheduling slack for loopback timings on a shared two-core machine.
SLACK = 0.5
#: A segment size a network path would give (TCP_MAXSEG); loopback's is about 64 KB.
MSS = 1448


def pacer_of(writer: ConnectionWriter) -> WindowPacer | None:
    """The pacer judging ``writer``'s reader, when its judge is the kernel's (TM-BP-PACE)."""
    judge = writer.judge
    return judge.pacer if isinstance(judge, KernelJudge) else None


def start_call(
    session: McpSession, port: int, *, maxseg: int | None, n: int = 100_000
) -> contextlib.AbstractAsyncContextManager[SlowClient]:
    """A tools/call of `stream` (2 KB events), on a raw socket with default buffers."""
    message = rpc_request("tools/call", {"name": "stream", "arguments": {"n": n, "tag": "p"}})
    return open_slow(
        ("127.0.0.1", port), "POST", "/mcp", session.headers(), json_body(message),
        rcvbuf=None, maxseg=maxseg,
    )


@pytest.mark.slow
@pytest.mark.spec("TM-BP-PACE", "TM-BP-STALL", "TM-BP-SIGNAL", "T-RESUME-5")
@pytest.mark.parametrize("maxseg", [None, MSS], ids=["loopback-mss", "mss-1448"])
async def test_stopped_reader_behind_large_buffers_is_cut_within_the_budget(
    live_server: StartServer, maxseg: int | None
) -> None:
    """A client with the kernel's default receive buffers that reads the response head and
    then nothing: its stream is paced from the first kilobyte, so its buffers hold a few
    KB, and its window, which never opens again, has it cut one stall budget after its
    writer became busy. The rest of the write in progress and the signal go out unpaced,
    so the connection is closed at once, and the client, reading at last, finds the
    `resumption-required` signal; resuming from the id it names delivers the rest once,
    in order. The handler was never cancelled."""
    server, record = make_server()
    budget = 4.0
    config = ServerConfig(stall_budget=budget)
    live = await live_server(server, config)
    session = await open_session(live.url)
    n = 150
    with trio.fail_after(30):
        async with start_call(session, live.port, maxseg=maxseg, n=n) as client:
            await client.read_head()
            writer = await request_writer(live.table, session.id)
            busy_since = writer.busy_since
            assert busy_since is not None
            paced = False
            while not live.stats()["streams_stalled"]:
                paced = paced or writer.paced
                await trio.sleep(0.005)
            cut_after = trio.current_time() - busy_since
            await writer.finished.wait()
            closed_after = trio.current_time() - busy_since
            await client.read(None)
            assert pacer_of(writer) is not None
            held = writer.bytes_written
        last_id = client.last_id
        assert last_id is not None
        async with open_stream(
            live.url, "GET", [*session.headers(), ("last-event-id", last_id)]
        ) as resumed:
            rest = [e async for e in resumed.events(comments=False)]
        await wait_until(lambda: not tasks_named("mcp:writer"))

    assert paced
    assert budget <= cut_after <= budget + CHECK + SLACK
    assert closed_after - cut_after <= CHECK + SLACK
    # What the stopped reader was handed: far from the ~125 KB its buffers take.
    assert held <= 40_000
    assert client.eof or client.reset
    [signal] = client.named("resumption-required")
    assert last_id == json.loads(signal.data or "")["lastEventId"]
    later = [json.loads(e.data) for e in rest if e.data and e.event is None]
    assert [*range(n), None] == [numbered(m) for m in client.messages + later]
    assert "p" not in record.cancelled


@pytest.mark.slow
@pytest.mark.spec("TM-BP-PACE", "TM-BP-STALL")
async def test_without_pacing_a_stopped_reader_behind_large_buffers_outlasts_the_budget(
    live_server: StartServer,
) -> None:
    """The same stopped client with window_pacing off: its buffers take tens of KB, which
    a reader at the minimum rate would need longer than the budget to drain, so it is not
    cut within the budget. (What makes the test above pass is the pacing.)"""
    server, _record = make_server()
    budget = 4.0
    live = await live_server(server, ServerConfig(stall_budget=budget, window_pacing=False))
    session = await open_session(live.url)
    with trio.fail_after(30):
        async with start_call(session, live.port, maxseg=None) as client:
            await client.read_head()
            writer = await request_writer(live.table, session.id)
            await trio.sleep(budget + CHECK + SLACK + 1.0)
            assert 0 == live.stats()["streams_stalled"]
            assert pacer_of(writer) is None and writer.bytes_written > 40_000


@pytest.mark.slow
@pytest.mark.spec("TM-BP-PACE", "TM-BP-STALL")
async def test_paced_readers_above_the_minimum_rate_are_never_cut(
    live_server: StartServer,
) -> None:
    """With the defaults (10 s budget, 2 KiB/s), clients at 1.25 and 2 times the minimum
    rate, with loopback's segments and with 1448-byte ones, stay paced, are not cut in
    25 s and get most of the rate they read at; one at half the minimum rate, beside
    them, is cut about a budget in."""
    server, _record = make_server()
    config = ServerConfig()
    live = await live_server(server, config)
    readers = [(1.25, None), (1.25, MSS), (2.0, None), (2.0, MSS), (0.5, None)]
    clients: list[SlowClient] = []
    writers: list[ConnectionWriter] = []
    cut_at: float | None = None
    with trio.fail_after(60):
        async with contextlib.AsyncExitStack() as stack:
            for _factor, maxseg in readers:
                session = await open_session(live.url)
                # The half-rate reader (the last) is timed from its request: its writer may be
                # busy (held back by its pacer) before the readers start, as long before as
                # the rest of this set-up takes on a loaded machine (once 30 ms, and it was
                # cut 9.97 s after the readers started).
                sent = trio.current_time()
                client = await stack.enter_async_context(
                    start_call(session, live.port, maxseg=maxseg)
                )
                await client.read_head()
                clients.append(client)
                writers.append(await request_writer(live.table, session.id))
            began = trio.current_time()
            async with trio.open_nursery() as nursery:
                for client, (factor, _) in zip(clients, readers, strict=True):
                    nursery.start_soon(client.read, factor * config.min_read_rate)
                while trio.current_time() - began < 25.0:
                    if cut_at is None and live.stats()["streams_stalled"]:
                        cut_at = trio.current_time() - sent
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()

    assert 1 == live.stats()["streams_stalled"]
    assert cut_at is not None
    assert config.stall_budget <= cut_at <= config.stall_budget + 2.0
    for client, writer, (factor, _) in list(zip(clients, writers, readers, strict=True))[:-1]:
        assert not client.eof
        assert writer.paced
        assert client.received >= 0.8 * factor * config.min_read_rate * 25.0
    assert writers[-1].finished.is_set()


@pytest.mark.slow
@pytest.mark.spec("TM-BP-PACE")
@pytest.mark.parametrize("maxseg", [None, MSS], ids=["loopback-mss", "mss-1448"])
async def test_a_reader_that_keeps_up_is_released_from_pacing(
    live_server: StartServer, maxseg: int | None
) -> None:
    """A client that reads as fast as it can takes each limit's worth well above the ramp
    rate: its limit doubles up to RELEASE_AT, after which its writes are no longer paced,
    and it reads the whole stream (4 MB) to its end."""
    server, _record = make_server()
    live = await live_server(server, ServerConfig())
    session = await open_session(live.url)
    n = 2000
    with trio.fail_after(60):
        async with start_call(session, live.port, maxseg=maxseg, n=n) as client:
            await client.read_head()
            writer = await request_writer(live.table, session.id)
            await client.read(None)

    pacer = pacer_of(writer)
    assert pacer is not None
    assert pacer.proved_fast and pacer.released and pacer.limit >= RELEASE_AT
    assert not writer.paced
    assert client.ended
    assert [*range(n), None] == [numbered(m) for m in client.messages]


@pytest.mark.spec("TM-BP-PACE")
async def test_small_responses_never_look_their_socket_up(
    live_server: StartServer, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSE responses that write no more than a kilobyte (here, tools/call answers of
    `echo`) are never paced: not one socket lookup is made for them (under hypercorn, a
    scan for the socket; on trio-mcp's own server, a probe of the socket it owns). A stream
    that writes more looks its socket up once."""
    lookups: list[object] = []
    if http_server == "hypercorn":
        real = trio_mcp.edges._asgi.find_tcp_socket

        def counted(local: object, peer: object) -> object:
            lookups.append(peer)
            return real(local, peer)

        monkeypatch.setattr(trio_mcp.edges._asgi, "find_tcp_socket", counted)
    else:
        made = trio_mcp.edges._http.TcpProbe.of_socket

        def counted_probe(sock: Any) -> object:
            lookups.append(sock)
            return made(sock)

        monkeypatch.setattr(trio_mcp.edges._http.TcpProbe, "of_socket", counted_probe)
    server, _record = make_server()
    live = await live_server(server, ServerConfig())
    session = await open_session(live.url)
    for i in range(20):
        reply = await session.call("tools/call", {"name": "echo", "arguments": {"text": str(i)}})
        assert str(i) in json.dumps(reply)
    assert [] == lookups

    reply = await session.call("tools/call", {"name": "stream", "arguments": {"n": 20}})
    assert "result" in reply
    assert 1 == len(lookups)
