# One MCP session: a supervisor task that owns the session's state, its event log and a
# nursery of request handlers (spec/sessions.md). Ending the session cancels that nursery,
# and with it every handler and every connection attached to the session: no orphans.
#
# The session is its state and its lifecycle (this file) and four parts, each a job of its
# own: its outgoing side, the log and the connections reading it (_streamout.StreamOut); its
# requests in flight (_handlers.Handlers); its requests to the client (_outbound); and the
# hooks its client's notifications run (_hooks). The legacy endpoint (_endpoint) hands it a
# POST's messages in one call (``receive``), starts their handlers in another (``start``).
from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs
import trio

from ...base._trace import TraceKind
from ...protocol import (
    JSON,
    STANDALONE_STREAM,
    ErrorCode,
    ErrorResponse,
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
from ...protocol._auth import Principal
from ...protocol._errors import resource_not_found
from ...protocol._eventlog import EventLog
from ...protocol._lifecycle import Admission, admit
from ...protocol._logging import requested_level
from ...protocol._logtext import LogLimiter
from ...protocol._methods import SUBSCRIBED, declared
from ...protocol._versions import revision_at_least
from .._describe import Attention, SessionEnd, SessionInfo, SessionRole
from .._pools import Charge, Meter, Pool
from ..store._store import ControlKind, SessionRecord, SharedState
from ._handlers import Handlers, InFlight
from ._hooks import ClientNotifications
from ._legacyport import RequestPort, SessionPort
from ._outbound import ClientRequests
from ._sessionstats import Received, SessionStatistics, SessionTotals, Started
from ._streamout import Copies, StreamOut
from ._subscriptions import Subscriptions

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...base._ports import App
    from ...protocol import CursorCodec
    from .._reqstats import RequestMetrics
    from ..backpressure._view import View

__all__ = [
    "SESSION_FOOTPRINT",
    "Received",
    "Session",
    "SessionHost",
    "SessionOwner",
    "SessionPeers",
    "Started",
]

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


class SessionOwner(Protocol):
    """What a session needs of the table it is in (the SessionTable)."""

    def used(self, session: Session) -> None:
        """The session was just used: it is the last to be evicted now (TM-SESS-CAP)."""

    def forget(self, session: Session, totals: SessionTotals | None) -> None:
        """The session has ended: out of the table; its ``totals``, given once, are kept."""


class SessionPeers(Protocol):
    """What a session needs of the other workers serving its endpoint (Peers)."""

    def forward(self, session: Session, kind: ControlKind, payload: JSON) -> None:
        """A cancellation or a client response for nothing running here: for the worker
        that runs it (TM-STORE-CONTROL)."""

    async def save(self, session: Session) -> None:
        """Store what changed in the session (TM-STORE-RECORD); raises RemoteProtocolError."""

    async def subscribe(self, session: Session, uri: str, *, added: bool) -> bool:
        """Add or remove one subscription, in the shared store first (TM-STORE-SUBS);
        False when the store refused it for their number (raises RemoteProtocolError)."""


@attrs.frozen
class SessionHost:
    """What every session of one runtime shares."""

    app: App
    config: ServerConfig
    codec: CursorCodec
    """Event ids of every session are sealed under one key."""
    owner: SessionOwner
    peers: SessionPeers
    copies: Copies
    outbound_base: int
    """The first id of the server requests this worker sends (TM-STORE-CONTROL)."""
    metrics: RequestMetrics
    handlers: Pool[Any] | None = None
    """TM-SEC-FAIR: the running handlers of the runtime, both eras (``max_handlers``)."""
    dropped_log: LogLimiter = attrs.field(factory=lambda: LogLimiter(interval=10.0))
    """TM-SEC-LOG: one line per interval for notifications dropped, whichever session."""


@attrs.frozen
class Creator:
    """Who created a session: the client's address, when known, the key of its token's
    principal ("" without authorization), and the client as the fair shares count it
    (``Unit.key``, TM-SEC-UNIT)."""

    peer: str | None
    principal: str
    unit: str = "ip:unknown"


class Session:
    """State and tasks of one session. Made by the legacy endpoint (or the cluster, for a
    session another worker created), run by its table's nursery."""

    def __init__(
        self,
        host: SessionHost,
        *,
        session_id: str,
        version: str,
        client_info: Mapping[str, Any],
        client_capabilities: Mapping[str, Any],
        server_capabilities: Mapping[str, Any],
        client_state_bytes: int = 0,
        peer: str | None = None,
        principal: str = "",
        unit: str = "ip:unknown",
        log_base: int = 0,
    ) -> None:
        self._host = host
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
        self.config = config = host.config
        self.phase = Phase.AWAITING_INITIALIZED
        # What the client made the session keep counts against its window (TM-SEC-STATE).
        self.log = EventLog(config.retention, reserved=SESSION_FOOTPRINT + client_state_bytes,
                            base=log_base)
        self.out = StreamOut(
            session_id=session_id, config=config, codec=host.codec, log=self.log,
            primes=revision_at_least(version, PRIMING_SINCE), copies=host.copies,
            spawn=self.spawn, fail_request=lambda rid: self.handlers.cancel_request(rid),
            heard=self.heard, on_cut=lambda *event: self.handlers.stream_event(*event),
        )
        self.handlers = Handlers(
            config, self.out, handle=lambda f: self._handle(RequestPort(self, f), f.request),
            spawn=self.spawn, metrics=host.metrics, ended=self.touch, heard=self.heard,
            pool=host.handlers, unit=unit,
        )
        self.outbound = ClientRequests(host.outbound_base, self.send, host.metrics.telemetry)
        self.notifications = ClientNotifications(
            session_id, config, host.app, cancel=self.handlers.cancel_request,
            elsewhere=lambda rid: host.peers.forward(self, ControlKind.CANCEL, rid),
            spawn=self.spawn, port=lambda: SessionPort(self), dropped_log=host.dropped_log,
            telemetry=host.metrics.telemetry,
        )
        #: The level the client set with logging/setLevel (None: not set, U-LOG-3).
        self.log_level: str | None = None
        #: The resources the client subscribed to (resources/subscribe).
        self.subs = Subscriptions(config, self.log)
        #: When this worker last read the session's record from a shared store.
        self._record_read = -math.inf
        self.created_at = self.last_activity = self.last_heard = trio.current_time()
        self._closed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.end_reason: SessionEnd | None = None
        #: Whether the table has been given this session's totals.
        self._tallied = False
        #: The supervisor task, once it runs (for describe()).
        self.task: trio.lowlevel.Task | None = None

    @classmethod
    def of(cls, host: SessionHost, record: SessionRecord, *, log_base: int = 0) -> Session:
        """The session ``record`` describes (made here, or taken up from a shared store)."""
        return cls(
            host, session_id=record.id, version=record.version, client_info=record.client_info,
            client_capabilities=record.client_capabilities,
            server_capabilities=record.server_capabilities,
            client_state_bytes=record.client_state_bytes, peer=record.peer,
            principal=record.principal, unit=record.unit, log_base=log_base,
        )

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
        self.out.stop_views()
        self.outbound.release()
        self.handlers.release()
        self.out.wake()
        self._leave_table()
        # After the table has its totals: the messages go at once, whatever still refers
        # to this session (TM-SESS-IDLE: expiry frees the log).
        self.out.release()

    def close(self, reason: SessionEnd) -> None:
        """End the session: its handlers are cancelled, its connections closed, its log freed."""
        if self.end_reason is None:
            self.end_reason = reason
            if self.config.tracer is not None:
                self.out.trace(TraceKind.SESSION_CLOSE, detail=reason.value)
        self.phase = Phase.CLOSED
        self.out.end()
        self._closed.set()
        # It leaves the table now, not when its supervisor next runs: a request in between
        # would count it against the cap, and might evict it again (TM-SESS-CAP); and its
        # totals are kept at once (TM-BP-COUNTERS).
        self._leave_table()

    def _leave_table(self) -> None:
        totals = None
        if not self._tallied:
            self._tallied = True
            totals = SessionTotals(
                self.statistics(), held_bytes=self.log.retained_bytes + SESSION_FOOTPRINT
            )
        self._host.owner.forget(self, totals)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> bool:
        """Run ``fn(*args)`` as a task of this session (cancelled when it ends)."""
        if self._nursery is None or self.closed:
            return False
        self._nursery.start_soon(fn, *args, name=name)
        return True

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED

    @property
    def subscriptions(self) -> set[str]:
        return self.subs.uris

    @property
    def views(self) -> Mapping[int, View]:
        return self.out.views

    @property
    def inflight(self) -> Mapping[RequestId, InFlight]:
        return self.handlers.inflight

    @property
    def idle(self) -> bool:
        """Idle: nothing in flight and no open connection (TM-SESS-IDLE)."""
        return not (self.handlers or self.out.views or self.outbound or self.handlers.waiting)

    @property
    def abandoned(self) -> bool:
        """Work in flight but no connection to deliver it on (TM-SESS-ABANDONED): how long
        since the client was last heard from decides whether it is coming back."""
        connected = self.out.views or self.handlers.waiting
        return not connected and bool(self.handlers or self.outbound)

    def evictable(self, now: float) -> bool:
        """TM-SESS-CAP: whether a full table may end this session for a new one: idle, or
        abandoned with its client silent for ``evict_abandoned_after``."""
        if self.out.views or self.handlers.waiting:
            return False
        busy = bool(self.handlers or self.outbound)
        return not busy or now - self.last_heard >= self.config.evict_abandoned_after

    def touch(self) -> None:
        self.last_activity = trio.current_time()
        self._host.owner.used(self)

    def heard(self) -> None:
        """The client showed itself: it is active, and not gone (TM-SESS-ABANDONED)."""
        self.last_activity = self.last_heard = trio.current_time()
        self._host.owner.used(self)

    # -- a POST's messages ----------------------------------------------------------------

    def receive(self, messages: Sequence[Message]) -> Received:
        """Apply the lifecycle table to a POST's messages (raises for a second initialize),
        and take its notifications and responses; its requests are returned, to start."""
        requests: list[Request] = []
        changed = False
        for message in messages:
            admission = admit(self.phase, message)
            if admission is Admission.HANDLE_AND_OPERATE:
                self.phase = Phase.OPERATING
                changed = True
            elif admission is Admission.IGNORE:
                continue  # nothing to do, but the client showed itself (TM-SESS-IDLE)
            if isinstance(message, Request):
                requests.append(message)
            elif isinstance(message, Notification):
                self.notifications.receive(message)
            else:
                self.receive_response(message)
        # Heard (the POST's endpoint told the table when it looked the session up).
        self.last_activity = self.last_heard = trio.current_time()
        return Received(tuple(requests), changed)

    def start(
        self,
        requests: tuple[Request, ...],
        *,
        sse: bool,
        principal: Principal | None = None,
        peer: str | None = None, charge: Charge | None = None,
    ) -> Started:
        """Start a handler for each request ``receive`` returned (raises RemoteProtocolError
        when the session has no room for them, or an id is in flight): with ``sse``, their
        responses go to a new stream of the log, primed; else they are answered as JSON.
        Each holds ``charge`` (TM-SEC-MEMORY, the session's budget too) until its handler
        ends."""
        if self._nursery is None:
            raise RemoteProtocolError("Session not found: it has ended.", http_status=404)
        # Checked before a stream is opened for them: a refused POST must leave no stream
        # behind in the log (one that no response would ever end).
        self.handlers.check(requests, self.log.pinned_responses)
        if charge is not None:
            charge.attach(self.meter, requests[0].id)
        stream, priming = self.out.open(tuple(r.id for r in requests)) if sse else (None, None)
        flights = self.handlers.start(
            requests, stream=stream, principal=principal, peer=peer, charge=charge
        )
        return Started(tuple(flights), stream, priming)

    def receive_response(
        self, message: Response | ErrorResponse, *, forwarded: bool = False
    ) -> None:
        """The client's answer to a server request (``forwarded``: by another worker)."""
        if self.outbound.answer(message):
            return
        if not forwarded:
            # TM-STORE-CONTROL: it may answer another worker's request.
            self._host.peers.forward(self, ControlKind.RESPONSE, message.to_dict())
        logger.debug("response to unknown server request %r ignored", message.id)

    async def _handle(self, port: RequestPort, request: Request) -> Mapping[str, Any]:
        """The session's own methods (the method table's SESSION rows), else the App's."""
        method = request.method
        if not declared(self.server_capabilities, method):
            # L-CAP-1 (MUST) / U-PROMPT-9: only what this session negotiated is served; a
            # capability that came after its initialize is not its own.
            raise RemoteProtocolError(
                f"Method not found: {method}", code=ErrorCode.METHOD_NOT_FOUND
            )
        own = self.OWN_METHODS.get(method)
        if own is None:
            return await self._host.app.dispatch(port, request)
        return await own(self, request.params or {})

    #: The requests a session answers itself: exactly the method table's SESSION rows
    #: (tests/protocol/test_proto_methods.py checks); the functions follow the class.
    OWN_METHODS: ClassVar[Mapping[str, _OwnMethod]]

    async def set_log_level(self, level: str) -> None:
        """logging/setLevel: the level this session's log notifications start at."""
        self.log_level = level
        await self._host.peers.save(self)

    async def subscribe(self, uri: str, *, added: bool) -> None:
        """resources/subscribe (``added``) or resources/unsubscribe of ``uri``."""
        if added:
            self.subs.check(uri)
            if not self._host.app.has_resource(uri):
                raise resource_not_found(uri)
        if not await self._host.peers.subscribe(self, uri, added=added) and added:
            # TM-STORE-SUBS: the store holds more of them than this worker knew of.
            self.subs.check(uri, full=True)

    # -- what other workers keep of it (TM-STORE-RECORD) ----------------------------------

    def shared_state(self) -> SharedState:
        """What other workers must see of this session (TM-STORE-RECORD)."""
        return SharedState(initialized=self.phase is Phase.OPERATING, log_level=self.log_level)

    def record_fresh(self, now: float, within: float) -> bool:
        """Whether this worker read the session's record less than ``within`` seconds ago,
        and has not been told of a change since (TM-STORE-RECORD)."""
        return now - self._record_read < within

    def record_changed(self) -> None:
        """Another worker changed the record: read it again at the next request."""
        self._record_read = -math.inf

    def take_record(self, record: SessionRecord) -> None:
        """Take what another worker changed in the session (TM-STORE-RECORD)."""
        self._record_read = trio.current_time()
        if record.initialized and self.phase is Phase.AWAITING_INITIALIZED:
            self.phase = Phase.OPERATING
        self.log_level = record.log_level
        if record.subscriptions is not None:
            # Read because they changed since the version this worker held.
            self.subs.replace(record.subscriptions, record.subscriptions_version)

    # -- outgoing messages ----------------------------------------------------------------

    def takes(self, notification: Notification) -> bool:
        """Whether a broadcast notification is for this session: a change its initialize
        announced (L-CAP-1), and for a resource update, one it subscribed to."""
        if not declared(self.server_capabilities, notification.method):
            return False
        field = SUBSCRIBED.get(notification.method)
        if field is not None:
            # A session follows resources only (U-RES-5): what it subscribed to.
            uri = (notification.params or {}).get(field)
            return isinstance(uri, str) and uri in self.subs
        return True

    def send(self, message: Request | Notification, related: RequestId | None = None) -> bool:
        """Queue a server message: on the related request's stream, else the standalone one.

        Returns False when it had nowhere to go (a JSON-mode request, an ended session).
        """
        if self.closed:
            return False
        stream = STANDALONE_STREAM if related is None else self.handlers.stream_of(related)
        try:
            if stream is None:
                raise StreamClosedError("nowhere to go")
            self.out.append(stream, dumps(message), request=related, method=message.method)
        except StreamClosedError:
            self.out.dropped()
            return False
        return True

    async def send_paced(
        self, message: Request | Notification, *, related: RequestId | None = None
    ) -> bool:
        """``send``, then wait (bounded) while the stream's reader lags too far behind
        (TM-BP-PRODUCER: StreamOut.pace). Always a cancellation point, before the message
        goes in."""
        await trio.lowlevel.checkpoint_if_cancelled()
        sent = self.send(message, related)
        stream = STANDALONE_STREAM if related is None else self.handlers.stream_of(related)
        await self.out.pace(stream if sent else None)
        return sent

    async def request(
        self, method: str, params: Mapping[str, Any] | None, *, related: RequestId | None,
        timeout: float,
    ) -> Mapping[str, Any]:
        """Ask the client, on the stream of request ``related`` (ClientRequests.request)."""
        return await self.outbound.request(method, params, related=related, timeout=timeout)

    def holds(self, flight: InFlight) -> bool:
        return self.handlers.holds(flight)

    def close_stream_connection(self, stream: int) -> bool:
        """Close the connection attached to ``stream`` with a retry hint (SEP-1699)."""
        return self.out.close_connection(stream)

    # -- introspection --------------------------------------------------------------------

    def attention(self) -> Attention | None:
        """What the inspector highlights about this session, cheaply (without describe()):
        a view cut for stalling, its end, a handler cancelled by its client. Reads only."""
        if self.out.recent_cuts:
            return Attention.CUT
        if self.closed:
            return Attention.CLOSING
        return Attention.CANCELLED if self.handlers.cancelled_by_client() else None

    def task_roles(self) -> dict[trio.lowlevel.Task, SessionRole]:
        """Which of this session's tasks is what: its handlers and its writers."""
        return {**self.handlers.roles(self), **self.out.writer_roles(self)}

    def describe(self) -> SessionInfo:
        """The session as the inspector shows it: its supervisor task, its handlers, its
        connections and its log against its bounds. Reads only."""
        return SessionInfo(
            task=self.task, session_id=self.id, version=self.version, phase=self.phase,
            created_at=self.created_at, closed=self.closed, end_reason=self.end_reason,
            handlers=self.handlers.describe(), views=self.out.describe_views(),
            recent_cuts=tuple(self.out.recent_cuts or ()), log=self.out.describe_log(),
        )

    def statistics(self) -> SessionStatistics:
        hooks, out = self.notifications, self.out.counts
        return SessionStatistics(
            inflight=len(self.handlers), views=len(self.out.views),
            retained_events=self.log.retained_events, retained_bytes=self.log.retained_bytes,
            events_appended=self.log.appended, events_evicted=self.log.evicted,
            requests=self.handlers.started, notifications_dropped=out.notifications_dropped,
            client_notifications_dropped=hooks.dropped,
            subscriptions_refused=self.subs.refused,
            client_notifications_merged=hooks.merged,
            handlers_cut=self.handlers.cut, events_written=out.events_written,
            streams_stalled=out.streams_stalled, streams_cut=out.streams_cut,
        )


_OwnMethod = Callable[[Session, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


# -- the requests a session answers itself (Session.OWN_METHODS) --------------------------


async def _ping(session: Session, params: Mapping[str, Any]) -> Mapping[str, Any]:
    # L-PING-1 (MUST): answer promptly with an empty result.
    return {}


async def _set_level(session: Session, params: Mapping[str, Any]) -> Mapping[str, Any]:
    await session.set_log_level(requested_level(params))
    return {}


async def _subscribe(session: Session, params: Mapping[str, Any]) -> Mapping[str, Any]:
    await session.subscribe(_subscription_uri(params), added=True)
    return {}


async def _unsubscribe(session: Session, params: Mapping[str, Any]) -> Mapping[str, Any]:
    # Unsubscribing from something not subscribed is harmless: the outcome is the same.
    await session.subscribe(_subscription_uri(params), added=False)
    return {}


Session.OWN_METHODS = {
    "ping": _ping,
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
}


def _subscription_uri(params: Mapping[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RemoteProtocolError(
            "Invalid params: uri must be a non-empty string.", code=ErrorCode.INVALID_PARAMS
        )
    return uri
