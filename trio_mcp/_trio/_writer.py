# The task that does one connection's socket writes, and watches how fast its reader drains
# them (spec/backpressure.md).
#
# Why a task of its own: hypercorn shields its socket writes from cancellation, so a write to
# a client that stopped reading cannot be interrupted from the task that made it. The writer
# runs in the session's nursery, apart from the HTTP request's task; when the reader stalls,
# the request task simply returns, hypercorn closes the connection, and the blocked write
# fails and releases the writer. Nothing ever waits on a stalled socket but this task.
from __future__ import annotations

import collections
import math
from collections.abc import Callable

import attrs
import trio

from ._responder import Responder

__all__ = ["ConnectionWriter"]

#: Chunks a writer holds besides the one on the wire: enough to keep the socket busy, few
#: enough that a slow reader pins almost nothing in the server (TM-BP-BOUNDED).
MAX_QUEUED = 2

#: How far back the drain rate looks, in stall budgets of busy time (TM-BP-STALL). The
#: kernel's socket buffers hand a writer its reader's progress in bursts: a write blocked on
#: a full socket returns only once a third of the send buffer is free, and the buffers first
#: absorb tens or hundreds of KB at once. A healthy reader at 4 KiB/s with autotuned buffers
#: completed no write for over 10 s at a time (measured on loopback), so a rate over one
#: budget cut it. Over six, and with the wait test of `stalled_for`, it is not. The price:
#: a reader that stops is cut between one budget (if its buffers held little) and this
#: many after it stopped.
RATE_LOOKBACK = 6
#: Buckets per stall budget in which busy time and written bytes are kept.
_BUCKETS_PER_WINDOW = 40


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
        self, responder: Responder, *, window: float, max_write: int | None = None
    ) -> None:
        self.responder = responder
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
        #: [bucket number, busy seconds, bytes written] for the last RATE_LOOKBACK windows.
        self._buckets: collections.deque[list[float]] = collections.deque()
        self._bucket_width = window / _BUCKETS_PER_WINDOW
        #: Up to when busy time has been put in buckets (None while idle).
        self._accounted: float | None = None
        #: When a write last completed, and the bytes of the burst it ended (writes that
        #: completed less than a bucket apart count as one burst).
        self._last_done: float | None = None
        self._burst = 0
        #: The last wait between two bursts, with the bytes of the burst before it.
        self._last_wait: tuple[float, int] | None = None
        self.bytes_written = 0
        self.finished = trio.Event()
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

        Fast enough is judged twice. Over the lookback, bytes per busy second. And by the
        waits between bursts of progress: a reader at ``min_rate`` takes a burst of
        ``burst`` bytes within ``burst / min_rate``, so a shorter wait for the next one is
        the kernel's doing, not the reader's. A stall needs the wait going on now, or the
        last one, to be longer. The second test is what keeps a healthy reader whose
        progress comes in bursts further apart than the lookback can average from being cut.
        """
        if self.busy_since is None:
            return 0.0
        busy = self.busy_time(now)
        if busy < self.window or self.drain_rate(now) >= min_rate:
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

    def _bucket(self, at: float) -> list[float]:
        number = math.floor(at / self._bucket_width)
        if not self._buckets or self._buckets[-1][0] < number:
            self._buckets.append([number, 0.0, 0.0])
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
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                    continue
                chunk = self._take()
                self.in_flight = chunk
                step = self.max_write or len(chunk.data) or 1
                for start in range(0, len(chunk.data), step):
                    if self._closed:
                        break
                    piece = chunk.data[start : start + step]
                    # The one await that may block on the client: it is shielded inside
                    # hypercorn, and it returns when the client reads, or when the connection
                    # is closed. TM-BP-STALL: a large chunk goes out in slices, so the drain
                    # rate sees a healthy reader's progress within the window; one write of
                    # more than min_read_rate x stall_budget bytes would look like a stall.
                    await self.responder.write(piece)
                    now = trio.current_time()
                    self._account(now)
                    self._bucket(now)[2] += len(piece)
                    if self._last_done is None or now - self._last_done > self._bucket_width:
                        # A new burst: keep the wait that ended here, and the burst before it.
                        if self._last_done is not None:
                            began = max(self._last_done, self.busy_since or self._last_done)
                            self._last_wait = (now - began, self._burst)
                        self._burst = 0
                    self._burst += len(piece)
                    self._last_done = now
                    self.bytes_written += len(piece)
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
            self._progress.set()
            self.finished.set()
            if self.on_progress is not None:
                self.on_progress()
