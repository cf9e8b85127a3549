# The session's event log (spec/resumption.md): every message the server sends in a session
# is appended here first, to the stream it belongs to, and connections are views that read
# from it. Replay and live tail are one loop over this log, so a message goes out at most
# once per view and never on a stream it does not belong to.
#
# Rule 1: everything about what is retained, what a cursor may read and what counts as lost
#         lives in this file.
# Rule 2: no I/O, no clock, no randomness: time is passed in.
from __future__ import annotations

import collections
import enum
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from typing import Final, overload

import attrs

from ._jsonrpc import RequestId

__all__ = [
    "ENTRY_OVERHEAD",
    "STANDALONE_STREAM",
    "Entry",
    "EntryKind",
    "EventLog",
    "Gap",
    "Retention",
    "StreamClosedError",
    "StreamState",
]

#: The standalone stream (the GET stream) is stream 0; POST streams count up from 1.
STANDALONE_STREAM: Final = 0

#: How many forgotten request streams keep their request ids for a late resume.
_FORGOTTEN_STREAMS: Final = 1024


class EntryKind(enum.Enum):
    #: An id with empty data that starts a connection (T-PSSE-1); never replayed.
    PRIMING = "priming"
    #: A request or notification from the server.
    MESSAGE = "message"
    #: The response that answers one of the stream's requests.
    RESPONSE = "response"


@attrs.define
class Entry:
    """One message of the log, as read from it: a copy of what the log keeps in its columns
    (see ``StreamState``). Two reads of the same message are equal, not the same object."""

    seq: int
    """Position in the session's log; unique across all streams of the session (T-RESUME-2)."""
    stream: int
    kind: EntryKind
    data: bytes
    """The serialized JSON-RPC message (empty for a priming entry)."""
    at: float
    written: bool = False
    """Whether a connection has taken this entry to write it (when it was read)."""
    answers: RequestId | None = None
    """For a RESPONSE, the id of the request it answers."""

    @property
    def pinned(self) -> bool:
        """A response nobody has been sent yet is kept whatever the window says (TM-RES-PIN)."""
        return self.kind is EntryKind.RESPONSE and not self.written


#: What one entry costs besides its message's bytes, charged to the window so that
#: ``max_bytes`` bounds the memory a log takes, not only its payload (TM-RES-WINDOW).
#: Measured with tracemalloc over 40,000 entries of 2,116-byte messages in 50 streams
#: (CPython 3.11 x86-64): 43 bytes each in the columns and the order, plus the bytes
#: object's 33-byte header; rounded up for the C allocator's chunk headers and the arrays'
#: spare room. (An object per entry, before the columns, cost 307.)
ENTRY_OVERHEAD = 128


@attrs.frozen(kw_only=True)
class Retention:
    """How much of a session's log is kept: the replay window (TM-RES-WINDOW).

    ``max_bytes`` counts each message's bytes plus ``ENTRY_OVERHEAD``.
    """

    max_events: int = 256
    max_bytes: int = 512 * 1024
    max_age: float = 300.0

    def __attrs_post_init__(self) -> None:
        if self.max_events < 1 or self.max_bytes < 1 or self.max_age <= 0:
            raise ValueError("retention limits must be positive")


#: Flags kept per entry: a RESPONSE (else a MESSAGE; priming entries are never kept), and
#: taken by a connection.
_RESPONSE: Final = 1
_WRITTEN: Final = 2


def _seqs() -> array[int]:
    return array("q")


def _times() -> array[float]:
    return array("d")


@attrs.define(eq=False)
class StreamState:
    """One stream of the log, and the messages of it the log keeps, in columns.

    Columns, not an object per message: a log holds hundreds of messages per session, and
    objects that small live in CPython's small-object arenas, which go back to the system
    only when wholly empty. After a wave of sessions ended, a few survivors kept most of
    those arenas, and the server's resident size with them (TM-SESS-RELEASE). Here a
    message costs its bytes object and a few machine words in arrays.
    """

    number: int
    open_requests: set[RequestId]
    """Requests on this stream whose response is not appended yet."""
    request_ids: tuple[RequestId, ...] = ()
    """Every request the stream carries a response for (empty for the standalone stream)."""
    last_seq: int = -1
    """The newest seq appended to this stream (priming included)."""
    written_through: int = -1
    """The newest seq a connection has taken from this stream."""
    lost_through: int = -1
    """The newest seq of a message of this stream that left the window unsent or unresumed."""
    # The kept messages, oldest first, one column per field; seqs ascend.
    _seq: array[int] = attrs.field(init=False, factory=_seqs)
    _at: array[float] = attrs.field(init=False, factory=_times)
    _flags: bytearray = attrs.field(init=False, factory=bytearray)
    _data: list[bytes] = attrs.field(init=False, factory=list)
    #: For each kept RESPONSE, by seq, the request it answers.
    _answers: dict[int, RequestId] = attrs.field(init=False, factory=dict)
    #: For each kept message, the bytes of the kept messages up to and including it (from an
    #: arbitrary base): a lag's bytes by subtraction, not by a sum (``lags_beyond``).
    _ends: array[int] = attrs.field(init=False, factory=_seqs)

    @property
    def ended(self) -> bool:
        """A request stream ends once every request on it has its response (T-PSSE-10)."""
        return self.number != STANDALONE_STREAM and not self.open_requests

    @property
    def first_kept(self) -> int:
        """The oldest seq of this stream the log keeps (past its newest when none is)."""
        return self._seq[0] if self._seq else self.last_seq + 1

    @property
    def entries(self) -> Sequence[Entry]:
        """The kept messages, oldest first, read as Entry objects."""
        return _Entries(self)

    @property
    def kept(self) -> int:
        """How many of the stream's messages the log keeps. (Not ``__len__``: a stream
        with nothing kept is still a stream, and callers test ``if state``.)"""
        return len(self._seq)

    def entry(self, index: int) -> Entry:
        seq, flags = self._seq[index], self._flags[index]
        return Entry(
            seq=seq,
            stream=self.number,
            kind=EntryKind.RESPONSE if flags & _RESPONSE else EntryKind.MESSAGE,
            data=self._data[index],
            at=self._at[index],
            written=bool(flags & _WRITTEN),
            answers=self._answers.get(seq),
        )

    def index(self, seq: int) -> int | None:
        """Where the message ``seq`` is kept, or None."""
        seqs = self._seq
        if not seqs:
            return None
        # Most lookups are of the oldest message (eviction) or the newest (a write).
        if seqs[0] == seq:
            return 0
        last = len(seqs) - 1
        if seqs[last] == seq:
            return last
        i = bisect_left(seqs, seq)
        return i if i <= last and seqs[i] == seq else None

    def after(self, seq: int) -> int:
        """The index of the first kept message after ``seq``."""
        return bisect_right(self._seq, seq)

    def size(self, index: int) -> int:
        return len(self._data[index])

    def pinned(self, index: int) -> bool:
        return self._flags[index] == _RESPONSE

    def lags_beyond(self, after: int, count: int, size: int) -> bool:
        """Whether more than ``count`` messages after ``after``, or more than ``size`` bytes of
        them, are kept: found by bisection and one subtraction."""
        seqs = self._seq
        if not seqs or seqs[-1] <= after:
            return False
        start = bisect_right(seqs, after)
        if len(seqs) - start > count:
            return True
        # A producer asks on every send: a subtraction, not a sum over the lag.
        ends = self._ends
        return ends[-1] - ends[start] + len(self._data[start]) > size

    def lag(self, after: int) -> tuple[int, int]:
        """How many messages after ``after`` are kept, and their bytes."""
        start = self.after(after)
        return len(self._seq) - start, sum(len(d) for d in self._data[start:])

    def _push(
        self, seq: int, flags: int, data: bytes, at: float, answers: RequestId | None
    ) -> None:
        self._seq.append(seq)
        self._at.append(at)
        self._flags.append(flags)
        self._data.append(data)
        ends = self._ends
        ends.append((ends[-1] if ends else 0) + len(data))
        if answers is not None:
            self._answers[seq] = answers

    def _pop(self, index: int) -> tuple[int, int, bytes, float, RequestId | None]:
        seq = self._seq.pop(index)
        flags = self._flags.pop(index)
        data = self._data.pop(index)
        self._unend(index, len(data))
        return seq, flags, data, self._at.pop(index), self._answers.pop(seq, None)

    def _unend(self, index: int, size: int) -> None:
        """Take the message that was at ``index``, of ``size`` bytes, out of ``_ends``: the
        ones after it, if it had messages on both sides, no longer count its bytes."""
        ends = self._ends
        del ends[index]
        if 0 < index < len(ends):
            for i in range(index, len(ends)):
                ends[i] -= size


    def _clear(self) -> None:
        self._seq = _seqs()
        self._at = _times()
        self._flags = bytearray()
        self._data = []
        self._answers = {}
        self._ends = _seqs()


class _Entries(Sequence[Entry]):
    """A stream's kept messages as a sequence of Entry objects, made as they are read."""

    __slots__ = ("_state",)

    def __init__(self, state: StreamState) -> None:
        self._state = state

    def __len__(self) -> int:
        return self._state.kept

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return [self._state.entry(i) for i in range(*index.indices(self._state.kept))]
        return self._state.entry(index)


@attrs.frozen
class Gap:
    """A read that cannot be served: messages after the cursor have left the window."""

    stream: int
    after: int
    lost_through: int
    """The newest lost seq; -1 when the whole stream is forgotten."""


class StreamClosedError(Exception):
    """Appending to a stream that has ended or been forgotten."""


class EventLog:
    """The bounded, per-session log of outgoing messages."""

    def __init__(
        self, retention: Retention | None = None, *, reserved: int = 0, base: int = 0
    ) -> None:
        """``base`` is where this log's seqs and request stream numbers start: another
        replica of the same session, in the same process, starts elsewhere, so that no
        cursor of one names a message of the other (TM-STORE-RECORD)."""
        self.retention = retention or Retention()
        #: Bytes of ``max_bytes`` the log leaves to its owner: what a session takes besides
        #: its log, so that the window bounds the whole session (TM-RES-WINDOW).
        self.reserved = reserved
        self._next_seq = base
        self._next_stream = base + STANDALONE_STREAM + 1
        #: Every kept message's seq and stream, in the order they leave the window (seq
        #: order). Messages dropped out of turn leave holes, skipped when met and compacted
        #: away (``_compact``); ``_head`` is where the ones not yet dropped begin.
        self._order_seq: array[int] = _seqs()
        self._order_stream: array[int] = _seqs()
        self._head = 0
        #: Where eviction resumes: every position from ``_head`` up to here is a hole or a
        #: pinned response, so a pinned response at the head (a stalled reader's) does not
        #: make each append walk the holes behind it again. Back to ``_head`` when a response
        #: is taken (it may go now) or the order is rebuilt.
        self._scan = 0
        self._kept = 0
        self._bytes = 0
        self.streams: dict[int, StreamState] = {
            # What an earlier replica's standalone stream held is lost to this one: a cursor
            # from it reads a gap, not a silent skip.
            STANDALONE_STREAM: StreamState(
                number=STANDALONE_STREAM, open_requests=set(), lost_through=base - 1
            )
        }
        #: Counters for statistics(): appended and evicted entries, and bytes retained.
        self.appended = 0
        self.evicted = 0
        # Kept as a count rather than found by a scan: the runtime asks for it on every
        # request (TM-RES-PIN), and a scan costs the whole window each time.
        self._pinned = 0
        #: The requests of the most recently forgotten request streams (bounded), so that
        #: a late resume of one still fails them explicitly (TM-RES-STALE).
        self.forgotten: collections.OrderedDict[int, tuple[RequestId, ...]] = (
            collections.OrderedDict()
        )

    # -- streams ------------------------------------------------------------------------

    def open_stream(self, request_ids: Iterable[RequestId]) -> StreamState:
        """A new request stream carrying the responses to ``request_ids`` (a POST's stream)."""
        ids = tuple(request_ids)
        if not ids:
            raise ValueError("a request stream needs at least one request")
        state = StreamState(number=self._next_stream, open_requests=set(ids), request_ids=ids)
        self._next_stream += 1
        self.streams[state.number] = state
        return state

    def stream(self, number: int) -> StreamState | None:
        return self.streams.get(number)

    # -- writing ------------------------------------------------------------------------

    def append(
        self,
        stream: int,
        data: bytes,
        *,
        now: float,
        kind: EntryKind = EntryKind.MESSAGE,
        answers: RequestId | None = None,
    ) -> Entry:
        """Append one message to ``stream``; a RESPONSE names the request it ``answers``.

        Appending never waits: retention is enforced by evicting old entries, never by
        blocking the producer here (producer backpressure is the runtime's business).
        """
        state = self.streams.get(stream)
        if state is None or state.ended:
            raise StreamClosedError(f"stream {stream} has ended")
        if kind is EntryKind.RESPONSE:
            if answers is None or answers not in state.open_requests:
                raise StreamClosedError(f"stream {stream} has no open request {answers!r}")
            state.open_requests.discard(answers)
        elif kind is not EntryKind.MESSAGE:
            raise ValueError("only messages and responses are appended")
        seq = self._next_seq
        self._next_seq += 1
        flags = _RESPONSE if kind is EntryKind.RESPONSE else 0
        state._push(seq, flags, data, now, answers)
        self._order_seq.append(seq)
        self._order_stream.append(stream)
        self._kept += 1
        self._pinned += flags
        self._bytes += len(data) + ENTRY_OVERHEAD
        state.last_seq = seq
        self.appended += 1
        self.evict(now)
        return Entry(seq=seq, stream=stream, kind=kind, data=data, at=now, answers=answers)

    def close_request(self, stream: int, request_id: RequestId) -> None:
        """A request of ``stream`` ends without a response (its client cancelled it, or its
        handler was let go): the stream ends once its other requests have answered."""
        state = self.streams.get(stream)
        if state is not None:
            state.open_requests.discard(request_id)

    def _keep(
        self,
        state: StreamState,
        seq: int,
        flags: int,
        data: bytes,
        at: float,
        answers: RequestId | None,
    ) -> None:
        state._push(seq, flags, data, at, answers)
        self._order_seq.append(seq)
        self._order_stream.append(state.number)
        self._kept += 1
        self._pinned += flags == _RESPONSE

    def prime(self, stream: int, *, now: float, carry_unsent: bool = False) -> Entry:
        """A fresh position in ``stream`` for a connection's priming event (T-PSSE-1).

        With ``carry_unsent`` (a fresh GET on the standalone stream), the stream's messages
        that no connection has taken yet are moved behind the priming position, with new
        seqs. Nobody has seen their old ids, so renumbering them is invisible; without it a
        client that resumed from the priming id would skip them (TM-GET-FRESH).
        """
        state = self.streams.get(stream)
        if state is None:
            raise StreamClosedError(f"stream {stream} is unknown")
        carried: list[tuple[int, int, bytes, float, RequestId | None]] = []
        if carry_unsent:
            while state.kept and state._seq[-1] > state.written_through:
                old = state._pop(state.kept - 1)
                self._kept -= 1
                self._pinned -= old[1] == _RESPONSE
                carried.append(old)
            carried.reverse()
        priming = Entry(
            seq=self._next_seq, stream=stream, kind=EntryKind.PRIMING, data=b"", at=now,
            written=True,
        )
        self._next_seq += 1
        # A priming entry is a position, not a message: it takes no room in the window.
        state.last_seq = priming.seq
        for _seq, flags, data, at, answers in carried:
            # Their old places in the order are holes now; their bytes stay counted.
            seq = self._next_seq
            self._next_seq += 1
            self._keep(state, seq, flags, data, at, answers)
            state.last_seq = seq
        return priming

    # -- reading ------------------------------------------------------------------------

    def read_after(self, stream: int, after: int) -> list[Entry] | Gap:
        """The stream's messages with seq > ``after``, oldest first, or the Gap that
        makes that impossible. Never another stream's messages (T-RESUME-6)."""
        state = self.streams.get(stream)
        if state is None:
            return Gap(stream=stream, after=after, lost_through=-1)
        if after < state.lost_through:
            return Gap(stream=stream, after=after, lost_through=state.lost_through)
        seqs = state._seq
        if not seqs or seqs[-1] <= after:
            return []
        return [state.entry(i) for i in range(bisect_right(seqs, after), len(seqs))]

    def mark_written(self, entry: Entry) -> None:
        """A connection took ``entry``: it no longer pins its place in the window."""
        entry.written = True
        state = self.streams.get(entry.stream)
        if state is None:
            return
        index = state.index(entry.seq)
        if index is not None:
            flags = state._flags[index]
            if flags == _RESPONSE:
                self._pinned -= 1
                self._scan = self._head
            state._flags[index] = flags | _WRITTEN
        if entry.seq > state.written_through:
            state.written_through = entry.seq

    # -- retention ----------------------------------------------------------------------

    def reserve(self, delta: int) -> None:
        """The owner holds ``delta`` more bytes (less, if negative) besides the log: the
        log's share of the window shrinks by as much (TM-RES-WINDOW)."""
        self.reserved = max(0, self.reserved + delta)

    @property
    def retained_bytes(self) -> int:
        """What the entries take: their messages' bytes plus ENTRY_OVERHEAD each."""
        return self._bytes

    @property
    def retained_events(self) -> int:
        return self._kept

    @property
    def pinned_responses(self) -> int:
        """Responses in the log that no connection has taken yet (TM-RES-PIN)."""
        return self._pinned

    def _find(self, position: int) -> tuple[StreamState, int] | None:
        """The stream and index of the message at ``position`` of the order; None for a
        hole."""
        state = self.streams.get(self._order_stream[position])
        if state is None:
            return None
        index = state.index(self._order_seq[position])
        return None if index is None else (state, index)

    def evict(self, now: float) -> int:
        """Drop entries beyond the window, oldest first, keeping unsent responses.

        Returns the number of entries dropped.
        """
        r = self.retention
        max_events, max_bytes, horizon = r.max_events, r.max_bytes - self.reserved, (
            now - r.max_age
        )
        dropped = 0
        start = max(self._head, self._scan)
        # Whether every position before this one is a hole or was dropped: the head may
        # move up to here. Positions skipped by ``_scan`` may hold pinned responses.
        clear = start == self._head
        order_seq, order_stream, streams = self._order_seq, self._order_stream, self.streams
        for position in range(start, len(order_seq)):
            state = streams.get(order_stream[position])
            index = None if state is None else state.index(order_seq[position])
            if state is None or index is None:
                if clear:
                    self._head = position + 1
                self._scan = position + 1
                continue
            # Entries are in the order they were appended: when this one may stay, so may
            # every later one (a pinned one skipped before it is older still).
            if (
                self._kept <= max_events
                and self._bytes <= max_bytes
                and state._at[index] >= horizon
            ):
                break
            self._scan = position + 1
            if state._flags[index] == _RESPONSE:  # pinned (TM-RES-PIN)
                clear = False
                continue
            self._drop(state, index)
            dropped += 1
            if clear:
                self._head = position + 1
        if dropped:
            self._trim_order()
        return dropped

    def _drop(self, state: StreamState, index: int) -> None:
        seq, flags, data, _at, _answers = state._pop(index)
        size = len(data)
        if flags & _RESPONSE:
            self._pinned -= flags == _RESPONSE
        self._kept -= 1
        self._bytes -= size + ENTRY_OVERHEAD
        self.evicted += 1
        if seq > state.lost_through:
            state.lost_through = seq
        # An ended stream with nothing left to read is forgotten: resuming it later is an
        # explicit failure (Gap with lost_through -1), not an empty replay. Its response was
        # written, but may never have reached the client (T-PSSE-11): the failure must still
        # answer its requests, or the client's call never ends.
        if (
            state.number != STANDALONE_STREAM
            and not state.open_requests
            and not state._seq
            and self.streams.pop(state.number, None) is not None
        ):
            self._remember(state)

    def _compact(self) -> None:
        """Move the head past the holes before it, and drop what lies before the head once
        that is most of the order; rebuild the order once holes are most of it (messages
        dropped out of turn: carried, forgotten, or evicted behind a pinned one)."""
        end = len(self._order_seq)
        while self._head < end and self._find(self._head) is None:
            self._head += 1
        self._trim_order()

    def _trim_order(self) -> None:
        """``_compact`` with the head already past the holes before it."""
        end = len(self._order_seq)
        if self._head == end:
            self._order_seq, self._order_stream, self._head = _seqs(), _seqs(), 0
            self._scan = 0
        elif end - self._head > 2 * self._kept + 64:
            keep = [p for p in range(self._head, end) if self._find(p) is not None]
            self._order_seq = array("q", (self._order_seq[p] for p in keep))
            self._order_stream = array("q", (self._order_stream[p] for p in keep))
            self._head = self._scan = 0
        elif self._head > 64 and self._head * 2 > end:
            del self._order_seq[: self._head]
            del self._order_stream[: self._head]
            self._scan = max(0, self._scan - self._head)
            self._head = 0

    def _remember(self, state: StreamState) -> None:
        self.forgotten[state.number] = state.request_ids
        while len(self.forgotten) > _FORGOTTEN_STREAMS:
            self.forgotten.popitem(last=False)

    def requests_of(self, stream: int) -> tuple[RequestId, ...]:
        """The requests a stream carries (or carried, if recently forgotten)."""
        state = self.streams.get(stream)
        if state is not None:
            return state.request_ids
        return self.forgotten.get(stream, ())

    def release(self) -> None:
        """Drop every entry at once: the session has ended and nobody will read them.

        Their memory is freed now, not when the cycle collector reaches whatever still
        refers to the log (TM-SESS-IDLE). Streams stay, empty; the counters stay as they were.
        """
        self._order_seq, self._order_stream, self._head = _seqs(), _seqs(), 0
        self._scan = 0
        self._kept = 0
        self._bytes = 0
        self._pinned = 0
        for state in self.streams.values():
            state._clear()

    def forget_stream(self, stream: int) -> None:
        """Drop a request stream and its entries (its request was cancelled or abandoned)."""
        state = self.streams.get(stream)
        if state is None or stream == STANDALONE_STREAM:
            return
        del self.streams[stream]
        for index in range(state.kept):
            self._kept -= 1
            self._bytes -= state.size(index) + ENTRY_OVERHEAD
            self._pinned -= state.pinned(index)
            self.evicted += 1
        state._clear()
        self._remember(state)
        self._compact()
