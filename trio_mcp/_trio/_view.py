# One SSE connection as a view of one stream of a session's log (spec/resumption.md).
#
# A view is a reader at a cursor. It writes what the log holds after the cursor, then waits
# for the next append, in one loop: replay and live tail are the same code, so there is no
# hand-over between them where a message could be doubled or dropped.
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs
import trio

from ..protocol import Cursor, Entry, EntryKind, Gap, encode_comment, encode_event
from ..protocol._transport import SSE_HEADERS
from ._responder import Responder

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["View", "ViewEnd"]


class ViewEnd:
    """Why a view stopped (for statistics and tests)."""

    COMPLETE = "complete"  # the stream ended after its last response (T-PSSE-10)
    CLIENT_GONE = "client-gone"
    DETACHED = "detached"  # another connection re-attached to the stream
    SERVER_CLOSED = "server-closed"  # polling close (SEP-1699), session end or shutdown
    GAP = "gap"  # the cursor fell outside the window


@attrs.define(eq=False)
class View:
    session: Session
    stream: int
    cursor: int
    """The seq of the last entry this view has written (or the position it attached at)."""
    responder: Responder
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    end_reason: str | None = None
    send_retry: bool = True

    def stop(self, reason: str, *, send_retry: bool = True) -> None:
        """End this connection from outside; the stream itself lives on in the log."""
        if self.end_reason is None:
            self.end_reason = reason
            self.send_retry = send_retry
        self.scope.cancel()

    def _event_id(self, seq: int) -> str:
        return self.session.codec.encode(self.session.id, Cursor(self.stream, seq))

    async def run(
        self,
        *,
        priming: Entry | None = None,
        attached_comment: bool = False,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> str:
        """Serve the connection until the stream ends, the client leaves or we stop it.

        ``priming`` is the stream's priming position, taken before anything was appended
        to the stream, so the priming event comes first on the wire.
        """
        session = self.session
        await self.responder.start_stream(200, (*SSE_HEADERS, *headers))
        if priming is not None:
            # T-PSSE-1 (SHOULD): start with an event that has an id and empty data, so the
            # client has a cursor to resume from even if nothing else arrives.
            self.cursor = max(self.cursor, priming.seq)
            await self.responder.write(encode_event(id=self._event_id(priming.seq), data=""))
        if attached_comment:
            # TM-RES-ATTACHED: a comment, which every client ignores, says where we are.
            await self.responder.write(
                encode_comment(f"attached stream={self.stream} after={self.cursor}")
            )
        with self.scope:
            self.end_reason = await self._pump()
        reason = self.end_reason or ViewEnd.SERVER_CLOSED
        session.detach_view(self)
        if reason not in (ViewEnd.COMPLETE, ViewEnd.CLIENT_GONE, ViewEnd.GAP) and self.send_retry:
            # T-PSSE-4 / T-GET-8 (SHOULD): before closing a connection whose stream goes on,
            # send a retry field so the client knows when to resume.
            with trio.move_on_after(1.0) as cs:
                cs.shield = True
                await self.responder.write(encode_event(retry=session.config.retry_ms))
        with trio.move_on_after(1.0) as cs:
            cs.shield = True
            await self.responder.end()
        return reason

    async def _pump(self) -> str:
        session = self.session
        keepalive = session.config.keepalive_interval
        while True:
            if self.responder.disconnected.is_set():
                return ViewEnd.CLIENT_GONE
            changed = session.changed_event()
            got = session.log.read_after(self.stream, self.cursor)
            if isinstance(got, Gap):
                await self._write_gap(got)
                return ViewEnd.GAP
            for entry in got:
                await self._write_entry(entry)
            state = session.log.stream(self.stream)
            if state is None or (state.ended and self.cursor >= state.last_seq):
                return ViewEnd.COMPLETE
            with trio.move_on_after(keepalive) as idle:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_set_when, changed, nursery.cancel_scope)
                    nursery.start_soon(_set_when, self.responder.disconnected, nursery.cancel_scope)
            if idle.cancelled_caught:
                await self.responder.write(encode_comment("keep-alive"))

    async def _write_entry(self, entry: Entry) -> None:
        if entry.kind is not EntryKind.PRIMING:
            await self.responder.write(
                encode_event(id=self._event_id(entry.seq), data=entry.data.decode("utf-8"))
            )
            # Marked only once the connection took it: a response whose write never finished
            # stays pinned in the window for the client's resume (TM-RES-PIN).
            self.session.log.mark_written(entry)
            self.session.stats.events_written += 1
        self.cursor = entry.seq

    async def _write_gap(self, gap: Gap) -> None:
        await self.responder.write(self.session.gap_signal(self.stream, gap, self.cursor))


async def _set_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def gap_event(details: dict[str, object]) -> bytes:
    """The named SSE event that says a resumption failed (TM-RES-STALE)."""
    return encode_event(event="resumption-failed", data=json.dumps(details, separators=(",", ":")))
