# TM-SEC-BODIES: the bytes of request bodies a server holds while it reads them, counted
# across every connection, so that many clients each sending a large body slowly cannot
# hold the server's memory between them. Both HTTP edges take from the one budget.
from __future__ import annotations

from ..protocol import ErrorCode, RemoteProtocolError

__all__ = ["ByteBudget", "bodies_busy"]


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


def bodies_busy() -> RemoteProtocolError:
    """The answer to a body the budget cannot hold: 503, retry in a second."""
    return RemoteProtocolError(
        "Service Unavailable: the server is reading too many request bodies; retry later.",
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", "1"),),
    )
