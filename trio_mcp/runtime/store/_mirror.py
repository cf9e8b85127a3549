# Request streams copied into the shared store, so that they outlive the worker holding them
# (TM-STORE-STREAMS). While the holder lives, a resume elsewhere is relayed to it and these
# copies are not read; once it is gone, a resume is answered from them and its stream ended,
# each request without a response failed explicitly.
#
# Copying follows the stream, not the client: it is written behind, in order, by one task per
# process, in batches. An event the client could have seen before its copy was written is
# harmless: a resume reads strictly after the client's cursor. What matters is that a copy
# never has a hole the reader cannot see: a change that cannot be copied (the queue is full,
# the store does not answer) is recorded as lost, and a cursor before it reads a gap, never
# the messages after it.
from __future__ import annotations

import collections
import logging
from typing import Final, Protocol

import attrs
import trio

from ...protocol import STANDALONE_STREAM, RequestId
from ...protocol._eventlog import Entry, EntryKind, EventLog
from ._store import StoreUnavailable, StreamChange, StreamCopies

__all__ = ["StreamMirror"]

logger = logging.getLogger("trio_mcp.store")

#: Changes sent to the store in one round trip.
_BATCH: Final = 256
#: How old a change must be before it is copied: a stream its client takes whole within
#: this time (a quick answer, even on a busy worker) is then not copied at all, and the
#: changes made meanwhile share the round trip.
_DELAY: Final = 0.02
#: How long copying waits after the store failed before it tries again.
_RETRY: Final = 0.5


class MirroredSession(Protocol):
    """What the mirror reads of a session when it copies: its id and its log."""

    @property
    def id(self) -> str: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def closed(self) -> bool: ...


@attrs.frozen
class _Change:
    source: MirroredSession
    stream: int
    seq: int | None
    at: float
    data: bytes = b""
    answers: RequestId | None = None


class StreamMirror:
    """Copies this process's request streams into ``store``, each copy kept ``ttl`` seconds
    after its last change. At most ``max_changes`` changes (``max_bytes`` of messages) wait
    to be copied: memory stays bounded when the store is slow (TM-BP-BOUNDED)."""

    def __init__(
        self, store: StreamCopies, *, ttl: float, max_changes: int = 4096,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.max_changes = max_changes
        self.max_bytes = max_bytes
        self._queue: collections.deque[_Change] = collections.deque()
        self._bytes = 0
        self._wake = trio.Event()
        #: Streams with a change that was not copied, by (session id, stream): the newest
        #: such seq, written as the stream's loss with its next change that is copied.
        self._holes: dict[tuple[str, int], tuple[MirroredSession, int]] = {}
        #: Streams of which a change has been copied, until their last is, by session id.
        self._copied: dict[str, set[int]] = {}
        #: Changes never copied (the queue full, the store failing): a counter.
        self.lost = 0
        #: Changes not copied because another worker had claimed their stream.
        self.refused = 0

    @property
    def pending(self) -> int:
        """Changes waiting to be copied, and streams whose loss is not yet written."""
        return len(self._queue) + len(self._holes)

    def add(self, source: MirroredSession, stream: int, entry: Entry | None) -> None:
        """Copy a change of ``stream``: ``entry`` appended, or None when it is opened."""
        if stream == STANDALONE_STREAM:
            return  # a standalone stream outlives nobody: TM-STORE-STREAMS
        now = trio.current_time()
        if entry is None:
            change = _Change(source, stream, None, now)
        else:
            answers = entry.answers if entry.kind is EntryKind.RESPONSE else None
            change = _Change(source, stream, entry.seq, now, entry.data, answers)
        if len(self._queue) >= self.max_changes or self._bytes + len(change.data) > self.max_bytes:
            self._hole(change)
            return
        self._queue.append(change)
        self._bytes += len(change.data)
        self._wake.set()

    def forget(self, session_id: str) -> None:
        """The session has ended here: what is still queued of it will not be copied."""
        self._copied.pop(session_id, None)

    def _hole(self, change: _Change) -> None:
        if change.seq is None:
            return  # the next change carries what an opening says
        self.lost += 1
        key = (change.source.id, change.stream)
        held = self._holes.get(key)
        self._holes[key] = (change.source, max(change.seq, -1 if held is None else held[1]))

    def _op(self, change: _Change) -> StreamChange | None:
        """The change as the store takes it, or None when copying it is moot: its session
        ended, its stream was forgotten, or the client took the whole of it."""
        source = change.source
        state = source.log.stream(change.stream)
        key = (source.id, change.stream)
        copied = self._copied.get(source.id)
        if source.closed or state is None:
            self._holes.pop(key, None)
            if copied is not None:
                copied.discard(change.stream)
            return None
        if copied is None:
            copied = self._copied[source.id] = set()
        if (
            change.stream not in copied
            and state.ended
            and state.written_through >= state.last_seq
        ):
            # The client took all of it before any of it was copied (most quick answers,
            # thanks to _DELAY): copying it would serve no resume. Once part of a stream is
            # copied, all of it is, or a resume could find a request without its response.
            self._holes.pop(key, None)
            return None
        if state.ended and (change.seq is None or change.seq >= state.last_seq):
            copied.discard(change.stream)  # its last change
        else:
            copied.add(change.stream)
        hole = self._holes.get(key)
        return StreamChange(
            session_id=source.id,
            stream=change.stream,
            requests=state.request_ids,
            seq=change.seq,
            data=change.data,
            answers=change.answers,
            first_kept=state.first_kept,
            lost=max(state.lost_through, -1 if hole is None else hole[1]),
        )

    async def run(self) -> None:
        """Copy what is added, for ever (until cancelled)."""
        queue = self._queue
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while queue or self._holes:
                if queue:
                    # Each change waits until it is _DELAY old, under load too: what comes
                    # meanwhile goes in the same round trip, and a stream whose client
                    # takes the whole of it at once is not copied at all.
                    wait = queue[0].at + _DELAY - trio.current_time()
                    if wait > 0:
                        await trio.sleep(wait)
                now = trio.current_time()
                changes: list[_Change] = []
                while queue and len(changes) < _BATCH and queue[0].at + _DELAY <= now:
                    change = queue.popleft()
                    self._bytes -= len(change.data)
                    changes.append(change)
                if not changes:
                    if queue:
                        continue  # not old enough yet (the clock is read once more)
                    # Nothing else waits: say what was lost of each stream with a hole.
                    changes = [_Change(src, stream, None, now) for (_, stream), (src, _) in
                               list(self._holes.items())[:_BATCH]]
                ops = [(c, op) for c in changes if (op := self._op(c)) is not None]
                if not ops:
                    continue
                try:
                    done = await self.store.copy([op for _, op in ops], self.ttl)
                except StoreUnavailable:
                    for change, _ in ops:
                        self._hole(change)
                    await trio.sleep(_RETRY)
                    continue
                for (change, op), copied in zip(ops, done, strict=True):
                    key = (change.source.id, change.stream)
                    hole = self._holes.get(key)
                    if not copied:
                        # Another worker claimed it: its holder was thought gone.
                        self.refused += 1
                        self._holes.pop(key, None)
                    elif hole is not None and hole[1] <= op.lost:
                        del self._holes[key]
