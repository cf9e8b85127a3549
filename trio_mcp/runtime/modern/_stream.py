# An SSE response that keeps nothing: the stream of a 2026-07-28 request or listener
# (spec/modern.md MT-SSE-6: no ids, no resumption). Events go to the connection's writer as
# they come; a reader too slow for the stall rule is cut (TM-BP-STALL), and since nothing is
# kept for it, being cut ends its request or subscription, as a closed connection does
# (MU-CANCEL-1).
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from ...protocol import RemoteProtocolError, encode_comment
from ...protocol._transport import SSE_HEADERS
from ..backpressure._responder import Responder
from ..backpressure._writer import ConnectionWriter, write_grain

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from .._pools import Charge

__all__ = ["EventStream"]

#: How often a busy stream judges its reader (as a legacy view does).
_CHECK_EVERY: Final = 0.25


class EventStream:
    """One streamed response of a modern request or listener.

    ``spawn`` starts a task outside the HTTP exchange's own (the writer, and this stream's
    watcher): a write stuck on a client that stopped reading must not keep the exchange from
    returning, which is what closes the connection under hypercorn (TM-BP-RELEASE).
    """

    def __init__(
        self,
        responder: Responder,
        config: ServerConfig,
        *,
        spawn: Callable[..., bool],
        on_cut: Callable[[], None],
        max_pending: int = 64,
        charge: Charge | None = None,
    ) -> None:
        self._responder = responder
        self._config = config
        self._spawn = spawn
        self._on_cut = on_cut
        self._max_pending = max_pending
        #: Events offered while the writer had no room: bounded, never a queue that grows
        #: with a slow reader (TM-BP-BOUNDED).
        self._pending: collections.deque[bytes] = collections.deque()
        #: TM-SEC-MEMORY: the pending events' bytes are charged to the request (a listen's),
        #: and a reader whose backlog its client's budget cannot hold is cut.
        self._charge = charge
        self._writer: ConnectionWriter | None = None
        self._changed = trio.Event()
        self._opening = trio.Lock()
        self.cut = False
        """Set when the reader was cut for draining too slowly."""
        self.closed = False
        self.lost = False
        """Set when the stream closed with events not yet written to its connection."""

    @property
    def started(self) -> bool:
        return self._writer is not None

    def _ring(self) -> None:
        self._changed.set()

    def _arm(self) -> trio.Event:
        if self._changed.is_set():
            self._changed = trio.Event()
        return self._changed

    async def open(self) -> bool:
        """Send the status line and headers (once); False if the stream cannot start."""
        async with self._opening:
            if self._writer is not None or self.closed:
                return not self.closed
            await self._responder.start_stream(200, SSE_HEADERS)
            cfg = self._config
            writer = ConnectionWriter(
                self._responder,
                window=cfg.stall_budget,
                max_write=write_grain(cfg.min_read_rate, cfg.stall_budget),
                on_progress=self._ring,
            )
            self._writer = writer
            if not (self._spawn(writer.run, name="mcp:writer") and self._spawn(
                self._watch, writer, name="mcp:stream-watch"
            )):
                self.close()
                return False
            return True

    def offer(self, data: bytes) -> bool:
        """Queue one event without waiting; False if the stream is closed, or cut because
        its reader fell more than ``max_pending`` events behind."""
        writer = self._writer
        if self.closed or writer is None:
            return False
        if not self._pending and writer.has_room:
            writer.submit(data)
        elif len(self._pending) < self._max_pending and self._charged(len(data)):
            self._pending.append(data)
        else:
            self._cut()
            return False
        self._ring()
        return True

    def _charged(self, nbytes: int) -> bool:
        if self._charge is None:
            return True
        try:
            self._charge.grow(nbytes)
        except RemoteProtocolError:
            return False
        return True

    def _take_pending(self) -> bytes:
        data = self._pending.popleft()
        if self._charge is not None:
            self._charge.shrink(len(data))
        return data

    async def send(self, data: bytes) -> bool:
        """Queue one event once the writer has room: a handler that sends faster than its
        reader reads is slowed to the reader's pace (TM-BP-PRODUCER), and the stall rule
        bounds the wait."""
        writer = self._writer
        while not self.closed and writer is not None and (self._pending or not writer.has_room):
            await self._arm().wait()
        return self.offer(data)

    async def finish(self, data: bytes | None) -> bool:
        """Send the last event, wait (bounded by the stall rule) until it is written, and
        end the response. A cut stream is not ended: the connection closes instead. Whether
        every event, the last included, was written to the connection (TM-TASK-WITHDRAW: a
        CreateTaskResult that was not is withdrawn)."""
        writer = self._writer
        if writer is None or self.closed:
            return False
        if data is not None and not await self.send(data):
            return False
        while not self.closed and (self._pending or not writer.idle):
            await self._arm().wait()
        if self.cut or writer.finished.is_set() or self._responder.disconnected.is_set():
            self.close()
            return not self.lost
        self.close()
        with trio.move_on_after(self._config.signal_timeout) as cs:
            cs.shield = True
            await self._responder.end()
        return not self.lost

    def close(self) -> None:
        """Stop the stream; what is still queued is dropped."""
        if self.closed:
            return
        self.closed = True
        self.lost = bool(self._pending) or (self._writer is not None and not self._writer.idle)
        while self._pending:
            self._take_pending()
        if self._writer is not None:
            self._writer.close()
        self._ring()

    def _cut(self) -> None:
        if self.closed:
            return
        self.cut = True
        self.close()
        self._on_cut()

    async def _watch(self, writer: ConnectionWriter) -> None:
        """Feed the writer from the pending events, judge the reader while the writer is
        busy, and send a keep-alive comment when the stream is idle."""
        cfg = self._config
        while not self.closed:
            while self._pending and writer.has_room:
                writer.submit(self._take_pending())
            if writer.finished.is_set() or self._responder.disconnected.is_set():
                self.close()
                return
            changed = self._arm()
            if writer.idle and not self._pending:
                with trio.move_on_after(cfg.keepalive_interval) as idle:
                    await changed.wait()
                if idle.cancelled_caught and writer.idle and not self.closed:
                    writer.submit(encode_comment("keep-alive"))
                continue
            with trio.move_on_after(_CHECK_EVERY):
                await changed.wait()
            # TM-BP-STALL: busy for the whole budget and still under the minimum rate.
            if writer.stalled_for(trio.current_time(), cfg.min_read_rate) >= cfg.stall_budget:
                self._cut()
