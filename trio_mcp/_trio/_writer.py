# The task that does one connection's socket writes, and watches how fast its reader drains
# them (spec/backpressure.md).
#
# Why a task of its own: hypercorn shields its socket writes from cancellation, so a write to
# a client that stopped reading cannot be interrupted from the task that made it. The writer
# runs in the session's nursery, apart from the HTTP request's task; when the reader stalls,
# the request task simply returns, hypercorn closes the connection, and the blocked write
# fails and releases the writer. Nothing ever waits on a stalled socket but this task.
#
# How it watches: by its own writes, which return only when the kernel frees room, in bursts;
# and, where the responder offers it (TcpProbing: the ASGI one, on Linux), by the kernel's
# count of bytes the reader acknowledged, which moves as soon as the reader takes a step.
from __future__ import annotations

import collections
import math
from collections.abc import Callable

import attrs
import trio

from ._pacer import WindowPacer
from ._responder import Responder
from ._tcpprobe import TcpSample

__all__ = ["ConnectionWriter"]

#: Chunks a writer holds besides the one on the wire: enough to keep the socket busy, few
#: enough that a slow reader pins almost nothing in the server (TM-BP-BOUNDED).
MAX_QUEUED = 2

#: How far back the drain rate looks, in stall budgets of busy time (TM-BP-STALL). The
#: kernel's socket buffers hand a writer its reader's progress in bursts: a write blocked on
#: a full socket returns only once a third of the send buffer is free, and the buffers first
#: absorb tens or hundreds of KB at once. A healthy reader at 4 KiB/s with autotuned buffers
#: completed no write for over 10 s at a time (measured on loopback), so a rate over one
#: budget cut it. Over six, and with the wait test of `stalled_for`, it is not. The price,
#: judged by writes alone: a reader that stops is cut between one budget (if its buffers held
#: little) and this many after it stopped. Judged by the kernel's count of acknowledged bytes
#: (`_Acks`), it is cut once a reader at the minimum rate would have drained what its buffers
#: took, or one budget after the writer became busy if that is later, and never later than
#: this many.
RATE_LOOKBACK = 6
#: Buckets per stall budget in which busy time and written bytes are kept.
_BUCKETS_PER_WINDOW = 40
#: How many of its expected waits between steps a cut reader may stay silent before the
#: signal is given up and the connection closed (TM-BP-SIGNAL): a reader at a third of the
#: minimum rate still steps within it, one that stopped is closed.
SILENCE_FACTOR = 3
#: The fraction of a stall budget a write must have been blocked before the writer looks its
#: socket up in the kernel, and the least time between two lookups that found nothing
#: (TM-BP-STALL). Only a writer that is stuck pays for it, never a request served at speed.
_PROBE_AFTER = 0.25


#: Growth of the acknowledged count closer than this to the last (or two round trips, if
#: longer) belongs to the same step: the acknowledgements of one opening of the peer's window
#: come over a round trip or a delayed ACK, and consecutive samples may see parts of them
#: (a busy view samples at least every 0.25 s, and whenever a write completes).
_STEP_GAP = 0.3


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


@attrs.define(eq=False)
class _Chunk:
    data: bytes
    on_written: Callable[[], None] | None


class ConnectionWriter:
    """Writes chunks to one responder, in order, and measures the reader's drain rate.

    The rate is measured only while the writer has work: a reader cannot look slow just
    because the server had nothing to send. It is bytes written per second of busy time
    over the last ``RATE_LOOKBACK`` windows, kept in buckets, so the memory it takes is
    fixed and a writer that catches up with its queue for an instant does not start over.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        window: float,
        max_write: int | None = None,
        pacer: WindowPacer | None = None,
    ) -> None:
        self.responder = responder
        #: Paces the writes by the reader's window, while it does (TM-BP-PACE).
        self.pacer = pacer
        self.window = window
        #: The most one write hands the responder; larger chunks go out in slices of it.
        self.max_write = max_write
        self._queue: collections.deque[_Chunk] = collections.deque()
        self._wakeup = trio.Event()
        self._progress = trio.Event()
        self._closed = False
        self.in_flight: _Chunk | None = None
        #: When the writer last went from idle to busy (None while idle).
        self.busy_since: float | None = None
        #: [bucket number, busy seconds, bytes written, bytes acknowledged (as the kernel
        #: counts them, when probing)] for the last RATE_LOOKBACK windows.
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
        self.bytes_written = 0
        self.finished = trio.Event()
        #: The kernel's view of the reader, when the responder offers it (TcpProbing).
        self._tcp_sample: Callable[[], TcpSample | None] | None = getattr(
            responder, "tcp_sample", None
        )
        self._release_tcp: Callable[[], None] | None = getattr(
            responder, "release_tcp_probe", None
        )
        self._acks: _Acks | None = None
        self._next_lookup = -math.inf
        #: When the write on the wire began (None between writes).
        self._write_began: float | None = None
        #: Called when a write completes and when the writer stops, besides the event that
        #: wait_progress() waits on: a View rings its bell with it (see View._bell).
        self.on_progress: Callable[[], None] | None = None

    # -- the producer side (the View) ---------------------------------------------------

    @property
    def idle(self) -> bool:
        return self.in_flight is None and not self._queue

    @property
    def has_room(self) -> bool:
        return len(self._queue) < MAX_QUEUED

    def submit(self, data: bytes, on_written: Callable[[], None] | None = None) -> None:
        if self._closed:
            return
        if self.busy_since is None:
            self.busy_since = self._accounted = trio.current_time()
        self._queue.append(_Chunk(data, on_written))
        self._wakeup.set()

    async def wait_progress(self) -> None:
        """Wait until a write completes (or the writer stops)."""
        await self._progress.wait()

    def drop_queued(self) -> None:
        """Forget the chunks not yet on the wire; the write in progress goes on.

        Their messages stay in the session's log: nothing was taken, so nothing is lost.
        """
        self._queue.clear()

    def close(self) -> None:
        """Stop after the write in progress; queued chunks are dropped."""
        self._closed = True
        self._queue.clear()
        self._wakeup.set()
        self.unpace()
        self._stop_probing()

    def unpace(self) -> None:
        """Stop pacing (TM-BP-PACE): a write held back goes out now. A cut connection's last
        writes are not held: its reader's buffers have room, so they go out at once."""
        if self.pacer is not None:
            self.pacer.stop()

    @property
    def paced(self) -> bool:
        """Whether the writes are paced by the reader's window now (TM-BP-PACE)."""
        return self.pacer is not None and self.pacer.pacing

    @property
    def probing(self) -> bool:
        """Whether the reader is judged by the kernel's count of acknowledged bytes."""
        return self._acks is not None

    def _stop_probing(self) -> None:
        self._acks = None
        self._tcp_sample = None
        if self._release_tcp is not None:
            release, self._release_tcp = self._release_tcp, None
            release()

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
        """The busy time behind a drain rate below ``min_rate``: 0 while the writer is idle,
        has been busy for less than one window, or drains fast enough.

        With the kernel's count of acknowledged bytes (``probing``), fast enough is judged
        on it (see ``_acks_stalled``). Without it, twice, on completed writes. Over the
        lookback, bytes per busy second. And by the waits between bursts of progress: a
        reader at ``min_rate`` takes a burst of ``burst`` bytes within ``burst / min_rate``,
        so a shorter wait for the next one is the kernel's doing, not the reader's. A stall
        needs the wait going on now, or the last one, to be longer. The second test is what
        keeps a healthy reader whose progress comes in bursts further apart than the
        lookback can average from being cut.
        """
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
        if self.drain_rate(now) >= min_rate:
            return 0.0
        cap = RATE_LOOKBACK * self.window

        def too_long(wait: float, burst: int) -> bool:
            return wait >= min(burst / min_rate, cap)

        since = self.busy_since if self._last_done is None else max(
            self._last_done, self.busy_since
        )
        if too_long(now - since, self._burst):
            return busy
        if self._last_wait is not None and too_long(*self._last_wait):
            return busy
        return 0.0

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
                self._stop_probing()
            return
        if self._acks is None:
            self._acks = _Acks()
        grown = self._acks.observe(now, sample, RATE_LOOKBACK * self.window)
        self._account(now)
        self._bucket(now)[3] += grown

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

    def _take(self) -> _Chunk:
        """The next chunk, joined with the queued ones after it that fit in the same write.

        Each write is a trip through hypercorn and a system call: a response's priming event
        and its result, queued apart, go out together.
        """
        chunk = self._queue.popleft()
        if not self._queue or self.max_write is None:
            return chunk
        parts = [chunk]
        size = len(chunk.data)
        while self._queue and size + len(self._queue[0].data) <= self.max_write:
            parts.append(self._queue.popleft())
            size += len(parts[-1].data)
        if len(parts) == 1:
            return chunk
        callbacks = [p.on_written for p in parts if p.on_written is not None]

        def written() -> None:
            for callback in callbacks:
                callback()

        return _Chunk(b"".join(p.data for p in parts), written if callbacks else None)

    # -- the task -------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self._account(trio.current_time())
                    self.busy_since = self._accounted = None
                    if self._acks is not None:
                        self._acks.acked = None  # the next busy period starts a new baseline
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                    continue
                chunk = self._take()
                self.in_flight = chunk
                step = self.max_write or len(chunk.data) or 1
                start = 0
                while start < len(chunk.data) and not self._closed:
                    size, probe = min(step, len(chunk.data) - start), False
                    if self.pacer is not None and not self.pacer.released:
                        size, probe = await self.pacer.admit(size, self.bytes_written)
                        if self._closed:
                            break
                    piece = chunk.data[start : start + size]
                    start += size
                    self._write_began = trio.current_time()
                    # The one await that may block on the client: it is shielded inside
                    # hypercorn, and it returns when the client reads, or when the connection
                    # is closed. TM-BP-STALL: a large chunk goes out in slices, so the drain
                    # rate sees a healthy reader's progress within the window; one write of
                    # more than min_read_rate x stall_budget bytes would look like a stall.
                    await self.responder.write(piece)
                    self._write_began = None
                    self.bytes_written += len(piece)
                    if probe:
                        # Sent to hear the reader's window, not because it read: no progress.
                        continue
                    now = trio.current_time()
                    self._account(now)
                    self._bucket(now)[2] += len(piece)
                    # How long the writer waited for the reader (held back or blocked)
                    # since its last write, counting busy time only.
                    waited = None if self._last_done is None else now - max(
                        self._last_done, self.busy_since or self._last_done
                    )
                    if waited is None or waited > self._bucket_width:
                        # A new burst: keep the wait that ended here, and the burst before it.
                        # Writes that found room are one burst however far apart they came:
                        # a handler slower than the room the reader opened leaves the writer
                        # idle between them, and a wait for the reader counted against one
                        # message's bytes made a healthy reader behind large buffers look
                        # stalled.
                        if waited is not None:
                            self._last_wait = (waited, self._burst)
                        self._burst = 0
                    self._burst += len(piece)
                    self._last_done = now
                self.in_flight = None
                # TM-BP-RELEASE: a write that returns after the view gave the connection up
                # is no delivery: hypercorn reports a write to a connection it has closed as
                # done. Counting it would mark its message taken, and unpin a response the
                # client never got (TM-RES-PIN).
                if (
                    chunk.on_written is not None
                    and not self._closed
                    and not self.responder.disconnected.is_set()
                ):
                    chunk.on_written()
                self._progress.set()
                self._progress = trio.Event()
                if self.on_progress is not None:
                    self.on_progress()
        finally:
            self.in_flight = None
            self._closed = True
            self._stop_probing()
            self._progress.set()
            self.finished.set()
            if self.on_progress is not None:
                self.on_progress()
