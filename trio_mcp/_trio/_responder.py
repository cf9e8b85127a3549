# The runtime's view of one HTTP exchange: what it may do to answer (a complete reply, or a
# stream of chunks), and an event that fires when the client goes away. The ASGI adapter
# implements it; tests may implement it in memory.
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import trio

from ..protocol import Reply

__all__ = ["Responder"]


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
