# The figures a legacy session reports (SessionStatistics, TM-BP-COUNTERS): its table sums
# those of the sessions it holds, and keeps those of a session that ends (SessionTotals).
from __future__ import annotations

import attrs

from .._stats import counter, gauge

__all__ = ["SessionStatistics", "SessionTotals"]


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
