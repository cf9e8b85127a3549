# Hypothesis over a client that reads one call's stream over a series of connections, each
# at its own pace, behind its own buffers: some it leaves, some the server cuts for reading
# too slowly (TM-BP-STALL), and each time it resumes from where it was told to (the
# resumption-required signal) or from the last id it saw. In memory, under trio's MockClock,
# with the whole runtime. Whatever happens, what it receives is each message once, in
# order, then the answer; or, when messages left the window before it came back, an
# explicit resumption-failed and an error for the call, never a silent gap.
from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.slow import MemoryServer, PacedResponder, make_server, numbered

from trio_mcp import Retention, ServerConfig
from trio_mcp.protocol import ErrorCode

#: How long one connection may last, in trio time, before the client gives it up.
CONNECTION_LIMIT = 200.0


@attrs.frozen
class Reader:
    rate: float | None
    """Bytes a second (None: at once; 0: stopped)."""
    buffer: int
    wake: float
    leaves_after: float | None
    """Trio seconds after which the client drops the connection (None: it stays)."""


READERS = st.builds(
    Reader,
    rate=st.sampled_from([None, 0.0, 600.0, 1500.0, 3000.0, 10_000.0]),
    buffer=st.sampled_from([0, 16384, 65536]),
    wake=st.sampled_from([0.0, 1 / 3]),
    leaves_after=st.none() | st.sampled_from([0.5, 3.0, 15.0, 40.0]),
)


@attrs.define
class Seen:
    numbers: list[int] = attrs.Factory(list)
    answer: dict[str, Any] | None = None
    failed: bool = False
    """A resumption-failed event came."""
    connections: int = 0
    cuts: int = 0


async def follow(
    mem: MemoryServer, sid: str, readers: list[Reader], arguments: dict[str, Any]
) -> tuple[Seen, dict[str, Any]]:
    seen = Seen()
    cursor: str | None = None
    request: dict[str, Any] | None = None
    # The last reader of the list is followed by a fast one that stays, so the call ends.
    for k, reader in enumerate([*readers, Reader(None, 0, 0.0, None)]):
        responder = PacedResponder(reader.rate, buffer=reader.buffer, wake=reader.wake)
        if k == 0:
            responder, request = mem.call(sid, "stream", arguments, responder)
        else:
            assert cursor is not None
            mem.get(sid, cursor, responder)
        seen.connections += 1
        with trio.move_on_after(reader.leaves_after or CONNECTION_LIMIT):
            await responder.connection_closed.wait()
        if not responder.connection_closed.is_set():
            responder.client_leaves()
        await trio.testing.wait_all_tasks_blocked()
        if k > 0:
            assert responder.status == 200, responder.reply_
        for _, sse in responder.events:
            if sse.event == "resumption-required":
                seen.cuts += 1
                told = json.loads(sse.data or "{}")["lastEventId"]
                if told is not None:
                    # TM-BP-SIGNAL: the signal names the last event the connection took.
                    assert told == (responder.ids() or [cursor])[-1]
            elif sse.event == "resumption-failed":
                seen.failed = True
            elif sse.event is None and sse.data:
                message = json.loads(sse.data)
                number = numbered(message)
                if number is not None:
                    seen.numbers.append(number)
                elif message.get("id") == request["id"]:
                    assert seen.answer is None, "the answer came twice"
                    seen.answer = message
        if responder.ids():
            cursor = responder.ids()[-1]
        if seen.answer is not None:
            break
    assert request is not None
    return seen, request


async def read_with_stalls(
    readers: list[Reader], arguments: dict[str, Any], small_window: bool
) -> Seen:
    server, _record = make_server()
    retention = Retention(max_events=40, max_bytes=64 * 1024) if small_window else Retention()
    config = ServerConfig(retention=retention, signal_timeout=5.0)
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        seen, request = await follow(mem, sid, readers, {"tag": "s", **arguments})
    n = arguments["n"]
    # Never a message twice, never one out of order.
    assert seen.numbers == sorted(set(seen.numbers)), seen.numbers
    assert seen.answer is not None, seen
    if seen.failed:
        # TM-RES-STALE: the loss is said, and the call fails explicitly.
        assert seen.answer["error"]["code"] == ErrorCode.RESUMPTION_FAILED, seen.answer
    else:
        # No signal of a loss: nothing was lost.
        assert seen.numbers == list(range(n)), seen.numbers
        assert seen.answer["id"] == request["id"] and "result" in seen.answer
    return seen


@pytest.mark.spec("T-RESUME-5", "T-RESUME-6", "TM-BP-SIGNAL", "TM-RES-STALE", "T-PSSE-12")
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    readers=st.lists(READERS, min_size=1, max_size=5),
    n=st.integers(1, 120),
    size=st.sampled_from([200, 2000, 6000]),
    delay=st.sampled_from([0.0, 0.0, 0.1, 1.0]),
    small_window=st.booleans(),
)
# Cut once for reading too slowly, then resumed from the signal by a fast reader.
@example(
    readers=[Reader(600.0, 16384, 0.0, None)], n=120, size=2000, delay=0.0, small_window=False
)
# Stopped behind a small window while the handler runs on: the loss is said.
@example(
    readers=[Reader(0.0, 0, 0.0, 40.0)], n=120, size=2000, delay=0.0, small_window=True
)
def test_a_client_cut_and_resuming_gets_each_message_once_or_an_explicit_loss(
    readers: list[Reader], n: int, size: int, delay: float, small_window: bool
) -> None:
    """A client that reads one call over a series of connections, each at its own rate
    (stopped, slow, fast), behind its own buffers, leaving some and cut from others for
    reading too slowly, and resuming each time from the last id it received, gets every
    notification once, in order, then the call's result; or, if some left the retention
    window before it came back, a resumption-failed event and the call's error, with
    nothing received twice or out of order."""
    seen = trio.run(
        read_with_stalls,
        readers,
        {"n": n, "size": size, "delay": delay},
        small_window,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    event("a loss, said" if seen.failed else "everything")
    if seen.cuts:
        event("cut at least once")
