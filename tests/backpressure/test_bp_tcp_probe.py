# The stall detector's kernel probe (trio_mcp/runtime/backpressure/_tcpprobe.py): finding a
# connection's
# socket in this process and reading how many bytes its reader acknowledged, then judging
# readers by it, in memory (a modelled kernel under MockClock) and end to end (real hypercorn
# on loopback, raw sockets with small receive buffers, tests/support/slow.py).
from __future__ import annotations

import contextlib
import math
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, rpc_request
from support.client import dumps as json_body
from support.fixtures import LiveServer, StartServer, wait_until
from support.slow import (
    MemoryServer,
    PacedResponder,
    SlowClient,
    make_server,
    open_slow,
    request_writer,
    tasks_named,
)

from trio_mcp import ServerConfig
from trio_mcp.runtime.backpressure._tcpprobe import (
    SocketIndex,
    TcpProbe,
    TcpSample,
    find_tcp_socket,
)
from trio_mcp.runtime.backpressure._writer import RATE_LOOKBACK, SILENCE_FACTOR, ConnectionWriter

#: The probe reads Linux's TCP_INFO; elsewhere there is none, and the writes alone judge.
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel probe reads Linux's TCP_INFO"
)

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: Scheduling slack for loopback timings on a shared two-core machine: a CI run cut 25 ms
#: past a 0.25 s slack while other test processes shared the CPUs.
SLACK = 0.75


# -- the probe ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def loopback_pair() -> Any:
    """(server side, client side) of a fresh loopback TCP connection."""
    listener = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with listener, client:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        await client.connect(listener.getsockname())
        server, _ = await listener.accept()
        with server:
            yield server, client


@linux_only
@pytest.mark.spec("TM-BP-STALL")
async def test_probe_finds_a_live_connection_and_sees_its_reader_acknowledge() -> None:
    """Given the two addresses of a connection (as an ASGI scope gives them), the probe
    finds this process's socket for it, the server's side and not the client's, and the
    kernel's count of bytes the peer acknowledged grows by what the peer read. Closed, it
    reports nothing more."""
    async with loopback_pair() as (server, client):
        probe = find_tcp_socket(server.getsockname(), server.getpeername())
        assert probe is not None
        try:
            before = probe.sample()
            assert before is not None
            data = b"x" * 50_000
            got = 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send_all, server, data)
                while got < len(data):
                    got += len(await client.recv(65536))
            with trio.fail_after(5):
                while True:
                    after = probe.sample()
                    assert after is not None
                    if after.bytes_acked - before.bytes_acked >= len(data):
                        break
                    await trio.sleep(0.01)
            assert after.bytes_acked - before.bytes_acked == len(data)
            assert 0 == after.notsent_bytes
        finally:
            probe.close()
        assert probe.sample() is None


@linux_only
@pytest.mark.spec("TM-BP-BOUNDED")
@pytest.mark.parametrize("lowat", [16384, None])
def test_probe_room_is_taken_whole_at_once_and_runs_out_while_the_reader_stops(
    lowat: int | None,
) -> None:
    """What the probe calls the socket's room, a non-blocking send takes whole, with
    TCP_NOTSENT_LOWAT set (as trio sets it) or not; while the reader reads nothing it runs
    out within its buffers' worth, and once the reader has read everything there is room
    again."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        server, _ = listener.accept()
        with server:
            if lowat is not None:
                server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, lowat)
            server.setblocking(False)
            probe = TcpProbe.of_socket(server)
            assert probe is not None
            sent = 0
            for _ in range(10_000):
                room = probe.room()
                if room == 0:
                    break
                assert room == server.send(b"x" * room)
                sent += room
            else:
                raise AssertionError("the room never ran out with the reader stopped")
            assert sent > 0
            if lowat is not None:
                assert probe.room() == 0 and sent < 16 * 1024 * 1024
            client.setblocking(False)
            got = 0
            for _ in range(10_000):
                try:
                    got += len(client.recv(1 << 20))
                except BlockingIOError:
                    if got >= sent:
                        break
                    time.sleep(0.001)
            assert got == sent
            assert probe.room() > 0
        probe.close()
        assert probe.room() == 0


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[await sock.send(view) :]


@linux_only
@pytest.mark.spec("TM-BP-STALL")
async def test_probe_is_none_for_addresses_no_socket_here_has_and_scans_are_bounded() -> None:
    """Addresses no socket of this process is connected between, or that are no IP socket
    addresses, give no probe (the detector then judges by writes alone). A pair that was
    not found is not scanned for again within `min_rescan`; a connection made after a scan
    is found by its first lookup, by a scan that looks only at descriptors new since the
    last; and an entry whose descriptor was closed since the scan is not mistaken for
    whatever socket reuses it."""
    assert find_tcp_socket(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert find_tcp_socket(None, None) is None
    assert find_tcp_socket(("/run/app.sock", None), ("x", 1)) is None

    index = SocketIndex(min_rescan=3600)
    assert index.find(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert index.find(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert 1 == index.scans
    examined = index.examined
    assert index.find(("127.0.0.1", 3), ("127.0.0.1", 4)) is None
    assert 2 == index.scans
    assert examined == index.examined
    async with loopback_pair() as (server, _client):
        # Made after the scans: found at once, looking at its three new sockets only
        # (the listener, and both ends).
        probe = index.find(server.getsockname(), server.getpeername())
        assert probe is not None
        probe.close()
        assert 3 == index.scans
        assert examined + 3 == index.examined

    fresh = SocketIndex(min_rescan=0)
    async with loopback_pair() as (server, _client):
        local, peer = server.getsockname(), server.getpeername()
        probe = fresh.find(local, peer)
        assert probe is not None
        probe.close()
        scans = fresh.scans
        # Known now: found again without a scan.
        probe = fresh.find(local, peer)
        assert probe is not None
        probe.close()
        assert scans == fresh.scans
    # The connection is closed, its descriptor free for reuse: never found again.
    async with loopback_pair():
        assert fresh.find(local, peer) is None


# -- the rule, in memory ------------------------------------------------------------------------


class KernelModel(PacedResponder):
    """A PacedResponder that also offers the kernel's count of acknowledged bytes
    (TcpProbing), as Linux behaves once the reader's receive buffer is full: the count
    stays put while the reader reads, and grows by ``step`` bytes each time the reader has
    read ``step`` more (its window opens). ``taken`` bytes were acknowledged at first.
    ``in_flight`` is what the kernel says is sent and not acknowledged (None: a kernel too
    old to say)."""

    def __init__(
        self, rate: float, *, taken: int, step: int, in_flight: int | None = 0
    ) -> None:
        super().__init__(rate, buffer=0)
        self.taken = taken
        self.step = step
        self.in_flight = in_flight
        self.released = False
        self._began = self._stepped_at = 0.0
        self._steps = 0

    def tcp_sample(self) -> TcpSample | None:
        if self.released:
            return None
        now = trio.current_time()
        read = 0.0 if not self.rate else self.rate * (now - self._began)
        steps = math.floor(read / self.step)
        if steps > self._steps:
            self._steps = steps
            self._stepped_at = self._began + steps * self.step / (self.rate or 1)
        return TcpSample(
            bytes_acked=self.taken + self._steps * self.step,
            notsent_bytes=16384,
            unacked=0,
            last_data_sent=now - self._stepped_at,
            rtt=0.0,
            in_flight=self.in_flight,
        )

    def release_tcp_probe(self) -> None:
        self.released = True

    async def start_stream(self, status: int, headers: Any) -> None:
        await super().start_stream(status, headers)
        self._began = self._stepped_at = trio.current_time()

    async def write(self, data: bytes) -> None:
        # Nothing the writer writes ever returns: what the reader takes, the model's count
        # says.
        with trio.CancelScope(shield=True):
            await self.connection_closed.wait()


async def time_to_cut(responder: KernelModel) -> float:
    """Seconds from a default server's `stream` call on ``responder`` to its cut (the
    connection closed after it)."""
    server, _record = make_server()
    async with MemoryServer.open(server, ServerConfig()) as mem:
        sid = await mem.initialize()
        with trio.fail_after(300):
            start = trio.current_time()
            mem.call(sid, "stream", {"n": 50, "tag": "s"}, responder)
            await wait_until(lambda: mem.stats()["streams_stalled"] > 0, poll=0.01)
            took = trio.current_time() - start
            await responder.connection_closed.wait()
    return took


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("taken", "cut_at"), [(4096, 10.0), (65536, 32.0), (10**7, 60.0)])
async def test_stopped_reader_is_cut_once_a_reader_at_the_minimum_rate_would_have_stepped(
    autojump_clock: trio.abc.Clock, taken: int, cut_at: float
) -> None:
    """Judged by the kernel's count, a reader that stopped is cut once the writer has been
    busy for stall_budget, or, if later, once a reader at min_read_rate would have drained
    everything the connection took (and so opened its window again), capped at
    RATE_LOOKBACK budgets: 4 KB at 2 KiB/s is within the 10 s budget, 64 KiB takes 32 s."""
    responder = KernelModel(0, taken=taken, step=taken)
    took = await time_to_cut(responder)

    assert cut_at <= took <= cut_at + CHECK + 0.02
    assert cut_at <= RATE_LOOKBACK * ServerConfig().stall_budget
    assert responder.released


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("in_flight", "cut_at"), [(0, 10.0), (None, 8.5 + 8704 / 2048)])
async def test_slow_reader_of_a_fresh_connection_is_cut_at_the_budget(
    autojump_clock: trio.abc.Clock, in_flight: int | None, cut_at: float
) -> None:
    """A reader at half min_read_rate whose kernel acknowledges in 8.5 KB steps took its
    last step 8.5 s into the budget, so its silence alone would not prove it slow until a
    reader at the minimum rate would have taken its next step (12.75 s). But everything its
    connection was sent by 10 s (17 KB) is less than a reader at the minimum rate reads in
    the 10 s budget (20 KB), so it is cut one budget after its writer became busy. A kernel
    that does not say what is in flight leaves only the silence to judge by."""
    responder = KernelModel(
        0.5 * ServerConfig().min_read_rate, taken=8704, step=8704, in_flight=in_flight
    )
    took = await time_to_cut(responder)

    assert cut_at <= took <= cut_at + CHECK + 0.02


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("factor", [1.1, 1.25, 2.0, 4.0])
@pytest.mark.parametrize("step", [6144, 65536])
async def test_reader_stepping_above_min_rate_is_never_cut(
    autojump_clock: trio.abc.Clock, factor: float, step: int
) -> None:
    """A reader above min_read_rate whose kernel acknowledges in steps (6 KB, as behind a
    4 KiB receive buffer on loopback, and 64 KB, loopback's segment) is never cut over ten
    minutes, however long it shows no progress between steps: each wait is shorter than
    the step before it would take at the minimum rate. One below the minimum is cut."""
    server, _record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        healthy = KernelModel(factor * config.min_read_rate, taken=step, step=step)
        slow = KernelModel(0.5 * config.min_read_rate, taken=step, step=step)
        mem.call(sid, "stream", {"n": 10, "tag": "h"}, healthy)
        mem.call(sid, "stream", {"n": 10, "tag": "s"}, slow)
        with trio.fail_after(700):
            await trio.sleep(600)

        assert not healthy.connection_closed.is_set()
        assert slow.connection_closed.is_set()
        assert 1 == mem.stats()["streams_stalled"]
        healthy.client_leaves()


# -- end to end, over loopback --------------------------------------------------------------


def start_call(
    session: McpSession, port: int, *, rcvbuf: int | None = 4096, n: int = 100_000
) -> contextlib.AbstractAsyncContextManager[SlowClient]:
    """A tools/call of `stream` (2 KB events, more than any test reads), sent on a raw socket
    with the given receive buffer when the context is entered."""
    message = rpc_request("tools/call", {"name": "stream", "arguments": {"n": n, "tag": "t"}})
    return open_slow(
        ("127.0.0.1", port), "POST", "/mcp", session.headers(), json_body(message),
        rcvbuf=rcvbuf,
    )


@contextlib.asynccontextmanager
async def busy_call(live: LiveServer) -> AsyncIterator[tuple[SlowClient, ConnectionWriter, float]]:
    """A new session's `stream` call on a 4 KiB receive buffer, once its response has begun:
    the client, the connection's writer, and when that writer became busy."""
    session = await open_session(live.url)
    async with start_call(session, live.port) as client:
        await client.read_head()
        writer = await request_writer(live.table, session.id)
        # Until the buffers are full the writer is idle between two chunks whenever it has
        # written all it was given before the handler gave more: a test scheduled late (a
        # loaded machine) could look at such a moment.
        await wait_until(lambda: writer.busy_since is not None)
        busy_since = writer.busy_since
        assert busy_since is not None
        yield client, writer, busy_since


def acknowledged(client: SlowClient) -> int:
    """What the server's socket for ``client`` says the client acknowledged so far (the
    probe is closed at once: it would hold the connection open)."""
    sock = client._sock
    probe = find_tcp_socket(sock.getpeername(), sock.getsockname())
    assert probe is not None
    try:
        sample = probe.sample()
        assert sample is not None
        return sample.bytes_acked
    finally:
        probe.close()


@pytest.mark.slow
@linux_only
@pytest.mark.spec("TM-BP-STALL", "TM-BP-RELEASE")
@pytest.mark.parametrize(("budget", "min_rate"), [(1.0, 8192), (2.0, 4096), (3.0, 2048)])
async def test_stopped_reader_is_closed_within_the_budget(
    live_server: StartServer, budget: float, min_rate: int
) -> None:
    """A client behind a 4 KiB receive buffer that stops reading at once, on real hypercorn:
    its buffers take about 5.5 KB, less than a reader at min_read_rate takes in one stall
    budget, so the kernel's count, which stops growing, has the stream cut within the
    budget (plus one check) after its writer became busy. The writer, whose socket write
    hypercorn shields, was judged by the probe; it is gone once the connection is closed,
    and the client, reading at last, finds the connection closed."""
    server, record = make_server()
    config = ServerConfig(stall_budget=budget, min_read_rate=min_rate, signal_timeout=0.5)
    live = await live_server(server, config)
    with trio.fail_after(15):
        async with busy_call(live) as (client, writer, busy_since):
            probing = False
            while not live.stats()["streams_stalled"]:
                probing = probing or writer.probing
                await trio.sleep(0.005)
            cut_after = trio.current_time() - busy_since
            await writer.finished.wait()
            await client.read(None)
            assert client.eof or client.reset
        await wait_until(lambda: not tasks_named("mcp:writer"))

    assert probing
    assert budget <= cut_after <= budget + CHECK + SLACK
    assert 1 == live.stats()["streams_cut"]
    assert "t" not in record.cancelled


@linux_only
@pytest.mark.spec("TM-BP-SIGNAL", "TM-BP-RELEASE")
async def test_stopped_reader_is_closed_without_waiting_out_the_signal_timeout(
    live_server: StartServer,
) -> None:
    """A reader the kernel shows silent for SILENCE_FACTOR times the wait a reader at
    min_read_rate needs for its next step cannot take the signal either: with a
    signal_timeout of 30 s, its connection is closed once that silence is reached (about 2 s
    here), not 30 s after the cut; the writer task is gone, nothing of the signal was
    written, and the request runs on."""
    server, record = make_server()
    config = ServerConfig(stall_budget=1.0, min_read_rate=8192, signal_timeout=30.0)
    live = await live_server(server, config)
    with trio.fail_after(15):
        async with busy_call(live) as (client, writer, busy_since):
            await trio.sleep(config.stall_budget / 2)
            taken = acknowledged(client)
            await writer.finished.wait()
            closed_after = trio.current_time() - busy_since
            await wait_until(lambda: not tasks_named("mcp:writer"))
            await client.read(None)

    silence = SILENCE_FACTOR * taken / config.min_read_rate
    assert client.eof or client.reset
    assert [] == client.named("resumption-required")
    assert config.stall_budget <= closed_after <= max(config.stall_budget, silence) + 2 * CHECK
    assert 1 == live.stats()["streams_cut"]
    assert "t" not in record.cancelled


@pytest.mark.slow
@linux_only
@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("budget", [1.0, 2.0])
async def test_stopped_reader_is_cut_once_a_min_rate_reader_would_have_drained_its_buffers(
    live_server: StartServer, budget: float
) -> None:
    """With the default min_read_rate, what a 4 KiB receive buffer took (about 5.5 KB on
    loopback) is more than a reader at that rate takes in a budget of 1 or 2 s: a healthy
    reader's window may open only that late. A client that stopped at once is cut no
    earlier than the budget, and no later than one check after a reader at the minimum
    rate would have drained everything the connection took: under RATE_LOOKBACK budgets,
    where the writes alone had it."""
    server, _record = make_server()
    config = ServerConfig(stall_budget=budget, signal_timeout=0.5)
    live = await live_server(server, config)
    with trio.fail_after(15):
        async with busy_call(live) as (client, writer, busy_since):
            await trio.sleep(budget / 2)
            taken = acknowledged(client)
            await wait_until(lambda: live.stats()["streams_stalled"] > 0)
            cut_after = trio.current_time() - busy_since
            await writer.finished.wait()

    assert budget <= cut_after <= max(budget, taken / config.min_read_rate) + CHECK + SLACK
    assert cut_after < RATE_LOOKBACK * budget


@pytest.mark.slow
@linux_only
@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("budget", [3.0, 10.0])
async def test_reader_at_half_the_minimum_rate_is_cut_at_the_budget(
    live_server: StartServer, budget: float
) -> None:
    """A client reading 1 KiB/s (half the default min_read_rate) behind a 4 KiB receive
    buffer is cut at the stall budget (3 s, and the default 10 s), within one check after
    it, having read some of the stream: the kernel saw it take less than the minimum for a
    budget. At 10 s the kernel's steps alone would leave it in doubt (its last may have
    come a second or two before); that its connection was sent less than a reader at the
    minimum rate reads in a budget settles it."""
    server, _record = make_server()
    config = ServerConfig(stall_budget=budget, signal_timeout=0.5)
    live = await live_server(server, config)
    with trio.fail_after(budget + 12):
        async with busy_call(live) as (client, _writer, busy_since):
            cut = trio.Event()

            async def watch() -> None:
                await wait_until(lambda: live.stats()["streams_stalled"] > 0)
                cut.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await client.read(1024, until=cut)
            cut_after = trio.current_time() - busy_since

    assert budget <= cut_after <= budget + CHECK + SLACK
    assert client.received > 2000


@pytest.mark.slow
@linux_only
@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(
    ("rcvbuf", "budget", "min_rate"),
    [(4096, 1.0, 2048), (None, 2.0, 32768)],
    ids=["4KiB-buffer", "autotuned-buffers"],
)
async def test_readers_above_the_minimum_rate_are_never_cut(
    live_server: StartServer, rcvbuf: int | None, budget: float, min_rate: int
) -> None:
    """Readers at 1.25x, 2x and 4x min_read_rate, side by side, behind a 4 KiB receive
    buffer (the kernel acknowledges them in steps of about 6 KB, 3 s at the minimum rate,
    with a budget of 1 s) and behind loopback's autotuned buffers (steps of about 110 KB
    at once, 3.4 s at the minimum rate, with a budget of 2 s): none is cut in 12 s, though
    each shows the kernel no progress for longer than the budget at a time."""
    server, _record = make_server()
    config = ServerConfig(stall_budget=budget, min_read_rate=min_rate)
    live = await live_server(server, config)
    factors = (1.25, 2.0, 4.0)
    readers = []
    with trio.fail_after(30):
        async with contextlib.AsyncExitStack() as stack:
            for _ in factors:
                session = await open_session(live.url)
                client = await stack.enter_async_context(
                    start_call(session, live.port, rcvbuf=rcvbuf)
                )
                await client.read_head()
                readers.append(client)
            async with trio.open_nursery() as nursery:
                for client, factor in zip(readers, factors, strict=True):
                    nursery.start_soon(client.read, factor * min_rate)
                await trio.sleep(12)
                assert 0 == live.stats()["streams_stalled"]
                assert len(factors) == live.stats()["streams_open"]
                nursery.cancel_scope.cancel()

    for client, factor in zip(readers, factors, strict=True):
        assert not client.eof
        assert client.received >= 0.6 * factor * min_rate * 12
