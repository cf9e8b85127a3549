# The runtime's view of one HTTP exchange: what it may do to answer (a complete reply, or a
# stream of chunks), and an event that fires when the client goes away. The ASGI adapter
# implements it; tests may implement it in memory.
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

import trio

from ..protocol import Reply

__all__ = ["Responder", "watching_disconnect"]


class Responder(Protocol):
    disconnected: trio.Event
    """Set when the client has closed the connection."""

    async def reply(self, reply: Reply) -> None:
        """Send a complete response."""

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        """Send the status line and headers of a streamed response."""

    async def write(self, data: bytes) -> None:
        """Send one chunk of a streamed response."""

    async def end(self) -> None:
        """Finish a streamed response."""


@contextlib.asynccontextmanager
async def watching_disconnect(
    responder: Responder, callback: Callable[[], None]
) -> AsyncIterator[None]:
    """Call ``callback`` if the client goes away while the block runs.

    A responder with an ``on_disconnect(callback)`` method (the ASGI one) calls it from the
    task that already watches the connection; any other gets a task that waits for its
    ``disconnected`` event. A nursery and a task per request cost more than the rest of a
    small request's own work, which is why the first way exists.
    """
    register = getattr(responder, "on_disconnect", None)
    if register is not None:
        register(callback)
        yield
        return
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await responder.disconnected.wait()
            callback()

        nursery.start_soon(watch)
        yield
        nursery.cancel_scope.cancel()
