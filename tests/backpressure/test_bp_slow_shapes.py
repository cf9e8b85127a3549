# The slow reader of issue 35, over real sockets on both HTTP servers, with the defaults (a
# 10 s stall budget, 2 KiB/s minimum): "a 1 KiB/s reader of a long stream (reads 1 KiB once a
# second, 8 KiB effective receive buffer, 2 KB events): not closed within 25 s in 2 of 3
# runs". Readers of each shape (once-a-second bursts, a steady trickle, a tiny receive buffer,
# the kernel's autotuned one) are cut at the budget, and the server's end of the connection
# is closed within the budget and a second: nothing it sends reaches the reader after that,
# so the reader sees the end once it has read what its own kernel took before. The
# resumption signal reaches a reader whose buffers had room for it; every reader resumes
# from the last id it read and loses and repeats nothing. benchmarks/BACKPRESSURE-NOTES.md
# says why the close used to come 22 s late (the judge was on time).
from __future__ import annotations

import json
import sys
from typing import Any

import attrs
import pytest
import trio
from support.client import McpSession, open_session, open_stream, rpc_request
from support.client import dumps as json_body
from support.fixtures import StartServer
from support.slow import SlowClient, make_server, numbered, open_slow

from trio_mcp import ServerConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel judge's"),
]

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: Slack for a loaded machine (two cores shared with other test runs), on top of each bound.
SLACK = 0.75


@attrs.frozen
class Shape:
    """How a reader reads: ``chunk`` bytes every ``period`` seconds, behind ``rcvbuf``
    (SO_RCVBUF, None: the kernel's autotuned default)."""

    chunk: int
    period: float
    rcvbuf: int | None

    @property
    def rate(self) -> float:
        return self.chunk / self.period


SHAPES = {
    # The reader: 1 KiB once a second, SO_RCVBUF 4 KiB (8 KiB effective).
    "bursts": Shape(1024, 1.0, 4096),
    "trickle": Shape(256, 0.25, 4096),
    "tiny-buffer": Shape(1024, 1.0, 1024),
    "autotuned": Shape(1024, 1.0, None),
    "large-bursts-autotuned": Shape(4096, 4.0, None),
}


def _server_state(server_port: int, client_port: int) -> tuple[str, int] | None:
    """The TCP state of the server's end of a loopback connection, and what its send queue
    holds (None: the socket is gone, as after a reset)."""
    local, remote = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1] == local and fields[2] == remote:
                return fields[3], int(fields[4].split(":")[0], 16)
    return None


@attrs.define
class Seen:
    sent_at: float = 0.0
    cut_at: float | None = None
    closed_at: float | None = None
    received_at_close: int = 0
    unread_at_close: int = 0
    queued_at_close: int | None = None
    """What the server's send queue held when its end left ESTABLISHED (None: reset, gone)."""
    end_at: float | None = None


async def _read_in_shape(client: SlowClient, shape: Shape, seen: Seen) -> None:
    """Read ``chunk`` bytes (what is there of them) every ``period``, until the end."""
    while not client.eof:
        want = shape.chunk
        while want > 0 and not client.eof:
            data = b""
            with trio.move_on_after(0.005):
                data = await client._recv(want)
            if not data:
                break
            client._feed(data)
            want -= len(data)
        await trio.sleep(shape.period)
    seen.end_at = trio.current_time()


async def _watch(live: Any, client: SlowClient, client_port: int, seen: Seen) -> None:
    """When the server decided the cut, and when its end of the connection closed."""
    while seen.closed_at is None:
        now = trio.current_time()
        if seen.cut_at is None and live.stats()["streams_cut"] >= 1:
            seen.cut_at = now
        state = _server_state(live.port, client_port)
        if state is None or state[0] != "01":  # gone, or no longer ESTABLISHED
            seen.closed_at = now
            # One instant: no read of the client's is between the kernel and its count
            # (SlowClient._recv), so what it has and what its kernel holds add up.
            seen.received_at_close = client.received
            seen.unread_at_close = client.unread()
            seen.queued_at_close = None if state is None else state[1]
            return
        await trio.sleep(0.01)


@pytest.mark.spec("TM-BP-STALL", "TM-BP-CLOSE", "TM-BP-SIGNAL", "T-RESUME-5")
@pytest.mark.parametrize("shape_name", sorted(SHAPES))
async def test_a_slow_reader_of_any_shape_is_cut_at_the_budget_and_closed_a_second_later(
    live_server: StartServer, shape_name: str
) -> None:
    """A reader at 1 KiB/s (half the minimum), whatever the shape of its reads and buffers,
    of a call sending 200 progress notifications of 2 KB: the server decides the cut once
    its writer has been busy for the stall budget (within a check of it), and its end of
    the connection leaves ESTABLISHED within the budget and a second. From then on the
    server sends nothing: what the reader still gets is what its own kernel held at the close.
    A reader whose buffers took the signal (the paced, autotuned ones) reads it last; every
    reader resumes from the last id it read and gets the rest exactly once."""
    shape = SHAPES[shape_name]
    server, record = make_server()
    config = ServerConfig()
    budget = config.stall_budget
    live = await live_server(server, config)
    session = await open_session(live.url)
    n = 200
    message = rpc_request("tools/call", {
        "name": "stream", "arguments": {"n": n, "size": 2000, "tag": "s"},
        "_meta": {"progressToken": "p"},
    })
    seen = Seen()
    with trio.fail_after(budget + 60):
        async with open_slow(
            ("127.0.0.1", live.port), "POST", "/mcp", session.headers(), json_body(message),
            rcvbuf=shape.rcvbuf,
        ) as client:
            seen.sent_at = trio.current_time()
            await client.read_head()
            client_port = client._sock.getsockname()[1]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch, live, client, client_port, seen)
                await _read_in_shape(client, shape, seen)
        rest = await _resume(live, session, client.last_id)
    assert seen.cut_at is not None and seen.closed_at is not None and seen.end_at is not None
    cut_after = seen.cut_at - seen.sent_at
    closed_after = seen.closed_at - seen.sent_at
    assert budget <= cut_after <= budget + CHECK + SLACK, cut_after
    assert closed_after <= budget + 1.0 + SLACK, closed_after
    # Nothing was sent after the close: the reader got what its kernel held then, no more.
    assert client.received <= seen.received_at_close + seen.unread_at_close, seen
    drained = seen.unread_at_close / shape.rate + 2 * shape.period
    assert seen.end_at - seen.closed_at <= drained + SLACK
    signals = client.named("resumption-required")
    if shape.rcvbuf is None:
        # Paced: its buffers have room for the rest of the write and the signal.
        [signal] = signals
        assert client.last_id == json.loads(signal.data or "")["lastEventId"]
    later = [json.loads(e.data) for e in rest if e.data and e.event is None]
    numbers = [numbered(m) for m in client.messages + later]
    assert [*range(n), None] == numbers
    assert message["id"] == later[-1]["id"]
    assert "s" not in record.cancelled
    assert 1 == live.stats()["streams_cut"]


async def _resume(live: Any, session: McpSession, last_id: str | None) -> list[Any]:
    assert last_id is not None
    async with open_stream(
        live.url, "GET", [*session.headers(), ("last-event-id", last_id)]
    ) as resumed:
        return [e async for e in resumed.events(comments=False)]
