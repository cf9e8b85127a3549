# Window pacing: keep little unread in a new stream's reader's buffers (TM-BP-PACE).
#
# Why: behind large socket buffers, a reader that stopped and one reading slowly look the
# same to the server for tens of seconds. Their kernels take what fits, and then a slow
# reader's window opens again only once it has read most of it. Kept to a few KB unread, a
# reader that reads shows it within a few seconds (its window reopens), and one that stopped
# never does.
#
# How: before each write, TCP_INFO says how much of what we sent the reader has not read:
# what is unsent or in flight, plus how far the window it advertises has shrunk below the
# largest it advertised. A write goes out only while that stays under the limit. When held
# back with nothing in flight, a probe of a byte or two of the pending data makes the
# reader's kernel acknowledge, which reports its window as it is now (a receiver does not
# announce a window that grew by reading alone until it has doubled).
#
# The window a receiver offers when its buffers are empty is not fixed: Linux sizes it by the
# ratio of payload to memory of the segments it received, so a run of small segments lowers
# it. A fall of that ceiling looks like data left unread, and a reader that has read
# everything can then be held for good: probes are too small to move its window. So, for a
# reader that has proved fast once (its limit was doubled), a hold that sees no progress for
# REBASE_STEPS steps' time at the minimum rate takes the window as it is now for the new
# ceiling, and lets a limit's worth through. Readers still at the first limit are left as
# they were: a rebase for them lets a slow reader's drain rate stray from what it reads,
# whether its bytes count as drained or not. A fast reader that then stopped gains nothing by
# it: its window never grows back, so it shows no progress, and what it is given goes out as
# a probe does, counted as nothing drained. It is given a limit's worth more each time, and
# is cut all the same.
#
# A reader that takes each limit's worth quickly proves it is no slow reader: the limit
# doubles, and past RELEASE_AT pacing stops for good, so fast streams pay for a few round
# trips at their start and nothing after. A stream that never writes more than ENGAGE_AFTER
# bytes never pays at all: no socket lookup, no sample.
#
# The pacer is the kernel judge's (trio_mcp/runtime/backpressure/_judge.py, KernelJudge.admit);
# measurements
# behind the constants here: benchmarks/BACKPRESSURE-NOTES.md.
from __future__ import annotations

import math
from collections.abc import Callable

import trio

from ._tcpprobe import TcpSample

__all__ = [
    "ENGAGE_AFTER",
    "RAMP_FACTOR",
    "REBASE_STEPS",
    "RELEASE_AT",
    "SMALL_WINDOW",
    "WindowPacer",
    "pace_limit",
]

#: Bytes a stream writes before pacing starts: small responses never look their socket up.
#: What the reader leaves of them unread is not seen (the window is first read after them),
#: so it adds to the limit in the worst case.
ENGAGE_AFTER = 1024
#: The share of what a reader at the minimum rate takes in one stall budget that may lie
#: unread in its buffers: a fifth, so that a reader at that rate drains it in a fifth of
#: the budget (TM-BP-PACE).
UNREAD_SHARE = 5
#: A reader whose window is no larger than this (or than what a reader at the minimum rate
#: takes in one stall budget, if more) is not paced: the stall detector's count of
#: acknowledged bytes tells it from a stopped one within the budget at the defaults, and
#: the windows of small receive buffers reopen too coarsely to pace by (paced, readers well
#: above the minimum behind them were cut).
SMALL_WINDOW = 16 * 1024
#: A limit this large means the reader has proved fast: pacing stops.
RELEASE_AT = 64 * 1024
#: A reader that takes a limit's worth at this many times the minimum rate has its limit
#: doubled.
RAMP_FACTOR = 4
#: The first probe after a hold begins, at least (or two round trips, if longer). Later
#: probes double the wait, up to the pacer's ``probe_max``.
PROBE_FIRST = 0.002
#: Bytes of pending data a probe sends: enough for an acknowledgement.
PROBE_BYTES = 2
#: Growth of the reader's consumption smaller than this, or than two grains of its window
#: (which is advertised in multiples of 2 to the power of its scale), is rounding, not
#: reading.
_MIN_STEP = 256
#: A write smaller than this (or than what is pending) is not worth making: wait instead.
_MIN_SLICE = 512
#: A hold that sees no progress for the time a reader at the minimum rate takes for this
#: many steps (or four of the longest probe gaps, if longer) takes the reader's window as it
#: is now for its ceiling (see above). Two: a reader at the minimum rate shows a step within
#: one, and the probe that shows it may come a probe gap late.
REBASE_STEPS = 2


def pace_limit(min_read_rate: float, stall_budget: float) -> int:
    """The bytes a paced stream keeps unread at most, at first (TM-BP-PACE)."""
    return max(1024, int(min_read_rate * stall_budget / UNREAD_SHARE))


class WindowPacer:
    """Paces one connection's writes by its reader's TCP window (TM-BP-PACE).

    ``sample`` gives the kernel's figures for the connection's socket (None when it cannot:
    pacing then stops). ``admit`` is called before each write with the bytes wanted; it
    returns how many may go now, waiting first if the reader holds too much unread.
    """

    # One per streamed response: slots keep what a paced stream costs small (TM-BP-BOUNDED).
    __slots__ = (
        "_gift", "_gone", "_held", "_held_since", "_next_probe", "_probe_gap", "_ref", "_sample",
        "_wake", "ceiling", "consumed", "engaged", "first_largest", "first_limit", "largest",
        "limit", "min_rate", "probe_max", "probes", "progress_at", "proved_fast", "ramp_rate",
        "rebases", "released", "small_window",
    )

    def __init__(
        self,
        sample: Callable[[], TcpSample | None],
        *,
        limit: int,
        min_rate: float,
        ramp_rate: float,
        probe_max: float,
        small_window: int = 0,
        gone: trio.Event | None = None,
    ) -> None:
        self._sample = sample
        #: Set when the client has left: nothing is held for it any more (its socket, kept
        #: open by the probe's duplicate, would go on answering with a shut window).
        self._gone = gone
        self.limit = limit
        self.first_limit = limit
        self.min_rate = min_rate
        self.ramp_rate = ramp_rate
        self.probe_max = probe_max
        #: A reader whose window is no larger than this when pacing would begin is not
        #: paced: whatever it takes, a reader at the minimum rate drains within one stall
        #: budget, so the stall detector tells it from a stopped one in time without help.
        self.small_window = small_window
        self.engaged = False
        """Whether writes are being paced now."""
        self.released = False
        """Whether pacing has stopped for good: the reader proved fast, the kernel's
        figures are not to be had, or the writer gave the connection up."""
        self.proved_fast = False
        self.largest = 0
        """The largest window the reader advertised since pacing began: what it has taken
        is measured against it."""
        self.ceiling = 0
        """The window the reader offers with nothing unread, as far as we know: what it
        holds unread is measured against it. The largest window, or since the last rebase
        the window then, if larger windows have not come since."""
        self.first_largest = 0
        """The window it advertised when pacing began."""
        self.consumed = 0
        """What the reader took since the connection opened, as far as its window shows:
        bytes acknowledged less what its window has shrunk by."""
        self.progress_at = -math.inf
        """When ``consumed`` last grew by a step (or pacing began)."""
        self.probes = 0
        self.rebases = 0
        """How often a hold took the reader's window as it was for its ceiling."""
        #: When the last ramp decision was taken, and what the reader had taken then (its
        #: consumption, less the growth of its window).
        self._ref = (-math.inf, 0)
        self._held = False
        self._held_since = -math.inf
        #: What a rebase lets through that is still to go (as probes: not drained).
        self._gift = 0
        self._probe_gap = PROBE_FIRST
        self._next_probe = math.inf
        self._wake: trio.Event | None = None

    @property
    def pacing(self) -> bool:
        return self.engaged and not self.released

    def stop(self) -> None:
        """Stop pacing for good; a write held back goes out at once."""
        self.released = True
        if self._wake is not None:
            self._wake.set()

    def _observe(self, sample: TcpSample, now: float) -> tuple[int, int] | None:
        """Take a sample: the bytes not yet delivered to the reader (unsent or in flight),
        and those it holds unread; None if the sample has no window (the pacer then
        stops)."""
        wnd, in_flight = sample.snd_wnd, sample.in_flight
        if wnd is None or in_flight is None:
            self.stop()
            return None
        self.largest = max(self.largest, wnd)
        self.ceiling = max(self.ceiling, wnd)
        # Taken is measured against the largest window, which a rebase leaves alone: a
        # window that falls and comes back (a ceiling that moves) nets to nothing, and only
        # reading beyond it shows.
        consumed = sample.bytes_acked - (self.largest - wnd)
        if consumed >= self.consumed + max(_MIN_STEP, 2 * sample.window_grain):
            self.consumed = consumed
            self.progress_at = now
            # A receiver grows the window it offers as data arrives, early in a connection,
            # whether or not its application reads (by some KB with a network's MSS):
            # that counts as progress (a reader that stopped shows it only at the start),
            # but not towards a ramp, which would hand a stopped reader more.
            self._ramp(now, sample.rtt, consumed - (self.largest - self.first_largest))
        return sample.notsent_bytes + in_flight, self.ceiling - wnd

    def _rebase_after(self, sample: TcpSample) -> float:
        """How long a hold may see no progress before the window is taken as the reader's
        new ceiling."""
        step = max(_MIN_STEP, 2 * sample.window_grain)
        return max(4 * self.probe_max, REBASE_STEPS * step / self.min_rate)

    def _rebase(self, sample: TcpSample) -> None:
        """Take the window the reader offers now for its ceiling: nothing counts as unread,
        and a limit's worth may go (as probes). What it has taken is still measured against
        the largest window, so this is no progress and no step towards a ramp: a reader
        that stopped is not let go by it, only given a limit's worth more."""
        assert sample.snd_wnd is not None
        self.rebases += 1
        self.ceiling = sample.snd_wnd
        self._gift = self.limit

    def _ramp(self, now: float, rtt: float, taken: int) -> None:
        """A reader that took a limit's worth at ``ramp_rate`` or faster (or within a few
        round trips and the first probe) gets twice the limit; past RELEASE_AT, no pacing
        at all. One that took it at under a quarter of that goes back towards the first
        limit, so that what it holds unread stays small."""
        began, taken_then = self._ref
        gained = taken - taken_then
        if gained < self.limit:
            return
        took = now - began
        if gained >= self.ramp_rate * took or took <= 2 * PROBE_FIRST + 4 * rtt:
            self.limit *= 2
            if self.limit >= RELEASE_AT:
                self.proved_fast = True
                self.stop()
        elif 4 * gained < self.ramp_rate * took:
            self.limit = max(self.first_limit, self.limit // 2)
        self._ref = (now, taken)

    async def admit(self, size: int, written: int) -> tuple[int, bool]:
        """How many of ``size`` bytes may be written now, having written ``written`` on this
        connection so far, and whether that write is a probe (sent only so that the reader's
        kernel reports its window: a byte or two, or after a rebase a limit's worth), which
        the writer does not count as drained."""
        if self.released:
            return size, False
        if not self.engaged:
            if written + size <= ENGAGE_AFTER:
                return size, False
            first = self._sample()
            if (
                first is None
                or first.snd_wnd is None
                or first.snd_wnd + (first.in_flight or 0) <= self.small_window
            ):
                self.stop()
                return size, False
            self.engaged = True
            self.progress_at = trio.current_time()
            self.largest = self.first_largest = self.ceiling = first.snd_wnd
            self.consumed = first.bytes_acked
            self._ref = (self.progress_at, self.consumed)
        while not self.released:
            if self._gone is not None and self._gone.is_set():
                self.stop()
                break
            sample = self._sample()
            if sample is None:
                self.stop()
                break
            now = trio.current_time()
            observed = self._observe(sample, now)
            if observed is None or self.released:
                break
            queued, unread = observed
            room = self.limit - queued - unread
            if room >= min(size, _MIN_SLICE):
                self._held = False
                admitted = min(size, room)
                if self._gift > 0:
                    # After a rebase: sent to see whether the reader reads, like a probe.
                    self._gift = max(0, self._gift - admitted)
                    return admitted, True
                return admitted, False
            if not self._held:
                self._held = True
                self._held_since = now
                self._probe_gap = max(PROBE_FIRST, 2 * sample.rtt)
                self._next_probe = now + self._probe_gap
            if (
                queued <= 0
                and self.limit > self.first_limit
                and now - max(self._held_since, self.progress_at) >= self._rebase_after(sample)
            ):
                # Everything sent is acknowledged and the window has not moved: either the
                # reader stopped or its ceiling fell (see the top of this file).
                self._rebase(sample)
                self._held = False
                continue
            if queued <= 0 and now >= self._next_probe:
                # Nothing in flight and the window still shut: only data brings an
                # acknowledgement, and with it the window as it is now.
                self._probe_gap = min(2 * self._probe_gap, self.probe_max)
                self._next_probe = now + self._probe_gap
                self.probes += 1
                return min(size, PROBE_BYTES), True
            # In flight: its acknowledgement comes within a round trip or a delayed ACK.
            wait = self._next_probe - now if queued <= 0 else max(sample.rtt, 0.001)
            if self._wake is None:
                self._wake = trio.Event()
            with trio.move_on_after(min(max(wait, 0.0005), self.probe_max)):
                await self._wake.wait()
        return size, False
