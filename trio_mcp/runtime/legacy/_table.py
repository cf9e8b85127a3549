# The legacy sessions of one runtime (spec/sessions.md): a table of them by id, the nursery
# that holds each session's supervisor task, and what bounds them. A full table takes from
# the client holding the most (TM-SEC-FAIR, TM-SESS-CAP: through the fair Pool); a session
# idle past its time to live ends (TM-SESS-IDLE), as does one whose client left it with work
# running (TM-SESS-ABANDONED). What a worker in a cluster does instead, or besides, is its
# peers' (trio_mcp.runtime.store._peers): an idle session is let go here and lives on in the store.
from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...protocol import CursorCodec, Notification, Phase
from ...protocol._fair import UnitPolicy
from ...protocol._headers import Headers
from .._describe import SessionEnd, TableInfo, ViewEnd
from .._memory import MemoryReleaser
from .._pools import Pool, handler_pool
from .._stats import counter, gauge
from ._session import Session, SessionHost
from ._sessionstats import SessionTotals

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...base._ports import App
    from .._reqstats import RequestMetrics
    from ..backpressure._view import View
    from ..store._peers import Peers
    from ..store._store import SessionRecord

__all__ = ["CANCEL_COST", "EVICTION_SCAN", "SessionTable", "TableStatistics", "expire_period"]

logger = logging.getLogger("trio_mcp.sessions")

#: What cancelling one running handler may cost at shutdown, in seconds: held back from the
#: grace (TM-SESS-SHUTDOWN; measured in benchmarks/ANALYSIS.md).
CANCEL_COST = 0.0003
#: The most sessions of one client an eviction looks at for an idle one (TM-SESS-CAP).
EVICTION_SCAN = 64


def expire_period(config: ServerConfig) -> float:
    """How often the expiry loop runs (and busy sessions are renewed in a shared store)."""
    ttls = [config.session_idle_ttl, config.uninitialized_ttl]
    if config.abandoned_ttl is not None:
        ttls.append(config.abandoned_ttl)
    return max(0.05, min(ttls) / 10)


@attrs.frozen
class TableStatistics:
    """The legacy sessions (TM-BP-COUNTERS; spec/backpressure.md says what each counts)."""

    sessions_expired: int = counter()
    sessions_evicted: int = counter()
    sessions_abandoned: int = counter()
    """Sessions ended with work in flight because their client was gone (TM-SESS-ABANDONED);
    also counted in ``sessions_expired``."""
    sessions_released: int = counter()
    """Sessions this worker stopped holding, idle here, while they live on in the shared
    store (TM-STORE-RECORD); not counted as expired."""
    streams_stalled: int = counter()
    streams_cut: int = counter()
    memory_releases: int = counter()
    """Times the expiry loop handed freed memory back to the OS (TM-SESS-RELEASE)."""
    sessions_open: int = gauge()
    streams_open: int = gauge()
    requests_inflight: int = gauge()
    events_appended: int = counter()
    events_evicted: int = counter()
    events_retained: int = gauge()
    bytes_retained: int = gauge()
    client_notifications_dropped: int = counter()
    """Notifications from clients whose hooks were not run (TM-SEC-NOTIFY)."""
    subscriptions_refused: int = counter()
    """Subscriptions refused for their URI's length or their number (TM-SEC-STATE)."""


@attrs.define
class _Counts:
    """The table's own counters, and those of the sessions that have ended."""

    sessions_expired: int = 0
    sessions_evicted: int = 0
    sessions_abandoned: int = 0
    sessions_released: int = 0
    memory_releases: int = 0
    streams_stalled: int = 0
    streams_cut: int = 0
    events_appended: int = 0
    events_evicted: int = 0
    client_notifications_dropped: int = 0
    subscriptions_refused: int = 0


class SessionTable:
    """Every legacy session of one runtime, by id. ``run()`` must be running for sessions
    to be served."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        peers: Peers,
        releaser: MemoryReleaser,
        codec: CursorCodec,
        metrics: RequestMetrics,
        units: UnitPolicy,
        handlers: Pool[Any] | None = None,
    ) -> None:
        self.config = config
        self.peers = peers
        #: What every session of this table shares.
        self.host = SessionHost(
            app, config, codec, owner=self, peers=peers, copies=peers.copies,
            outbound_base=peers.outbound_base, metrics=metrics,
            handlers=handlers if handlers is not None else handler_pool(config.max_handlers),
        )
        #: TM-SEC-UNIT: whose share a session takes up from a shared store counts against,
        #: when its record does not say.
        self._units = units
        #: TM-SESS-RELEASE: what ended sessions held, for the next memory release.
        self.releaser = releaser
        #: Every session, by id.
        self.sessions: dict[str, Session] = {}
        #: Sessions closed whose tasks are still ending, with what they held (TM-SESS-RELEASE).
        self._ending: dict[Session, int] = {}
        #: TM-SESS-CAP / TM-SEC-FAIR: the sessions by client, each's least recently used
        #: first (``used`` moves a session to the end): a full table takes from the client
        #: holding the most.
        self.pool: Pool[Session] = Pool(
            "sessions",
            config.max_sessions,
            evict=self._evicted,
            pick=self._least_needed,
            replace=self._idle_among,
        )
        self._counts = _Counts()
        self._nursery: trio.Nursery | None = None
        self.shutting_down = False
        #: The task of run(), once it runs (for describe()).
        self.task: trio.lowlevel.Task | None = None

    # -- lifetime -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery of every session's supervisor, and the expiry loop."""
        self.task = trio.lowlevel.current_task()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._expire_loop)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    @property
    def running(self) -> bool:
        return self._nursery is not None

    async def shutdown(self, grace: float) -> int:
        """Graceful shutdown (TM-SESS-SHUTDOWN): refuse new work, close every connection
        with a retry hint, give running handlers ``grace`` seconds, then end every session
        (which cancels what is still running). Returns how many handlers that cancelled."""
        self.shutting_down = True
        closing: list[View] = []
        for session in list(self.sessions.values()):
            for view in list(session.views.values()):
                view.stop(ViewEnd.SERVER_CLOSED)
                closing.append(view)
        running = self.running_handlers()
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
            session.close(SessionEnd.SHUTDOWN)
        # Let the supervisors run their teardown before the caller stops the server.
        await trio.lowlevel.checkpoint()
        return left

    def running_handlers(self) -> int:
        return sum(len(s.inflight) for s in self.sessions.values())

    # -- the sessions in it ---------------------------------------------------------------

    def make(self, record: SessionRecord, *, log_base: int = 0) -> Session:
        """A session of this table for ``record``, made here or taken up from a shared store
        (not yet entered: ``hold``, ``enter``)."""
        if not record.unit:
            unit = self._units.of_request(record.principal, record.peer, Headers([])).key
            record = attrs.evolve(record, unit=unit)
        return Session.of(self.host, record, log_base=log_base)

    def admit(self, unit: str) -> bool:
        """Whether a new session of client ``unit`` may take a place now (TM-SESS-CAP,
        TM-SEC-FAIR): sessions of the client holding the most, or this client's own idle
        ones, are ended for it; False when it holds its share or more of a full table."""
        return self.pool.admit(unit)

    def hold(self, session: Session) -> None:
        """A place admitted is taken now, before the session starts: another initialize
        must not be admitted to the same place meanwhile."""
        self.pool.add(session.creator.unit, session)

    def give_up(self, session: Session) -> None:
        """The place ``hold`` took is given back: the session never started."""
        self.pool.discard(session)

    async def enter(self, session: Session) -> bool:
        """Start the session's supervisor, then enter it in the table: a request that finds
        it there can start handlers at once. False when it did not stay: taken for another
        client's while it started (TM-SEC-FAIR), or ``session.id`` is held already (a
        concurrent request took it up: that one is in the table)."""
        assert self._nursery is not None
        await self._nursery.start(self._supervise, session)
        if session.closed or self.sessions.get(session.id) not in (None, session):
            return False
        self.sessions[session.id] = session
        self.pool.add(session.creator.unit, session)
        return True

    async def _supervise(
        self, session: Session, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run ``session``; once it and all its tasks have ended, tell the memory releaser
        what it held (TM-SESS-RELEASE). Told when it was closed instead, a release could
        come between the two and trim while its tasks still held their memory, and none
        come after if little more was freed."""
        try:
            await session.run(task_status=task_status)
        finally:
            self.releaser.freed(self._ending.pop(session, 0))

    def get(self, session_id: str) -> Session | None:
        """The session ``session_id`` if it is held here and has not ended."""
        session = self.sessions.get(session_id)
        return None if session is None or session.closed else session

    def busy(self) -> list[str]:
        """The sessions with work running here (handlers, connections)."""
        return [s.id for s in self.sessions.values() if not s.idle]

    def used(self, session: Session) -> None:
        self.pool.touch(session)

    def forget(self, session: Session, totals: SessionTotals | None) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.pool.discard(session)
        if totals is not None:
            if (telemetry := self.host.metrics.telemetry) is not None:
                # TM-OTEL-METRICS: mcp.server.session.duration.
                telemetry.session_ended(trio.current_time() - session.created_at, session.version)
            # TM-SESS-RELEASE: what the session held, freed once its tasks are done.
            self._ending[session] = totals.held_bytes
            counts, ended = self._counts, totals.statistics
            counts.events_appended += ended.events_appended
            counts.events_evicted += ended.events_evicted
            counts.client_notifications_dropped += ended.client_notifications_dropped
            counts.subscriptions_refused += ended.subscriptions_refused
            counts.streams_stalled += ended.streams_stalled
            counts.streams_cut += ended.streams_cut

    def evicted_elsewhere(self, session_ids: tuple[str, ...]) -> None:
        """The shared store deleted these sessions to make room (TM-STORE-BOUND): evicted,
        and ended here too if held here."""
        for session_id in session_ids:
            self._counts.sessions_evicted += 1
            session = self.get(session_id)
            if session is not None:
                session.close(SessionEnd.EVICTED)

    def broadcast(self, notification: Notification) -> int:
        """Send a change notification on the standalone stream (T-GET-5: it relates to no
        request) of each session it is for (Session.takes); how many got it at once."""
        deliver = self.peers.deliver
        return sum(deliver(session, notification) for session in list(self.sessions.values()))

    # -- what ends sessions ---------------------------------------------------------------

    async def _expire_loop(self) -> None:
        period = expire_period(self.config)
        while True:
            await trio.sleep(period)
            # TM-SESS-RELEASE: a period after sessions ended, when their tasks are done.
            if self.releaser.maybe_release():
                self._counts.memory_releases += 1
            self._expire_once(trio.current_time())

    def _expire_once(self, now: float) -> None:
        # A function of its own, so that no local of this sleeping loop keeps the last
        # session it looked at (and that session's log) alive after it ended (TM-SESS-IDLE).
        cfg, counts = self.config, self._counts
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
                    counts.sessions_expired += 1
                    counts.sessions_abandoned += 1
                    session.close(SessionEnd.ABANDONED)
                    # TM-STORE-CONTROL: abandoned is an end for every worker.
                    self.peers.ended(session, SessionEnd.ABANDONED)
                continue
            ttl = cfg.session_idle_ttl
            if session.phase is Phase.AWAITING_INITIALIZED:
                ttl = min(ttl, cfg.uninitialized_ttl)
            if now - session.last_activity >= ttl:
                # TM-SESS-IDLE: expired; in a cluster (TM-STORE-RECORD), let go here while
                # the shared record keeps its own expiry, renewed by whichever worker the
                # client reaches.
                end = self.peers.idle_end
                if end is SessionEnd.RELEASED:
                    counts.sessions_released += 1
                else:
                    counts.sessions_expired += 1
                session.close(end)

    def _evicted(self, session: Session) -> None:
        """TM-SESS-CAP: a full table took this session for another client's."""
        self._counts.sessions_evicted += 1
        session.close(SessionEnd.EVICTED)  # which takes it out of the table (forget)
        # TM-STORE-BOUND: evicted for every worker, not left in the store to be taken up
        # again until its time to live runs out; unless it is in use at another worker
        # (then this one has only let its replica go).
        self.peers.ended(session, SessionEnd.EVICTED)

    def _idle_among(self, sessions: dict[Session, None]) -> Session | None:
        """The least recently used evictable session (idle, or abandoned for
        ``evict_abandoned_after``) among the first EVICTION_SCAN of ``sessions``. One in use
        now goes to the back of the order, so that the next look does not look at it again:
        each costs O(1) amortized. A client at its share of a full table may give up such a
        session of its own for a new one (TM-SESS-CAP): none, and it is refused."""
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

    # -- introspection --------------------------------------------------------------------

    def describe(self) -> TableInfo:
        """The table itself, for the inspector (its sessions describe themselves)."""
        return TableInfo(
            task=self.task,
            sessions=len(self.sessions),
            max_sessions=self.config.max_sessions,
            shutting_down=self.shutting_down,
        )

    def statistics(self) -> TableStatistics:
        """The counters of TM-BP-COUNTERS: totals, then what is open and retained now."""
        counts = self._counts
        live = [s.statistics() for s in list(self.sessions.values())]
        return TableStatistics(
            sessions_expired=counts.sessions_expired,
            sessions_evicted=counts.sessions_evicted,
            sessions_abandoned=counts.sessions_abandoned,
            sessions_released=counts.sessions_released,
            streams_stalled=counts.streams_stalled + sum(s.streams_stalled for s in live),
            streams_cut=counts.streams_cut + sum(s.streams_cut for s in live),
            memory_releases=counts.memory_releases,
            sessions_open=len(live),
            streams_open=sum(s.views for s in live),
            requests_inflight=sum(s.inflight for s in live),
            events_appended=counts.events_appended + sum(s.events_appended for s in live),
            events_evicted=counts.events_evicted + sum(s.events_evicted for s in live),
            events_retained=sum(s.retained_events for s in live),
            bytes_retained=sum(s.retained_bytes for s in live),
            client_notifications_dropped=counts.client_notifications_dropped
            + sum(s.client_notifications_dropped for s in live),
            subscriptions_refused=counts.subscriptions_refused
            + sum(s.subscriptions_refused for s in live),
        )
