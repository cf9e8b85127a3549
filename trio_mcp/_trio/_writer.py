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


@attrs.define(eq=False)
class _Chunk:
    data: bytes
    on_written: Callable[[], None] | None


class ConnectionWriter:
    """Writes chunks to one responder, in order, and measures the reader's drain rate.

    The rate is measured only while the writer has work: a reader cannot look slow just
    because the server had nothing to send.
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
        #: (time a write completed, bytes) for the recent past, to measure the drain rate.
        self._done: collections.deque[tuple[float, int]] = collections.deque()
        self.bytes_written = 0
        self.finished = trio.Event()

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
            self.busy_since = trio.current_time()
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

    def drain_rate(self, now: float) -> float:
        """Bytes per second the reader took over the last ``window`` seconds of busy time."""
        self._trim(now)
        if self.busy_since is None:
            return math.inf
        span = min(self.window, now - self.busy_since)
        if span <= 0:
            return math.inf
        return sum(n for _, n in self._done) / span

    def stalled_for(self, now: float, min_rate: float) -> float:
        """How long the writer has been busy while draining below ``min_rate`` (0 if not)."""
        if self.busy_since is None or now - self.busy_since < self.window:
            return 0.0
        if self.drain_rate(now) >= min_rate:
            return 0.0
        return now - self.busy_since

    def _trim(self, now: float) -> None:
        horizon = now - self.window
        while self._done and self._done[0][0] < horizon:
            self._done.popleft()

    # -- the task -------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self.busy_since = None
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                    continue
                chunk = self._queue.popleft()
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
                    self._done.append((now, len(piece)))
                    self._trim(now)
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
        finally:
            self.in_flight = None
            self._closed = True
            self._progress.set()
            self.finished.set()
