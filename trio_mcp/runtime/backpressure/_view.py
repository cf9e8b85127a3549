# One SSE connection as a view of one stream of a session's log (spec/resumption.md).
#
# A view is a reader at a cursor. It hands what the log holds after the cursor to its
# connection's writer, then waits for the next append, in one loop: replay and live tail are
# the same code, so there is no hand-over between them where a message could be doubled or
# dropped. It also watches its writer: a reader that drains too slowly for too long is cut and
# told where to resume (spec/backpressure.md), and the request behind it keeps running.
from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from ...base._trace import TraceKind, TraceRecord
from ...protocol import (
    STANDALONE_STREAM,
    Entry,
    EntryKind,
    Gap,
    encode_comment,
    encode_event,
)
from ...protocol._transport import SSE_HEADERS
from .._describe import ViewEnd, ViewInfo
from ._judge import judge_for
from ._pacer import RAMP_FACTOR, SMALL_WINDOW, WindowPacer, pace_limit
from ._responder import Resettable, Responder, TcpProbing, watching_disconnect
from ._writer import ConnectionWriter, write_grain

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...protocol import EventLog

__all__ = ["View", "ViewEnd", "ViewHost"]


class ViewHost(Protocol):
    """What a view needs of the session whose stream it reads (its StreamOut)."""

    id: str
    config: ServerConfig
    log: EventLog

    @property
    def primes(self) -> bool: ...

    def event_id(self, stream: int, seq: int) -> str: ...

    def encode(self, stream: int, seq: int, data: bytes) -> bytes:
        """The SSE event of ``stream``'s message ``data`` at ``seq`` (empty: priming)."""

    def changed_event(self) -> trio.Event: ...

    def detach_view(self, view: View) -> None: ...

    def gap_signal(self, stream: int, gap: Gap, cursor: int) -> bytes: ...

    def notify_progress(self) -> None: ...

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> bool: ...

    def wrote(self, events: int) -> None:
        """The connection took ``events`` more events."""

    def stream_stalled(self) -> None:
        """A view found its reader stalled (TM-BP-COUNTERS)."""

    def stream_cut(self, view: View | None = None) -> None:
        """A view cut its stalled reader (TM-BP-COUNTERS)."""


#: How often a busy view looks at its writer's drain rate.
_CHECK_EVERY = 0.25


@attrs.define(eq=False)
class View:
    session: ViewHost
    stream: int
    cursor: int
    """The seq of the last entry handed to the writer (or the position attached at)."""
    responder: Responder
    delivered: int = -1
    """The seq of the last entry the connection took (its writes completed)."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    end_reason: ViewEnd | None = None
    send_retry: bool = True
    writer: ConnectionWriter | None = None
    closed: trio.Event = attrs.field(factory=trio.Event)
    """Set once the connection is done with: its last writes made or given up."""
    # What the view waits on, whatever it waits for: rung when the writer makes progress or
    # stops, when the client leaves, and (while the view is idle) when the log changes. One
    # event rather than a task per thing watched: the view waits about once per write, and
    # spawning watcher tasks for each wait cost more than the rest of its work.
    _bell: trio.Event = attrs.field(factory=trio.Event, init=False, repr=False)
    _listening: bool = attrs.field(default=False, init=False, repr=False)
    task: trio.lowlevel.Task | None = attrs.field(default=None, init=False, repr=False)
    """The HTTP request's task that serves the connection, once it runs (describe())."""
    ended_at: float | None = attrs.field(default=None, init=False, repr=False)

    def ring(self) -> None:
        """Wake the view to look at its writer, its client and the log."""
        self._bell.set()

    def log_changed(self) -> None:
        """The session's log changed (Session._wake). Only an idle view needs to know: a busy
        one reads the log again when its writer next makes progress, and takes all that came
        meanwhile in one go."""
        if self._listening:
            self._bell.set()

    def _arm(self) -> trio.Event:
        """The bell to wait on. Taken before looking at what it waits for, so that a ring in
        between is not lost: it leaves the bell set, and the wait returns at once."""
        if self._bell.is_set():
            self._bell = trio.Event()
        return self._bell

    def stop(self, reason: ViewEnd, *, send_retry: bool = True) -> None:
        """End this connection from outside; the stream itself lives on in the log."""
        if self.end_reason is None:
            self.end_reason = reason
            self.send_retry = send_retry
        self.scope.cancel()

    def evict(self) -> None:
        """TM-SEC-FAIR: a full streams pool takes this connection for another client's: it
        ends with ``retry``, and its client resumes from its last event id (the stream lives
        on in the log)."""
        self.stop(ViewEnd.EVICTED)

    def describe(self) -> ViewInfo:
        """This connection: its stream, cursor, lag and writer; reads only."""
        return ViewInfo(
            task=self.task,
            stream=self.stream,
            cursor=self.cursor,
            delivered=self.delivered,
            lag=self.lag(),
            stopping=self.scope.cancel_called,
            end_reason=self.end_reason,
            ended_at=self.ended_at,
            writer=None if self.writer is None else self.writer.describe(),
        )

    def event_id(self, seq: int) -> str:
        return self.session.event_id(self.stream, seq)

    def lag(self) -> int:
        """Messages of this stream appended but not yet taken by the connection."""
        state = self.session.log.stream(self.stream)
        return 0 if state is None else state.lag(self.delivered)[0]

    def lags_beyond(self, count: int, size: int) -> bool:
        """Whether more than ``count`` messages, or ``size`` bytes of them, of this stream are
        appended but not yet taken, summing only as far as it takes to know. A producer asks
        on every message it sends (TM-BP-PRODUCER), so this costs a bisection and the lag,
        not the window."""
        state = self.session.log.stream(self.stream)
        return state is not None and state.lags_beyond(self.delivered, count, size)

    async def run(
        self,
        *,
        priming: Entry | None = None,
        attached_comment: bool = False,
        headers: tuple[tuple[str, str], ...] = (),
        preface: bytes = b"",
    ) -> ViewEnd:
        """Serve the connection until the stream ends, the client leaves or we stop it.

        ``priming`` is the stream's priming position, taken before anything was appended
        to the stream, so the priming event comes first on the wire; ``preface`` goes even
        before it (what the client must be told of the stream it asked for).
        """
        self.task = trio.lowlevel.current_task()
        try:
            return await self._serve(priming, attached_comment, headers, preface)
        finally:
            self.closed.set()

    async def _serve(
        self,
        priming: Entry | None,
        attached_comment: bool,
        headers: tuple[tuple[str, str], ...],
        preface: bytes = b"",
    ) -> ViewEnd:
        session = self.session
        self.delivered = self.cursor
        await self.responder.start_stream(200, (*SSE_HEADERS, *headers))
        cfg = session.config
        gone = self.responder.disconnected
        writer = ConnectionWriter(
            self.responder,
            window=cfg.stall_budget,
            max_write=_max_write(cfg),
            # TM-BP-STALL: the judge is chosen by what the responder offers (judge_for); a
            # kernel judge also paces the stream (TM-BP-PACE).
            judge=judge_for(
                self.responder,
                window=cfg.stall_budget,
                pacer=lambda probing: _pacer(probing, cfg, gone),
            ),
            on_progress=self.ring,
        )
        self.writer = writer
        if not session.spawn(writer.run, name=f"mcp:writer:{self.stream}"):
            writer.close()
            return ViewEnd.SERVER_CLOSED
        if preface:
            writer.submit(preface)
        if priming is not None:
            # T-PSSE-1 (SHOULD): start with an event that has an id and empty data, so the
            # client has a cursor to resume from even if nothing else arrives.
            self.cursor = max(self.cursor, priming.seq)
            self.delivered = self.cursor
            seq = priming.seq
            event = session.encode(self.stream, seq, b"")

            def primed(upto: int) -> None:
                # Told once the connection took it whole, as every other event is.
                if upto == len(event):
                    self._trace(TraceKind.DELIVER, seq, "priming")

            writer.submit(event, None if cfg.tracer is None else primed)
        if attached_comment:
            # TM-RES-ATTACHED: a comment, which every client ignores, says where we are.
            writer.submit(encode_comment(f"attached stream={self.stream} after={self.cursor}"))
        with self.scope:
            # The client leaving is the one thing nothing else rings the bell for.
            async with watching_disconnect(self.responder, self.ring):
                self.end_reason = await self._pump(writer)
        reason = self.end_reason or ViewEnd.SERVER_CLOSED
        session.detach_view(self)
        await self._finish(writer, reason)
        return reason

    async def _finish(self, writer: ConnectionWriter, reason: ViewEnd) -> None:
        session = self.session
        cfg = session.config
        if reason is ViewEnd.STALLED:
            self.ended_at = trio.current_time()
            session.stream_cut(self)
            await self._signal_stall(writer)
            # Never end a cut response properly: a completed response would leave the
            # connection open for keep-alive. Returning unfinished makes hypercorn close it.
            return
        # TM-BP-PACE: what is left to write is a few chunks at most; holding them back
        # would only delay the end of the response.
        writer.unpace()
        if reason not in (ViewEnd.COMPLETE, ViewEnd.CLIENT_GONE, ViewEnd.GAP) and self.send_retry:
            # T-PSSE-4 / T-GET-8 (SHOULD): before closing a connection whose stream goes on,
            # send a retry field so the client knows when to resume.
            writer.submit(encode_event(retry=cfg.retry_ms))
        if not writer.idle and not writer.finished.is_set():
            # (A view that ended COMPLETE has waited for this already: no scope for nothing.)
            with trio.move_on_after(cfg.stall_budget) as cs:
                cs.shield = True
                while not writer.idle and not writer.finished.is_set():
                    await writer.wait_progress()
        writer.close()
        if writer.idle and not self.responder.disconnected.is_set():
            with trio.move_on_after(cfg.signal_timeout) as cs:
                cs.shield = True
                await self.responder.end()
        # Otherwise a write is stuck on the client: returning ends the HTTP request task and
        # hypercorn closes the connection, which releases the stuck write (TM-BP-RELEASE).

    async def _signal_stall(self, writer: ConnectionWriter) -> None:
        """TM-BP-SIGNAL: a named event with the cursor to resume from, and retry.

        It may never get through a stalled connection, so it is tried within
        ``signal_timeout``. It goes ahead of the chunks still queued (never written, their
        messages stay in the log) but behind the write in progress, which cannot be taken
        back: once that one is through, the cursor the signal names is the last event the
        connection took, and the signal is the next thing on the wire. Queued behind
        MAX_QUEUED events instead, it would not reach a reader this slow within the bound.
        """
        cfg = self.session.config
        min_rate = cfg.min_read_rate
        writer.drop_queued()
        # TM-BP-PACE: a paced reader's buffers have room for the rest of the write in
        # progress and the signal; holding them back would only delay the close.
        writer.unpace()
        delivered = False
        with trio.move_on_after(cfg.signal_timeout) as cs:
            cs.shield = True
            drained = await writer.drain_while_read(min_rate, _CHECK_EVERY)
            if drained and not writer.finished.is_set():
                details = {
                    "lastEventId": self.event_id(self.delivered) if self.delivered >= 0 else None,
                    "retry": cfg.retry_ms,
                    "reason": "the connection drained too slowly; "
                    "resume with GET and Last-Event-ID",
                }
                writer.submit(
                    encode_event(
                        event="resumption-required",
                        data=json.dumps(details, separators=(",", ":")),
                        retry=cfg.retry_ms,
                    )
                )
                if await writer.drain_while_read(min_rate, _CHECK_EVERY):
                    delivered = await writer.until_delivered(min_rate)
                    if delivered and cfg.tracer is not None:
                        self._trace(TraceKind.SIGNAL, self.delivered, "resumption-required")
        if not delivered and isinstance(self.responder, Resettable):
            # TM-BP-CLOSE: the signal did not reach the reader's buffers in time; what the
            # kernel still holds for it (up to TCP_NOTSENT_LOWAT unsent, 16 KiB, besides
            # what is in flight) would reach it after the close, at its own slow pace,
            # before the FIN. Reset instead: it reads what its own kernel holds, then the
            # end, and resumes from the last id it read.
            self.responder.reset_on_close()
        writer.close()

    async def _pump(self, writer: ConnectionWriter) -> ViewEnd:
        session = self.session
        cfg = session.config
        while True:
            if self.end_reason is not None:
                # Stopped from outside (stop()): what the log gained since goes to the next
                # connection, even when the stop came in the same turn as the messages.
                return self.end_reason
            if self.responder.disconnected.is_set() or writer.finished.is_set():
                return ViewEnd.CLIENT_GONE
            changed = session.changed_event()
            bell = self._arm()
            got = session.log.read_after(self.stream, self.cursor)
            if isinstance(got, Gap):
                writer.submit(session.gap_signal(self.stream, got, self.delivered))
                if self.stream != STANDALONE_STREAM or got.lost_through < 0:
                    return ViewEnd.GAP
                # TM-RES-STALE: the standalone stream has no request to fail, and it never
                # ends. Having said what was lost, it goes on from the oldest message the
                # window still holds. Ending the connection here would have the SDK clients,
                # which reconnect a GET stream that ends, resume the same stale cursor again
                # and again, and never hear from the stream anew.
                self.cursor = self.delivered = got.lost_through
                if session.primes and not session.log.read_after(self.stream, self.cursor):
                    # Nothing kept follows the loss: a priming event gives the client a
                    # cursor that works (T-PSSE-1). No await since the read: nothing was
                    # appended in between, so the position skips nothing.
                    priming = session.log.prime(self.stream, now=trio.current_time())
                    self.cursor = self.delivered = priming.seq
                    writer.submit(session.encode(self.stream, priming.seq, b""))
                continue
            while got:
                # Hand over entries only when the writer has room: the log, not a queue in
                # front of the socket, holds what the reader lags by.
                end = await self._until(writer, lambda: writer.has_room)
                if end is not None:
                    return end
                if self.end_reason is not None:
                    return self.end_reason
                got = self._submit(writer, got)
            state = session.log.stream(self.stream)
            if state is None or (state.ended and self.cursor >= state.last_seq):
                # T-PSSE-10 (SHOULD): the stream ends after its last response is taken.
                end = await self._until(writer, lambda: writer.idle)
                return ViewEnd.COMPLETE if end is None else end
            if not writer.idle:
                # What the log gained meanwhile is read when the writer next makes progress.
                if await self._wait_writer(writer, bell):
                    return ViewEnd.STALLED
                continue
            self._listening = True
            try:
                bell = self._arm()
                if changed.is_set():
                    continue  # the log changed since it was read
                with trio.move_on_after(cfg.keepalive_interval) as idle:
                    await bell.wait()
            finally:
                self._listening = False
            if idle.cancelled_caught:
                writer.submit(encode_comment("keep-alive"))

    def _submit(self, writer: ConnectionWriter, entries: list[Entry]) -> list[Entry]:
        """Hand the writer the first of ``entries`` as one chunk, and return the rest.

        The chunk holds as many entries as fit in the writer's ``max_chunk`` (at least
        one): a stream of small events then costs a socket write per batch, not per event,
        and the writer still holds at most MAX_QUEUED chunks of at most about that size
        (TM-BP-BOUNDED).
        """
        limit = writer.max_chunk or 0
        parts: list[bytes] = []
        taken: list[Entry] = []
        size = count = 0
        for entry in entries:
            if parts and size + len(entry.data) > limit:
                break
            count += 1
            self.cursor = entry.seq
            if entry.kind is EntryKind.PRIMING:
                continue
            data = self.session.encode(self.stream, entry.seq, entry.data)
            parts.append(data)
            taken.append(entry)
            size += len(data)
        if taken:
            ends = list(itertools.accumulate(len(p) for p in parts))
            marked = 0

            def written(upto: int) -> None:
                # Marked only once the connection took them whole: a response whose write
                # never finished stays pinned in the window for the client's resume
                # (TM-RES-PIN). A slow reader takes a chunk in several writes, and each
                # message counts once its last byte has gone.
                nonlocal marked
                done = bisect.bisect_right(ends, upto)
                if done <= marked:
                    return
                now_taken = taken[marked:done]
                marked = done
                log = self.session.log
                for entry in now_taken:
                    log.mark_written(entry)
                self.delivered = max(self.delivered, now_taken[-1].seq)
                if self.session.config.tracer is not None:
                    for entry in now_taken:
                        self._trace(TraceKind.DELIVER, entry.seq)
                self.session.wrote(len(now_taken))
                self.session.notify_progress()

            writer.submit(parts[0] if len(parts) == 1 else b"".join(parts), written, ends)
        return entries[count:]

    def _trace(self, kind: TraceKind, seq: int, detail: str | None = None) -> None:
        """Tell the session's tracer (there is one: callers check) what this view did."""
        tracer = self.session.config.tracer
        assert tracer is not None
        tracer.record(TraceRecord(
            kind=kind, session=self.session.id, conn=id(self.responder), stream=self.stream,
            seq=seq, detail=detail,
        ))

    async def _until(
        self, writer: ConnectionWriter, ready: Callable[[], bool]
    ) -> ViewEnd | None:
        """Wait until ``ready()``: None then, or why the view must end first."""
        while True:
            bell = self._arm()
            if ready():
                return None
            if await self._wait_writer(writer, bell):
                return ViewEnd.STALLED
            # T-PSSE-11: the client may leave mid-write. Its writer can sit in a write that
            # never finishes, so `disconnected` is what says it is gone; without this check
            # the loop waits on a writer that never makes progress until the stall budget
            # runs out.
            if writer.finished.is_set() or self.responder.disconnected.is_set():
                return ViewEnd.CLIENT_GONE

    async def _wait_writer(self, writer: ConnectionWriter, bell: trio.Event) -> bool:
        """Wait for the bell (at most _CHECK_EVERY); True if the reader has stalled."""
        cfg = self.session.config
        with trio.move_on_after(_CHECK_EVERY):
            await bell.wait()
        # TM-BP-STALL: busy for the whole budget and still under the minimum rate, as the
        # writer's judge sees it. This is also when a kernel judge samples the count of bytes
        # the reader acknowledged (and, once a write has been blocked for a while, looks its
        # socket up), so a busy view is what keeps that count current.
        stalled = writer.stalled_for(trio.current_time(), cfg.min_read_rate)
        if stalled >= cfg.stall_budget:
            self.session.stream_stalled()
            return True
        return False


def _pacer(probing: TcpProbing, cfg: ServerConfig, gone: trio.Event) -> WindowPacer | None:
    """TM-BP-PACE: a pacer for a responder that can read its socket's TCP_INFO (None with
    ``window_pacing`` off). ``gone`` is set when the client leaves."""
    if not cfg.window_pacing:
        return None
    return WindowPacer(
        probing.tcp_sample,
        limit=pace_limit(cfg.min_read_rate, cfg.stall_budget),
        min_rate=cfg.min_read_rate,
        ramp_rate=RAMP_FACTOR * cfg.min_read_rate,
        probe_max=cfg.stall_budget / 40,
        small_window=max(SMALL_WINDOW, int(cfg.min_read_rate * cfg.stall_budget)),
        gone=gone,
    )


def _max_write(cfg: ServerConfig) -> int:
    """The largest write of a connection that may wait for its reader (TM-BP-STALL)."""
    return write_grain(cfg.min_read_rate, cfg.stall_budget)



