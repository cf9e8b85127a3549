# A session's outgoing side (spec/resumption.md): its event log, the connections that read it
# (Views, trio_mcp.runtime.backpressure._view), and the one place where a message enters the log
# and where a
# log entry becomes an SSE event.
#
# Every message a legacy session sends goes through ``append``: into the log, to its copy in a
# shared store (TM-STORE-STREAMS, through the peers' ``copy``), to the tracer, and a ring for
# the views waiting on the log. Every event id and every event of a legacy stream is made by
# ``event_id`` and ``encode``: on a View, in a stream sent whole (TM-POST-ATONCE,
# ``send_whole``) and in a stream read from a gone worker's copy alike.
from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from ...base._trace import TraceKind, TraceRecord
from ...protocol import (
    STANDALONE_STREAM,
    Cursor,
    Entry,
    EntryKind,
    EventLog,
    Gap,
    RequestId,
    dumps,
    encode_event,
)
from ...protocol._resume import resumption_failed_event, stream_lost_error
from ...protocol._sse import encode_message_event
from ...protocol._transport import SSE_HEADERS, Reply
from .._describe import DescribedSession, LogInfo, RoleKind, SessionRole, ViewEnd, ViewInfo

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...protocol import CursorCodec
    from ..backpressure._responder import Responder
    from ..backpressure._view import View

__all__ = ["AT_ONCE_BYTES", "NO_COPIES", "SENDS_PER_SCHEDULE_POINT", "Copies", "StreamOut"]

#: At most this many sends of a session follow each other without a schedule point
#: (TM-BP-PRODUCER): what a handler holds the event loop for is a few messages' work.
SENDS_PER_SCHEDULE_POINT = 16

#: The most message bytes a request stream may hold to go out as one complete response
#: (TM-POST-ATONCE): any socket's buffers take this much at once, so the reply cannot wait
#: on its reader; a larger answer goes through a View, whose writer judges the reader.
AT_ONCE_BYTES = 16384


class Copies(Protocol):
    """Where a worker in a cluster copies its request streams for the others
    (TM-STORE-STREAMS: trio_mcp.runtime.store._mirror.StreamMirror)."""

    def add(self, source: StreamOut, stream: int, entry: Entry | None) -> None:
        """``entry`` was appended to ``stream`` of ``source`` (None: the stream opened)."""

    def forget(self, session_id: str) -> None:
        """The session has ended here: nothing more of it is copied."""


class _NoCopies:
    """A worker alone copies nothing: no other worker would read it."""

    def add(self, source: StreamOut, stream: int, entry: Entry | None) -> None:
        return None

    def forget(self, session_id: str) -> None:
        return None


NO_COPIES: Copies = _NoCopies()


@attrs.define
class OutCounts:
    """What a session's outgoing side counted (its session's statistics, TM-BP-COUNTERS)."""

    events_written: int = 0
    notifications_dropped: int = 0
    streams_stalled: int = 0
    streams_cut: int = 0


class StreamOut:
    """The log of session ``session_id`` and the connections reading it."""

    def __init__(
        self,
        *,
        session_id: str,
        config: ServerConfig,
        codec: CursorCodec,
        log: EventLog,
        primes: bool,
        copies: Copies,
        spawn: Callable[..., bool],
        fail_request: Callable[[RequestId], object],
        heard: Callable[[], None],
        on_cut: Callable[[int, str, int], None] | None = None,
    ) -> None:
        self.id = session_id
        #: Told of a view cut for stalling: its stream, the event's name and its cursor
        #: (Handlers.stream_event, TM-OTEL-EVENTS).
        self._on_cut = on_cut
        self.config = config
        self.codec = codec
        self.log = log
        #: Whether this session's SSE streams start with a priming event (TM-RES-PRIME).
        self.primes = primes
        self._copies = copies
        self._spawn = spawn
        #: Told of a request whose stream's messages were lost (its handler's work is moot).
        self._fail_request = fail_request
        self._heard = heard
        #: The connection reading each stream.
        self.views: dict[int, View] = {}
        self.counts = OutCounts()
        self.closed = False
        self._changed = trio.Event()
        self._progress = trio.Event()
        #: Request streams that were forgotten, with their request ids, so that a late
        #: resume of one can still fail its requests explicitly (TM-RES-STALE).
        self._stream_requests: dict[int, tuple[RequestId, ...]] = {}
        #: The last few views cut for stalling (made on the first cut; for describe()).
        self.recent_cuts: collections.deque[ViewInfo] | None = None
        #: Sends since the last one that was a schedule point (TM-BP-PRODUCER).
        self._unscheduled = 0

    # -- into the log -----------------------------------------------------------------------

    def append(
        self,
        stream: int,
        data: bytes,
        *,
        answers: RequestId | None = None,
        request: RequestId | None = None,
        method: str | None = None,
        detail: str | None = None,
    ) -> Entry:
        """Append one message to ``stream`` (a response, when it ``answers`` a request),
        copy it for the other workers, tell the tracer, and wake the views (raises
        StreamClosedError for a stream that has ended)."""
        if answers is None:
            entry = self.log.append(stream, data, now=trio.current_time())
        else:
            entry = self.log.append(
                stream, data, now=trio.current_time(), kind=EntryKind.RESPONSE, answers=answers
            )
        self._copies.add(self, stream, entry)
        if self.config.tracer is not None:
            self.trace(TraceKind.APPEND, stream=stream, seq=entry.seq, request=request,
                        method=method, detail=detail)
        self.wake()
        return entry

    def open(self, request_ids: tuple[RequestId, ...]) -> tuple[int, Entry | None]:
        """A new request stream for ``request_ids``, and its priming position."""
        stream = self.log.open_stream(request_ids).number
        return stream, self.prime(stream)

    def prime(self, stream: int, *, carry: bool = False) -> Entry | None:
        """The stream's priming position, taken before anything else is appended to it
        (None for a revision that does not prime, TM-RES-PRIME); the stream's copy learns
        its requests first, so that a resume from the priming id alone can fail them
        explicitly once this worker is gone."""
        self._copies.add(self, stream, None)
        if not self.primes:
            return None
        entry = self.log.prime(stream, now=trio.current_time(), carry_unsent=carry)
        if self.config.tracer is not None:
            self.trace(TraceKind.APPEND, stream=stream, seq=entry.seq, detail="priming")
        return entry

    def close_request(self, stream: int | None, request_id: RequestId) -> None:
        """A request of ``stream`` ends with no response (cancelled, or its handler let
        go): the stream ends once its other requests have answered."""
        if stream is not None:
            self.log.close_request(stream, request_id)
        self.wake()

    # -- out as SSE -------------------------------------------------------------------------

    def event_id(self, stream: int, seq: int, *, origin: str | None = None) -> str:
        return self.codec.event_id(self.id, stream, seq, origin=origin)

    def encode(self, stream: int, seq: int, data: bytes, *, origin: str | None = None) -> bytes:
        """An event of ``stream``: the message ``data`` at ``seq``; a priming event (T-PSSE-1:
        an id and empty data) for empty ``data``. ``origin``: the worker that held it."""
        event_id = self.codec.event_id(self.id, stream, seq, origin=origin)
        if not data:
            return encode_event(id=event_id, data="")
        return encode_message_event(id=event_id, data=data)

    async def send_whole(
        self,
        stream: int,
        priming: Entry | None,
        responder: Responder,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> bool:
        """Send a request stream that has ended before a connection took anything from it as
        one complete SSE response (the same events a View would write: TM-POST-ATONCE), if it
        is small; False, having sent nothing, when it is not."""
        state = self.log.stream(stream)
        entries = self.log.read_after(stream, -1 if priming is None else priming.seq)
        if state is None or not state.ended or not isinstance(entries, list):
            return False
        taken = [e for e in entries if e.kind is not EntryKind.PRIMING]
        if sum(len(e.data) for e in taken) > AT_ONCE_BYTES:
            # A large answer goes through a View: its writer watches the reader's speed.
            return False
        # T-PSSE-1 (SHOULD): the priming event first, as on any stream.
        events = [] if priming is None else [self.encode(stream, priming.seq, b"")]
        events += [self.encode(stream, e.seq, e.data) for e in taken]
        # The client was heard a moment ago, by the POST this answers (LegacyEndpoint.post
        # and _initialize): nothing to tell the session or its table again.
        if responder.disconnected.is_set():
            # The client left already: its answer stays in the log for a resume.
            return True
        # Within the stall budget, as a View's writes are: a reader that takes nothing for
        # that long loses the connection, and the response stays in the log to resume.
        with trio.move_on_after(self.config.stall_budget):
            reply = Reply(status=200, headers=(*SSE_HEADERS, *headers), body=b"".join(events))
            await responder.reply(reply)
        if responder.finished:
            if self.config.tracer is not None:
                conn = id(responder)
                for entry in [*([priming] if priming else []), *taken]:
                    self.trace(TraceKind.DELIVER, conn=conn, stream=stream, seq=entry.seq,
                                detail="priming" if entry is priming else None)
                self.trace(TraceKind.REPLY, conn=conn, status=200, detail="the stream whole")
            # Marked only once the connection took them (TM-RES-PIN), as a View does.
            for entry in taken:
                self.log.mark_written(entry)
            self.wrote(len(taken))
            self.notify_progress()
        return True

    # -- the connections (views) ------------------------------------------------------------

    def attach(self, view: View) -> None:
        old = self.views.get(view.stream)
        if old is not None and old is not view:
            # Never one stream on two connections (T-MULTI-2): the older one is detached.
            old.stop(ViewEnd.DETACHED, send_retry=False)
        self.views[view.stream] = view
        if self.config.tracer is not None:
            self.trace(TraceKind.ATTACH, conn=id(view.responder), stream=view.stream,
                        seq=view.cursor)

    def detach_view(self, view: View) -> None:
        if self.views.get(view.stream) is view:
            del self.views[view.stream]
        if self.config.tracer is not None:
            reason = view.end_reason or ViewEnd.SERVER_CLOSED
            self.trace(TraceKind.DETACH, conn=id(view.responder), stream=view.stream,
                        seq=view.delivered, detail=reason.value)
        # The client held this connection until now.
        self._heard()
        # TM-BP-PRODUCER: a handler paced to this reader's speed stops waiting the moment
        # the reader is gone (cut, left or detached), not when producer_wait runs out.
        self.notify_progress()

    def stop_views(self) -> None:
        """The session ends: every connection closes (with a retry field)."""
        for view in list(self.views.values()):
            view.stop(ViewEnd.SERVER_CLOSED)

    def close_connection(self, stream: int) -> bool:
        """Close the connection attached to ``stream`` with a retry hint (SEP-1699 polling).

        T-PSSE-2 (MAY): once an event id has gone out, the server may close the connection
        without ending the stream; the client resumes with GET and Last-Event-ID.
        """
        if not self.primes:
            # T-PSSE-15 (SHOULD NOT, before 2025-11-25): a stream is not closed before its
            # response; polling (SEP-1699) came with 2025-11-25, as priming did.
            return False
        view = self.views.get(stream)
        if view is None or view.delivered < 0:
            # Without an event id the client has no cursor to resume from: closing would
            # lose the stream, so it stays open.
            return False
        if view.end_reason is not None:
            # Already ending: this call closes nothing (a handler polling for an attached
            # connection waits for the client's next one).
            return False
        view.stop(ViewEnd.SERVER_CLOSED)
        return True

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> bool:
        """Run a connection's writer as a task of the session (cancelled when it ends)."""
        return self._spawn(fn, *args, name=name)

    def gap_signal(self, stream: int, gap: Gap, cursor: int) -> bytes:
        """What a connection gets when its cursor has left the window (TM-RES-STALE).

        A named SSE event for anyone reading the wire, then, for a request stream, an error
        response for each of its requests still unanswered on this connection, so that the
        client's pending call fails at once with a clear message instead of hanging.
        """
        state = self.log.stream(stream)
        details = {
            "stream": stream,
            "lastEventId": self.codec.encode(self.id, Cursor(stream, cursor))
            if cursor >= 0
            else None,
            "reason": "events after this cursor have left the server's replay window",
        }
        out = resumption_failed_event(details)
        if stream == STANDALONE_STREAM:
            return out
        if state is not None:
            # A request answered at or before the cursor has its response on the client
            # already (a batch stream): it must not get a second one.
            answered = {e.answers for e in state.entries if e.seq <= cursor}
            request_ids: tuple[RequestId, ...] = tuple(
                r for r in state.request_ids if r not in answered
            )
        else:
            request_ids = self._stream_requests.get(stream) or self.log.requests_of(stream)
        for rid in request_ids:
            out += encode_event(data=dumps(stream_lost_error(rid, details)).decode())
            # The client has been given a final answer: the handler's work is moot.
            self._fail_request(rid)
        if state is not None:
            self._forget_stream(stream)
        return out

    def describe_views(self) -> tuple[ViewInfo, ...]:
        return tuple(v.describe() for v in list(self.views.values()))

    def describe_log(self) -> LogInfo:
        """The log against its bounds (TM-RES-WINDOW)."""
        log, retention = self.log, self.config.retention
        return LogInfo(
            events=log.retained_events, bytes=log.retained_bytes,
            max_events=retention.max_events, max_bytes=retention.max_bytes,
            max_age=retention.max_age, appended=log.appended, evicted=log.evicted,
        )

    def writer_roles(
        self, owner: DescribedSession
    ) -> dict[trio.lowlevel.Task, SessionRole]:
        """The connections' writers' tasks, each by its stream, described by ``owner``."""
        return {
            view.writer.task: SessionRole(RoleKind.WRITER, owner, view.stream)
            for view in list(self.views.values())
            if view.writer is not None and view.writer.task is not None
        }

    def _forget_stream(self, stream: int) -> None:
        state = self.log.stream(stream)
        if state is not None:
            self._stream_requests[stream] = tuple(state.request_ids)
            if len(self._stream_requests) > 4 * self.config.max_inflight_requests:
                self._stream_requests.pop(next(iter(self._stream_requests)))
        self.log.forget_stream(stream)

    # -- what views and producers wait on ---------------------------------------------------

    def changed_event(self) -> trio.Event:
        """An event that fires at the next append (or detach) in this session."""
        return self._changed

    def wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        for view in self.views.values():
            view.log_changed()

    def progress_event(self) -> trio.Event:
        """An event that fires when a connection next takes an event (or leaves)."""
        return self._progress

    def notify_progress(self) -> None:
        """A connection took an event: producers waiting on a slow reader may go on."""
        self._progress.set()
        self._progress = trio.Event()

    async def pace(self, stream: int | None) -> None:
        """After a send to ``stream`` (None: it went nowhere), wait while the stream's
        attached reader lags too far behind.

        TM-BP-PRODUCER: a handler that emits faster than a healthy reader drains is slowed
        to the reader's pace, for at most ``producer_wait`` per message; memory stays bounded
        either way (the log is bounded), this only keeps a live reader inside the window.
        With no reader attached nothing waits: the log evicts within its window. A schedule
        point, as trio's own functions have, unless a reader is attached to the stream and
        the session's last SENDS_PER_SCHEDULE_POINT sends had one: a handler looping over
        sends never holds the event loop (and every other session with it) for more than a
        few messages, and a reader that keeps up takes them a batch at a time, not with a
        turn of the scheduler for each.
        """
        view = None if stream is None else self.views.get(stream)
        self._unscheduled += 1
        if view is None or self._unscheduled >= SENDS_PER_SCHEDULE_POINT:
            self._unscheduled = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        if view is None or stream is None or not self.lags_beyond(stream, view):
            return
        cfg = self.config
        with trio.move_on_after(
            cfg.producer_wait if cfg.producer_wait is not None else cfg.stall_budget
        ):
            while self.lags_beyond(stream, view):
                await self._progress.wait()

    def lags_beyond(self, stream: int, view: View) -> bool:
        """TM-BP-PRODUCER: whether ``view``'s reader of ``stream`` lags too far behind."""
        cfg = self.config
        limit = cfg.max_stream_lag or max(1, cfg.retention.max_events // 2)
        # The window is counted in events and in bytes: large events would push a reader's
        # unsent messages out of it by their bytes while their count still looks small.
        return self.views.get(stream) is view and view.lags_beyond(
            limit, max(1, cfg.retention.max_bytes // 2)
        )

    # -- what views tell --------------------------------------------------------------------

    def wrote(self, events: int) -> None:
        """The connection took ``events`` more events."""
        self.counts.events_written += events

    def stream_stalled(self) -> None:
        """A view found its reader stalled (TM-BP-COUNTERS)."""
        self.counts.streams_stalled += 1

    def stream_cut(self, view: View | None = None) -> None:
        """A view cut its stalled reader (TM-BP-COUNTERS)."""
        self.counts.streams_cut += 1
        if view is not None:
            if self._on_cut is not None:
                self._on_cut(view.stream, "mcp.stream.cut", view.delivered)
            if self.recent_cuts is None:
                self.recent_cuts = collections.deque(maxlen=3)
            # Kept for the session's life: without the tasks, which are over soon.
            self.recent_cuts.append(attrs.evolve(view.describe(), task=None, writer=None))

    def dropped(self) -> None:
        """A message had nowhere to go (U-PROG-7, U-CANCEL-4: a request that finished or
        was cancelled; a JSON-mode request; an ended stream)."""
        self.counts.notifications_dropped += 1

    # -- the end ----------------------------------------------------------------------------

    def end(self) -> None:
        """The session ends: nothing more of it is copied."""
        if not self.closed:
            self.closed = True
            self._copies.forget(self.id)

    def release(self) -> None:
        """The session has ended: its connections close, and its messages go at once,
        whatever still refers to it (TM-SESS-IDLE: expiry frees the log)."""
        self.end()
        self.stop_views()
        self.wake()
        self.log.release()

    def trace(self, kind: TraceKind, **fields: Any) -> None:
        """Tell the tracer (there is one: callers check) what happened in this session."""
        assert self.config.tracer is not None
        self.config.tracer.record(TraceRecord(kind=kind, session=self.id, **fields))
