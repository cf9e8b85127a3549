# What the runtime's live objects say about themselves, for the inspector (trio_mcp._inspect):
# small frozen records that `describe()` methods of Session, View, ConnectionWriter, the
# SessionManager, ModernExchange and TaskRun return. They are read-only snapshots: building
# one changes nothing in the object it describes, and nothing here runs unless someone asks.
#
# Each record names the trio task that does the work it describes (``task``), so that the
# inspector can hang the record on the task it finds in trio's own task tree
# (trio.lowlevel.current_root_task(), Task.child_nurseries, Nursery.child_tasks) instead of
# drawing a tree of its own.
from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import trio

    from ..protocol import RequestId

__all__ = [
    "ExchangeInfo",
    "HandlerInfo",
    "LogInfo",
    "ManagerInfo",
    "SessionInfo",
    "TaskRunInfo",
    "ViewInfo",
    "WriterInfo",
]


@attrs.frozen(kw_only=True)
class WriterInfo:
    """A connection's writer (trio_mcp._trio._writer.ConnectionWriter)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    bytes_queued: int
    """Bytes handed to the writer and not yet written: queued chunks and the rest of the
    chunk on the wire."""
    chunks_queued: int
    bytes_written: int
    busy_since: float | None
    """trio time the writer last went from idle to busy (None while idle)."""
    paced: bool
    """Writes held to the reader's window (TM-BP-PACE)."""
    probing: bool
    """Judged by the kernel's count of acknowledged bytes (TM-BP-STALL)."""
    stalled_for: float
    """The busy time behind a drain rate under the minimum, at the view's last check."""
    judgement: str
    """"idle", "draining", "slow" (under the minimum rate, within the budget) or
    "stalled" (past the budget: its view cuts it), as of the view's last check."""
    finished: bool


@attrs.frozen(kw_only=True)
class ViewInfo:
    """One SSE connection reading one stream of a session's log (trio_mcp._trio._view.View)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    """The HTTP request's task (a connection task of trio-mcp's own server)."""
    stream: int
    cursor: int
    """The seq of the last entry handed to the writer."""
    delivered: int
    """The seq of the last entry the connection took."""
    lag: int
    """Messages appended to the stream and not yet taken by the connection."""
    stopping: bool
    """Its cancel scope has been cancelled (the view is being ended)."""
    end_reason: str | None
    """Why it ended or is ending ("stalled": cut for draining too slowly)."""
    ended_at: float | None
    writer: WriterInfo | None


@attrs.frozen(kw_only=True)
class HandlerInfo:
    """A request a legacy session is handling (trio_mcp._trio._session.InFlight)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    request_id: RequestId
    method: str
    stream: int | None
    """The log stream its response goes to; None when it is answered as application/json."""
    cancel_called: bool
    """Its cancel scope has been cancelled (by the client, a resumption gap, the session)."""
    cancelled_by_client: bool


@attrs.frozen(kw_only=True)
class LogInfo:
    """A session's event log against its bounds (TM-RES-WINDOW)."""

    events: int
    bytes: int
    max_events: int
    max_bytes: int
    max_age: float
    appended: int
    evicted: int


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One legacy session (trio_mcp._trio._session.Session)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    """Its supervisor task (Session.run)."""
    session_id: str
    version: str
    phase: str
    created_at: float
    closed: bool
    end_reason: str | None
    handlers: tuple[HandlerInfo, ...]
    views: tuple[ViewInfo, ...]
    recent_cuts: tuple[ViewInfo, ...]
    """The last few views cut for stalling, newest last, as they were when cut (without
    their task or writer: their connections may be gone)."""
    log: LogInfo


@attrs.frozen(kw_only=True)
class ManagerInfo:
    """The session manager (trio_mcp._trio._manager.SessionManager)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    sessions: int
    max_sessions: int
    shutting_down: bool


@attrs.frozen(kw_only=True)
class ExchangeInfo:
    """A 2026-07-28 request being handled on its own exchange (ModernExchange)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    request_id: RequestId
    method: str
    cancel_called: bool
    streaming: bool
    """Its answer has become an SSE stream."""


@attrs.frozen(kw_only=True)
class TaskRunInfo:
    """A tools/call of the tasks extension (trio_mcp._trio._tasks.TaskRun)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    task_id: str
    method: str
    status: str
    """The task's status, or "deciding" before it is published."""
    cancel_called: bool
