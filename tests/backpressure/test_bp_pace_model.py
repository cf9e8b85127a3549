# Window pacing (trio_mcp/runtime/backpressure/_pacer.py, TM-BP-PACE) against a modelled TCP
# receiver under
# trio's MockClock (pytest-trio's autojump_clock): what it lets through, when it probes,
# when it lets a reader go. The real kernel's behaviour is in test_bp_pace.py.
from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from trio_mcp.runtime.backpressure._pacer import (
    ENGAGE_AFTER,
    PROBE_BYTES,
    PROBE_FIRST,
    RELEASE_AT,
    WindowPacer,
    pace_limit,
)
from trio_mcp.runtime.backpressure._tcpprobe import TcpSample

#: The pacer of the default configuration: 2048 B/s minimum, 10 s budget.
MIN_RATE = 2048.0
LIMIT = pace_limit(MIN_RATE, 10.0)
RAMP = 4 * MIN_RATE
PROBE_MAX = 10.0 / 40


@attrs.define
class Receiver:
    """A TCP receiver as TCP_INFO shows it to the sender: what is written arrives and is
    acknowledged at once, and each acknowledgement advertises the room its buffer has left.
    Its application reads ``rate`` bytes per second of what arrived. Like Linux, reading
    alone announces nothing: the window the sender sees is the one of the last arrival."""

    buffer: int = 128 * 1024
    rate: float = 0.0
    acked: int = 0
    unread: float = 0.0
    wnd: int = 128 * 1024
    at: float = 0.0
    arrivals: list[tuple[float, int]] = attrs.Factory(list)

    def _read(self) -> None:
        now = trio.current_time()
        self.unread = max(0.0, self.unread - self.rate * (now - self.at))
        self.at = now

    def deliver(self, n: int) -> None:
        self._read()
        self.unread += n
        self.acked += n
        self.wnd = self.buffer - math.ceil(self.unread)
        self.arrivals.append((trio.current_time(), n))

    def sample(self) -> TcpSample:
        return TcpSample(
            bytes_acked=self.acked, notsent_bytes=0, unacked=0, last_data_sent=0.0,
            rtt=0.0001, snd_wnd=self.wnd, in_flight=0,
        )


def pacer_for(receiver: Receiver) -> WindowPacer:
    return WindowPacer(
        receiver.sample, limit=LIMIT, min_rate=MIN_RATE, ramp_rate=RAMP, probe_max=PROBE_MAX
    )


async def write_for(
    pacer: WindowPacer,
    receiver: Receiver,
    seconds: float,
    each: Callable[[], None] | None = None,
) -> list[int]:
    """Write 2 KB pieces through the pacer for ``seconds``, calling ``each`` after every
    write; the sizes of the probes sent."""
    probes: list[int] = []
    written = 0
    with trio.move_on_after(seconds):
        while True:
            size, probe = await pacer.admit(2048, written)
            receiver.deliver(size)
            written += size
            if probe:
                probes.append(size)
            if each is not None:
                each()
            await trio.sleep(0.001)
    return probes


#: How long a hold with no progress lasts before the window is taken as the reader's ceiling,
#: for the modelled receiver (its window grain is one byte): four of the longest probe gaps.
REBASE_AFTER = 4 * PROBE_MAX


@pytest.mark.spec("TM-BP-PACE")
async def test_a_stopped_reader_is_given_the_limit_and_then_only_probes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that reads nothing gets the first kilobyte unpaced, then no more than the
    limit, then only probes of a couple of bytes, whose spacing doubles from the first
    probe's to a fortieth of the budget; its window never shows progress. At the first
    limit, a hold is never rebased."""
    receiver = Receiver()
    pacer = pacer_for(receiver)
    probes = await write_for(pacer, receiver, 10.0)

    assert pacer.pacing and pacer.limit == LIMIT and pacer.rebases == 0
    assert all(size == PROBE_BYTES for size in probes)
    assert receiver.acked <= ENGAGE_AFTER + 2048 + LIMIT + PROBE_BYTES * len(probes)
    assert receiver.acked >= LIMIT
    probe_times = [t for t, n in receiver.arrivals if n == PROBE_BYTES]
    gaps = [b - a for a, b in itertools.pairwise(probe_times)]
    assert gaps[0] == pytest.approx(2 * PROBE_FIRST, abs=1e-3)
    assert max(gaps) == pytest.approx(PROBE_MAX, abs=1e-3)
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(gaps))
    # 10 s of backing off: a handful of quick probes, then four a second.
    assert 35 <= len(probes) <= 50
    assert pacer.progress_at == 0.0


async def stopped_after_ramping() -> tuple[WindowPacer, Receiver]:
    """A ramped pacer whose reader then stops, once the pacer has seen what it read before
    it stopped (within a tenth of a second: the window is seen only as data arrives)."""
    pacer, receiver = await ramped()
    receiver._read()
    receiver.rate = 0.0
    await write_for(pacer, receiver, 0.1)
    assert pacer.rebases == 0
    return pacer, receiver


async def ramped(rate: float = 1_000_000.0) -> tuple[WindowPacer, Receiver]:
    """A pacer whose reader, at ``rate``, has had its limit doubled once, and no more."""
    receiver = Receiver(rate=rate)
    pacer = pacer_for(receiver)
    written = 0
    while pacer.limit == LIMIT:
        size, _ = await pacer.admit(1024, written)
        receiver.deliver(size)
        written += size
        await trio.sleep(0.001)
    assert pacer.pacing
    return pacer, receiver


@pytest.mark.spec("TM-BP-PACE")
async def test_a_fast_reader_that_stops_is_given_a_limit_per_hold_as_probes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that proved fast once and then reads nothing: a hold that sees no progress
    for four of the longest probe gaps takes the window as it is for the reader's new
    ceiling and lets one more limit's worth through (a fallen ceiling looks like data left
    unread), as probes: none of it counts as drained. Its window never shows progress, so
    none of that lets it go."""
    pacer, receiver = await stopped_after_ramping()
    limit, progress_at = pacer.limit, pacer.progress_at
    probes = await write_for(pacer, receiver, 10.0)

    assert pacer.pacing and pacer.limit == limit
    assert pacer.progress_at == progress_at
    assert 8 <= pacer.rebases <= 10
    gifts = [size for size in probes if size != PROBE_BYTES]
    assert limit * (pacer.rebases - 1) <= sum(gifts) <= limit * pacer.rebases


@pytest.mark.spec("TM-BP-PACE")
async def test_a_stopped_reader_whose_window_ceiling_comes_back_shows_no_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that proved fast once stops, and its ceiling falls by twice the limit;
    after the rebase that took the fallen window for its ceiling, it comes back: that is
    its ceiling, not reading, so it is no progress and does not ramp its limit. The stall
    detector, which waits for progress, still cuts it within the budget."""
    pacer, receiver = await stopped_after_ramping()
    limit, progress_at = pacer.limit, pacer.progress_at
    full = receiver.buffer
    receiver.buffer -= 2 * limit

    def ceiling_comes_back_after_the_first_rebase() -> None:
        if pacer.rebases == 1:
            receiver.buffer = full

    await write_for(pacer, receiver, 10.0, ceiling_comes_back_after_the_first_rebase)

    assert receiver.buffer == full and pacer.rebases >= 2
    assert pacer.progress_at == progress_at
    assert pacer.pacing and pacer.limit == limit


@pytest.mark.spec("TM-BP-PACE")
async def test_a_fast_reader_that_paused_past_a_rebase_shows_its_reading_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that proved fast once, stops for 4 s (long enough for rebases) and then
    reads at twice the minimum rate shows progress again within a second of reading, and
    then at least once every quarter budget: what a rebase takes for the ceiling does not
    hide its reading."""
    pacer, receiver = await ramped()
    receiver._read()
    receiver.rate = 0.0
    await write_for(pacer, receiver, 4.0)
    assert pacer.rebases >= 1
    receiver._read()
    receiver.rate = 2 * MIN_RATE
    resumed = trio.current_time()
    progress: list[float] = []

    def watch() -> None:
        if pacer.progress_at >= resumed and (not progress or pacer.progress_at > progress[-1]):
            progress.append(pacer.progress_at)

    await write_for(pacer, receiver, 20.0, watch)

    assert progress and progress[0] - resumed <= 1.0
    gaps = [b - a for a, b in itertools.pairwise([*progress, trio.current_time()])]
    assert max(gaps) <= 10.0 / 4


@pytest.mark.spec("TM-BP-PACE")
async def test_a_fast_reader_whose_window_ceiling_falls_is_held_once_then_let_go(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A receiver can lower the window it offers when empty (Linux sizes it by the payload
    of the segments it gets), which looks like data left unread. A fast reader whose
    ceiling fell by twice the limit, having read everything, is held for no longer than
    one hold with no progress; then its window is taken as the new ceiling, and it goes on
    to prove itself fast and is let go. Before, it was held until the stall detector cut
    it (seen on loopback in 5 of 400 streams of 20,000 events)."""
    pacer, receiver = await ramped()
    receiver.buffer -= 2 * pacer.limit
    fell_at = trio.current_time()
    await write_for(pacer, receiver, 3.0)

    assert pacer.rebases == 1
    assert pacer.released and pacer.proved_fast
    resumed = [t for t, n in receiver.arrivals if t > fell_at and n != PROBE_BYTES]
    assert resumed and resumed[0] - fell_at <= REBASE_AFTER + PROBE_MAX


@pytest.mark.spec("TM-BP-PACE")
async def test_a_slow_reader_stays_paced_and_shows_progress_often(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader at 1.25 times the minimum rate never has more than the limit (and a
    probe) unread, keeps the first limit, takes most of what it asks for, and its window
    shows progress far more often than once a budget."""
    receiver = Receiver(rate=2560.0)
    pacer = pacer_for(receiver)
    progress: list[float] = []

    def watch() -> None:
        assert receiver.unread <= LIMIT + ENGAGE_AFTER + 2048
        if not progress or pacer.progress_at > progress[-1]:
            progress.append(pacer.progress_at)

    await write_for(pacer, receiver, 30.0, watch)

    assert pacer.pacing and pacer.limit == LIMIT
    assert receiver.acked >= 0.9 * 2560 * 30
    gaps = [b - a for a, b in itertools.pairwise(progress)]
    assert max(gaps) <= 10.0 / 4


@pytest.mark.spec("TM-BP-PACE")
async def test_a_reader_that_keeps_up_is_let_go(autojump_clock: trio.testing.MockClock) -> None:
    """A reader that takes each limit's worth at over the ramp rate doubles its limit, and
    past RELEASE_AT is no longer paced: from then on the pacer admits every write whole,
    without sampling."""
    receiver = Receiver(rate=1_000_000.0)
    pacer = pacer_for(receiver)
    await write_for(pacer, receiver, 2.0)

    assert pacer.released and pacer.proved_fast
    assert pacer.limit >= RELEASE_AT
    calls = 0

    def counted() -> TcpSample:
        nonlocal calls
        calls += 1
        return receiver.sample()

    pacer._sample = counted
    assert (4096, False) == await pacer.admit(4096, 10**6)
    assert calls == 0


@pytest.mark.spec("TM-BP-PACE")
async def test_a_reader_that_slows_down_goes_back_to_the_first_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that earned a larger limit and then reads at the minimum rate has its limit
    halved back to the first one, so what it holds unread is small again."""
    receiver = Receiver(rate=12_000.0)
    pacer = pacer_for(receiver)
    await write_for(pacer, receiver, 3.0)
    assert pacer.pacing and pacer.limit > LIMIT
    receiver.rate = 1500.0
    await write_for(pacer, receiver, 40.0)

    assert pacer.pacing and pacer.limit == LIMIT


@pytest.mark.spec("TM-BP-PACE")
async def test_small_streams_and_kernels_without_a_window_are_not_paced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Writes that stay within the first kilobyte never sample the socket; a kernel whose
    TCP_INFO has no advertised window (before Linux 5.4) stops the pacer for good, and so
    do a socket that can no longer be read, stop(), and a reader whose window is small
    enough for the stall detector alone."""
    calls = 0

    def never() -> TcpSample | None:
        nonlocal calls
        calls += 1
        return None

    pacer = WindowPacer(never, limit=LIMIT, min_rate=MIN_RATE, ramp_rate=RAMP, probe_max=PROBE_MAX)
    assert (600, False) == await pacer.admit(600, 0)
    assert (400, False) == await pacer.admit(400, 600)
    assert calls == 0
    assert (2048, False) == await pacer.admit(2048, 1000)
    assert calls == 1 and pacer.released

    old = Receiver()
    pacer = WindowPacer(
        lambda: attrs.evolve(old.sample(), snd_wnd=None, in_flight=None),
        limit=LIMIT, min_rate=MIN_RATE, ramp_rate=RAMP, probe_max=PROBE_MAX,
    )
    assert (2048, False) == await pacer.admit(2048, 4096)
    assert pacer.released and not pacer.proved_fast

    held = Receiver()
    pacer = pacer_for(held)
    written = 0
    while not (pacer.pacing and held.acked >= LIMIT):
        size, _ = await pacer.admit(2048, written)
        held.deliver(size)
        written += size
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def blocked() -> None:
            # Nothing but probes while held back; the whole write once stopped.
            while (got := await pacer.admit(2048, written)) == (PROBE_BYTES, True):
                held.deliver(PROBE_BYTES)
            assert (2048, False) == got
            done.set()

        nursery.start_soon(blocked)
        await trio.sleep(1.0)
        assert not done.is_set()
        pacer.stop()
        await done.wait()

    # A reader whose whole window a reader at the minimum rate drains within a budget.
    small = Receiver(buffer=16 * 1024, wnd=16 * 1024)
    pacer = WindowPacer(
        small.sample,
        limit=LIMIT,
        min_rate=MIN_RATE,
        ramp_rate=RAMP,
        probe_max=PROBE_MAX,
        small_window=20480,
    )
    assert (2048, False) == await pacer.admit(2048, 4096)
    assert pacer.released and not pacer.engaged
