# What the runtime's live objects say about themselves, for the inspector
# (trio_mcp.edges.observe._inspect):
# small frozen records that `describe()` methods of Session, View, ConnectionWriter, the
# SessionTable, ModernExchange and TaskRun return, and the words they say it in (enums: why a
# session or a connection ended, how a writer's reader is judged, what the inspector
# highlights). They are read-only snapshots: building one changes nothing in the object it
# describes, and nothing here runs unless someone asks.
#
# Each record names the trio task that does the work it describes (``task``), so that the
# inspector can hang the record on the task it finds in trio's own task tree
# (trio.lowlevel.current_root_task(), Task.child_nurseries, Nursery.child_tasks) instead of
# drawing a tree of its own. ``Runtime.describe_tree()`` says which task is what (TaskRole).
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..protocol import Phase
from ..protocol._tasks import TaskStatus

if TYPE_CHECKING:
    import trio

    from ..protocol import RequestId

__all__ = [
    "Attention",
    "DescribedSession",
    "ExchangeInfo",
    "HandlerInfo",
    "Judgement",
    "LogInfo",
    "ObjectRole",
    "RoleKind",
    "RuntimeInfo",
    "SessionEnd",
    "SessionInfo",
    "SessionRole",
    "TableInfo",
    "TaskRole",
    "TaskRunInfo",
    "TreeIndex",
    "ViewEnd",
    "ViewInfo",
    "WriterInfo",
]


class SessionEnd(enum.Enum):
    """Why a legacy session ended (TM-SESS-*)."""

    EXPIRED = "expired"
    """Idle past its time to live (TM-SESS-IDLE)."""
    RELEASED = "released"
    """Idle here, let go by this worker; it lives on in the shared store (TM-STORE-RECORD)."""
    ENDED_ELSEWHERE = "ended-elsewhere"
    """Ended at another worker, or gone from the shared store (TM-STORE-CONTROL)."""
    EVICTED = "evicted"
    """Taken for another client's by a full table or store (TM-SESS-CAP, TM-STORE-BOUND)."""
    DELETED = "deleted"
    """Its client ended it with DELETE (T-SESS-9)."""
    ABANDONED = "abandoned"
    """Work in flight and its client gone for too long (TM-SESS-ABANDONED)."""
    SHUTDOWN = "shutdown"
    """The server stopped (TM-SESS-SHUTDOWN)."""


class ViewEnd(enum.Enum):
    """Why a connection reading a stream (a View) stopped."""

    COMPLETE = "complete"
    """The stream ended after its last response (T-PSSE-10)."""
    CLIENT_GONE = "client-gone"
    DETACHED = "detached"
    """Another connection re-attached to the stream (T-MULTI-2)."""
    SERVER_CLOSED = "server-closed"
    """Polling close (SEP-1699), session end or shutdown."""
    GAP = "gap"
    """The cursor fell outside the window (TM-RES-STALE)."""
    STALLED = "stalled"
    """The reader drained too slowly for too long (TM-BP-STALL)."""
    EVICTED = "evicted"
    """A full streams pool took it for another client (TM-SEC-FAIR)."""


class Judgement(enum.Enum):
    """How a connection's writer judges its reader, as of the view's last check."""

    IDLE = "idle"
    DRAINING = "draining"
    SLOW = "slow"
    """Under the minimum rate, within the stall budget."""
    STALLED = "stalled"
    """Past the budget: its view cuts it (TM-BP-STALL)."""


class Attention(enum.Enum):
    """What the inspector highlights, most serious first (``Attention.order``)."""

    CUT = "cut"
    STALLED = "stalled"
    CANCELLED = "cancelled"
    SLOW = "slow"
    CLOSING = "closing"

    @property
    def rank(self) -> int:
        return _ATTENTION_ORDER.index(self)


_ATTENTION_ORDER = tuple(Attention)


@attrs.frozen(kw_only=True)
class WriterInfo:
    """A connection's writer (trio_mcp.runtime.backpressure._writer.ConnectionWriter)."""

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
    judgement: Judgement
    finished: bool


@attrs.frozen(kw_only=True)
class ViewInfo:
    """One SSE connection reading one stream of a session's log (backpressure._view.View)."""

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
    end_reason: ViewEnd | None
    """Why it ended or is ending."""
    ended_at: float | None
    writer: WriterInfo | None


@attrs.frozen(kw_only=True)
class HandlerInfo:
    """A request a legacy session is handling (trio_mcp.runtime.legacy._session.InFlight)."""

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
    """One legacy session (trio_mcp.runtime.legacy._session.Session)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    """Its supervisor task (Session.run)."""
    session_id: str
    version: str
    phase: Phase
    created_at: float
    closed: bool
    end_reason: SessionEnd | None
    handlers: tuple[HandlerInfo, ...]
    views: tuple[ViewInfo, ...]
    recent_cuts: tuple[ViewInfo, ...]
    """The last few views cut for stalling, newest last, as they were when cut (without
    their task or writer: their connections may be gone)."""
    log: LogInfo


@attrs.frozen(kw_only=True)
class TableInfo:
    """The legacy sessions' table (trio_mcp.runtime.legacy._table.SessionTable)."""

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
    """A tools/call of the tasks extension (trio_mcp.runtime.tasks._tasks.TaskRun)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    task_id: str
    method: str
    status: TaskStatus | None
    """The task's status; None before it is published, while the call decides whether to
    become a task."""
    cancel_called: bool


class RoleKind(enum.Enum):
    """What a task of the runtime is, for the inspector."""

    RUNTIME = "runtime"
    TABLE = "table"
    SESSION = "session"
    VIEW = "view"
    HANDLER = "handler"
    WRITER = "writer"
    EXCHANGE = "exchange"
    TASKRUN = "taskrun"


class Described(Protocol):
    """An object that describes itself to the inspector."""

    def describe(self) -> Any: ...


class DescribedSession(Protocol):
    """A legacy session as the inspector asks it: its record, what to highlight about it
    (cheaply, for a session it does not show), and what its handlers' and writers' tasks are
    (only for a session it shows)."""

    def describe(self) -> SessionInfo: ...

    def attention(self) -> Attention | None: ...

    def task_roles(self) -> Mapping[trio.lowlevel.Task, SessionRole]: ...


@attrs.frozen(kw_only=True)
class RuntimeInfo:
    """The runtime (trio_mcp.runtime._runtime.Runtime)."""

    task: trio.lowlevel.Task | None = attrs.field(eq=False, repr=False)
    server: str | None
    """The App's name (its serverInfo)."""


@attrs.frozen
class SessionRole:
    """A task of a session: its supervisor, a view's connection, a handler or a writer;
    ``part`` is which (a handler's request id, a view's or writer's stream)."""

    kind: RoleKind
    session: DescribedSession
    part: RequestId | int | None = None


@attrs.frozen
class ObjectRole:
    """A task of the runtime, its table, a modern exchange or a task run."""

    kind: RoleKind
    owner: Described


#: What one task is.
TaskRole = SessionRole | ObjectRole


@attrs.frozen
class TreeIndex:
    """Which task is what, now (``Runtime.describe_tree()``): the roles of the runtime's own
    tasks, its sessions' supervisors and connections, its modern exchanges and task runs. A
    session's handlers and writers are told by ``DescribedSession.task_roles``, asked only for
    a session the inspector shows: a snapshot of a thousand sessions indexes the few it
    shows."""

    roles: Mapping[trio.lowlevel.Task, TaskRole]
    sessions: int
    modern_requests: int
    task_runs: int
