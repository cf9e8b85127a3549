# The task that does one connection's socket writes (spec/backpressure.md). It writes; its
# judge (trio_mcp/runtime/backpressure/_judge.py, `StallJudge`) says how its reader is doing.
#
# Why a task of its own: hypercorn shields its socket writes from cancellation, so a write to
# a client that stopped reading cannot be interrupted from the task that made it. The writer
# runs in the session's nursery, apart from the HTTP request's task; when the reader stalls,
# the request task simply returns, hypercorn closes the connection, and the blocked write
# fails and releases the writer. Nothing ever waits on a stalled socket but this task.
#
# The writer tells its judge when it becomes busy and idle and when each write begins and
# ends, asks it before each write how much may go (TM-BP-PACE), and passes on its View's
# questions (TM-BP-STALL, TM-BP-SIGNAL). Which judge a connection gets is `judge_for`'s choice,
# made once, when the writer is built.
from __future__ import annotations

import bisect
import collections
from collections.abc import Callable, Sequence

import attrs
import trio

from .._describe import Judgement, WriterInfo
from ._judge import RATE_LOOKBACK, SILENCE_FACTOR, StallJudge, judge_for
from ._responder import Responder, SendRoom

__all__ = [
    "MAX_CHUNK",
    "MAX_QUEUED",
    "RATE_LOOKBACK",
    "SILENCE_FACTOR",
    "ConnectionWriter",
    "write_grain",
]

#: Chunks a writer holds besides the one on the wire: enough to keep the socket busy, few
#: enough that a slow reader pins almost nothing in the server (TM-BP-BOUNDED).
MAX_QUEUED = 2
#: How often a cut connection asks the kernel whether its signal has reached the reader's
#: buffers (TM-BP-CLOSE): a small fraction of signal_timeout.
_DELIVERY_POLL = 0.01
#: The most a chunk holds (unless the write grain is larger): what trio lets a socket hold
#: unsent (TCP_NOTSENT_LOWAT), so a reader that keeps up takes a chunk in one write.
MAX_CHUNK = 16384


def write_grain(min_read_rate: float, stall_budget: float) -> int:
    """The largest write that may wait for the reader: an eighth of what a reader at the
    minimum rate takes in one stall budget, at least 1 KiB, so the judge sees a reader's
    progress at a fine enough grain (TM-BP-STALL)."""
    return max(1024, int(min_read_rate * stall_budget / 8))


@attrs.define(eq=False)
class _Chunk:
    data: bytes
    #: Told, after each write of the chunk, how many of its bytes the connection has taken.
    on_written: Callable[[int], None] | None
    #: Where the messages in ``data`` end, in order (None: it is one message).
    ends: Sequence[int] | None = None

    def ends_at(self, offset: int) -> bool:
        """Whether a message of the data ends at ``offset``."""
        if offset >= len(self.data):
            return True
        ends = self.ends
        if ends is None:
            return False
        at = bisect.bisect_left(ends, offset)
        return at < len(ends) and ends[at] == offset

    def piece(self, start: int, limit: int) -> int:
        """How much of the data from ``start`` goes in a write of at most ``limit`` bytes:
        up to the last end of a message within it, if there is one. A write that completes
        then always completes messages, and one cut short leaves none half counted."""
        ends = self.ends
        if ends is None or start + limit >= len(self.data):
            return min(limit, len(self.data) - start)
        last = bisect.bisect_right(ends, start + limit) - 1
        if last >= 0 and ends[last] > start:
            return ends[last] - start
        return limit


class ConnectionWriter:
    """Writes chunks to one responder, in order, and reports its writes to its judge.

    ``judge`` says how the reader is doing (TM-BP-STALL); without one, the writer asks
    ``judge_for`` for its responder's, judging over ``window`` seconds of busy time.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        window: float,
        max_write: int | None = None,
        judge: StallJudge | None = None,
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        self.responder = responder
        self.window = window
        #: Judges the reader by what the writer does (chosen once, here).
        self.judge: StallJudge = judge if judge is not None else judge_for(
            responder, window=window
        )
        #: The most one write that may wait for the reader hands the responder; the rest of
        #: a larger chunk goes out in slices of it, unless the socket takes it at once.
        self.max_write = max_write
        #: The most one chunk holds (the View's batches, and the queued chunks joined).
        self.max_chunk = max(MAX_CHUNK, max_write) if max_write is not None else None
        self._room = responder.send_room if isinstance(responder, SendRoom) else None
        self._queue: collections.deque[_Chunk] = collections.deque()
        self._wakeup = trio.Event()
        self._progress = trio.Event()
        self._closed = False
        #: Set by drop_queued: the chunk in progress ends at its next message end.
        self._trim = False
        self.in_flight: _Chunk | None = None
        self.bytes_written = 0
        self.finished = trio.Event()
        #: Called when a write completes and when the writer stops, besides the event that
        #: wait_progress() waits on: a View rings its bell with it (see View._bell).
        self._on_progress = on_progress
        #: The writer's own task, once it runs (for the inspector's describe()).
        self.task: trio.lowlevel.Task | None = None
        #: The last answer of stalled_for(), for describe(), which must not ask the judge
        #: itself: asking samples the kernel and moves the judge's accounts on.
        self._last_stalled_for = 0.0

    # -- the producer side (the View) ---------------------------------------------------

    @property
    def idle(self) -> bool:
        return self.in_flight is None and not self._queue

    @property
    def has_room(self) -> bool:
        return len(self._queue) < MAX_QUEUED

    @property
    def busy_since(self) -> float | None:
        """When the writer last went from idle to busy (None while idle)."""
        return self.judge.busy_since

    def submit(
        self,
        data: bytes,
        on_written: Callable[[int], None] | None = None,
        ends: Sequence[int] | None = None,
    ) -> None:
        """Queue ``data``, the messages that end at ``ends`` (None: one message).
        ``on_written`` is called after each write of it with how many of its bytes the
        connection has taken: a chunk may go out in several writes, which end where its
        messages do whenever one fits (``_Chunk.piece``)."""
        if self._closed:
            return
        if self.judge.busy_since is None:
            self.judge.busy(trio.current_time())
        self._queue.append(_Chunk(data, on_written, ends))
        self._wakeup.set()

    async def wait_progress(self) -> None:
        """Wait until a write completes (or the writer stops)."""
        await self._progress.wait()

    def drop_queued(self) -> None:
        """Forget the chunks not yet on the wire, and the rest of the one in progress after
        the message its current write ends in (which cannot be taken back half sent).

        Their messages stay in the session's log: nothing was taken, so nothing is lost.
        """
        self._queue.clear()
        self._trim = True

    def close(self) -> None:
        """Stop after the write in progress; queued chunks are dropped."""
        self._closed = True
        self._queue.clear()
        self._wakeup.set()
        self.judge.unpace()
        self.judge.release()

    # -- the judge's verdicts, for the View ----------------------------------------------

    def unpace(self) -> None:
        """Stop pacing (TM-BP-PACE): a write held back goes out now. A cut connection's last
        writes are not held: its reader's buffers have room, so they go out at once."""
        self.judge.unpace()

    @property
    def paced(self) -> bool:
        """Whether the writes are paced by the reader's window now (TM-BP-PACE)."""
        return self.judge.paced

    @property
    def probing(self) -> bool:
        """Whether the reader is judged by the kernel's count of acknowledged bytes."""
        return self.judge.probing

    def stalled_for(self, now: float, min_rate: float) -> float:
        """The busy time behind a drain rate below ``min_rate`` (TM-BP-STALL): 0 while the
        writer is idle, has been busy for less than one window, or drains fast enough, as
        its judge sees it (``StallJudge.stalled_for``)."""
        self._last_stalled_for = stalled = self.judge.stalled_for(now, min_rate)
        return stalled

    def describe(self) -> WriterInfo:
        """What this writer holds and how its reader was last judged; reads only."""
        queued = sum(len(c.data) for c in self._queue)
        if self.in_flight is not None:
            queued += len(self.in_flight.data)
        stalled = self._last_stalled_for if self.judge.busy_since is not None else 0.0
        if self.judge.busy_since is None:
            judgement = Judgement.IDLE
        elif stalled >= self.window:
            judgement = Judgement.STALLED
        elif stalled > 0:
            judgement = Judgement.SLOW
        else:
            judgement = Judgement.DRAINING
        return WriterInfo(
            task=self.task,
            bytes_queued=queued,
            chunks_queued=len(self._queue),
            bytes_written=self.bytes_written,
            busy_since=self.judge.busy_since,
            paced=self.judge.paced,
            probing=self.judge.probing,
            stalled_for=stalled,
            judgement=judgement,
            finished=self.finished.is_set(),
        )

    def undelivered(self) -> int | None:
        """TM-BP-CLOSE: what the kernel holds of this connection's writes that has not
        reached its reader's buffers; None when it does not say (``StallJudge.undelivered``)."""
        return self.judge.undelivered()

    def reader_silent(self, now: float, min_rate: float) -> bool:
        """TM-BP-SIGNAL: whether the judge shows the reader silent for so long that it will
        not take the signal (``StallJudge.reader_silent``)."""
        return self.judge.reader_silent(now, min_rate)

    async def drain_while_read(self, min_rate: float, check_every: float) -> bool:
        """Wait until the writer is idle or finished: True; or until the kernel shows its
        reader silent for longer than a reader at ``min_rate`` would be (TM-BP-SIGNAL):
        False. A reader that stopped cannot take a cut connection's signal, so its
        connection is closed then rather than after signal_timeout; the client resumes from
        the last id it read, as after any drop."""
        while not self.idle and not self.finished.is_set():
            if self.reader_silent(trio.current_time(), min_rate):
                return False
            with trio.move_on_after(check_every):
                await self.wait_progress()
        return True

    async def until_delivered(self, min_rate: float) -> bool:
        """TM-BP-CLOSE: wait until the kernel has nothing of the connection's writes that
        the reader's buffers have not taken (True), or shows the reader silent (False).
        True at once when the kernel does not say: the close is then a plain one, as it
        always was."""
        while True:
            held = self.undelivered()
            if held is None or held == 0:
                return True
            if self.finished.is_set() or self.reader_silent(trio.current_time(), min_rate):
                return False
            await trio.sleep(_DELIVERY_POLL)

    def _take(self) -> _Chunk:
        """The next chunk, joined with the queued ones after it that fit in the same write.

        Each write is a trip through hypercorn and a system call: a response's priming event
        and its result, queued apart, go out together.
        """
        chunk = self._queue.popleft()
        limit = self.max_chunk
        if not self._queue or limit is None:
            return chunk
        parts = [chunk]
        size = len(chunk.data)
        while self._queue and size + len(self._queue[0].data) <= limit:
            parts.append(self._queue.popleft())
            size += len(parts[-1].data)
        if len(parts) == 1:
            return chunk
        marks: list[tuple[int, int, Callable[[int], None]]] = []
        ends: list[int] = []
        base = 0
        for part in parts:
            if part.on_written is not None:
                marks.append((base, len(part.data), part.on_written))
            if part.ends is None:
                ends.append(base + len(part.data))
            else:
                ends.extend(base + end for end in part.ends)
            base += len(part.data)

        before = 0

        def written(upto: int) -> None:
            # Each part hears of its own bytes, and no more once it has heard of all.
            nonlocal before
            for start, length, callback in marks:
                if upto <= start:
                    break
                if before < start + length:
                    callback(min(upto - start, length))
            before = upto

        return _Chunk(b"".join(p.data for p in parts), written if marks else None, ends)

    # -- the task -------------------------------------------------------------------------

    async def run(self) -> None:
        judge = self.judge
        self.task = trio.lowlevel.current_task()
        try:
            while not self._closed:
                if not self._queue:
                    judge.idle(trio.current_time())
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                    continue
                chunk = self._take()
                self._trim = False
                self.in_flight = chunk
                step = self.max_write or len(chunk.data) or 1
                start = 0
                while start < len(chunk.data) and not self._closed:
                    left = len(chunk.data) - start
                    limit = step
                    if step < left and self._room is not None and not judge.may_pace:
                        # What the socket takes at once goes in one write: it cannot wait,
                        # so it tells the judge nothing a slice would. Only what would
                        # wait for the reader goes in slices (TM-BP-BOUNDED).
                        limit = max(step, self._room())
                    size = chunk.piece(start, limit)
                    size, probe = await judge.admit(size, self.bytes_written)
                    if self._closed:
                        break
                    piece = chunk.data[start : start + size]
                    start += size
                    judge.write_began(trio.current_time())
                    # The one await that may block on the client: it is shielded inside
                    # hypercorn, and it returns when the client reads, or when the connection
                    # is closed. TM-BP-STALL: a large chunk goes out in slices, so the judge
                    # sees a healthy reader's progress within the window; one write of more
                    # than min_read_rate x stall_budget bytes would look like a stall.
                    await self.responder.write(piece)
                    self.bytes_written += len(piece)
                    # A probe is sent to hear the reader's window, not because it read: no
                    # progress (TM-BP-PACE).
                    judge.observe_write(trio.current_time(), len(piece), probe=probe)
                    # TM-BP-RELEASE: a write that returns after the view gave the connection
                    # up is no delivery: hypercorn reports a write to a connection it has
                    # closed as done. Counting it would mark its message taken, and unpin a
                    # response the client never got (TM-RES-PIN). Told after every write, a
                    # chunk's owner counts each message once its last byte went, not when
                    # the whole chunk has.
                    if (
                        chunk.on_written is not None
                        and not self._closed
                        and not self.responder.disconnected.is_set()
                    ):
                        chunk.on_written(start)
                    if self._trim and chunk.ends_at(start):
                        break
                self.in_flight = None
                self._progress.set()
                self._progress = trio.Event()
                if self._on_progress is not None:
                    self._on_progress()
        finally:
            self.in_flight = None
            self._closed = True
            judge.release()
            self._progress.set()
            self.finished.set()
            if self._on_progress is not None:
                self._on_progress()
