# The session manager: one nursery holding every session's supervisor task, and the code that
# turns a validated HTTP request into work for a session (spec/transport.md, spec/sessions.md).
# Every protocol decision is made by trio_mcp.protocol; this module executes them.
from __future__ import annotations

import itertools
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._config import ResponseMode
from .._trace import TraceKind, TraceRecord
from ..protocol import (
    JSON,
    STANDALONE_STREAM,
    Cursor,
    CursorCodec,
    Entry,
    EntryKind,
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
    encode_comment,
    encode_event,
)
from ..protocol._auth import Principal
from ..protocol._fair import Unit, UnitPolicy
from ..protocol._headers import Headers
from ..protocol._jsonrpc import dumps_json
from ..protocol._lifecycle import Admission, initialize_result
from ..protocol._logtext import LogLimiter
from ..protocol._methods import SUBSCRIBED
from ..protocol._sse import encode_message_event
from ..protocol._transport import (
    SSE_HEADERS,
    GetPlan,
    HttpRequest,
    PostPlan,
    Reply,
    check_batch,
    json_reply,
    method_not_allowed,
    plan_delete,
    plan_get,
    plan_legacy_post,
    session_not_found,
)
from ..protocol._versions import MODERN_VERSIONS, effective_version, negotiate
from ._announce import announced
from ._budget import BodyPool
from ._describe import ManagerInfo
from ._memory import MemoryReleaser
from ._mirror import StreamMirror
from ._pools import Charge, Pool, pool_busy
from ._relay import RelaySeal, relay
from ._reqstats import RequestMetrics
from ._responder import Responder, watching_disconnect
from ._session import SESSION_FOOTPRINT, InFlight, Session
from ._store import (
    ClaimKind,
    Control,
    ControlKind,
    CreateKind,
    MemoryStore,
    SessionRecord,
    SessionStore,
    StoredTask,
    StoreLimits,
    StoreUnavailable,
)
from ._view import View, gap_event

if TYPE_CHECKING:
    from .._config import ServerConfig
    from .._ports import App

__all__ = ["ManagerStats", "SessionManager"]

logger = logging.getLogger("trio_mcp.manager")

#: The most message bytes a request stream may hold to go out as one complete response
#: (TM-POST-ATONCE): any socket's buffers take this much at once, so the reply cannot wait
#: on its reader; a larger answer goes through a View, whose writer judges the reader.
_AT_ONCE_BYTES = 16384
#: What cancelling one running handler may cost at shutdown, in seconds: held back from the
#: grace (TM-SESS-SHUTDOWN; measured in benchmarks/ANALYSIS.md).
CANCEL_COST = 0.0003
#: The most sessions of one client an eviction looks at for an idle one (TM-SESS-CAP).
EVICTION_SCAN = 64
#: A session no worker has renewed in the shared store for this many expiry periods has
#: nothing running anywhere and no request of its client since: the store may delete it to
#: make room (TM-STORE-BOUND). Busy sessions are renewed every period (``_keep_alive``).
STORE_IDLE_PERIODS = 3


@attrs.define
class ManagerStats:
    """Totals since the server started; spec/backpressure.md (TM-BP-COUNTERS) says what each
    one counts."""

    sessions_created: int = 0
    sessions_deleted: int = 0
    sessions_expired: int = 0
    sessions_evicted: int = 0
    sessions_abandoned: int = 0
    """Sessions ended with work in flight because their client was gone (TM-SESS-ABANDONED);
    also counted in ``sessions_expired``."""
    streams_opened: int = 0
    streams_stalled: int = 0
    streams_cut: int = 0
    memory_releases: int = 0
    """Times the expiry loop handed freed memory back to the OS (TM-SESS-RELEASE)."""
    events_appended_closed: int = 0
    """Events appended by sessions that have ended (live sessions are summed on demand)."""
    events_evicted_closed: int = 0
    sessions_refused: int = 0
    """Initialize requests answered 503: the table was full and their client held its fair
    share of it or more, with no idle session of its own to give up (TM-SESS-CAP)."""
    client_state_refused: int = 0
    """Initialize requests refused for the size of their clientInfo and capabilities
    (TM-SEC-STATE)."""
    client_notifications_dropped_closed: int = 0
    """Notifications from clients of ended sessions whose hooks were not run
    (TM-SEC-NOTIFY)."""
    subscriptions_refused_closed: int = 0
    """Subscriptions refused to ended sessions (TM-SEC-STATE)."""
    sessions_adopted: int = 0
    """Sessions another worker created, taken up here for a request (TM-STORE-RECORD)."""
    sessions_released: int = 0
    """Sessions this worker stopped holding, idle here, while they live on in the shared
    store (TM-STORE-RECORD); not counted as expired."""
    store_failures: int = 0
    """Requests answered 503 because the shared store did not answer (TM-STORE-DOWN)."""
    resumes_relayed: int = 0
    """Resumes passed to the worker holding their stream (TM-STORE-STREAMS)."""
    controls_received: int = 0
    """Cancellations, client responses and session ends from other workers (TM-STORE-CONTROL),
    and change notifications made at another worker (TM-STORE-NOTIFY)."""
    resumes_from_store: int = 0
    """Resumes of a stream whose worker was gone, answered from its copy (TM-STORE-STREAMS)."""


class SessionManager:
    """Owns all sessions of one server. ``run()`` must be running for requests to be served."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        bind_hosts: list[str],
        store: SessionStore | None = None,
        on_notify: Callable[[Notification], object] | None = None,
        on_lapse: Callable[[], Any] | None = None,
        units: UnitPolicy | None = None,
        streams: Pool[Any] | None = None,
    ) -> None:
        self.app = app
        self.config = config
        #: Told when this worker's relay address had lapsed in the store (TM-STORE-TASKS):
        #: the other workers may have taken it for gone, and ended its tasks there.
        self._on_lapse = on_lapse
        #: TM-SEC-UNIT: who a client is, for the fair shares.
        self.units = units if units is not None else UnitPolicy.of(
            ipv4_prefix=config.client_ipv4_prefix,
            ipv6_prefix=config.client_ipv6_prefix,
            trusted_proxies=config.trusted_proxies,
            header=config.client_address_header,
        )
        #: TM-SEC-FAIR: the long-lived streams of both eras (the runtime's, shared with its
        #: listeners); legacy GET streams are entered here.
        self.streams: Pool[Any] = streams if streams is not None else Pool(
            "streams", config.max_streams, evict=lambda stream: stream.evict()
        )
        #: Where a change notification published by another worker goes (TM-STORE-NOTIFY):
        #: the runtime, which delivers it to every client of this worker.
        self._on_notify = on_notify
        #: Where sessions are kept besides this process's table (TM-STORE-RECORD).
        self.store: SessionStore = store or MemoryStore()
        #: Where this worker's relay port listens, once an HTTP edge has opened it.
        self._relay_address: str | None = None
        #: T-AUTH-17 / TM-STORE-STREAMS: what a relayed request carries instead of its
        #: client's credentials, under a key only the workers sharing the secret have.
        self.relay_seal = RelaySeal(config.derived_key("relay"))
        #: Every session, by id.
        self.sessions: dict[str, Session] = {}
        #: TM-SESS-CAP / TM-SEC-FAIR: the sessions by client, each's least recently used
        #: first (``used`` moves a session to the end): a full table takes from the client
        #: holding the most.
        self.pool: Pool[Session] = Pool(
            "sessions",
            config.max_sessions,
            evict=self._evicted,
            pick=self._least_needed,
            replace=self._own_idle,
        )
        # TM-RES-EVENTID / TM-WORK-SECRET: without a shared secret the key lives only in this
        # process, and cursors from before a restart (or from another worker) do not verify.
        self.codec = CursorCodec(config.derived_key("cursor"), origin=self.store.origin)
        #: Replicas of sessions created elsewhere taken up here (their logs' bases).
        self._replicas = 0
        #: Request streams copied for the other workers (TM-STORE-STREAMS).
        self._mirror = (
            StreamMirror(self.store, ttl=config.session_idle_ttl) if self.store.shared else None
        )
        self.stats = ManagerStats()
        self._dropped_notifications_log = LogLimiter(interval=10.0)
        #: TM-SEC-BODIES: bodies still arriving, server-wide and shared fairly among clients
        #: (the HTTP edges take from it).
        self.bodies = BodyPool(config.max_body_memory)
        #: Requests by method and outcome, both eras and tasks (/metrics).
        self.requests = RequestMetrics()
        self.releaser = MemoryReleaser(config.release_memory_after)
        self._nursery: trio.Nursery | None = None
        self.shutting_down = False
        #: The task of run(), once it runs (for describe()).
        self.task: trio.lowlevel.Task | None = None

    # -- lifetime -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.task = trio.lowlevel.current_task()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.store.run, self._on_control)
                if self._mirror is not None:
                    nursery.start_soon(self._mirror.run)
                self._nursery = nursery
                nursery.start_soon(self._expire_loop)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    @property
    def running(self) -> bool:
        return self._nursery is not None

    @property
    def mirror(self) -> StreamMirror | None:
        return self._mirror

    @property
    def dropped_notifications_log(self) -> LogLimiter:
        return self._dropped_notifications_log

    def used(self, session: Session) -> None:
        self.pool.touch(session)

    def count_stall(self) -> None:
        self.stats.streams_stalled += 1

    def count_cut(self) -> None:
        self.stats.streams_cut += 1

    def forget(self, session: Session) -> None:
        if self._mirror is not None:
            self._mirror.forget(session.id)
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.pool.discard(session)
        if not session.tallied:
            session.tallied = True
            # TM-SESS-RELEASE: what the session held, for the next memory release.
            self.releaser.freed(session.log.retained_bytes + SESSION_FOOTPRINT)
            self.stats.events_appended_closed += session.log.appended
            self.stats.events_evicted_closed += session.log.evicted
            self.stats.client_notifications_dropped_closed += (
                session.stats.client_notifications_dropped
            )
            self.stats.subscriptions_refused_closed += session.stats.subscriptions_refused

    async def shutdown(self, grace: float) -> int:
        """Graceful shutdown (TM-SESS-SHUTDOWN): refuse new work, close every connection
        with a retry hint, give running handlers ``grace`` seconds, then end every session
        (which cancels what is still running). Returns how many handlers that cancelled."""
        self.shutting_down = True
        closing = []
        for session in list(self.sessions.values()):
            for view in list(session.views.values()):
                view.stop("server-closed")
                closing.append(view)
        running = sum(len(s.inflight) for s in self.sessions.values())
        # Cancelling takes CPU time per handler: what it will take comes out of the grace,
        # so that the shutdown as a whole keeps to it (up to half of it is kept back).
        with trio.move_on_after(grace - min(grace / 2, CANCEL_COST * running)):
            # Each connection writes its retry field before the sessions end: ending a
            # session cancels its connections' writers, with whatever they still hold.
            for view in closing:
                await view.closed.wait()
            for session in list(self.sessions.values()):
                for flight in list(session.inflight.values()):
                    await flight.done.wait()
        left = sum(
            not flight.done.is_set()
            for session in self.sessions.values() for flight in session.inflight.values()
        )
        for session in list(self.sessions.values()):
            session.close("shutdown")
        # Let the supervisors run their teardown before the caller stops the server.
        await trio.lowlevel.checkpoint()
        return left

    async def _expire_loop(self) -> None:
        period = self._expire_period()
        while True:
            await trio.sleep(period)
            # TM-SESS-RELEASE: a period after sessions ended, when their tasks are done.
            if self.releaser.maybe_release():
                self.stats.memory_releases += 1
            self._expire_once(trio.current_time())
            if self.store.shared:
                await self._keep_alive()
                await self._advertise(period)

    def _expire_once(self, now: float) -> None:
        # A function of its own, so that no local of this sleeping loop keeps the last
        # session it looked at (and that session's log) alive after it ended (TM-SESS-IDLE).
        cfg = self.config
        for session in list(self.sessions.values()):
            session.log.evict(now)
            if not session.idle:
                # TM-SESS-ABANDONED: a handler that never returns must not keep a session
                # whose client is gone forever (T-SESS-7 lets the server end it any time).
                if (
                    cfg.abandoned_ttl is not None
                    and session.abandoned
                    and now - session.last_heard >= cfg.abandoned_ttl
                ):
                    self.stats.sessions_expired += 1
                    self.stats.sessions_abandoned += 1
                    session.close("abandoned")
                    if self.store.shared:
                        # TM-STORE-CONTROL: abandoned is an end for every worker.
                        self._spawn(self._end_elsewhere, session.id, "abandoned")
                continue
            ttl = cfg.session_idle_ttl
            if session.phase.value == "awaiting-initialized":
                ttl = min(ttl, cfg.uninitialized_ttl)
            if now - session.last_activity >= ttl:
                if self.store.shared:
                    # TM-STORE-RECORD: idle here; the shared record keeps its own expiry,
                    # renewed by whichever worker the client reaches.
                    self.stats.sessions_released += 1
                    session.close("released")
                    continue
                self.stats.sessions_expired += 1
                session.close("expired")

    async def _keep_alive(self) -> None:
        """TM-STORE-RECORD: a session with work running here stays alive in the store, its
        client silent or not; one that ended elsewhere (expired or deleted, a control
        message lost) ends here too."""
        busy = [s.id for s in self.sessions.values() if not s.idle]
        try:
            gone = await self.store.keep_alive(busy, self.config.session_idle_ttl)
        except StoreUnavailable:
            return  # counted by the requests that meet it; the next tick tries again
        for session_id in gone:
            session = self.sessions.get(session_id)
            if session is not None:
                session.close("ended-elsewhere")

    def _count_relayed(self) -> None:
        self.stats.resumes_relayed += 1

    async def locate(self, origin: str) -> str | None:
        """Where the relay port of worker ``origin`` is (raises RemoteProtocolError 503 when
        the store does not answer: TM-STORE-DOWN)."""
        address: str | None = await self._stored(self.store.locate(origin))
        return address

    async def load_task(self, task_id: str) -> StoredTask | None:
        """A task as the store last kept it (TM-STORE-TASKS; 503 when the store does not
        answer: TM-STORE-DOWN)."""
        task: StoredTask | None = await self._stored(self.store.load_task(task_id))
        return task

    async def end_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        """Keep the end of a task whose worker is gone (TM-STORE-TASKS); the end the store
        already held instead, if it held one (raises 503 when the store does not answer:
        nothing is said that was not stored)."""
        held: StoredTask | None = await self._stored(self.store.save_task(task, ttl))
        return held

    def advertise(self, host: str, port: int) -> None:
        """An HTTP edge listens for relayed resumes at ``host:port`` (TM-STORE-STREAMS)."""
        shown = f"[{host}]" if ":" in host else host
        self._relay_address = f"{shown}:{port}"
        self._spawn(self._advertise, None)

    async def _advertise(self, period: float | None) -> None:
        """Say where the relay port is, for a few expiry periods: a worker that dies is
        forgotten once they pass."""
        if self._relay_address is None:
            return
        if period is None:
            cfg = self.config
            period = max(0.05, min(cfg.session_idle_ttl, cfg.uninitialized_ttl) / 10)
        try:
            lapsed = await self.store.advertise(self._relay_address, max(4 * period, 5.0))
        except StoreUnavailable:
            return  # said again at the next tick
        if lapsed and self._on_lapse is not None:
            await self._on_lapse()

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args)

    async def _end_elsewhere(self, session_id: str, reason: str) -> None:
        try:
            await self.store.delete(session_id, reason)
        except StoreUnavailable:
            logger.warning("session %s ended here (%s) but not in the store", session_id[:8],
                           reason)

    async def _evict_elsewhere(self, session_id: str) -> None:
        try:
            await self.store.evict(session_id, self._store_limits().idle_after)
        except StoreUnavailable:
            logger.warning("session %s evicted here but not in the store", session_id[:8])

    # -- the shared store (TM-STORE-*) ----------------------------------------------------------

    async def _stored(self, call: Any) -> Any:
        """Await a store call; an unanswered one is a 503 with a retry hint (TM-STORE-DOWN):
        nothing is acknowledged that was not stored."""
        try:
            return await call
        except StoreUnavailable:
            self.stats.store_failures += 1
            raise RemoteProtocolError(
                "Service Unavailable: the session store is not answering; retry later.",
                code=ErrorCode.STORE_UNAVAILABLE,
                http_status=503,
                headers=(("retry-after", "1"),),
            ) from None

    async def _adopt(self, record: SessionRecord) -> Session:
        """Take up here a session another worker created (TM-STORE-RECORD)."""
        if record.subscriptions is None:
            # Read for a replica that ended meanwhile: this one needs them all.
            cfg = self.config
            again = await self._stored(self.store.fetch(
                record.id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl
            ))
            if again is None:
                raise session_not_found()
            record = again
        # A replica's log numbers its messages and streams from a base of its own: this
        # worker may have held the session before, and cursors from then must not name
        # messages of this replica.
        self._replicas += 1
        session = Session(
            log_base=self._replicas << 32,
            manager=self,
            session_id=record.id,
            version=record.version,
            client_info=record.client_info,
            client_capabilities=record.client_capabilities,
            client_state_bytes=record.client_state_bytes,
            peer=record.peer,
            principal=record.principal,
            # The unit it was counted against where it was created (TM-SEC-UNIT).
            unit=record.unit or self.units.of_request(
                record.principal, record.peer, Headers([])
            ).key,
            server_capabilities=record.server_capabilities,
            config=self.config,
        )
        session.refresh(record)
        await self._register(session)
        other = self.sessions.get(record.id)
        if other is not session and other is not None and not other.closed:
            # Taken up by a concurrent request meanwhile: one replica per worker.
            session.close("released")
            return other
        self.stats.sessions_adopted += 1
        return session

    async def _register(self, session: Session) -> None:
        """Start the session's supervisor, then enter it in the tables: a request that finds
        it there can start handlers at once."""
        assert self._nursery is not None
        await self._nursery.start(session.run)
        if session.closed:
            return  # taken for another client's meanwhile (TM-SEC-FAIR)
        if self.sessions.get(session.id) not in (None, session):
            return  # the caller sees the other one
        self.sessions[session.id] = session
        self.pool.add(session.unit, session)

    @property
    def outbound_base(self) -> int:
        return self.store.outbound_base

    def forward(self, session: Session, kind: ControlKind, payload: JSON) -> None:
        """A cancellation or a client response for nothing running here: for the worker
        that runs it (TM-STORE-CONTROL)."""
        if self.store.shared:
            self._spawn(self._publish, Control(kind, session.id, payload))

    async def _publish(self, control: Control) -> None:
        try:
            await self.store.publish(control)
        except StoreUnavailable:
            logger.warning("a %s for session %s could not reach the other workers",
                           control.kind.value, control.session_id[:8])

    async def save_shared(self, session: Session) -> None:
        """Store what changed in a session before the request that changed it is answered,
        so that the client's next request, at any worker, sees it (TM-STORE-RECORD)."""
        if not self.store.shared or session.closed:
            return
        ttl = self.config.session_idle_ttl
        if not await self._stored(self.store.save(session.id, session.shared_state(), ttl)):
            session.close("ended-elsewhere")
            return
        # The workers holding it read it again at their next request.
        await self._publish(Control(ControlKind.CHANGED, session.id, None))

    def _on_control(self, control: Control) -> None:
        if control.kind is ControlKind.NOTIFY:
            # TM-STORE-NOTIFY: no session's; delivered here, and not published again.
            notification = announced(control)
            if notification is not None and self._on_notify is not None:
                self.stats.controls_received += 1
                self._on_notify(notification)
            return
        session = self.sessions.get(control.session_id)
        if session is None or session.closed:
            return
        self.stats.controls_received += 1
        if control.kind is ControlKind.END:
            session.close("ended-elsewhere")
        elif control.kind is ControlKind.CHANGED:
            session.record_changed(control.payload)
        else:
            session.apply_control(control)

    # -- HTTP entry ---------------------------------------------------------------------

    async def serve(
        self, request: HttpRequest, responder: Responder, *, unit: Unit | None = None
    ) -> None:
        """Serve a legacy GET or DELETE (or refuse another method); the Runtime checked
        Origin and Host, and the era, and says whose the request is, ``unit`` (raises
        RemoteProtocolError)."""
        if request.method == "GET":
            await self._get(request, responder, unit or self._unit_of(request))
        elif request.method == "DELETE":
            await self._delete(request, responder)
        else:
            raise method_not_allowed()

    async def _lookup(self, session_id: str, request: HttpRequest) -> Session:
        session = self.sessions.get(session_id)
        cfg = self.config
        if self.store.shared and not (
            session is not None
            and not session.closed
            and session.record_fresh(trio.current_time(), cfg.store_recheck)
        ):
            # TM-STORE-RECORD: the store says whether the session lives, and what it is now;
            # a session another worker created is taken up here.
            held = session is not None and not session.closed
            record = await self._stored(self.store.fetch(
                session_id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl,
                subscriptions_seen=session.subscriptions_version if held and session else None,
            ))
            if record is None:
                if session is not None and not session.closed:
                    session.close("ended-elsewhere")
                raise session_not_found()
            session = self.sessions.get(session_id)  # it may have been taken up meanwhile
            if session is None or session.closed:
                session = await self._adopt(record)
            else:
                session.refresh(record)
        if session is None or session.closed:
            raise session_not_found()
        if session.principal != _principal_key(request):
            # T-AUTH-BIND: another principal's session is one it has never heard of: 404,
            # as for an id that does not exist (a 403 would confirm that it does).
            raise session_not_found()
        return session

    # -- POST ---------------------------------------------------------------------------

    def _unit_of(self, request: HttpRequest) -> Unit:
        return self.units.of_request(
            _principal_key(request), request.peer_host, request.headers
        )

    async def post(
        self,
        request: HttpRequest,
        body: JSON,
        responder: Responder,
        *,
        unit: Unit | None = None,
        charge: Charge | None = None,
    ) -> None:
        """Serve a legacy POST whose body the Runtime decoded, charged with ``charge`` to
        its client ``unit`` (raises RemoteProtocolError)."""
        plan = plan_legacy_post(request.headers, body)
        if plan.is_initialize and plan.session_id is None:
            await self._initialize(
                plan,
                responder,
                peer=self.units.client_address(request.peer_host, request.headers),
                principal=_principal_key(request),
                unit=unit or self._unit_of(request),
            )
            return
        assert plan.session_id is not None
        session = await self._lookup(plan.session_id, request)
        if self.config.tracer is not None:
            self._trace_post(session, plan, responder)
        version = effective_version(plan.version_header, session.version)
        del version  # checked for validity; the session's negotiated version rules behaviour
        check_batch(plan, session.version)
        requests: list[Request] = []
        # Only a shared store needs to know what the messages changed (TM-STORE-RECORD).
        shared_before = session.shared_state() if self.store.shared else None
        for message in plan.messages:
            admission = session.admit(message)
            if admission is Admission.IGNORE:
                # Nothing to do, but the client showed itself all the same (TM-SESS-IDLE).
                session.heard()
                continue
            if isinstance(message, Request):
                requests.append(message)
            elif isinstance(message, Notification):
                session.receive_notification(message)
            else:
                session.receive_response(message)
        if shared_before is not None and session.shared_state() != shared_before:
            # notifications/initialized: stored before it is acknowledged.
            await self.save_shared(session)
        if not requests:
            # T-POST-4 (MUST): accepted notifications and responses get 202 with no body.
            await responder.reply(Reply(status=202))
            if self.config.tracer is not None:
                self._trace(TraceKind.REPLY, session, responder, status=202)
            return
        session.check_capacity(len(requests))
        # Checked before a stream is opened for them: a refused POST must leave no stream
        # behind in the log (one that no response would ever end).
        session.check_request_ids(tuple(requests))
        if charge is not None:
            # TM-SEC-MEMORY: the session's budget too, before anything starts.
            charge.attach(session.meter, requests[0].id)
        await self._answer(
            session, tuple(requests), plan, responder, request.principal, charge
        )

    async def _initialize(
        self,
        plan: PostPlan,
        responder: Responder,
        *,
        peer: str | None = None,
        principal: str = "",
        unit: Unit | None = None,
    ) -> None:
        [message] = plan.messages
        assert isinstance(message, Request)
        params = message.params or {}
        requested = params.get("protocolVersion")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo", {})
        if not isinstance(requested, str) or not isinstance(caps, Mapping) or not isinstance(
            info, Mapping
        ):
            # TM-LIFE-INIT: an in-band JSON-RPC error (HTTP 200, application/json): it needs
            # no session, and a 4xx would send dual-transport clients to the old transport.
            raise RemoteProtocolError(
                "Invalid params: initialize needs protocolVersion (string), capabilities "
                "(object) and clientInfo (object).",
                code=ErrorCode.INVALID_PARAMS,
                http_status=200,
                request_id=message.id,
            )
        if self.config.workers > 1 and not self.store.shared:
            # TM-WORK-LEGACY: this session would live in this process alone, and the
            # client's next requests reach any of the workers: refused up front, naming the
            # revision every worker serves alike, rather than half of them answered 404.
            # In-band (ML-COMPAT-2): a 4xx would send a 2025 client to the old HTTP+SSE
            # transport (T-COMPAT-2), and this message would never reach its user.
            raise RemoteProtocolError(
                f"Unsupported protocol version: this server runs {self.config.workers} worker "
                "processes without a shared session store, so it serves only the stateless "
                f"revision{'s' if len(MODERN_VERSIONS) > 1 else ''} "
                f"{', '.join(MODERN_VERSIONS)}.",
                code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                http_status=200,
                data={"supported": list(MODERN_VERSIONS), "requested": requested},
                request_id=message.id,
            )
        state_bytes = len(dumps_json(caps)) + len(dumps_json(info))
        if state_bytes > self.config.max_client_state_bytes:
            # TM-SEC-STATE: the session would keep them for its whole life.
            self.stats.client_state_refused += 1
            raise RemoteProtocolError(
                f"Invalid params: clientInfo and capabilities take {state_bytes} bytes; "
                f"this server keeps at most {self.config.max_client_state_bytes}.",
                code=ErrorCode.INVALID_PARAMS,
                http_status=200,
                request_id=message.id,
            )
        if plan.version_header is not None:
            effective_version(plan.version_header, None)
        if unit is None:
            unit = self.units.of_request(principal, peer, Headers([]))
        if not self.pool.admit(unit.key):
            # TM-SESS-CAP / TM-SEC-FAIR: the table is full, and this client holds its share.
            self.stats.sessions_refused += 1
            raise pool_busy("sessions", retry_after=5, request_id=message.id)
        version = negotiate(requested)
        # T-SESS-2 / T-SEC-9 / T-SEC-10: 192 bits from the OS CSPRNG; T-SESS-3: base64url is
        # visible ASCII.
        session_id = secrets.token_urlsafe(24)
        capabilities = self.app.capabilities()
        session = Session(
            manager=self,
            session_id=session_id,
            version=version,
            client_info=info,
            client_capabilities=caps,
            client_state_bytes=state_bytes,
            peer=peer,
            principal=principal,
            unit=unit.key,
            server_capabilities=capabilities,
            config=self.config,
        )
        # The place admitted is taken now: what follows waits, and another initialize must
        # not be admitted to the same place meanwhile.
        self.pool.add(unit.key, session)
        try:
            # TM-STORE-RECORD: kept where every worker finds it before the client learns its
            # id; TM-STORE-BOUND: counted there against the store's caps.
            stored = await self._stored(self.store.create(
                SessionRecord(
                    id=session_id, version=version, client_info=info, client_capabilities=caps,
                    server_capabilities=capabilities, client_state_bytes=state_bytes, peer=peer,
                    principal=principal, unit=unit.key,
                ),
                self.config.uninitialized_ttl,
                self._store_limits(),
            ))
        except BaseException:
            self.pool.discard(session)
            raise
        for gone in stored.evicted:
            self.stats.sessions_evicted += 1
            evicted = self.sessions.get(gone)
            if evicted is not None:
                evicted.close("evicted")
        if stored.kind is not CreateKind.CREATED:
            self.pool.discard(session)
            self.stats.sessions_refused += 1
            raise RemoteProtocolError(
                "Service Unavailable: every session is busy; retry later.",
                code=ErrorCode.SERVER_BUSY,
                http_status=503,
                headers=(("retry-after", "5"),),
                request_id=message.id,
            )
        await self._register(session)
        if session.closed:
            # Taken for another client's while it started (TM-SEC-FAIR): as if refused.
            self.stats.sessions_refused += 1
            raise pool_busy("sessions", retry_after=5, request_id=message.id)
        self.stats.sessions_created += 1
        if self.config.tracer is not None:
            self._trace_post(session, plan, responder)
            self._trace(TraceKind.SESSION_OPEN, session, responder)
        result = initialize_result(
            version,
            capabilities=capabilities,
            server_info=self.app.server_info(),
            instructions=self.app.instructions,
        )
        response = Response(id=message.id, result=result)
        # T-SESS-1: the session id rides the HTTP response that carries the InitializeResult.
        extra = (("mcp-session-id", session_id),)
        await self._reply_now(session, message, response, plan, responder, extra)

    def _evicted(self, session: Session) -> None:
        """TM-SESS-CAP: a full table took this session for another client's."""
        self.stats.sessions_evicted += 1
        session.close("evicted")  # which takes it out of the table (Session.close)
        if self.store.shared:
            # TM-STORE-BOUND: evicted for every worker, not left in the store to be taken up
            # again until its time to live runs out; unless it is in use at another worker
            # (then this one has only let its replica go).
            self._spawn(self._evict_elsewhere, session.id)

    def _store_limits(self) -> StoreLimits:
        """The shared store's bound on sessions (TM-STORE-BOUND): this server's caps, over
        every worker's sessions."""
        cfg = self.config
        return StoreLimits(
            max_sessions=cfg.max_sessions,
            max_per_unit=cfg.store_max_sessions_per_client,
            idle_after=STORE_IDLE_PERIODS * self._expire_period(),
        )

    def _expire_period(self) -> float:
        """How often the expiry loop runs (and busy sessions are renewed in the store)."""
        cfg = self.config
        ttls = [cfg.session_idle_ttl, cfg.uninitialized_ttl]
        if cfg.abandoned_ttl is not None:
            ttls.append(cfg.abandoned_ttl)
        return max(0.05, min(ttls) / 10)

    async def subscribe(self, session: Session, uri: str, *, added: bool) -> bool:
        """TM-STORE-SUBS: one subscription added (``added``) or removed, in the shared store
        first, one member of the session's set there, and told to the other workers as that
        one change; False when the store refused it for their number."""
        if not self.store.shared:
            session.subscribed(uri, added=added)
            return True
        cfg = self.config
        if added:
            change = await self._stored(self.store.subscribe(
                session.id, uri, max_subscriptions=cfg.max_subscriptions,
                ttl=cfg.session_idle_ttl,
            ))
        else:
            change = await self._stored(
                self.store.unsubscribe(session.id, uri, ttl=cfg.session_idle_ttl)
            )
        if change.gone:
            session.close("ended-elsewhere")
            return True
        if change.full:
            return False
        if change.version == session.subscriptions_version + 1:
            session.subscribed(uri, added=added, version=change.version)
        else:
            # Changes made elsewhere that this worker has not seen: read at the next request.
            session.subscribed(uri, added=added)
            session.record_changed()
        if change.changed:
            await self._publish(Control(
                ControlKind.CHANGED, session.id,
                {"uri": uri, "added": added, "version": change.version},
            ))
        return True

    def _idle_among(self, sessions: dict[Session, None]) -> Session | None:
        """The least recently used evictable session (idle, or abandoned for
        ``evict_abandoned_after``) among the first EVICTION_SCAN of ``sessions``. One in use
        now goes to the back of the order, so that the next look does not look at it again:
        each costs O(1) amortized."""
        now = trio.current_time()
        for session in list(itertools.islice(sessions, EVICTION_SCAN)):
            if session.evictable(now):
                return session
            self.pool.touch(session)
        return None

    def _least_needed(self, sessions: dict[Session, None]) -> Session:
        """Which session of the client holding the most a full table takes (TM-SESS-CAP):
        its least recently used idle one, else its least recently used one."""
        return self._idle_among(sessions) or next(iter(sessions))

    def _own_idle(self, sessions: dict[Session, None]) -> Session | None:
        """A client at its share of a full table may give up an idle session of its own
        for a new one (TM-SESS-CAP): none, and it is refused."""
        return self._idle_among(sessions)

    async def _reply_now(
        self,
        session: Session,
        request: Request,
        response: Response,
        plan: PostPlan,
        responder: Responder,
        extra: tuple[tuple[str, str], ...],
    ) -> None:
        """Answer a request whose response is already known (initialize)."""
        if self.config.response_mode is ResponseMode.JSON:
            await responder.reply(
                Reply(
                    status=200,
                    headers=(("content-type", "application/json"), *extra),
                    body=dumps(response),
                )
            )
            return
        state = session.log.open_stream([request.id])
        priming = self._prime(session, state.number)
        entry = session.log.append(
            state.number, dumps(response), now=trio.current_time(),
            kind=EntryKind.RESPONSE, answers=request.id,
        )
        if self._mirror is not None:
            self._mirror.add(session, state.number, entry)
        if self.config.tracer is not None:
            self._trace(TraceKind.APPEND, session, stream=state.number, seq=entry.seq,
                        request=request.id, detail="response")
        # TM-POST-ATONCE: the stream is complete already. Sent whole, it needs no view, and on
        # trio-mcp's own server no reader task for the rest of the connection's life.
        if await self._reply_complete(session, state.number, priming, responder, extra):
            return
        await self._serve_view(session, state.number, -1, responder, priming=priming,
                               headers=extra)

    def _prime(self, session: Session, stream: int, *, carry: bool = False) -> Entry | None:
        """The stream's priming position, taken before anything else is appended to it."""
        if self._mirror is not None:
            # The copy learns its requests first: a resume from the priming id alone can
            # fail them explicitly once this worker is gone.
            self._mirror.add(session, stream, None)
        if not session.primes:
            return None
        entry = session.log.prime(stream, now=trio.current_time(), carry_unsent=carry)
        if self.config.tracer is not None:
            self._trace(TraceKind.APPEND, session, stream=stream, seq=entry.seq, detail="priming")
        return entry

    async def _answer(
        self,
        session: Session,
        requests: tuple[Request, ...],
        plan: PostPlan,
        responder: Responder,
        principal: Principal | None = None,
        charge: Charge | None = None,
    ) -> None:
        if self.config.response_mode is ResponseMode.JSON:
            flights = session.start_requests(
                requests, stream=None, principal=principal, charge=charge
            )
            # The POST waits for its handlers. Closing the connection does not cancel them
            # (T-PSSE-12): they finish and their results are dropped, having nowhere to go.
            # While it waits, the client holds a connection: it has not abandoned the
            # session, however long the handlers run (TM-SESS-ABANDONED).
            session.json_waiting += 1
            try:
                # Handlers that answer without waiting on anything have done so after two
                # turns of the scheduler, as on the SSE path: their answer needs no watch for
                # the client's leaving (on trio-mcp's own server, a reader task for the rest
                # of the connection; under hypercorn, a task for this request).
                answered = await _answered_at_once(flights)
                with trio.CancelScope() as scope:
                    if not answered:
                        async with watching_disconnect(responder, scope.cancel):
                            for flight in flights:
                                await flight.done.wait()
            finally:
                session.json_waiting -= 1
                # The connection's end is a sign of the client, as a view's is.
                session.heard()
            if scope.cancelled_caught:
                return
            outcomes = [f.outcome for f in flights if f.outcome is not None]
            if not outcomes and session.closed:
                # T-SESS-7 (MUST): the session ended (DELETE, expiry, eviction) before any
                # answer; its id now gets 404, so the client knows to start a new session.
                raise session_not_found()
            if not outcomes:
                # TM-CANCEL-JSON: every request was cancelled by the client. U-CANCEL-4
                # (SHOULD) asks for no response, and T-POST-7 (MUST) for a JSON body or a
                # stream, in any mode: a stream that ends with no response keeps both.
                await responder.reply(Reply(status=200, headers=SSE_HEADERS))
                return
            body: Any = (
                [o.to_dict() for o in outcomes] if plan.batch else outcomes[0].to_dict()
            )
            await responder.reply(json_reply(200, body))
            return
        state = session.log.open_stream([r.id for r in requests])
        priming = self._prime(session, state.number)
        flights = session.start_requests(
            requests, stream=state.number, principal=principal, charge=charge
        )
        # Handlers that answer without waiting on anything have done so after two turns of
        # the scheduler (trio runs a batch in either order). Their stream is then complete
        # before its first byte goes out, and needs no view, writer or watcher.
        if await _answered_at_once(flights) and await self._reply_complete(
            session, state.number, priming, responder
        ):
            return
        await self._serve_view(session, state.number, -1, responder, priming=priming)

    async def _reply_complete(
        self,
        session: Session,
        stream: int,
        priming: Entry | None,
        responder: Responder,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> bool:
        """Send a request stream that has ended before a connection took anything from it as
        one complete SSE response (the same events a View would write: TM-POST-ATONCE), if it
        is small; False, having sent nothing, when it is not."""
        state = session.log.stream(stream)
        entries = session.log.read_after(stream, -1 if priming is None else priming.seq)
        if state is None or not state.ended or not isinstance(entries, list):
            return False
        taken = [e for e in entries if e.kind is not EntryKind.PRIMING]
        if sum(len(e.data) for e in taken) > _AT_ONCE_BYTES:
            # A large answer goes through a View: its writer watches the reader's speed.
            return False
        codec = session.codec
        # T-PSSE-1 (SHOULD): the priming event first, as on any stream.
        events = [] if priming is None else [
            encode_event(id=codec.event_id(session.id, stream, priming.seq), data="")
        ]
        events += [
            encode_message_event(id=codec.event_id(session.id, stream, e.seq), data=e.data)
            for e in taken
        ]
        body = b"".join(events)
        self.stats.streams_opened += 1
        session.heard()
        if responder.disconnected.is_set():
            # The client left already: its answer stays in the log for a resume.
            return True
        # Within the stall budget, as a View's writes are: a reader that takes nothing for
        # that long loses the connection, and the response stays in the log to resume.
        with trio.move_on_after(self.config.stall_budget):
            await responder.reply(Reply(status=200, headers=(*SSE_HEADERS, *headers), body=body))
        if responder.finished:
            if self.config.tracer is not None:
                for entry in [*([priming] if priming else []), *taken]:
                    self._trace(TraceKind.DELIVER, session, responder, stream=stream,
                                seq=entry.seq, detail="priming" if entry is priming else None)
                self._trace(TraceKind.REPLY, session, responder, status=200,
                            detail="the stream whole")
            # Marked only once the connection took them (TM-RES-PIN), as a View does.
            for entry in taken:
                session.log.mark_written(entry)
            session.wrote(len(taken))
            session.notify_progress()
        return True

    async def _serve_view(
        self,
        session: Session,
        stream: int,
        after: int,
        responder: Responder,
        *,
        priming: Entry | None = None,
        attached_comment: bool = False,
        headers: tuple[tuple[str, str], ...] = (),
        preface: bytes = b"",
        pooled: str | None = None,
    ) -> str:
        """Serve ``stream`` on a View; a GET's holds a slot of the streams for client
        ``pooled`` until it ends (TM-SEC-FAIR)."""
        view = View(session=session, stream=stream, cursor=after, responder=responder)
        if pooled is not None:
            self.streams.add(pooled, view)
        session.attach_view(view)
        self.stats.streams_opened += 1
        try:
            return await view.run(
                priming=priming, attached_comment=attached_comment, headers=headers,
                preface=preface,
            )
        finally:
            self.streams.discard(view)

    # -- GET ----------------------------------------------------------------------------

    async def _get(self, request: HttpRequest, responder: Responder, unit: Unit) -> None:
        plan = plan_get(request)
        session = await self._lookup(plan.session_id, request)
        effective_version(plan.version_header, session.version)
        session.heard()
        if plan.last_event_id is not None:
            await self._resume(session, plan, responder, request, unit.key)
            return
        # TM-GET-ONE: a second fresh GET takes the standalone stream over, as a resume
        # does (TM-RES-TAKEOVER): the older connection is detached (T-MULTI-2), and every
        # GET is answered with a stream (T-GET-3).
        state = session.log.stream(STANDALONE_STREAM)
        assert state is not None
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="GET")
        # TM-GET-FRESH: a fresh GET delivers what no connection has taken yet, and replays
        # nothing.
        # What left the window unsent is lost either way; starting after it keeps a fresh
        # GET from reporting an old loss forever instead of delivering what is new.
        after = max(state.written_through, state.lost_through)
        pooled = self._stream_slot(session, STANDALONE_STREAM, unit.key)
        await self._serve_view(
            session, STANDALONE_STREAM, after, responder,
            priming=self._prime(session, STANDALONE_STREAM, carry=True), pooled=pooled,
        )

    def _stream_slot(self, session: Session, stream: int, unit: str) -> str:
        """TM-SEC-FAIR: a slot of the long-lived streams for a GET on ``stream`` of client
        ``unit``: the slot of the connection it takes the stream over from, when that one
        holds one (a client reconnecting is never refused for its own old connection), else
        one the pool admits (raises RemoteProtocolError 503 when it does not)."""
        old = session.views.get(stream)
        if old is not None and old in self.streams:
            self.streams.discard(old)
        elif not self.streams.admit(unit):
            # Every long-lived stream is in use, and this client holds its share or more.
            raise pool_busy("streams")
        return unit

    async def _resume(
        self,
        session: Session,
        plan: GetPlan,
        responder: Responder,
        request: HttpRequest,
        unit: str,
    ) -> None:
        assert plan.last_event_id is not None
        cursor = self.codec.decode(session.id, plan.last_event_id)
        if cursor is None:
            # TM-RES-MALFORMED: a cursor this server did not issue for this session.
            raise RemoteProtocolError(
                "Bad Request: Last-Event-ID is not an event id of this session.",
                code=ErrorCode.INVALID_REQUEST,
                http_status=400,
                data={"lastEventId": plan.last_event_id[:200]},
            )
        if cursor.origin != self.codec.origin:
            # TM-STORE-STREAMS: the stream is held by another worker: the resume is relayed
            # to it, once; a holder that is gone (or a request relayed already) is an
            # explicit failure, never a replay from nothing.
            address = None
            if not request.relayed:
                address = await self.locate(cursor.origin)
            if address is not None and await relay(
                address, request, responder,
                seal=self.relay_seal.seal(request, time.time()),
                connect_timeout=self.config.store_timeout,
                write_timeout=self.config.stall_budget,
                on_answer=self._count_relayed,
            ):
                return
            if not request.relayed and await self._resume_orphan(
                session, cursor, plan.last_event_id, responder, unit
            ):
                return
            raise RemoteProtocolError(
                "Resumption failed: the worker of this server that held this stream is "
                "gone; its events are lost.",
                code=ErrorCode.RESUMPTION_FAILED,
                http_status=409,
                data={"lastEventId": plan.last_event_id[:200], "reason": "holder-gone"},
            )
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="GET",
                        detail=f"Last-Event-ID {cursor.stream}.{cursor.seq}")
        # T-RESUME-5 / T-RESUME-6: re-attach to the cursor's own stream, after the cursor.
        pooled = self._stream_slot(session, cursor.stream, unit)
        await self._serve_view(
            session, cursor.stream, cursor.seq, responder, attached_comment=True, pooled=pooled
        )

    async def _resume_orphan(
        self,
        session: Session,
        cursor: Cursor,
        last_event_id: str,
        responder: Responder,
        unit: str,
    ) -> bool:
        """Resume a stream whose worker is gone (TM-STORE-STREAMS); False when the store
        has nothing of it. A request stream is read from its copy, strictly after the
        cursor, and ended: a request that has no response there gets an error saying that
        its worker stopped. The standalone stream goes on here, after saying that what its
        worker held is lost."""
        if not self.store.shared:
            return False
        details: dict[str, Any] = {
            "stream": cursor.stream,
            "lastEventId": last_event_id[:200],
            "reason": "holder-gone",
        }
        if cursor.stream == STANDALONE_STREAM:
            self.stats.resumes_from_store += 1
            state = session.log.stream(STANDALONE_STREAM)
            assert state is not None
            pooled = self._stream_slot(session, STANDALONE_STREAM, unit)
            await self._serve_view(
                session, STANDALONE_STREAM, max(state.written_through, state.lost_through),
                responder, priming=self._prime(session, STANDALONE_STREAM, carry=True),
                preface=gap_event({**details, "reason": "holder-gone: the messages after "
                                   "this cursor were held by a worker that is gone"}),
                pooled=pooled,
            )
            return True
        failed = ErrorResponse(
            id=0,
            code=ErrorCode.INTERNAL_ERROR,
            message="The worker of this server running this request stopped; the "
            "request's outcome is unknown.",
            data={"reason": "holder-gone"},
        ).to_dict()
        del failed["id"]
        claim = await self._stored(self.store.claim(
            session.id, cursor.origin, cursor.stream, cursor.seq,
            b'{"jsonrpc":"2.0","id":', b"," + dumps_json(failed)[1:],
            ttl=self.config.session_idle_ttl,
        ))
        if claim.kind is ClaimKind.UNKNOWN:
            return False
        self.stats.resumes_from_store += 1
        codec = self.codec
        if claim.kind is ClaimKind.GAP:
            # TM-RES-STALE, as for a stream held here: said, and each request not answered
            # at or before the cursor fails.
            body = gap_event({**details, "reason": "events after this cursor have left "
                              "the server's replay window"})
            for rid in claim.requests:
                at = claim.answered.get(rid)
                if at is not None and at <= cursor.seq:
                    continue
                err = ErrorResponse(
                    id=json.loads(rid),
                    code=ErrorCode.RESUMPTION_FAILED,
                    message="Resumption failed: messages of this request's stream were "
                    "lost from the server's replay window; the request's outcome is "
                    "unknown.",
                    data=details,
                )
                body += encode_event(data=dumps(err).decode())
        else:
            body = encode_comment(f"attached stream={cursor.stream} after={cursor.seq}")
            body += b"".join(
                encode_message_event(
                    id=codec.event_id(session.id, cursor.stream, e.seq, origin=cursor.origin),
                    data=e.data,
                )
                for e in claim.events
            )
        session.heard()
        # Within the stall budget, as any stream's writes are; the copy stays to resume.
        with trio.move_on_after(self.config.stall_budget):
            await responder.reply(Reply(status=200, headers=SSE_HEADERS, body=body))
        return True

    # -- DELETE -------------------------------------------------------------------------

    async def _delete(self, request: HttpRequest, responder: Responder) -> None:
        plan = plan_delete(request)
        session = await self._lookup(plan.session_id, request)
        effective_version(plan.version_header, session.version)
        if self.store.shared:
            # TM-STORE-CONTROL: gone from the store first, so that no worker takes it up
            # again; then every worker holding it ends its part.
            await self._stored(self.store.delete(session.id, "deleted"))
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="DELETE")
        # T-SESS-9: the client ends its session; every later request with its id gets 404.
        session.close("deleted")
        self.stats.sessions_deleted += 1
        await responder.reply(Reply(status=204))
        if self.config.tracer is not None:
            self._trace(TraceKind.REPLY, session, responder, status=204)

    # -- recorded timelines (trio_mcp._trace) -------------------------------------------

    def _trace(
        self, kind: TraceKind, session: Session, responder: Responder | None = None,
        **fields: Any,
    ) -> None:
        """Tell the tracer (there is one: callers check) what happened in ``session``."""
        assert self.config.tracer is not None
        conn = None if responder is None else id(responder)
        self.config.tracer.record(TraceRecord(kind=kind, session=session.id, conn=conn, **fields))

    def _trace_post(self, session: Session, plan: PostPlan, responder: Responder) -> None:
        """A POST as a trace tells it: its first request, and the methods it carries."""
        first = next((m for m in plan.messages if isinstance(m, Request)), None)
        what = ", ".join(
            m.method if isinstance(m, Request | Notification) else "response"
            for m in plan.messages
        )
        self._trace(TraceKind.REQUEST, session, responder, http="POST",
                    request=None if first is None else first.id, detail=what)

    # -- introspection ------------------------------------------------------------------

    def describe(self) -> ManagerInfo:
        """The manager itself, for the inspector (its sessions describe themselves)."""
        return ManagerInfo(
            task=self.task,
            sessions=len(self.sessions),
            max_sessions=self.config.max_sessions,
            shutting_down=self.shutting_down,
        )

    def statistics(self) -> dict[str, Any]:
        """The counters of TM-BP-COUNTERS: totals, then what is open and retained now."""
        sessions = list(self.sessions.values())
        stats = attrs.asdict(self.stats)
        appended = stats.pop("events_appended_closed")
        evicted = stats.pop("events_evicted_closed")
        dropped = stats.pop("client_notifications_dropped_closed")
        subscriptions = stats.pop("subscriptions_refused_closed")
        return {
            **stats,
            "sessions_open": len(sessions),
            "streams_open": sum(len(s.views) for s in sessions),
            "requests_inflight": sum(len(s.inflight) for s in sessions),
            "events_appended": appended + sum(s.log.appended for s in sessions),
            "events_evicted": evicted + sum(s.log.evicted for s in sessions),
            "events_retained": sum(s.log.retained_events for s in sessions),
            "bytes_retained": sum(s.log.retained_bytes for s in sessions),
            "client_notifications_dropped": dropped
            + sum(s.stats.client_notifications_dropped for s in sessions),
            "subscriptions_refused": subscriptions
            + sum(s.stats.subscriptions_refused for s in sessions),
            "stream_copies_lost": 0 if self._mirror is None else self._mirror.lost,
            **self.bodies.statistics(),
        }

    def broadcast(self, notification: Notification) -> int:
        """Send a change notification on the standalone stream (T-GET-5: it relates to no
        request) of each session it is for (``Session.takes``); how many got it at once.

        With a shared store, a session told that its record changed elsewhere may have
        subscribed or unsubscribed there: for a resource update, its record is read first,
        and it gets the update (or not) when the store has answered (TM-STORE-NOTIFY)."""
        sent = 0
        for session in list(self.sessions.values()):
            if (
                self.store.shared
                and notification.method in SUBSCRIBED
                # Not read since another worker said it changed (or never read here).
                and not session.record_fresh(trio.current_time(), math.inf)
            ):
                self._spawn(self._broadcast_fresh, session, notification)
            elif session.takes(notification) and session.send(notification):
                sent += 1
        return sent

    async def _broadcast_fresh(self, session: Session, notification: Notification) -> None:
        cfg = self.config
        try:
            record = await self.store.fetch(
                session.id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl,
                subscriptions_seen=session.subscriptions_version,
            )
        except StoreUnavailable:
            record = None  # decided on what this worker knows
        else:
            if record is None:
                return  # ended meanwhile: its next request here is told so
        if session.closed:
            return
        if record is not None:
            session.refresh(record)
        if session.takes(notification):
            session.send(notification)


def _principal_key(request: HttpRequest) -> str:
    """Who a request's session must belong to: "" without authorization."""
    return request.principal.key if request.principal is not None else ""


async def _answered_at_once(flights: Sequence[InFlight]) -> bool:
    """Whether every handler has answered within two turns of the scheduler: those that
    wait on nothing have (trio runs a batch in either order), and their answer needs no
    View, writer or watch for the client's leaving (TM-POST-ATONCE, TM-HTTP-OWN)."""
    for _ in range(2):
        await trio.lowlevel.checkpoint()
        if all(f.done.is_set() for f in flights):
            return True
    return False
