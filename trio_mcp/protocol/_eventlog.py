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
from collections.abc import Iterable
from typing import Final

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


@attrs.define(eq=False)
class Entry:
    seq: int
    """Position in the session's log; unique across all streams of the session (T-RESUME-2)."""
    stream: int
    kind: EntryKind
    data: bytes
    """The serialized JSON-RPC message (empty for a priming entry)."""
    at: float
    written: bool = False
    """Whether a connection has taken this entry to write it."""
    answers: RequestId | None = None
    """For a RESPONSE, the id of the request it answers."""

    @property
    def pinned(self) -> bool:
        """A response nobody has been sent yet is kept whatever the window says (TM-RES-PIN)."""
        return self.kind is EntryKind.RESPONSE and not self.written


#: What one entry costs besides its message's bytes, charged to the window so that
#: ``max_bytes`` bounds the memory a log takes, not only its payload (TM-RES-WINDOW).
#: Measured with tracemalloc in a server holding 42,086 entries of 2,117-byte messages
#: (CPython 3.11 x86-64): 2,424 bytes each, 307 beyond the message (the bytes header, the
#: Entry, its seq and timestamp, its share of the log's index and of its stream's queue);
#: rounded up for the C allocator's chunk headers.
ENTRY_OVERHEAD = 320


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


@attrs.define(eq=False)
class StreamState:
    number: int
    open_requests: set[RequestId]
    """Requests on this stream whose response is not appended yet."""
    request_ids: tuple[RequestId, ...] = ()
    """Every request the stream carries a response for (empty for the standalone stream)."""
    entries: collections.deque[Entry] = attrs.field(factory=collections.deque)
    last_seq: int = -1
    """The newest seq appended to this stream (priming included)."""
    written_through: int = -1
    """The newest seq a connection has taken from this stream."""
    lost_through: int = -1
    """The newest seq of a message of this stream that left the window unsent or unresumed."""

    @property
    def ended(self) -> bool:
        """A request stream ends once every request on it has its response (T-PSSE-10)."""
        return self.number != STANDALONE_STREAM and not self.open_requests


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

    def __init__(self, retention: Retention | None = None, *, reserved: int = 0) -> None:
        self.retention = retention or Retention()
        #: Bytes of ``max_bytes`` the log leaves to its owner: what a session takes besides
        #: its log, so that the window bounds the whole session (TM-RES-WINDOW).
        self.reserved = reserved
        self._next_seq = 0
        self._next_stream = STANDALONE_STREAM + 1
        self._entries: dict[int, Entry] = {}
        self._bytes = 0
        self.streams: dict[int, StreamState] = {
            STANDALONE_STREAM: StreamState(number=STANDALONE_STREAM, open_requests=set())
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
        entry = Entry(
            seq=self._next_seq, stream=stream, kind=kind, data=data, at=now, answers=answers
        )
        self._next_seq += 1
        self._entries[entry.seq] = entry
        self._bytes += len(data) + ENTRY_OVERHEAD
        self._pinned += entry.pinned
        state.entries.append(entry)
        state.last_seq = entry.seq
        self.appended += 1
        self.evict(now)
        return entry

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
        carried: list[Entry] = []
        if carry_unsent:
            while state.entries and state.entries[-1].seq > state.written_through:
                entry = state.entries.pop()
                del self._entries[entry.seq]
                self._pinned -= entry.pinned
                carried.append(entry)
            carried.reverse()
        priming = Entry(
            seq=self._next_seq, stream=stream, kind=EntryKind.PRIMING, data=b"", at=now,
            written=True,
        )
        self._next_seq += 1
        # A priming entry is a position, not a message: it takes no room in the window.
        state.last_seq = priming.seq
        for old in carried:
            entry = Entry(
                seq=self._next_seq, stream=stream, kind=old.kind, data=old.data, at=old.at,
                answers=old.answers,
            )
            self._next_seq += 1
            self._entries[entry.seq] = entry
            self._pinned += entry.pinned
            state.entries.append(entry)
            state.last_seq = entry.seq
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
        # Entries are in seq order; the ones a reader still needs are at the end.
        out: list[Entry] = []
        for entry in reversed(state.entries):
            if entry.seq <= after:
                break
            out.append(entry)
        out.reverse()
        return out

    def mark_written(self, entry: Entry) -> None:
        """A connection took ``entry``: it no longer pins its place in the window."""
        if entry.pinned and self._entries.get(entry.seq) is entry:
            self._pinned -= 1
        entry.written = True
        state = self.streams.get(entry.stream)
        if state is not None and entry.seq > state.written_through:
            state.written_through = entry.seq

    # -- retention ----------------------------------------------------------------------

    @property
    def retained_bytes(self) -> int:
        """What the entries take: their messages' bytes plus ENTRY_OVERHEAD each."""
        return self._bytes

    @property
    def retained_events(self) -> int:
        return len(self._entries)

    @property
    def pinned_responses(self) -> int:
        """Responses in the log that no connection has taken yet (TM-RES-PIN)."""
        return self._pinned

    def evict(self, now: float) -> int:
        """Drop entries beyond the window, oldest first, keeping unsent responses.

        Returns the number of entries dropped.
        """
        r = self.retention
        dropped = 0
        horizon = now - r.max_age
        victims: list[Entry] = []
        count, size = len(self._entries), self._bytes + self.reserved
        for entry in self._entries.values():
            if count <= r.max_events and size <= r.max_bytes and entry.at >= horizon:
                break
            if entry.pinned:
                continue
            victims.append(entry)
            count -= 1
            size -= len(entry.data) + ENTRY_OVERHEAD
        for entry in victims:
            self._drop(entry)
            dropped += 1
        return dropped

    def _drop(self, entry: Entry) -> None:
        del self._entries[entry.seq]
        self._bytes -= len(entry.data) + ENTRY_OVERHEAD
        self._pinned -= entry.pinned
        self.evicted += 1
        state = self.streams.get(entry.stream)
        if state is None:
            return
        # Entries leave in seq order, so this is the stream's head, except behind a pinned
        # response of a batch stream (several requests on one stream).
        if state.entries and state.entries[0] is entry:
            state.entries.popleft()
        else:
            state.entries.remove(entry)
        state.lost_through = max(state.lost_through, entry.seq)
        if state.ended and not state.entries:
            # An ended stream with nothing left to read is forgotten: resuming it later is
            # an explicit failure (Gap with lost_through -1), not an empty replay. Its
            # response was written, but may never have reached the client (T-PSSE-11): the
            # failure must still answer its requests, or the client's call never ends.
            del self.streams[state.number]
            self._remember(state)

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
        self._entries.clear()
        self._bytes = 0
        self._pinned = 0
        for state in self.streams.values():
            state.entries.clear()

    def forget_stream(self, stream: int) -> None:
        """Drop a request stream and its entries (its request was cancelled or abandoned)."""
        state = self.streams.pop(stream, None)
        if state is None or stream == STANDALONE_STREAM:
            if state is not None:
                self.streams[stream] = state
            return
        for entry in state.entries:
            if self._entries.pop(entry.seq, None) is not None:
                self._bytes -= len(entry.data) + ENTRY_OVERHEAD
                self._pinned -= entry.pinned
                self.evicted += 1
        state.entries.clear()
        self._remember(state)
