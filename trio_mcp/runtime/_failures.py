# What a guard caught, logged without letting a client fill the log (spec/security.md
# TM-SEC-ISOLATE, TM-SEC-LOG). Every connection of every port runs under a guard
# (trio_mcp.edges._http.HttpServer._connection; hypercorn's, through
# trio_mcp.edges._hypercorn.isolate_connections), and every request's handler under another
# (_handler.outcome_of, _runtime.Runtime.serve_guarded): what one raises ends that connection
# or answers that request with an internal error, and is logged here. What a guard catches is
# a bug, of trio-mcp or of a library under it, so the first failure from each place is logged
# with its traceback; a client that repeats what triggers it gets one line per place and
# interval, with a count, not one per attempt.
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from ..protocol._logtext import LogLimiter

__all__ = ["FailureLog", "leaf"]

#: Places told apart, at most; failures from further places share one limiter.
_MAX_PLACES: Final = 64


def leaf(exc: BaseException) -> BaseException:
    """The first exception of ``exc`` that is not a group (trio's nurseries group what
    their tasks raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _place(exc: BaseException) -> tuple[str, str, int]:
    """Where ``exc`` was raised: its type, and the file and line of its innermost frame."""
    tb = exc.__traceback__
    if tb is None:
        return type(exc).__qualname__, "?", 0
    while tb.tb_next is not None:
        tb = tb.tb_next
    return type(exc).__qualname__, tb.tb_frame.f_code.co_filename, tb.tb_lineno


class FailureLog:
    """Logs what a guard caught, at ``level``: per place (exception type, file and line it
    was raised at), the first with its traceback, then at most one line per ``interval``
    seconds that counts those not logged."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        level: int = logging.ERROR,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._level = level
        self._what = what
        self._interval = interval
        self._clock = clock
        self._places: dict[tuple[str, str, int], LogLimiter] = {}
        self._others = LogLimiter(interval, clock)
        #: Failures caught, in all.
        self.count = 0

    def caught(self, exc: BaseException | None, *, context: str = "") -> None:
        """Log ``exc`` (if its place's turn has come); ``context`` says what raised it."""
        if exc is None:
            return
        self.count += 1
        failure = leaf(exc)
        place = _place(failure)
        limiter = self._places.get(place)
        first = limiter is None
        if limiter is None:
            if len(self._places) >= _MAX_PLACES:
                limiter = self._others
                first = False
            else:
                limiter = self._places[place] = LogLimiter(self._interval, self._clock)
        tail = limiter.tail(f"like it in {self._interval:.0f} s")
        if tail is None:
            return
        where = f"{place[1]}:{place[2]}" + (f" in {context}" if context else "")
        if first:
            self._logger.log(
                self._level,
                "%s: %r at %s",
                self._what, failure, where, exc_info=failure,
            )
        else:
            self._logger.log(
                self._level,
                "%s again: %r at %s%s",
                self._what, failure, where, tail,
            )
