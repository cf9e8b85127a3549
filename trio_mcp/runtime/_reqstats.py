# Requests by method and outcome, and how long their handlers ran (TM-BP-COUNTERS), for the
# stats port's /metrics. One object per runtime, fed by outcome_of in both eras and in tasks:
# a dict increment and a bisect per request.
from __future__ import annotations

import bisect
import enum
from typing import TYPE_CHECKING, Final

from ..protocol._methods import CLIENT_REQUESTS

if TYPE_CHECKING:
    from ._telemetry import Telemetry

__all__ = ["LATENCY_BUCKETS", "Outcome", "RequestMetrics"]

#: Upper bounds of the handler-time histogram, in seconds (+Inf is implied).
LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
)

#: The methods counted under their own name; any other (a client may send any string) is
#: counted as "other", so that clients cannot grow the table.
KNOWN_METHODS: Final = CLIENT_REQUESTS


class Outcome(enum.Enum):
    OK = "ok"
    """A result (a tool's isError result included)."""
    ERROR = "error"
    """A JSON-RPC error."""
    INPUT_REQUIRED = "input_required"
    """A 2026-07-28 handler stopped to ask for input (MRTR)."""
    CANCELLED = "cancelled"
    """Cancelled: its client left or cancelled it, or the server ended it."""


class RequestMetrics:
    """Counts of requests by (method, outcome), and a histogram of handler time by method."""

    def __init__(self, telemetry: Telemetry | None = None) -> None:
        #: OpenTelemetry, when it is on (trio_mcp.runtime._telemetry): outcome_of runs each
        #: request under its span; legacy sessions report their duration.
        self.telemetry = telemetry
        self.counts: dict[tuple[str, Outcome], int] = {}
        #: Per method: a count per bucket (the last one is +Inf), then the sum of seconds.
        self.buckets: dict[str, list[int]] = {}
        self.seconds: dict[str, float] = {}

    def record(self, method: str, outcome: Outcome, seconds: float) -> None:
        name = method if method in KNOWN_METHODS else "other"
        key = (name, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1
        buckets = self.buckets.get(name)
        if buckets is None:
            buckets = self.buckets[name] = [0] * (len(LATENCY_BUCKETS) + 1)
            self.seconds[name] = 0.0
        buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.seconds[name] += seconds
