# How a connection's writer judges its reader: too slow, or not (spec/backpressure.md).
#
# The writer (trio_mcp/runtime/backpressure/_writer.py) only writes. It tells its judge what it
# does (when it
# becomes busy and idle, when each write begins and ends) and asks it the questions its View
# asks: how long the reader has been stalled (TM-BP-STALL), whether it has gone silent
# (TM-BP-SIGNAL), and how much may be written now (TM-BP-PACE). Two judges answer them:
#
# - `WriteProgressJudge`, the portable one: the reader's progress is the writes that
#   completed, nothing else. Any responder, any platform.
# - `KernelJudge`: the same, plus what the kernel says about the connection's socket, for a
#   responder that offers it (`TcpProbing`): the bytes the reader acknowledged (TCP_INFO), and
#   window pacing (`WindowPacer`). Whenever the kernel has nothing to say (no sample yet, or
#   the probe is gone), it judges exactly as the portable one.
#
# Which connection gets which is decided in one place, `judge_for`.
# Measurements behind the constants here: benchmarks/BACKPRESSURE-NOTES.md.
from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Protocol

import attrs

from ._pacer import WindowPacer
from ._responder import Responder, TcpProbing
from ._tcpprobe import TcpSample

__all__ = [
    "RATE_LOOKBACK",
    "SILENCE_FACTOR",
    "KernelJudge",
    "StallJudge",
    "WriteProgressJudge",
    "judge_for",
]

#: How far back the drain rate looks, in stall budgets of busy time (TM-BP-STALL). The
#: kernel's buffers hand a writer its reader's progress in bursts, which can be far apart for
#: a healthy reader: a rate over one budget cuts such readers. The price: judged by writes
#: alone, a reader that stops is cut between one budget (if its buffers held little) and this
#: many after it stopped; judged by the kernel's count, once a reader at the minimum rate would
#: have drained what its buffers took (at least one budget after the writer became busy), and
#: never later than this many.
RATE_LOOKBACK = 6
#: Buckets per stall budget in which busy time and written bytes are kept.
_BUCKETS_PER_WINDOW = 40
#: How many of its expected waits between steps a cut reader may stay silent before the
#: signal is given up and the connection closed (TM-BP-SIGNAL): a reader at a third of the
#: minimum rate still steps within it, one that stopped is closed.
SILENCE_FACTOR = 3
#: The fraction of a stall budget a write must have been blocked before the kernel judge looks
#: its socket up, and the least time between two lookups that found nothing (TM-BP-STALL).
#: Only a writer that is stuck pays for it, never a request served at speed.
_PROBE_AFTER = 0.25
#: Growth of the acknowledged count closer than this to the last (or two round trips, if
#: longer) belongs to the same step: the acknowledgements of one opening of the peer's window
#: come over a round trip or a delayed ACK, and consecutive samples may see parts of them
#: (a busy view samples at least every 0.25 s, and whenever a write completes).
_STEP_GAP = 0.3


class StallJudge(Protocol):
    """What a ConnectionWriter needs to judge its reader (TM-BP-STALL, TM-BP-SIGNAL,
    TM-BP-PACE). Times are trio's clock, in seconds; rates are bytes per second.

    The writer reports: ``busy`` when it gets work while idle, ``idle`` when it has none
    left, ``write_began`` before each write to the socket and ``observe_write`` after it.
    Its View asks ``stalled_for`` and ``reader_silent``; the writer asks ``admit`` before
    each write. ``unpace`` and ``release`` come when the connection is given up.
    """

    @property
    def busy_since(self) -> float | None:
        """When the writer last went from idle to busy (None while idle)."""

    @property
    def paced(self) -> bool:
        """Whether the writes are paced by the reader's window now (TM-BP-PACE)."""

    @property
    def may_pace(self) -> bool:
        """Whether the writes are, or may yet be, paced by the reader's window (TM-BP-PACE):
        until a pacer stops for good, every write is its to size."""

    @property
    def probing(self) -> bool:
        """Whether the reader is judged by the kernel's count of acknowledged bytes now."""

    def busy(self, now: float) -> None:
        """The writer, idle until now, has work."""

    def idle(self, now: float) -> None:
        """The writer has no work left (called again while idle, it changes nothing)."""

    async def admit(self, size: int, written: int) -> tuple[int, bool]:
        """How many of ``size`` bytes may be written now, having written ``written`` on the
        connection so far (waiting first if the reader must be held back), and whether that
        write is a probe, sent only to hear from the reader: no progress."""

    def write_began(self, now: float) -> None:
        """A write to the socket begins; it may block on the reader."""

    def observe_write(self, now: float, nbytes: int, *, probe: bool = False) -> None:
        """The write begun last completed, handing the kernel ``nbytes`` (a ``probe``, as
        ``admit`` said: no progress)."""

    def stalled_for(self, now: float, min_rate: float) -> float:
        """The busy time behind a verdict of "slower than ``min_rate``" (TM-BP-STALL): 0 while
        the reader is not judged too slow."""

    def reader_silent(self, now: float, min_rate: float) -> bool:
        """Whether a reader already judged too slow has shown no progress for so long that
        waiting for it to take the signal is pointless (TM-BP-SIGNAL)."""

    def undelivered(self) -> int | None:
        """What the connection was handed that its reader's kernel has not acknowledged yet,
        unsent or in flight, as the kernel says now: 0 exactly when all of it has reached
        the reader's buffers; None when the kernel does not say (TM-BP-CLOSE)."""

    def unpace(self) -> None:
        """Stop pacing for good: a write held back goes out now (TM-BP-PACE)."""

    def release(self) -> None:
        """Let go of what the judge holds open (the kernel probe); it judges by the writes
        alone from then on."""


class WriteProgressJudge:
    """The portable judge: the reader's progress is the writes that completed (TM-BP-STALL).

    It measures only while the writer has work: a reader cannot look slow because the server
    had nothing to send. Busy seconds and written bytes are kept in buckets (a fortieth of the
    window each) over the last ``RATE_LOOKBACK`` windows, so the memory it takes is fixed and a
    writer that catches up with its queue for an instant does not start over.

    What it guarantees: a reader that takes more than the minimum rate is never cut, however
    far apart the kernel hands its progress on, as long as each wait stays within the
    lookback (the wait test of ``_writes_stalled``); a reader that stops is cut no sooner than
    one window of busy time, and no later than ``RATE_LOOKBACK`` windows after its last write
    completed: as soon as a reader at the minimum rate would have taken the burst before, if
    that is sooner. It never calls a reader silent.
    """

    def __init__(self, window: float) -> None:
        self.window = window
        self.busy_since: float | None = None
        #: [bucket number, busy seconds, bytes written, bytes acknowledged (KernelJudge
        #: only)] for the last RATE_LOOKBACK windows.
        self._buckets: collections.deque[list[float]] = collections.deque()
        self._bucket_width = window / _BUCKETS_PER_WINDOW
        #: Up to when busy time has been put in buckets (None while idle).
        self._accounted: float | None = None
        #: When a write last completed, and the bytes of the burst it ended: what went out
        #: since the last write that had to wait for the reader (for more than a bucket).
        self._last_done: float | None = None
        self._burst = 0
        #: The last wait between two bursts, with the bytes of the burst before it.
        self._last_wait: tuple[float, int] | None = None

    # -- what the writer reports ------------------------------------------------------------

    @property
    def paced(self) -> bool:
        return False

    @property
    def may_pace(self) -> bool:
        return False

    @property
    def probing(self) -> bool:
        return False

    def busy(self, now: float) -> None:
        self.busy_since = self._accounted = now

    def idle(self, now: float) -> None:
        self._account(now)
        self.busy_since = self._accounted = None

    async def admit(self, size: int, written: int) -> tuple[int, bool]:
        return size, False

    def write_began(self, now: float) -> None:
        pass

    def observe_write(self, now: float, nbytes: int, *, probe: bool = False) -> None:
        if probe:
            return
        self._account(now)
        self._bucket(now)[2] += nbytes
        # How long the writer waited for the reader (held back or blocked) since its last
        # write, counting busy time only.
        waited = None if self._last_done is None else now - max(
            self._last_done, self.busy_since or self._last_done
        )
        if waited is None or waited > self._bucket_width:
            # A new burst: keep the wait that ended here, and the burst before it. Writes
            # that found room are one burst however far apart they came: a handler slower
            # than the room the reader opened leaves the writer idle between them, and that
            # is the handler's pace, not the reader's.
            if waited is not None:
                self._last_wait = (waited, self._burst)
            self._burst = 0
        self._burst += nbytes
        self._last_done = now

    def undelivered(self) -> int | None:
        return None

    def unpace(self) -> None:
        pass

    def release(self) -> None:
        pass

    # -- the verdicts -----------------------------------------------------------------------

    def busy_time(self, now: float) -> float:
        """Seconds the writer had work in the last ``RATE_LOOKBACK`` windows."""
        self._account(now)
        return sum(b[1] for b in self._buckets)

    def drain_rate(self, now: float) -> float:
        """Bytes per second of busy time the reader took in the last ``RATE_LOOKBACK``
        windows (infinite when the writer had no work)."""
        busy = self.busy_time(now)
        if busy <= 0:
            return math.inf
        return sum(b[2] for b in self._buckets) / busy

    def stalled_for(self, now: float, min_rate: float) -> float:
        """TM-BP-STALL: the busy time, once the writer has been busy for a window and
        ``_writes_stalled`` says so; 0 otherwise."""
        if self.busy_since is None:
            return 0.0
        busy = self.busy_time(now)
        if busy < self.window:
            return 0.0
        return busy if self._writes_stalled(now, min_rate) else 0.0

    def _writes_stalled(self, now: float, min_rate: float) -> bool:
        """Stalled, judged twice on completed writes. Over the lookback, bytes per busy
        second under ``min_rate``. And by the waits between bursts of progress: a reader at
        ``min_rate`` takes a burst of ``burst`` bytes within ``burst / min_rate``, so a
        shorter wait for the next one is the kernel's doing, not the reader's. A stall needs
        the wait going on now, or the last one, to be longer (capped at the lookback). The
        second test is what keeps a healthy reader whose progress comes in bursts further
        apart than the lookback can average from being cut."""
        assert self.busy_since is not None
        if self.drain_rate(now) >= min_rate:
            return False
        cap = RATE_LOOKBACK * self.window

        def too_long(wait: float, burst: int) -> bool:
            return wait >= min(burst / min_rate, cap)

        since = self.busy_since if self._last_done is None else max(
            self._last_done, self.busy_since
        )
        if too_long(now - since, self._burst):
            return True
        return self._last_wait is not None and too_long(*self._last_wait)

    def reader_silent(self, now: float, min_rate: float) -> bool:
        """False: the writes alone cannot tell a reader that stopped from one behind full
        buffers, so a cut reader is given the whole ``signal_timeout`` (TM-BP-SIGNAL)."""
        return False

    # -- the buckets ------------------------------------------------------------------------

    def _bucket(self, at: float) -> list[float]:
        number = math.floor(at / self._bucket_width)
        if not self._buckets or self._buckets[-1][0] < number:
            self._buckets.append([number, 0.0, 0.0, 0.0])
        return self._buckets[-1]

    def _account(self, now: float) -> None:
        """Put the busy time since the last call in its buckets, and drop old buckets."""
        start = self._accounted
        if start is not None and now > start:
            while start < now:
                bucket = self._bucket(start)
                end = min(now, (bucket[0] + 1) * self._bucket_width)
                bucket[1] += max(0.0, end - start)
                start = max(end, math.nextafter(start, math.inf))
            self._accounted = now
        oldest = math.floor((now - RATE_LOOKBACK * self.window) / self._bucket_width)
        while self._buckets and self._buckets[0][0] < oldest:
            self._buckets.popleft()


@attrs.define(eq=False)
class _Acks:
    """The reader's progress as the kernel counts it: bytes acknowledged (TM-BP-STALL).

    Once the peer's receive buffer is full, the count grows only when the peer's application
    has read enough for its kernel to open the window again: in steps (an MSS or more, up to
    about what the buffer holds), whatever the reader's speed. A reader waits for each step
    about as long as it takes to read what its buffer held before it, which is no more than
    the largest step it took, or than everything the connection took: at the minimum rate,
    that long is the most a healthy reader shows no progress.
    """

    acked: int | None = None
    """The count at the last sample of the current busy period (None: none taken yet)."""
    sampled_at: float = -math.inf
    progress_at: float = -math.inf
    """When the count last grew (dated by the kernel where it can tell)."""
    estimate: int | None = None
    """Everything the peer had acknowledged on the connection when the current busy period
    was first sampled, if no step was seen in the lookback before: what its buffers hold
    unread is no more, and a reader that has drained them all has opened its window again,
    so a reader at the minimum rate steps within this many bytes' time. It counts as a step
    until the busy period ends: the buffers may hold that much until then, even after
    smaller steps."""
    steps: collections.deque[list[float]] = attrs.Factory(collections.deque)
    """[when it last grew, bytes] of the steps seen within the lookback, oldest first."""
    delivered: int | None = None
    """Everything sent on the connection at the last sample, acknowledged or in flight
    (None: the kernel does not say): no reader can have read more."""

    def observe(self, now: float, sample: TcpSample, keep: float) -> int:
        """Take a sample; the bytes acknowledged since the last one of this busy period."""
        while self.steps and self.steps[0][0] < now - keep:
            self.steps.popleft()
        self.delivered = (
            None if sample.in_flight is None else sample.bytes_acked + sample.in_flight
        )
        if self.acked is None:
            # The first sample of a busy period: what came before is the baseline, not a
            # step, except to date the last progress.
            self.acked = sample.bytes_acked
            self.progress_at = _dated(now, sample, None)
            self.sampled_at = now
            self.estimate = None if self.steps else sample.bytes_acked
            return 0
        grown = sample.bytes_acked - self.acked
        if grown > 0:
            self.progress_at = _dated(now, sample, self.sampled_at)
            if self.steps and now - self.steps[-1][0] <= max(_STEP_GAP, 2 * sample.rtt):
                self.steps[-1][0] = now
                self.steps[-1][1] += grown
            else:
                self.steps.append([now, grown])
        self.acked = sample.bytes_acked
        self.sampled_at = now
        return max(grown, 0)

    def step(self) -> float:
        """The step a reader is expected to take next, in bytes: the largest of the
        lookback (the estimate counting as one)."""
        first = self.estimate or 0
        return max(first, *(s[1] for s in self.steps)) if self.steps else first


def _dated(now: float, sample: TcpSample, after: float | None) -> float:
    """When the acknowledged count last grew, as well as the sample can tell: no earlier than
    the last data sent plus a round trip when everything sent has been acknowledged (and that
    send came after ``after``, the previous sample), else now."""
    if sample.unacked == 0:
        sent_at = now - sample.last_data_sent
        if after is None or sent_at > after:
            return min(now, sent_at + sample.rtt)
    return now


class KernelJudge(WriteProgressJudge):
    """The kernel-informed judge (Linux): the portable judge, plus what the kernel says about
    the connection's socket through the responder's ``TcpProbing`` (TM-BP-STALL,
    TM-BP-SIGNAL, TM-BP-PACE).

    - Paced (``pacer``, while it paces): the reader's buffers hold little, so a reader that
      shows no progress (its window does not reopen) for a window of busy time, or twice the
      pacer's limit at the minimum rate if longer, has stopped.
    - Probing (a write blocked for ``_PROBE_AFTER`` of a window looked the socket up, and it
      answers): the reader's progress is what it acknowledged (``_acks_stalled``). A reader
      that stops is cut once the writer has been busy for a window, or, if later, once a reader
      at the minimum rate would have drained what its buffers took; never later than
      ``RATE_LOOKBACK`` windows. A reader stepping above the minimum rate is never cut.
    - Otherwise (no answer yet, or the probe is gone): exactly as ``WriteProgressJudge``.
    """

    def __init__(
        self, probing: TcpProbing, *, window: float, pacer: WindowPacer | None = None
    ) -> None:
        super().__init__(window)
        #: Paces the writes by the reader's window, while it does (TM-BP-PACE).
        self.pacer = pacer
        self._tcp_sample: Callable[[], TcpSample | None] | None = probing.tcp_sample
        self._release_tcp: Callable[[], None] | None = probing.release_tcp_probe
        self._acks: _Acks | None = None
        self._next_lookup = -math.inf
        #: When the write on the wire began (None between writes).
        self._write_began: float | None = None

    # -- what the writer reports ------------------------------------------------------------

    @property
    def paced(self) -> bool:
        return self.pacer is not None and self.pacer.pacing

    @property
    def may_pace(self) -> bool:
        return self.pacer is not None and not self.pacer.released

    @property
    def probing(self) -> bool:
        return self._acks is not None

    def idle(self, now: float) -> None:
        super().idle(now)
        if self._acks is not None:
            self._acks.acked = None  # the next busy period starts a new baseline

    async def admit(self, size: int, written: int) -> tuple[int, bool]:
        pacer = self.pacer
        if pacer is None or pacer.released:
            return size, False
        return await pacer.admit(size, written)

    def write_began(self, now: float) -> None:
        self._write_began = now

    def observe_write(self, now: float, nbytes: int, *, probe: bool = False) -> None:
        self._write_began = None
        super().observe_write(now, nbytes, probe=probe)

    def unpace(self) -> None:
        """Stop pacing (TM-BP-PACE). A cut connection's last writes are not held: its
        reader's buffers have room, so they go out at once."""
        if self.pacer is not None:
            self.pacer.stop()

    def undelivered(self) -> int | None:
        sample = None if self._tcp_sample is None else self._tcp_sample()
        if sample is None:
            return None
        # Without tcpi_bytes_sent (before Linux 4.19), the segments in flight say whether
        # anything is, which is all a caller asks.
        in_flight = sample.in_flight if sample.in_flight is not None else sample.unacked
        return sample.notsent_bytes + in_flight

    def release(self) -> None:
        self._acks = None
        self._tcp_sample = None
        if self._release_tcp is not None:
            release, self._release_tcp = self._release_tcp, None
            release()

    # -- the verdicts -----------------------------------------------------------------------

    def stalled_for(self, now: float, min_rate: float) -> float:
        """TM-BP-STALL: paced, by the window's progress (TM-BP-PACE); probing, by the
        acknowledged bytes (``_acks_stalled``); otherwise by the writes. It is also when the
        judge samples the kernel (and, once a write has been blocked for a while, looks the
        socket up), so a busy view is what keeps the count current."""
        if self.busy_since is None:
            return 0.0
        busy = self.busy_time(now)
        pacer = self.pacer
        if pacer is not None and pacer.pacing:
            if busy < self.window:
                return 0.0
            # TM-BP-PACE: the reader's buffers hold little, so a reader that reads shows it
            # (its window reopens) well within the budget; one that shows nothing for a whole
            # budget has stopped.
            silent = now - max(pacer.progress_at, self.busy_since)
            if silent >= max(self.window, 2 * pacer.limit / min_rate):
                return busy
        else:
            self._watch_kernel(now)
            if busy < self.window:
                return 0.0
        if self._acks is not None and self._acks.acked is not None:
            return busy if self._acks_stalled(now, min_rate) else 0.0
        return busy if self._writes_stalled(now, min_rate) else 0.0

    def _acks_stalled(self, now: float, min_rate: float) -> bool:
        """TM-BP-STALL, by the kernel's count: stalled when the reader acknowledged less
        than ``min_rate`` over the last window of busy time, and has taken no step for
        longer than a reader at ``min_rate`` would need for its next one (``_Acks.step``:
        the largest step of the lookback, and what the connection had taken when the busy
        period was first sampled; capped at the lookback), or has been sent less on the whole
        connection than ``min_rate`` over the busy time of the lookback (it cannot have read
        more). A reader that stopped is then cut one window after the writer became busy,
        or once a reader at the minimum rate would have drained what its buffers took, if
        that is later; a slow reader of a fresh connection, one window after."""
        acks = self._acks
        assert acks is not None and self.busy_since is not None
        busy = acked = 0.0
        for bucket in reversed(self._buckets):
            busy += bucket[1]
            acked += bucket[3]
            if busy >= self.window:
                break
        if acked >= min_rate * busy:
            return False
        if self._silence(now, acks) > self._allowance(acks, min_rate):
            return True
        # What the reader has read is no more than everything its kernel was sent: when
        # that is below the minimum over the busy time, no step can be about to come that
        # would prove it faster, and there is nothing to wait for.
        delivered = acks.delivered
        return delivered is not None and delivered < min_rate * self.busy_time(now)

    def reader_silent(self, now: float, min_rate: float) -> bool:
        """TM-BP-SIGNAL: whether the kernel shows the reader silent for more than
        ``SILENCE_FACTOR`` times the wait a reader at ``min_rate`` needs for its next step
        (the allowance of ``_acks_stalled``). False when not probing: the writes alone
        cannot tell a reader that stopped from one behind full buffers."""
        if self._acks is None or self._acks.acked is None or self.busy_since is None:
            return False
        self._watch_kernel(now)
        acks = self._acks
        if acks is None:
            return False
        return self._silence(now, acks) > SILENCE_FACTOR * self._allowance(acks, min_rate)

    def _allowance(self, acks: _Acks, min_rate: float) -> float:
        """How long a reader at ``min_rate`` may go without a step: its next one (the
        largest of the lookback) at that rate, capped at the lookback."""
        return min(acks.step() / min_rate, RATE_LOOKBACK * self.window)

    def _silence(self, now: float, acks: _Acks) -> float:
        """How long the reader has shown the kernel no progress in this busy period."""
        assert self.busy_since is not None
        return now - max(acks.progress_at, self.busy_since)

    def _watch_kernel(self, now: float) -> None:
        """Sample the kernel's count of acknowledged bytes, having looked the socket up once
        a write has been blocked for ``_PROBE_AFTER`` of a window (TM-BP-STALL)."""
        if self._tcp_sample is None:
            return
        if self._acks is None:
            began = self._write_began
            if began is None or now - began < self.window * _PROBE_AFTER:
                return
            if now < self._next_lookup:
                return
            self._next_lookup = now + self.window * _PROBE_AFTER
        sample = self._tcp_sample()
        if sample is None:
            if self._acks is not None:
                # The probe is gone (released, or the socket no longer answers): the writes
                # alone judge from now on.
                self.release()
            return
        if self._acks is None:
            self._acks = _Acks()
        grown = self._acks.observe(now, sample, RATE_LOOKBACK * self.window)
        self._account(now)
        self._bucket(now)[3] += grown


def judge_for(
    responder: Responder,
    *,
    window: float,
    pacer: Callable[[TcpProbing], WindowPacer | None] | None = None,
) -> StallJudge:
    """The judge of a connection answered through ``responder`` (TM-BP-STALL): the one
    place that chooses.

    - A responder that offers ``TcpProbing`` gets a ``KernelJudge``, paced by what
      ``pacer`` makes of it (if anything). Those are trio-mcp's own HTTP server
      (``HttpResponder``, which owns its socket and reads it directly), and the ASGI
      responder (``ASGIResponder``, which finds the socket by the scope's addresses): for an
      HTTP/2 exchange it is given no addresses, answers no sample, and so is judged by the
      writes alone, as the portable judge would.
    - Any other responder (the in-memory ones of the tests, any platform's without the
      kernel's figures) gets a ``WriteProgressJudge``.
    """
    if isinstance(responder, TcpProbing):
        return KernelJudge(
            responder, window=window, pacer=None if pacer is None else pacer(responder)
        )
    return WriteProgressJudge(window)
