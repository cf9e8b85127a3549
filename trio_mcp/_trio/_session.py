# One MCP session: a supervisor task that owns the session's state, its event log and a
# nursery of request handlers (spec/sessions.md). Ending the session cancels that nursery,
# and with it every handler and every connection attached to the session: no orphans.
from __future__ import annotations

import collections
import itertools
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from .._ports import ClientCapabilityError, ClientTimeoutError, NotificationHandler
from .._trace import TraceKind, TraceRecord
from ..protocol import (
    STANDALONE_STREAM,
    Cursor,
    EntryKind,
    ErrorCode,
    ErrorResponse,
    Gap,
    LocalProtocolError,
    Message,
    Notification,
    Phase,
    RemoteProtocolError,
    Request,
    RequestId,
    Response,
    StreamClosedError,
    dumps,
)
from ..protocol._auth import Principal
from ..protocol._capabilities import announces, declares
from ..protocol._errors import resource_not_found
from ..protocol._eventlog import EventLog
from ..protocol._jsonrpc import parse_message
from ..protocol._lifecycle import Admission, admit
from ..protocol._logging import DEFAULT_LOG_LEVEL, requested_level
from ..protocol._logtext import LogLimiter, printable
from ..protocol._mrtr import InputRequest, check_input_response
from ..protocol._sse import encode_event
from ..protocol._versions import revision_at_least
from ._describe import HandlerInfo, LogInfo, SessionInfo, ViewInfo
from ._handler import outcome_of
from ._mirror import StreamMirror
from ._pools import Charge, Meter
from ._reqstats import RequestMetrics
from ._store import Control, ControlKind, SessionRecord, SharedState
from ._view import View, ViewEnd, gap_event

if TYPE_CHECKING:
    from .._config import ServerConfig
    from .._ports import App
    from ..protocol import JSON, CursorCodec

__all__ = ["InFlight", "Session", "SessionOwner", "SessionPort", "SessionStats"]

logger = logging.getLogger("trio_mcp.session")

#: What a session takes besides its log's entries: the Session and its stream states, its
#: supervisor task and nursery, their cancel scopes and events, and what an HTTP server
#: keeps of its connections (benchmarks/BACKPRESSURE-NOTES.md has the figures). It is
#: left out of the log's share of the window (TM-RES-WINDOW), so that
#: ``Retention.max_bytes`` bounds a whole session, and counted towards a memory release
#: when the session ends (TM-SESS-RELEASE).
SESSION_FOOTPRINT = 28 * 1024

#: First revision whose clients accept an empty-data priming event (see T-PSSE-1's note).
PRIMING_SINCE = "2025-11-25"


@attrs.define(eq=False)
class InFlight:
    """A client request being handled."""

    request: Request
    stream: int | None
    """The log stream its response goes to; None when it is answered as application/json."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: Message | None = None
    cancelled_by_client: bool = False
    principal: Principal | None = None
    """Who the request's access token speaks for (None without authorization)."""
    task: trio.lowlevel.Task | None = None
    """The handler's task, once it runs (for describe())."""
    charge: Charge | None = None
    """What the request is charged (TM-SEC-MEMORY), held until the handler's task ends."""


@attrs.define(eq=False)
class Outbound:
    """A request this server sent to the client, waiting for its response."""

    request_id: int
    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    response: Response | ErrorResponse | None = None


#: At most this many sends of a session follow each other without a schedule point
#: (TM-BP-PRODUCER): what a handler holds the event loop for is a few messages' work.
SENDS_PER_SCHEDULE_POINT = 16


@attrs.define
class SessionStats:
    requests: int = 0
    notifications_dropped: int = 0
    client_notifications_dropped: int = 0
    """Notifications from the client whose hooks were not run: too many were waiting
    (TM-SEC-NOTIFY)."""
    subscriptions_refused: int = 0
    """resources/subscribe requests refused for their URI's length or their number
    (TM-SEC-STATE)."""
    client_notifications_merged: int = 0
    """Notifications from the client identical to one already waiting for its hooks."""
    handlers_cut: int = 0
    """Cancelled handlers that outlived ``cancel_grace`` and were let go (see _cut_after_grace)."""
    events_written: int = 0


@attrs.frozen
class Creator:
    """Who created a session: the client's address, when known, the key of its token's
    principal ("" without authorization), and the client as the fair shares count it
    (``Unit.key``, TM-SEC-UNIT)."""

    peer: str | None
    principal: str
    unit: str = "ip:unknown"


@attrs.define(slots=True)
class _HookQueue:
    """A session's notifications waiting for their hooks (TM-SEC-NOTIFY): by key (method
    and params as JSON), in arrival order; their keys' bytes; whether a task runs them."""

    waiting: dict[str, tuple[NotificationHandler, dict[str, Any]]] = attrs.field(factory=dict)
    bytes: int = 0
    running: bool = False


class SessionOwner(Protocol):
    """What a session needs of the manager that created it (the SessionManager)."""

    @property
    def app(self) -> App: ...

    @property
    def codec(self) -> CursorCodec: ...

    def forget(self, session: Session) -> None:
        """The session has ended: take it out of the table and keep its totals."""

    def count_stall(self) -> None: ...

    def used(self, session: Session) -> None:
        """The session was just used: it is the last to be evicted now (TM-SESS-CAP)."""

    @property
    def dropped_notifications_log(self) -> LogLimiter:
        """TM-SEC-LOG: one line per interval for notifications dropped, whichever
        session dropped them."""

    def count_cut(self) -> None: ...

    @property
    def requests(self) -> RequestMetrics:
        """Requests by method and outcome, and their handlers' time (/metrics)."""

    @property
    def outbound_base(self) -> int:
        """The first id of the server requests this process sends (TM-STORE-CONTROL)."""

    def forward(self, session: Session, kind: ControlKind, payload: JSON) -> None:
        """Pass a cancellation or a client response on to the other workers."""

    async def save_shared(self, session: Session) -> None:
        """Store what changed in the session (TM-STORE-RECORD); raises RemoteProtocolError."""

    async def subscribe(self, session: Session, uri: str, *, added: bool) -> bool:
        """Add or remove one subscription, in the shared store first (TM-STORE-SUBS);
        False when the store refused it for their number (raises RemoteProtocolError)."""

    @property
    def mirror(self) -> StreamMirror | None:
        """Where request streams are copied for other workers (TM-STORE-STREAMS); None
        when nothing is shared."""


class Session:
    """State and tasks of one session. Created by the SessionManager, run by its nursery."""

    def __init__(
        self,
        *,
        manager: SessionOwner,
        session_id: str,
        version: str,
        client_info: Mapping[str, Any],
        client_capabilities: Mapping[str, Any],
        server_capabilities: Mapping[str, Any],
        client_state_bytes: int = 0,
        peer: str | None = None,
        principal: str = "",
        unit: str = "ip:unknown",
        config: ServerConfig,
        log_base: int = 0,
    ) -> None:
        self.manager = manager
        self.id = session_id
        self.version = version
        #: Who created it: the client's address and unit (TM-SESS-CAP, TM-SEC-UNIT) and
        #: principal (TM-AUTH-BIND).
        self.creator = Creator(peer=peer, principal=principal, unit=unit)
        #: TM-SEC-MEMORY: what its requests in flight are charged.
        self.meter = Meter()
        self.client_info = dict(client_info)
        self.client_capabilities = dict(client_capabilities)
        #: What the server declared in this session's InitializeResult: the session holds to
        #: it, whatever is registered later (L-CAP-1).
        self.server_capabilities = dict(server_capabilities)
        self.config = config
        self.phase = Phase.AWAITING_INITIALIZED
        # What the client made the session keep counts against its window (TM-SEC-STATE).
        self.log = EventLog(
            config.retention, reserved=SESSION_FOOTPRINT + client_state_bytes, base=log_base
        )
        self.inflight: dict[RequestId, InFlight] = {}
        self.outbound: dict[int, Outbound] = {}
        self.views: dict[int, View] = {}
        #: JSON-mode POSTs waiting, with their client connected, for their handlers: open
        #: connections of the session as much as views are (TM-SESS-ABANDONED).
        self.json_waiting = 0
        self.stats = SessionStats()
        #: The level the client set with logging/setLevel (None: not set, U-LOG-3).
        self.log_level: str | None = None
        #: The resource URIs the client subscribed to (resources/subscribe).
        self.subscriptions: set[str] = set()
        #: The version of them last read from a shared store (TM-STORE-SUBS).
        self.subscriptions_version = 0
        self.created_at = trio.current_time()
        self.last_activity = self.created_at
        #: When the client last showed itself: a request naming this session, or a
        #: connection of it ending (TM-SESS-ABANDONED).
        self.last_heard = self.created_at
        self._outbound_ids = itertools.count(manager.outbound_base)
        #: Sends since the last one that was a schedule point (TM-BP-PRODUCER).
        self._sends_unscheduled = 0
        self._mirror = manager.mirror
        #: When this worker last read the session's record from a shared store.
        self._record_read = -math.inf
        self._changed = trio.Event()
        self._progress = trio.Event()
        self._closed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.end_reason: str | None = None
        #: Whether the manager has added this session's counters to its totals.
        self.tallied = False
        #: Request streams that were forgotten, with their request ids, so that a late
        #: resume of one can still fail its requests explicitly (TM-RES-STALE).
        self._stream_requests: dict[int, tuple[RequestId, ...]] = {}
        #: Notifications from the client waiting for their hooks, in arrival order, by
        #: their key (method and params as JSON); one task runs them, one at a time, and
        #: one identical to a waiting one is merged into it (TM-SEC-NOTIFY).
        self._hooks: _HookQueue | None = None
        #: The supervisor task, once it runs (for describe()).
        self.task: trio.lowlevel.Task | None = None
        #: The last few views cut for stalling (made on the first cut; for describe()).
        self._recent_cuts: collections.deque[ViewInfo] | None = None

    # -- supervision --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The session's supervisor: runs until the session is closed."""
        self.task = trio.lowlevel.current_task()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._closed.wait()
                # The session ends for the client now, before the nursery waits for its
                # handlers: one that shields itself from cancellation delays only its own
                # task, not the end of the connections (TM-CANCEL-GRACE).
                self._teardown()
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            self._teardown()

    def _teardown(self) -> None:
        self.phase = Phase.CLOSED
        for view in list(self.views.values()):
            view.stop(ViewEnd.SERVER_CLOSED)
        for out in self.outbound.values():
            out.done.set()
        for flight in self.inflight.values():
            # A cancelled handler never reaches its own done.set(): wake whoever waits on
            # it (a JSON-mode POST), which then finds the session closed.
            flight.done.set()
        self._wake()
        self.manager.forget(self)
        # After the manager has tallied its counters: the messages go at once, whatever
        # still refers to this session (TM-SESS-IDLE: expiry frees the log).
        self.log.release()

    def close(self, reason: str) -> None:
        """End the session: its handlers are cancelled, its connections closed, its log freed."""
        if self.end_reason is None:
            self.end_reason = reason
            if self.config.tracer is not None:
                self.trace(TraceKind.SESSION_CLOSE, detail=reason)
        self.phase = Phase.CLOSED
        self._closed.set()
        # It leaves the manager's table now, not when its supervisor next runs: a request
        # in between would count it against the cap, and might evict it again (TM-SESS-CAP);
        # and its totals are kept at once (TM-BP-COUNTERS).
        self.manager.forget(self)

    @property
    def app(self) -> App:
        return self.manager.app

    @property
    def codec(self) -> CursorCodec:
        """The manager's: event ids of every session are sealed under one key."""
        return self.manager.codec

    @property
    def peer(self) -> str | None:
        return self.creator.peer

    @property
    def principal(self) -> str:
        return self.creator.principal

    @property
    def unit(self) -> str:
        return self.creator.unit

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED

    @property
    def idle(self) -> bool:
        """Idle: nothing in flight and no open connection (TM-SESS-IDLE)."""
        return not self.inflight and not self.views and not self.outbound and not self.json_waiting

    @property
    def abandoned(self) -> bool:
        """Work in flight but no connection to deliver it on (TM-SESS-ABANDONED): how long
        since the client was last heard from decides whether it is coming back."""
        return not self.views and not self.json_waiting and bool(self.inflight or self.outbound)

    def evictable(self, now: float) -> bool:
        """TM-SESS-CAP: whether a full table may end this session for a new one: idle, or
        abandoned with its client silent for ``evict_abandoned_after``."""
        if self.views or self.json_waiting:
            return False
        busy = bool(self.inflight or self.outbound)
        return not busy or now - self.last_heard >= self.config.evict_abandoned_after

    def touch(self) -> None:
        self.last_activity = trio.current_time()
        self.manager.used(self)

    def heard(self) -> None:
        """The client showed itself: it is active, and not gone (TM-SESS-ABANDONED)."""
        self.last_activity = self.last_heard = trio.current_time()
        self.manager.used(self)

    # -- the log and its readers --------------------------------------------------------

    def changed_event(self) -> trio.Event:
        """An event that fires at the next append (or detach) in this session."""
        return self._changed

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        for view in self.views.values():
            view.log_changed()

    def notify_progress(self) -> None:
        """A connection took an event: producers waiting on a slow reader may go on."""
        self._progress.set()
        self._progress = trio.Event()

    def takes(self, notification: Notification) -> bool:
        """Whether a broadcast notification is for this session: a change its initialize
        announced (L-CAP-1), and for a resource update, one it subscribed to."""
        if not announces(self.server_capabilities, notification.method):
            return False
        if notification.method == "notifications/resources/updated":
            uri = (notification.params or {}).get("uri")
            return isinstance(uri, str) and uri in self.subscriptions
        return True

    def wrote(self, events: int) -> None:
        self.stats.events_written += events

    def stream_stalled(self) -> None:
        self.manager.count_stall()

    def stream_cut(self, view: View | None = None) -> None:
        self.manager.count_cut()
        if view is not None:
            if self._recent_cuts is None:
                self._recent_cuts = collections.deque(maxlen=3)
            # Kept for the session's life: without the tasks, which are over soon.
            self._recent_cuts.append(attrs.evolve(view.describe(), task=None, writer=None))

    @property
    def primes(self) -> bool:
        """Whether this session's SSE streams start with a priming event (TM-RES-PRIME)."""
        return revision_at_least(self.version, PRIMING_SINCE)

    def attach_view(self, view: View) -> None:
        old = self.views.get(view.stream)
        if old is not None and old is not view:
            # Never one stream on two connections (T-MULTI-2): the older one is detached.
            old.stop(ViewEnd.DETACHED, send_retry=False)
        self.views[view.stream] = view
        if self.config.tracer is not None:
            self.trace(TraceKind.ATTACH, conn=id(view.responder), stream=view.stream,
                       seq=view.cursor)

    def detach_view(self, view: View) -> None:
        if self.views.get(view.stream) is view:
            del self.views[view.stream]
        if self.config.tracer is not None:
            self.trace(TraceKind.DETACH, conn=id(view.responder), stream=view.stream,
                       seq=view.delivered, detail=view.end_reason or ViewEnd.SERVER_CLOSED)
        # The client held this connection until now.
        self.heard()
        # TM-BP-PRODUCER: a handler paced to this reader's speed stops waiting the moment
        # the reader is gone (cut, left or detached), not when producer_wait runs out.
        self.notify_progress()

    def gap_signal(self, stream: int, gap: Gap, cursor: int) -> bytes:
        """What a connection gets when its cursor has left the window (TM-RES-STALE).

        A named SSE event for anyone reading the wire, then, for a request stream, an error
        response for each of its requests still unanswered on this connection, so that the
        client's pending call fails at once with a clear message instead of hanging.
        """
        state = self.log.stream(stream)
        details = {
            "stream": stream,
            "lastEventId": self.codec.encode(self.id, Cursor(stream, cursor))
            if cursor >= 0
            else None,
            "reason": "events after this cursor have left the server's replay window",
        }
        out = gap_event(details)
        if stream == STANDALONE_STREAM:
            return out
        if state is not None:
            # A request answered at or before the cursor has its response on the client
            # already (a batch stream): it must not get a second one.
            answered = {e.answers for e in state.entries if e.seq <= cursor}
            request_ids: tuple[RequestId, ...] = tuple(
                r for r in state.request_ids if r not in answered
            )
        else:
            request_ids = self._stream_requests.get(stream) or self.log.requests_of(stream)
        for rid in request_ids:
            err = ErrorResponse(
                id=rid,
                code=ErrorCode.RESUMPTION_FAILED,
                message="Resumption failed: messages of this request's stream were lost "
                "from the server's replay window; the request's outcome is unknown.",
                data=details,
            )
            out += encode_event(data=dumps(err).decode())
            flight = self.inflight.get(rid)
            if flight is not None:
                # The client has been given a final answer: the handler's work is moot.
                self.cancel_flight(flight)
        if state is not None:
            self._forget_stream(stream)
        return out

    def _forget_stream(self, stream: int) -> None:
        state = self.log.stream(stream)
        if state is not None:
            self._stream_requests[stream] = tuple(state.request_ids)
            if len(self._stream_requests) > 4 * self.config.max_inflight_requests:
                self._stream_requests.pop(next(iter(self._stream_requests)))
        self.log.forget_stream(stream)

    # -- incoming messages --------------------------------------------------------------

    def admit(self, message: Message) -> Admission:
        """Apply the lifecycle table to ``message`` (raises for a second initialize)."""
        admission = admit(self.phase, message)
        if admission is Admission.HANDLE_AND_OPERATE:
            self.phase = Phase.OPERATING
        return admission

    def shared_state(self) -> SharedState:
        """What other workers must see of this session (TM-STORE-RECORD)."""
        return SharedState(initialized=self.phase is Phase.OPERATING, log_level=self.log_level)

    def record_fresh(self, now: float, within: float) -> bool:
        """Whether this worker read the session's record less than ``within`` seconds ago,
        and has not been told of a change since (TM-STORE-RECORD)."""
        return now - self._record_read < within

    def record_changed(self, change: JSON = None) -> None:
        """Another worker changed the record: read it again at the next request; or, for
        one subscription added or removed (TM-STORE-SUBS), take that change, if it is the
        next after the version this worker holds."""
        if isinstance(change, dict):
            uri, added, version = change.get("uri"), change.get("added"), change.get("version")
            if isinstance(uri, str) and isinstance(added, bool) and isinstance(version, int):
                if version <= self.subscriptions_version:
                    return  # seen already
                if version == self.subscriptions_version + 1:
                    self.subscribed(uri, added=added, version=version)
                    return
        self._record_read = -math.inf

    def subscribed(self, uri: str, *, added: bool, version: int | None = None) -> None:
        """One subscription added or removed, here or at another worker (``version``: the
        subscriptions' version after it, TM-STORE-SUBS)."""
        if added and uri not in self.subscriptions:
            self.subscriptions.add(uri)
            self.log.reserve(len(uri.encode("utf-8")))
        elif not added and uri in self.subscriptions:
            self.subscriptions.discard(uri)
            self.log.reserve(-len(uri.encode("utf-8")))
        if version is not None:
            self.subscriptions_version = version

    def refresh(self, record: SessionRecord) -> None:
        """Take what another worker changed in the session (TM-STORE-RECORD)."""
        self._record_read = trio.current_time()
        if record.initialized and self.phase is Phase.AWAITING_INITIALIZED:
            self.phase = Phase.OPERATING
        self.log_level = record.log_level
        if record.subscriptions is not None:
            # Read because they changed since the version this worker held.
            if record.subscriptions != self.subscriptions:
                size = sum(len(u.encode("utf-8")) for u in record.subscriptions)
                self.log.reserve(size - sum(len(u.encode("utf-8")) for u in self.subscriptions))
                self.subscriptions = set(record.subscriptions)
            self.subscriptions_version = record.subscriptions_version

    def apply_control(self, control: Control) -> None:
        """What another worker passed on for this session (TM-STORE-CONTROL)."""
        if control.kind is ControlKind.CANCEL:
            rid = control.payload
            flight = self.inflight.get(rid) if isinstance(rid, str | int) else None
            if flight is not None and flight.request.method != "initialize":
                self.cancel_flight(flight)
        elif control.kind is ControlKind.RESPONSE:
            try:
                message = parse_message(control.payload)
            except RemoteProtocolError:
                return
            if isinstance(message, Response | ErrorResponse):
                self.receive_response(message, forwarded=True)

    def receive_notification(self, note: Notification) -> None:
        self.heard()
        if note.method == "notifications/cancelled":
            params = note.params or {}
            rid = params.get("requestId")
            flight = self.inflight.get(rid) if isinstance(rid, str | int) else None
            if flight is None and isinstance(rid, str | int):
                # TM-STORE-CONTROL: it may be running in another worker.
                self.manager.forward(self, ControlKind.CANCEL, rid)
            # U-CANCEL-5 / U-CANCEL-9: unknown, finished or malformed: ignored.
            if flight is not None and flight.request.method != "initialize":
                # TM-SEC-LOG: the reason is the client's text, escaped and cut.
                logger.info(
                    "request %s cancelled by the client: %s",
                    printable(rid), printable(params.get("reason", "")),
                )
                self.cancel_flight(flight)
            return
        handler = self.app.notification_handler(note.method)
        if handler is not None:
            self._queue_hook(note.method, handler, dict(note.params or {}))

    def _queue_hook(
        self, method: str, handler: NotificationHandler, params: dict[str, Any]
    ) -> None:
        """TM-SEC-NOTIFY: a client's notifications cost the session one task and a
        bounded queue, however many it sends: the hooks run one at a time, in order; one
        identical to a notification still waiting is merged into it (a list changed twice
        is fetched once), and past ``max_pending_notifications`` waiting, or their bytes
        past a sixteenth of the session's window, the newest is dropped and counted."""
        key = method + "\n" + json.dumps(params, sort_keys=True, separators=(",", ":"))
        hooks = self._hooks
        if hooks is None:
            # Made on the first notification with a hook: most sessions never get one.
            hooks = self._hooks = _HookQueue()
        waiting = hooks.waiting
        if key in waiting:
            self.stats.client_notifications_merged += 1
            return
        cfg = self.config
        budget = cfg.retention.max_bytes // 16
        if (
            len(waiting) >= cfg.max_pending_notifications
            or hooks.bytes + len(key) > budget
        ):
            self.stats.client_notifications_dropped += 1
            tail = self.manager.dropped_notifications_log.tail("dropped,")
            if tail is not None:
                logger.warning(
                    "session %s: notification %s dropped: %d already wait for their hooks%s",
                    self.id[:8], printable(method), len(waiting), tail,
                )
            return
        waiting[key] = (handler, params)
        hooks.bytes += len(key)
        if not hooks.running and self.spawn(self._run_hooks, hooks, name="mcp:notification-hooks"):
            hooks.running = True

    async def _run_hooks(self, hooks: _HookQueue) -> None:
        try:
            while hooks.waiting:
                key = next(iter(hooks.waiting))
                handler, params = hooks.waiting.pop(key)
                hooks.bytes -= len(key)
                await handler(SessionPort(self), params)
        finally:
            hooks.running = False

    def receive_response(
        self, message: Response | ErrorResponse, *, forwarded: bool = False
    ) -> None:
        if not forwarded:
            self.heard()
        rid = message.id
        out = self.outbound.pop(rid, None) if isinstance(rid, int) else None
        if out is None and not forwarded:
            # TM-STORE-CONTROL: it may answer another worker's request.
            self.manager.forward(self, ControlKind.RESPONSE, message.to_dict())
        if out is None:
            logger.debug("response to unknown server request %r ignored", rid)
            return
        out.response = message
        out.done.set()

    def check_capacity(self, count: int) -> None:
        pinned = self.log.pinned_responses
        if len(self.inflight) + pinned + count > self.config.max_inflight_requests:
            raise RemoteProtocolError(
                "Too many requests in flight in this session; retry later.",
                code=ErrorCode.SERVER_BUSY,
                http_status=503,
                headers=(("retry-after", "1"),),
            )

    def check_request_ids(self, requests: tuple[Request, ...]) -> None:
        """Refuse requests whose ids are in flight, or repeated within one batch.

        J-ID-3 (MUST NOT, client): ids are not reused within a session. Two requests with one
        id in a single 2025-03-26 batch count too: their responses could not be told apart,
        and one would overwrite the other's in-flight entry.
        """
        seen: set[RequestId] = set()
        for req in requests:
            if req.id in self.inflight or req.id in seen:
                why = "is already in flight" if req.id in self.inflight else "repeats in this batch"
                raise RemoteProtocolError(
                    f"Invalid Request: request id {req.id!r} {why}.",
                    request_id=req.id,
                )
            seen.add(req.id)

    def start_requests(
        self,
        requests: tuple[Request, ...],
        *,
        stream: int | None,
        principal: Principal | None = None,
        charge: Charge | None = None,
    ) -> list[InFlight]:
        """Start a handler task for each request, in this session's nursery; each holds
        ``charge`` (TM-SEC-MEMORY) until its task ends."""
        if self._nursery is None:
            raise RemoteProtocolError(
                "Session not found: it has ended.", http_status=404
            )
        self.check_request_ids(requests)
        flights = []
        for req in requests:
            flight = InFlight(request=req, stream=stream, principal=principal, charge=charge)
            if charge is not None:
                charge.hold()
            self.inflight[req.id] = flight
            self.stats.requests += 1
            run = self._run_handler if self.config.tracer is None else self._run_traced
            self._nursery.start_soon(run, flight, name=f"mcp:{req.method}")
            flights.append(flight)
        self.heard()
        return flights

    async def _run_traced(self, flight: InFlight) -> None:
        """_run_handler, told to the tracer: its start, and its end however it ends."""
        req = flight.request
        self.trace(TraceKind.HANDLER_START, request=req.id, method=req.method)
        ending = "cancelled"
        try:
            await self._run_handler(flight)
            ending = "cancelled" if flight.cancelled_by_client else "returned"
        finally:
            self.trace(TraceKind.HANDLER_END, request=req.id, method=req.method, detail=ending)

    def trace(self, kind: TraceKind, **fields: Any) -> None:
        """Tell the tracer (there is one: callers check) what this session did."""
        assert self.config.tracer is not None
        self.config.tracer.record(TraceRecord(kind=kind, session=self.id, **fields))

    async def _run_handler(self, flight: InFlight) -> None:
        req = flight.request
        flight.task = trio.lowlevel.current_task()
        port = RequestPort(self, flight)
        outcome: Message | None = None
        try:
            with flight.scope:
                outcome = await outcome_of(
                    lambda: self._handle(port, req), req, self.manager.requests
                )
        finally:
            if flight.charge is not None:
                # TM-SEC-MEMORY: the handler's task, and what it held, is done.
                flight.charge.drop()
        if self.inflight.get(req.id) is flight:
            del self.inflight[req.id]
        if flight.cancelled_by_client or outcome is None:
            # U-CANCEL-4 (SHOULD): no response for a cancelled request. Its stream ends.
            if flight.stream is not None and (state := self.log.stream(flight.stream)):
                state.open_requests.discard(req.id)
            flight.done.set()
            self._wake()
            return
        self._deliver(flight, outcome)

    async def _handle(self, port: RequestPort, request: Request) -> Mapping[str, Any]:
        """The session's own methods, else the App's method table."""
        method = request.method
        params = request.params or {}
        if method == "ping":
            # L-PING-1 (MUST): answer promptly with an empty result.
            return {}
        if method == "logging/setLevel":
            self.log_level = requested_level(params)
            await self.manager.save_shared(self)
            return {}
        if not declares(self.server_capabilities, method):
            # L-CAP-1 (MUST) / U-PROMPT-9: only what this session negotiated is served; a
            # capability that came after its initialize is not its own.
            raise RemoteProtocolError(
                f"Method not found: {method}", code=ErrorCode.METHOD_NOT_FOUND
            )
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise RemoteProtocolError(
                    "Invalid params: uri must be a non-empty string.",
                    code=ErrorCode.INVALID_PARAMS,
                )
            if method == "resources/unsubscribe":
                # Unsubscribing from something not subscribed is harmless: the outcome is
                # the same.
                await self.manager.subscribe(self, uri, added=False)
                return {}
            self._check_subscription(uri)
            if not self.app.has_resource(uri):
                raise resource_not_found(uri)
            if not await self.manager.subscribe(self, uri, added=True):
                # TM-STORE-SUBS: the store holds more of them than this worker knew of.
                self._check_subscription(uri, full=True)
            return {}
        return await self.app.dispatch(port, request)

    def _check_subscription(self, uri: str, *, full: bool = False) -> None:
        """TM-SEC-STATE: a subscription is kept for the session's life, so its URI and
        their number are bounded (``full``: the store says it has the most already)."""
        cfg = self.config
        if len(uri.encode("utf-8")) > cfg.max_uri_bytes:
            self.stats.subscriptions_refused += 1
            raise RemoteProtocolError(
                f"Invalid params: the uri is longer than {cfg.max_uri_bytes} bytes.",
                code=ErrorCode.INVALID_PARAMS,
            )
        if full or (
            uri not in self.subscriptions and len(self.subscriptions) >= cfg.max_subscriptions
        ):
            self.stats.subscriptions_refused += 1
            held = cfg.max_subscriptions if full else len(self.subscriptions)
            raise RemoteProtocolError(
                f"Invalid params: this session already has {held} "
                "subscriptions, the most this server keeps; unsubscribe from one first.",
                code=ErrorCode.INVALID_PARAMS,
            )

    def cancel_flight(self, flight: InFlight) -> None:
        """Cancel a request whose answer the client no longer wants (U-CANCEL-4).

        Its handler is cancelled at once and no response is sent. A handler that shields
        itself from cancellation is let go after ``config.cancel_grace`` seconds (see
        ``_cut_after_grace``).
        """
        flight.cancelled_by_client = True
        flight.scope.cancel()
        if self.config.tracer is not None:
            self.trace(TraceKind.CANCEL, request=flight.request.id, method=flight.request.method)
        if self._nursery is not None and not flight.done.is_set():
            self._nursery.start_soon(self._cut_after_grace, flight)

    async def _cut_after_grace(self, flight: InFlight) -> None:
        """TM-CANCEL-GRACE: bound what a cancelled handler can hold.

        trio cannot pierce a shielded cancel scope from outside, so the task itself runs on
        until it leaves its shield. What the session can take back, it takes back here:
        the request's in-flight slot (max_inflight_requests), its stream (which ends), and
        the idle check that lets the session expire. Ending the session never waits for it.
        """
        with trio.move_on_after(self.config.cancel_grace):
            await flight.done.wait()
        if flight.done.is_set():
            return
        rid = flight.request.id
        logger.warning(
            "handler for %s (request %r) ignored its cancellation for %g s; its slot is freed",
            flight.request.method, rid, self.config.cancel_grace,
        )
        self.stats.handlers_cut += 1
        if self.inflight.get(rid) is flight:
            del self.inflight[rid]
        if flight.stream is not None and (state := self.log.stream(flight.stream)):
            state.open_requests.discard(rid)
        flight.done.set()
        self._wake()

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> bool:
        """Run ``fn(*args)`` as a task of this session (cancelled when it ends)."""
        if self._nursery is None or self.closed:
            return False
        self._nursery.start_soon(fn, *args, name=name)
        return True

    def _deliver(self, flight: InFlight, outcome: Message) -> None:
        if flight.stream is None:
            flight.outcome = outcome
        else:
            try:
                entry = self.log.append(
                    flight.stream,
                    dumps(outcome),
                    now=trio.current_time(),
                    kind=EntryKind.RESPONSE,
                    answers=flight.request.id,
                )
                if self._mirror is not None:
                    self._mirror.add(self, flight.stream, entry)
                if self.config.tracer is not None:
                    self.trace(TraceKind.APPEND, stream=flight.stream, seq=entry.seq,
                               request=flight.request.id, detail=_outcome_label(outcome))
            except StreamClosedError:
                logger.debug("response to %r has no stream left", flight.request.id)
        flight.done.set()
        self.touch()
        self._wake()

    # -- outgoing messages --------------------------------------------------------------

    def send(self, message: Request | Notification, *, related: RequestId | None = None) -> bool:
        """Queue a server message: on the related request's stream, else the standalone one.

        Returns False when it had nowhere to go (a JSON-mode request, an ended session).
        """
        if self.closed:
            return False
        stream = STANDALONE_STREAM
        if related is not None:
            flight = self.inflight.get(related)
            if flight is None:
                # U-PROG-11 / U-PROG-7: nothing goes out for a request that has finished.
                self.stats.notifications_dropped += 1
                return False
            if flight.stream is None or flight.cancelled_by_client:
                # U-CANCEL-4: a cancelled request's handler sends nothing more.
                self.stats.notifications_dropped += 1
                return False
            stream = flight.stream
        try:
            entry = self.log.append(stream, dumps(message), now=trio.current_time())
        except StreamClosedError:
            self.stats.notifications_dropped += 1
            return False
        if self._mirror is not None:
            self._mirror.add(self, stream, entry)
        if self.config.tracer is not None:
            self.trace(TraceKind.APPEND, stream=stream, seq=entry.seq, request=related,
                       method=message.method)
        self._wake()
        return True

    async def send_paced(
        self, message: Request | Notification, *, related: RequestId | None = None
    ) -> bool:
        """``send``, then wait while the stream's attached reader lags too far behind.

        TM-BP-PRODUCER: a handler that emits faster than a healthy reader drains is slowed
        to the reader's pace, for at most ``producer_wait`` per message; memory stays bounded
        either way (the log is bounded), this only keeps a live reader inside the window.
        With no reader attached nothing waits: the log evicts within its window.
        """
        # TM-BP-PRODUCER: always a cancellation point, before the message goes in. Then a
        # schedule point, as trio's own functions have, unless a reader is attached to the
        # stream and the session's last SENDS_PER_SCHEDULE_POINT sends had one: a handler
        # looping over sends never holds the event loop (and every other session with it)
        # for more than a few messages, and a reader that keeps up takes them a batch at a
        # time, not with a turn of the scheduler for each.
        await trio.lowlevel.checkpoint_if_cancelled()
        sent = self.send(message, related=related)
        stream: int | None = STANDALONE_STREAM
        if related is not None:
            flight = self.inflight.get(related)
            stream = None if flight is None else flight.stream
        view = None if not sent or stream is None else self.views.get(stream)
        self._sends_unscheduled += 1
        if view is None or self._sends_unscheduled >= SENDS_PER_SCHEDULE_POINT:
            self._sends_unscheduled = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        if view is None or stream is None:
            return sent
        cfg = self.config
        limit = cfg.max_stream_lag or max(1, cfg.retention.max_events // 2)
        wait = cfg.producer_wait if cfg.producer_wait is not None else cfg.stall_budget
        # The window is counted in events and in bytes: large events would push a reader's
        # unsent messages out of it by their bytes while their count still looks small.
        byte_limit = max(1, cfg.retention.max_bytes // 2)

        def behind() -> bool:
            return view.lags_beyond(limit, byte_limit)

        if not behind():
            return True
        with trio.move_on_after(wait):
            while self.views.get(stream) is view and behind():
                await self._progress.wait()
        return True

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        related: RequestId | None,
        timeout: float,
    ) -> Mapping[str, Any]:
        """Send a request to the client and wait for its result.

        Raises:
            RemoteProtocolError: the client answered with an error, never answered within
                ``timeout``, or the request could not be sent.
        """
        rid = next(self._outbound_ids)
        out = Outbound(request_id=rid, method=method)
        self.outbound[rid] = out
        try:
            if not self.send(Request(id=rid, method=method, params=params), related=related):
                raise RemoteProtocolError(
                    f"Cannot send {method}: the request has no stream to carry it (JSON "
                    "response mode) or the session has ended.",
                    code=ErrorCode.INTERNAL_ERROR,
                )
            with trio.move_on_after(timeout if math.isfinite(timeout) else math.inf):
                await out.done.wait()
            if out.response is None:
                if not out.done.is_set():
                    # L-TIME-2 (SHOULD): on timeout, cancel the request and stop waiting.
                    self.send(
                        Notification(
                            method="notifications/cancelled",
                            params={"requestId": rid, "reason": "timed out"},
                        ),
                        related=related,
                    )
                    raise ClientTimeoutError(
                        f"The client did not answer {method} within {timeout:g} s.",
                        code=ErrorCode.INTERNAL_ERROR,
                    )
                raise RemoteProtocolError(
                    f"The session ended before the client answered {method}.",
                    code=ErrorCode.INTERNAL_ERROR,
                )
            if isinstance(out.response, ErrorResponse):
                raise RemoteProtocolError(
                    f"The client answered {method} with an error: {out.response.message}",
                    code=out.response.code,
                    data=out.response.data,
                )
            return out.response.result
        finally:
            self.outbound.pop(rid, None)

    def close_stream_connection(self, stream: int) -> bool:
        """Close the connection attached to ``stream`` with a retry hint (SEP-1699 polling).

        T-PSSE-2 (MAY): once an event id has gone out, the server may close the connection
        without ending the stream; the client resumes with GET and Last-Event-ID.
        """
        if not self.primes:
            # T-PSSE-15 (SHOULD NOT, before 2025-11-25): a stream is not closed before its
            # response; polling (SEP-1699) came with 2025-11-25, as priming did.
            return False
        view = self.views.get(stream)
        if view is None or view.delivered < 0:
            # Without an event id the client has no cursor to resume from: closing would
            # lose the stream, so it stays open.
            return False
        view.stop(ViewEnd.SERVER_CLOSED)
        return True

    def attention(self) -> str | None:
        """What the inspector highlights about this session, cheaply (without describe()):
        "cut" (a view of it was cut for stalling), "cancelled" (a handler's cancel scope was
        cancelled), "closing", or None. Reads only."""
        if self._recent_cuts:
            return "cut"
        if self.closed:
            return "closing"
        # A handler's scope is cancelled by cancel_flight (which marks it) or by the session's
        # end (closed, above): the mark is the cheap question.
        for flight in self.inflight.values():
            if flight.cancelled_by_client:
                return "cancelled"
        return None

    def describe(self) -> SessionInfo:
        """The session as the inspector shows it: its supervisor task, its handlers, its
        connections and its log against its bounds. Reads only."""
        retention = self.config.retention
        return SessionInfo(
            task=self.task,
            session_id=self.id,
            version=self.version,
            phase=self.phase.value,
            created_at=self.created_at,
            closed=self.closed,
            end_reason=self.end_reason,
            handlers=tuple(
                HandlerInfo(
                    task=f.task,
                    request_id=f.request.id,
                    method=f.request.method,
                    stream=f.stream,
                    cancel_called=f.scope.cancel_called,
                    cancelled_by_client=f.cancelled_by_client,
                )
                for f in list(self.inflight.values())
            ),
            views=tuple(v.describe() for v in list(self.views.values())),
            recent_cuts=tuple(self._recent_cuts or ()),
            log=LogInfo(
                events=self.log.retained_events,
                bytes=self.log.retained_bytes,
                max_events=retention.max_events,
                max_bytes=retention.max_bytes,
                max_age=retention.max_age,
                appended=self.log.appended,
                evicted=self.log.evicted,
            ),
        )

    def statistics(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "phase": self.phase.value,
            "inflight": len(self.inflight),
            "views": len(self.views),
            "retained_events": self.log.retained_events,
            "retained_bytes": self.log.retained_bytes,
            "events_appended": self.log.appended,
            "events_evicted": self.log.evicted,
            **attrs.asdict(self.stats),
        }



def _outcome_label(outcome: Message) -> str:
    """How a trace names a response: a result, or an error and its code."""
    return f"error {outcome.code}" if isinstance(outcome, ErrorResponse) else "response"


class SessionPort:
    """A legacy session as a handler or hook outside any request sees it: messages go on
    the session's standalone stream (T-GET-4, T-GET-5). Implements trio_mcp._ports.SessionPort."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def session_id(self) -> str | None:
        return self._session.id

    @property
    def protocol_version(self) -> str:
        return self._session.version

    @property
    def client_info(self) -> Mapping[str, JSON]:
        return self._session.client_info

    @property
    def client_capabilities(self) -> Mapping[str, JSON]:
        return self._session.client_capabilities

    @property
    def log_threshold(self) -> str | None:
        # TM-LOG-DEFAULT: "info" until the client sets a level.
        return self._session.log_level or DEFAULT_LOG_LEVEL

    @property
    def client_request_timeout(self) -> float:
        return self._session.config.client_request_timeout

    @property
    def _related(self) -> RequestId | None:
        return None

    async def notify(self, notification: Notification) -> bool:
        # Paced: waits (bounded) while this stream's reader lags far behind (TM-BP-PRODUCER).
        return await self._session.send_paced(notification, related=self._related)

    def notify_now(self, notification: Notification) -> bool:
        return self._session.send(notification, related=self._related)

    async def request(
        self, method: str, params: Mapping[str, JSON] | None, *, timeout: float
    ) -> Mapping[str, JSON]:
        if method != "ping" and self._session.phase is Phase.AWAITING_INITIALIZED:
            # L-INIT-6 (SHOULD NOT): only pings before the client's initialized notification.
            raise LocalProtocolError(
                f"Cannot send {method} before the client sent notifications/initialized."
            )
        return await self._session.request(method, params, related=self._related, timeout=timeout)

    async def ask(
        self, requests: Mapping[str, InputRequest], *, timeout: float
    ) -> dict[str, Mapping[str, JSON]]:
        """TM-MRTR-LEGACY: each question is a request on the stream, all sent at once."""
        answers: dict[str, Mapping[str, JSON]] = {}

        async def one(key: str, question: InputRequest) -> None:
            result = await self.request(question.method, question.params, timeout=timeout)
            # A legacy client's malformed answer is the handler's to see, as before the
            # modern era: only the shape is checked, not the requested schema.
            if question.method != "elicitation/create":
                check_input_response(key, question, result)
            answers[key] = result

        if len(requests) == 1:
            [(key, question)] = requests.items()
            await one(key, question)
            return answers
        async with trio.open_nursery() as nursery:
            for key, question in requests.items():
                nursery.start_soon(one, key, question)
        return {key: answers[key] for key in requests}

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError:
        # L-CAP-1: a server bug in a session (the capabilities were negotiated): -32603.
        what = ", ".join(
            f"{name}.{feature}" if isinstance(features, Mapping) and features else name
            for name, features in required.items()
            for feature in (features if isinstance(features, Mapping) and features else [""])
        )
        return ClientCapabilityError(
            f"The client did not declare the {what} capability.",
            data={"missingCapability": what},
        )


class RequestPort(SessionPort):
    """One request of a legacy session: messages go on its own stream (T-PSSE-8).
    Implements trio_mcp._ports.RequestPort."""

    def __init__(self, session: Session, flight: InFlight) -> None:
        super().__init__(session)
        self._flight = flight

    @property
    def _related(self) -> RequestId | None:
        return self._flight.request.id

    @property
    def finished(self) -> bool:
        return self._flight.done.is_set() or self._session.inflight.get(
            self._flight.request.id
        ) is not self._flight

    @property
    def page_size(self) -> int:
        return self._session.config.page_size

    @property
    def principal(self) -> Principal | None:
        return self._flight.principal

    def close_stream(self) -> bool:
        stream = self._flight.stream
        if stream is None or self.finished:
            return False
        return self._session.close_stream_connection(stream)
