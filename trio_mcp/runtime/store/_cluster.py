# A worker in a cluster (spec/workers.md, TM-STORE-*): the Peers of a runtime whose sessions
# and tasks are shared with other workers through a store (trio_mcp.runtime.store._store). It exists
# only when a store is configured; a worker alone has ``Alone`` (trio_mcp.runtime.store._peers).
#
# What it does for the legacy runtime:
#   records     a session is created in the store, read again from it when it was read too
#               long ago, taken up from it (adopted) when another worker created it, and its
#               changes written there before they are acknowledged (TM-STORE-RECORD, -SUBS)
#   control     what must reach the worker running a request goes on the store's control bus:
#               cancellations, client responses, session ends, changes (TM-STORE-CONTROL)
#   keep-alive  every expiry period, the sessions with work here are renewed, and the relay
#               port's address is advertised (TM-STORE-RECORD, TM-STORE-STREAMS)
#   streams     request streams are copied (the mirror), and a resume of another worker's
#               stream is relayed to it, or read from the copy once it is gone
#               (TM-STORE-STREAMS: trio_mcp.runtime.store._orphans)
#   tasks       kept in the store, relayed to their worker (trio_mcp.runtime.store._cluster_tasks)
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...protocol import (
    JSON,
    STANDALONE_STREAM,
    Cursor,
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Response,
    parse_message,
)
from ...protocol._methods import SUBSCRIBED
from ...protocol._tasks import TaskSnapshot
from ...protocol._transport import HttpRequest
from .._describe import SessionEnd
from ..legacy._streamout import Copies
from ..legacy._table import expire_period
from ._announce import Announcer, announced
from ._cluster_tasks import ClusterTasks
from ._mirror import StreamMirror
from ._orphans import resume_from_copy
from ._peers import ClusterStatistics, LocalSessions, Resumed
from ._relay import RelaySeal, relay
from ._store import (
    Control,
    ControlKind,
    CreateKind,
    SessionRecord,
    SharedStore,
    StoreLimits,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...protocol._era import ModernCall
    from ..backpressure._responder import Responder
    from ..legacy._session import Session
    from ..modern._modern import ModernServer
    from ..tasks._taskmanager import TaskManager

__all__ = ["STORE_IDLE_PERIODS", "Cluster"]

logger = logging.getLogger("trio_mcp.cluster")

#: A session no worker has renewed in the shared store for this many expiry periods has
#: nothing running anywhere and no request of its client since: the store may delete it to
#: make room (TM-STORE-BOUND). Busy sessions are renewed every period (``_keep_alive``).
STORE_IDLE_PERIODS = 3


@attrs.define
class _Counts:
    sessions_adopted: int = 0
    store_failures: int = 0
    resumes_relayed: int = 0
    controls_received: int = 0
    resumes_from_store: int = 0

    def relayed(self) -> None:
        """A resume was answered by the worker holding its stream."""
        self.resumes_relayed += 1


class Cluster:
    """The other workers sharing ``store``, for one runtime (a Peers)."""

    def __init__(
        self,
        store: SharedStore,
        config: ServerConfig,
        *,
        relay_seal: RelaySeal,
        on_notify: Callable[[Notification], object],
    ) -> None:
        self.store = store
        self.config = config
        #: T-AUTH-17 / TM-STORE-STREAMS: what a relayed request carries instead of its
        #: client's credentials.
        self.relay_seal = relay_seal
        #: Where a change notification published by another worker goes (TM-STORE-NOTIFY):
        #: the runtime, which delivers it to every client of this worker.
        self._on_notify = on_notify
        #: Request streams copied for the other workers (TM-STORE-STREAMS).
        self.mirror = StreamMirror(store, ttl=config.session_idle_ttl)
        #: TM-STORE-NOTIFY: this worker's change notifications, for the other workers.
        self._announcer = Announcer(store)
        #: TM-STORE-TASKS: tasks kept in the store, and relayed to their worker.
        self.tasks = ClusterTasks(store, relay_to=self.relay_to, stored=self.stored)
        self._counts = _Counts()
        #: Where this worker's relay port listens, once an HTTP edge has opened it.
        self._relay_address: str | None = None
        #: Replicas of sessions created elsewhere taken up here (their logs' bases).
        self._replicas = 0
        self._table: LocalSessions | None = None
        self._nursery: trio.Nursery | None = None
        if config.secret is None and config.workers > 1:
            # TM-WORK-SECRET: each process would draw keys of its own.
            logger.warning(
                "a shared store without a shared secret: the other workers will refuse this "
                "one's cursors, requestStates and relayed requests; set ServerConfig.secret "
                "or $TRIO_MCP_SECRET"
            )

    origin = property(lambda self: self.store.origin)
    outbound_base = property(lambda self: self.store.outbound_base)
    idle_end = SessionEnd.RELEASED
    serves_relays = True

    @property
    def copies(self) -> Copies:
        return self.mirror

    async def run(
        self,
        table: LocalSessions,
        tasks: TaskManager,
        modern: ModernServer,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The store's connections and control bus, the copies, the announcements, the
        tasks' writes and the keep-alive, for ``table``'s sessions and ``tasks``."""
        self._table = table
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.store.run, self._on_control)
                self._nursery = nursery
                nursery.start_soon(self.mirror.run)
                nursery.start_soon(self._announcer.run)
                nursery.start_soon(self.tasks.run, tasks, modern)
                nursery.start_soon(self._keep_alive_loop)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, object]], *args: Any) -> None:
        if self._nursery is not None:  # else the worker stops: nothing more is told
            self._nursery.start_soon(fn, *args)

    async def stored(self, call: Any) -> Any:
        """Await a store call; an unanswered one is a 503 with a retry hint (TM-STORE-DOWN):
        nothing is acknowledged that was not stored."""
        try:
            return await call
        except StoreUnavailable:
            self._counts.store_failures += 1
            raise RemoteProtocolError(
                "Service Unavailable: the session store is not answering; retry later.",
                code=ErrorCode.STORE_UNAVAILABLE,
                http_status=503,
                headers=(("retry-after", "1"),),
            ) from None

    # -- records (TM-STORE-RECORD) --------------------------------------------------------

    def legacy_refusal(self, requested: JSON, request_id: object) -> RemoteProtocolError | None:
        return None  # every worker serves every session

    async def create(self, record: SessionRecord) -> bool:
        assert self._table is not None
        cfg = self.config
        outcome = await self.stored(self.store.create(
            record, cfg.uninitialized_ttl, StoreLimits(
                max_sessions=cfg.max_sessions,
                max_per_unit=cfg.store_max_sessions_per_client,
                idle_after=STORE_IDLE_PERIODS * expire_period(cfg),
            ),
        ))
        self._table.evicted_elsewhere(outcome.evicted)
        return outcome.kind is CreateKind.CREATED

    async def find(self, session_id: str) -> Session | None:
        assert self._table is not None
        cfg = self.config
        session = self._table.get(session_id)
        if session is not None and session.record_fresh(trio.current_time(), cfg.store_recheck):
            return session
        # The store says whether the session lives, and what it is now; a session another
        # worker created is taken up here.
        record = await self.stored(self.store.fetch(
            session_id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl,
            subscriptions_seen=None if session is None else session.subs.version,
        ))
        if record is None:
            if session is not None:
                session.close(SessionEnd.ENDED_ELSEWHERE)
            return None
        session = self._table.get(session_id)  # it may have been taken up meanwhile
        if session is None:
            return await self._adopt(record)
        session.take_record(record)
        return session

    async def _adopt(self, record: SessionRecord) -> Session | None:
        """Take up here a session another worker created (TM-STORE-RECORD)."""
        assert self._table is not None
        if record.subscriptions is None:
            # Read for a replica that ended meanwhile: this one needs them all.
            cfg = self.config
            again = await self.stored(self.store.fetch(
                record.id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl
            ))
            if again is None:
                return None
            record = again
        # A replica's log numbers its messages and streams from a base of its own: this
        # worker may have held the session before, and cursors from then must not name
        # messages of this replica.
        self._replicas += 1
        session = self._table.make(record, log_base=self._replicas << 32)
        session.take_record(record)
        if not await self._table.enter(session):
            # Taken up by a concurrent request meanwhile: one replica per worker.
            session.close(SessionEnd.RELEASED)
            return self._table.get(record.id)
        self._counts.sessions_adopted += 1
        return session

    async def save(self, session: Session) -> None:
        """Store what changed in a session before the request that changed it is answered,
        so that the client's next request, at any worker, sees it (TM-STORE-RECORD)."""
        if session.closed:
            return
        ttl = self.config.session_idle_ttl
        if not await self.stored(self.store.save(session.id, session.shared_state(), ttl)):
            session.close(SessionEnd.ENDED_ELSEWHERE)
            return
        # The workers holding it read it again at their next request.
        await self._publish(Control(ControlKind.CHANGED, session.id, None))

    async def subscribe(self, session: Session, uri: str, *, added: bool) -> bool:
        """TM-STORE-SUBS: one subscription added (``added``) or removed, in the shared store
        first, one member of the session's set there, and told to the other workers as that
        one change; False when the store refused it for their number."""
        cfg = self.config
        if added:
            change = await self.stored(self.store.subscribe(
                session.id, uri, max_subscriptions=cfg.max_subscriptions,
                ttl=cfg.session_idle_ttl,
            ))
        else:
            change = await self.stored(
                self.store.unsubscribe(session.id, uri, ttl=cfg.session_idle_ttl)
            )
        if change.gone:
            session.close(SessionEnd.ENDED_ELSEWHERE)
            return True
        if change.full:
            return False
        if change.version == session.subs.version + 1:
            session.subs.change(uri, added=added, version=change.version)
        else:
            # Changes made elsewhere that this worker has not seen: read at the next request.
            session.subs.change(uri, added=added)
            session.record_changed()
        if change.changed:
            await self._publish(Control(
                ControlKind.CHANGED, session.id,
                {"uri": uri, "added": added, "version": change.version},
            ))
        return True

    async def delete(self, session: Session) -> None:
        """Gone from the store first, so that no worker takes it up again; then every
        worker holding it ends its part (TM-STORE-CONTROL)."""
        await self.stored(self.store.delete(session.id, SessionEnd.DELETED.value))

    def ended(self, session: Session, reason: SessionEnd) -> None:
        if reason is SessionEnd.EVICTED:
            # TM-STORE-BOUND: evicted for every worker, unless it is in use at another one.
            self._spawn(self._evict_elsewhere, session.id)
        else:
            self._spawn(self._end_elsewhere, session.id, reason)

    async def _end_elsewhere(self, session_id: str, reason: SessionEnd) -> None:
        try:
            await self.store.delete(session_id, reason.value)
        except StoreUnavailable:
            logger.warning("session %s ended here (%s) but not in the store", session_id[:8],
                           reason.value)

    async def _evict_elsewhere(self, session_id: str) -> None:
        try:
            await self.store.evict(session_id, STORE_IDLE_PERIODS * expire_period(self.config))
        except StoreUnavailable:
            logger.warning("session %s evicted here but not in the store", session_id[:8])

    async def _keep_alive_loop(self) -> None:
        period = expire_period(self.config)
        while True:
            await trio.sleep(period)
            await self._keep_alive()
            await self._advertise(period)

    async def _keep_alive(self) -> None:
        """TM-STORE-RECORD: a session with work running here stays alive in the store, its
        client silent or not; one that ended elsewhere (expired or deleted, a control
        message lost) ends here too."""
        assert self._table is not None
        try:
            gone = await self.store.keep_alive(self._table.busy(), self.config.session_idle_ttl)
        except StoreUnavailable:
            return  # counted by the requests that meet it; the next tick tries again
        for session_id in gone:
            session = self._table.get(session_id)
            if session is not None:
                session.close(SessionEnd.ENDED_ELSEWHERE)

    # -- the control bus (TM-STORE-CONTROL) -----------------------------------------------

    def forward(self, session: Session, kind: ControlKind, payload: JSON) -> None:
        """A cancellation or a client response for nothing running here: for the worker
        that runs it."""
        self._spawn(self._publish, Control(kind, session.id, payload))

    async def _publish(self, control: Control) -> None:
        try:
            await self.store.publish(control)
        except StoreUnavailable:
            logger.warning("a %s for session %s could not reach the other workers",
                           control.kind.value, control.session_id[:8])

    def _on_control(self, control: Control) -> None:
        if control.kind is ControlKind.NOTIFY:
            # TM-STORE-NOTIFY: no session's; delivered here, and not published again.
            notification = announced(control)
            if notification is not None:
                self._counts.controls_received += 1
                self._on_notify(notification)
            return
        session = None if self._table is None else self._table.get(control.session_id)
        if session is None:
            return
        self._counts.controls_received += 1
        if control.kind is ControlKind.END:
            session.close(SessionEnd.ENDED_ELSEWHERE)
        elif control.kind is ControlKind.CHANGED:
            # One subscription changed (TM-STORE-SUBS), else read the record again.
            if not session.subs.take_change(control.payload):
                session.record_changed()
        elif control.kind is ControlKind.CANCEL:
            if isinstance(control.payload, str | int):
                session.handlers.cancel_request(control.payload)
        elif control.kind is ControlKind.RESPONSE:
            try:
                message = parse_message(control.payload)
            except RemoteProtocolError:
                return
            if isinstance(message, Response | ErrorResponse):
                session.receive_response(message, forwarded=True)

    def deliver(self, session: Session, notification: Notification) -> bool:
        """TM-STORE-NOTIFY: a session told that its record changed elsewhere may have
        subscribed or unsubscribed there: for a resource update, its record is read first,
        and it gets the update (or not) when the store has answered."""
        if notification.method in SUBSCRIBED and not (
            # Not read since another worker said it changed (or never read here).
            session.record_fresh(trio.current_time(), math.inf)
        ):
            self._spawn(self._deliver_fresh, session, notification)
            return False
        return session.takes(notification) and session.send(notification)

    async def _deliver_fresh(self, session: Session, notification: Notification) -> None:
        cfg = self.config
        try:
            record = await self.store.fetch(
                session.id, idle_ttl=cfg.session_idle_ttl, uninitialized_ttl=cfg.uninitialized_ttl,
                subscriptions_seen=session.subs.version,
            )
        except StoreUnavailable:
            record = None  # decided on what this worker knows
        else:
            if record is None:
                return  # ended meanwhile: its next request here is told so
        if session.closed:
            return
        if record is not None:
            session.take_record(record)
        if session.takes(notification):
            session.send(notification)

    def announce(self, notification: Notification) -> None:
        self._announcer.add(notification)

    # -- relays (TM-STORE-STREAMS, TM-STORE-TASKS) ----------------------------------------

    def advertise(self, host: str, port: int) -> None:
        """An HTTP edge listens for relayed requests at ``host:port``."""
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
        if lapsed:
            # The other workers may have taken this one for gone (TM-STORE-TASKS).
            await self.tasks.reconcile()

    async def relay_to(
        self, origin: str, request: HttpRequest, responder: Responder,
        on_answer: Callable[[], None] = lambda: None,
    ) -> str | None:
        """Pass ``request`` to worker ``origin``, once (a relayed request is never relayed
        again): None when it answered; else where it was thought to listen ("" when the
        store no longer has its address, the worker stopped)."""
        address = "" if request.relayed else await self.stored(self.store.locate(origin))
        if not address:
            return ""
        if await relay(
            address, request, responder,
            seal=self.relay_seal.seal(request, time.time()),
            connect_timeout=self.config.store_timeout, write_timeout=self.config.stall_budget,
            on_answer=on_answer,
        ):
            return None
        return address

    async def resume_elsewhere(
        self, session: Session, cursor: Cursor, last_event_id: str, request: HttpRequest,
        responder: Responder,
    ) -> Resumed:
        """Relayed to the worker holding the stream, once; a holder that is gone (or a
        request relayed already) is resumed from the stream's copy: strictly after the
        cursor, then its end (TM-STORE-STREAMS)."""
        if await self.relay_to(cursor.origin, request, responder, self._counts.relayed) is None:
            return Resumed.ANSWERED
        if request.relayed:
            return Resumed.LOST
        if cursor.stream == STANDALONE_STREAM:
            self._counts.resumes_from_store += 1
            return Resumed.STANDALONE
        claim = await self.stored(self.store.claim(
            session.id, cursor.origin, cursor.stream, cursor.seq,
            ttl=self.config.session_idle_ttl,
        ))
        if not await resume_from_copy(session, cursor, last_event_id, claim, responder):
            return Resumed.LOST
        self._counts.resumes_from_store += 1
        return Resumed.ANSWERED

    def keep_task(self, snapshot: TaskSnapshot, owner: str) -> None:
        self.tasks.keep(snapshot, owner)

    async def relay_task(
        self, call: ModernCall, request: HttpRequest, responder: Responder
    ) -> bool:
        return await self.tasks.relay(call, request, responder)

    def statistics(self) -> ClusterStatistics:
        return ClusterStatistics(**attrs.asdict(self._counts), stream_copies_lost=self.mirror.lost)
