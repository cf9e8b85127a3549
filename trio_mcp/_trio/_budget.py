# TM-SEC-BODIES: the bytes of request bodies a server holds while it reads them, counted
# across every connection, so that many clients each sending a large body slowly cannot
# hold the server's memory between them. Both HTTP edges take from the one budget.
from __future__ import annotations

import attrs

from ..protocol import ErrorCode, RemoteProtocolError
from ._stats import counter, gauge

__all__ = ["BodyStatistics", "ByteBudget", "bodies_busy"]


@attrs.frozen
class BodyStatistics:
    """The bodies of requests still arriving (TM-SEC-BODIES)."""

    bodies_refused: int = counter()
    """Requests refused because the budget was spent."""
    bodies_timed_out: int = counter()
    """Requests whose body did not arrive within the body deadline."""
    bytes_of_bodies_arriving: int = gauge()


class ByteBudget:
    """A server-wide count of bytes held, against a limit. ``take`` reserves bytes (False,
    and nothing reserved, when they would pass the limit); ``give`` returns them."""

    __slots__ = ("held", "limit", "refused", "timed_out")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        #: Requests refused because the budget was spent.
        self.refused = 0
        #: Requests whose body did not arrive within the body deadline.
        self.timed_out = 0

    def count_timeout(self) -> None:
        self.timed_out += 1

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            self.refused += 1
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size
        assert self.held >= 0, self.held

    def statistics(self) -> BodyStatistics:
        return BodyStatistics(
            bodies_refused=self.refused, bodies_timed_out=self.timed_out,
            bytes_of_bodies_arriving=self.held,
        )


def bodies_busy() -> RemoteProtocolError:
    """The answer to a body the budget cannot hold: 503, retry in a second."""
    return RemoteProtocolError(
        "Service Unavailable: the server is reading too many request bodies; retry later.",
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", "1"),),
    )
