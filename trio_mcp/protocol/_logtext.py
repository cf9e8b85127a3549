# What the server's own log may hold of a client's text, and how often one failure may be
# logged (TM-SEC-LOG). A client controls notification params, cancellation reasons and
# ids: verbatim they could forge log lines (newlines) or fill the disk (length, repetition).
# No I/O: the caller logs.
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["CLIENT_TEXT_LIMIT", "LogLimiter", "printable"]

#: Characters of a client's text a log line shows at most.
CLIENT_TEXT_LIMIT: Final = 200


def printable(value: object, limit: int = CLIENT_TEXT_LIMIT) -> str:
    """``value`` for a log line: its repr (quotes, and escapes for newlines and every other
    control character), cut to ``limit`` characters with the length that was cut."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


class LogLimiter:
    """Lets one log record through per ``interval`` seconds and counts the others, so that a
    client repeating what fails costs one line per interval, not one per attempt.

    ``allow()`` says whether to log now; ``suppressed`` is how many were held back since
    the last record let through (to say so in it). ``tail()`` does both, for the usual use.
    """

    __slots__ = ("_clock", "_next", "interval", "suppressed")

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._next = -float("inf")
        self.suppressed = 0

    def allow(self) -> bool:
        now = self._clock()
        if now < self._next:
            self.suppressed += 1
            return False
        self._next = now + self.interval
        return True

    def take_suppressed(self) -> int:
        """How many records were held back since the last one let through; resets it."""
        count, self.suppressed = self.suppressed, 0
        return count

    def tail(self, what: str = "") -> str | None:
        """None when this record is held back; else the end of its line: how many like it
        were held back since the last one, " (N more WHAT not logged)", or "" if none."""
        if not self.allow():
            return None
        more = self.take_suppressed()
        return f" ({more} more {what + ' ' if what else ''}not logged)" if more else ""
