# The records of a legacy session: the figures it reports (SessionStatistics, TM-BP-COUNTERS),
# which its table sums over the sessions it holds and keeps for a session that ends
# (SessionTotals); and what a POST asked of it and started (Received, Started).
from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .._stats import counter, gauge

if TYPE_CHECKING:
    from ...protocol import Entry, Request
    from ._handlers import InFlight

__all__ = ["Received", "SessionStatistics", "SessionTotals", "Started"]


@attrs.frozen
class SessionStatistics:
    """One session's figures (its table sums them: TM-BP-COUNTERS)."""

    inflight: int = gauge()
    views: int = gauge()
    retained_events: int = gauge()
    retained_bytes: int = gauge()
    events_appended: int = counter()
    events_evicted: int = counter()
    requests: int = counter()
    notifications_dropped: int = counter()
    client_notifications_dropped: int = counter()
    """Notifications from the client whose hooks were not run: too many were waiting
    (TM-SEC-NOTIFY)."""
    subscriptions_refused: int = counter()
    """resources/subscribe requests refused for their URI's length or their number
    (TM-SEC-STATE)."""
    client_notifications_merged: int = counter()
    """Notifications from the client identical to one already waiting for its hooks."""
    handlers_cut: int = counter()
    """Cancelled handlers that outlived ``cancel_grace`` and were let go."""
    events_written: int = counter()
    streams_stalled: int = counter()
    streams_cut: int = counter()


@attrs.frozen
class SessionTotals:
    """What an ended session leaves its table: its counters, and what it held (for the next
    memory release, TM-SESS-RELEASE)."""

    statistics: SessionStatistics
    held_bytes: int


@attrs.frozen
class Received:
    """What a POST's messages asked of the session: its requests to answer, and whether
    its record changed (notifications/initialized: stored before it is acknowledged)."""

    requests: tuple[Request, ...]
    changed: bool


@attrs.frozen
class Started:
    """A POST's requests started: their handlers, and the stream their responses go to,
    with its priming position (None and None when they are answered as JSON)."""

    flights: tuple[InFlight, ...]
    stream: int | None
    priming: Entry | None
