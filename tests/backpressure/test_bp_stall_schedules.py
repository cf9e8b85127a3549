# Hypothesis over readers and handlers, for the stall detector judging by writes alone (in
# memory, under trio's MockClock; tests/support/slow.py's responders model the kernel's
# buffers, which hand a writer its reader's progress in bursts). Rates, buffer sizes, how
# much room a blocked write waits for, write grain, message sizes and the handler's pauses
# are all drawn; the hand-picked cases of test_bp_stall_memory.py say what each rule does.
from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support.slow import MemoryServer, PacedResponder, make_server, numbered

from trio_mcp import ServerConfig
from trio_mcp.runtime.backpressure._writer import RATE_LOOKBACK

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: The polling step of these tests, in trio time.
POLL = 0.01

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BUFFERS = st.sampled_from([0, 4096, 16384, 65536, 262144])
WAKES = st.sampled_from([0.0, 1 / 3, 0.5])
PIECES = st.sampled_from([256, 1024, 4096])


async def serve_one_call(
    rate: float, buffer: int, wake: float, piece: int, arguments: dict[str, Any], progress: bool
) -> tuple[float | None, PacedResponder, dict[str, Any], float]:
    """One stream call read at ``rate``: when it was cut (None: never), its responder, the
    request, and how long it ran, in trio time."""
    server, _record = make_server()
    async with MemoryServer.open(server, ServerConfig()) as mem:
        sid = await mem.initialize()
        start = trio.current_time()
        responder, message = mem.call(
            sid,
            "stream",
            {"tag": "s", **arguments},
            PacedResponder(rate, buffer=buffer, wake=wake, piece=piece),
            progress=progress,
        )
        cut_at = None
        with trio.fail_after(3000):
            while not responder.connection_closed.is_set():
                if cut_at is None and mem.stats()["streams_stalled"]:
                    cut_at = trio.current_time() - start
                await trio.sleep(POLL)
        if cut_at is None and mem.stats()["streams_stalled"]:
            cut_at = trio.current_time() - start
        return cut_at, responder, message, trio.current_time() - start


def run(*args: Any) -> tuple[float | None, PacedResponder, dict[str, Any], float]:
    return trio.run(serve_one_call, *args, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.slow
@pytest.mark.spec("TM-BP-STALL")
@SETTINGS
@given(
    factor=st.floats(1.1, 4.0),
    buffer=BUFFERS,
    wake=WAKES,
    piece=PIECES,
    size=st.integers(50, 15000),
    delay=st.sampled_from([0.0, 0.05, 0.5, 3.0]),
    n=st.integers(1, 60),
    progress=st.booleans(),
)
# Cut at 78 s while bursts ended at idle gaps (found by a longer run of this test).
@example(
    factor=1.125, buffer=262144, wake=1 / 3, piece=256, size=7358, delay=0.5, n=53,
    progress=False,
)
def test_readers_above_the_minimum_rate_are_never_cut_whatever_the_buffers_and_handler(
    factor: float,
    buffer: int,
    wake: float,
    piece: int,
    size: int,
    delay: float,
    n: int,
    progress: bool,
) -> None:
    """A reader that takes more than min_read_rate, behind any buffers waking a blocked
    write at any fraction, fed messages of any size up to what a reader at the minimum
    rate takes within producer_wait, at any pace, is never cut: it gets every message,
    then the response."""
    rate = factor * ServerConfig().min_read_rate
    arguments = {"n": n, "size": size, "delay": delay}
    cut_at, responder, message, took = run(rate, buffer, wake, piece, arguments, progress)
    event(f"ran {int(took) // 100 * 100}-{int(took) // 100 * 100 + 99} s")
    assert cut_at is None, (cut_at, took)
    assert responder.ended
    assert list(range(n)) == [numbered(m) for m in responder.messages()[:-1]]
    assert message["id"] == responder.messages()[-1]["id"]


@pytest.mark.spec("TM-BP-STALL")
@SETTINGS
@given(
    factor=st.floats(0.0, 0.5),
    buffer=st.sampled_from([0, 4096, 16384, 65536]),
    wake=WAKES,
    piece=PIECES,
    size=st.integers(500, 40000),
    progress=st.booleans(),
)
def test_readers_at_half_the_minimum_rate_or_less_are_cut_within_the_lookback(
    factor: float, buffer: int, wake: float, piece: int, size: int, progress: bool
) -> None:
    """A reader that takes half of min_read_rate or less, from a handler that always has
    more to send, is cut: not before stall_budget, and no later than RATE_LOOKBACK budgets
    plus what its buffers took at the minimum rate (and one check of the view)."""
    config = ServerConfig()
    total = buffer + 4 * RATE_LOOKBACK * config.stall_budget * config.min_read_rate + 10 * size
    arguments = {"n": int(total // size) + 1, "size": size}
    cut_at, _responder, _message, _took = run(
        factor * config.min_read_rate, buffer, wake, piece, arguments, progress
    )
    assert cut_at is not None
    fill = buffer / config.min_read_rate
    event(f"cut at {int(cut_at) // 10 * 10}-{int(cut_at) // 10 * 10 + 9} s")
    assert config.stall_budget <= cut_at <= (
        RATE_LOOKBACK * config.stall_budget + fill + CHECK + POLL
    ), (cut_at, fill)
