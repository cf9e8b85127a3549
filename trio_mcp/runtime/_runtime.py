# The runtime that serves one App over HTTP: the entry every request to the MCP endpoint
# takes. It checks what holds for every request (Origin and Host, a running server), lets
# trio_mcp.protocol decide the request's era, and hands it to that era's path: legacy
# sessions (the LegacyEndpoint, over the SessionTable) or stateless modern requests
# (ModernServer, Listeners). It is the Hub the App reaches its clients through. It is built in
# one of two shapes, chosen once, here: a worker alone, or a worker in a cluster sharing a
# store with others (``Peers``: Alone or Cluster).
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..base._ports import App, SessionPort
from ..protocol import (
    JSON,
    CursorCodec,
    ErrorCode,
    Notification,
    OriginPolicy,
    RemoteProtocolError,
)
from ..protocol._era import Era, ModernCall, ModernNotification, route_other, route_post
from ..protocol._fair import Unit, UnitPolicy
from ..protocol._jsonrpc import request_id_of
from ..protocol._mrtr import RequestStateCodec
from ..protocol._tasks import TASKS_EXTENSION, declares_tasks, task_notification
from ..protocol._transport import HttpRequest, Reply, error_reply
from ._auth import Authenticator
from ._budget import BodyPool, BodyStatistics
from ._describe import ObjectRole, RoleKind, RuntimeInfo, SessionRole, TaskRole, TreeIndex
from ._failures import FailureLog
from ._memory import MemoryReleaser
from ._otelswitch import telemetry_for
from ._pools import Charge, Ledger, LedgerStatistics, Pool, PoolStatistics, handler_pool
from ._reqstats import RequestMetrics
from ._stats import counter, gauge, part
from ._telemetry import with_http
from .backpressure._responder import Responder
from .legacy._endpoint import EndpointStatistics, LegacyEndpoint
from .legacy._legacyport import SessionPort as LegacySessionPort
from .legacy._table import SessionTable, TableStatistics
from .modern._listen import Listeners
from .modern._modern import ModernServer
from .store._cluster import Cluster
from .store._peers import Alone, ClusterStatistics, Peers
from .store._relay import RelaySeal
from .tasks._taskmanager import TaskManager, TaskStatistics

if TYPE_CHECKING:
    from ..base._config import ServerConfig

logger = logging.getLogger("trio_mcp.runtime")

__all__ = ["Runtime", "RuntimeStatistics"]


def _scopes_for(app: App, body: JSON) -> frozenset[str]:
    """T-AUTH-STEPUP: the scopes of whatever the POSTed messages name."""
    needed: frozenset[str] = frozenset()
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            params = message.get("params")
            needed |= app.required_scopes(
                message["method"], params if isinstance(params, dict) else {}
            )
    return needed


@attrs.frozen
class ModernStatistics:
    """The modern path (TM-BP-COUNTERS: ModernStats, and what runs now), named ``modern_*``."""

    requests: int = counter()
    requests_streamed: int = counter()
    """Requests whose answer became an SSE stream (they sent a notification first)."""
    requests_cancelled: int = counter()
    """Requests whose client left before the answer (MU-CANCEL-1)."""
    input_required: int = counter()
    streams_cut: int = counter()
    requests_running: int = gauge()


@attrs.frozen(kw_only=True)
class RuntimeStatistics:
    """The counters of TM-BP-COUNTERS, both eras: what the stats port serves, flat, as JSON,
    and /metrics exports (each figure as the kind its field declares)."""

    sessions: TableStatistics = part()
    endpoint: EndpointStatistics = part()
    cluster: ClusterStatistics = part()
    bodies: BodyStatistics = part()
    modern: ModernStatistics = part("modern_")
    listeners_open: int = gauge()
    tasks: TaskStatistics = part("tasks_")
    long_streams_open: int = gauge()
    streams: PoolStatistics = part("streams_")
    handlers_running: int = gauge()
    """Handlers running now, both eras (TM-SEC-FAIR's handlers pool)."""
    handlers: PoolStatistics = part("handlers_")
    request_memory: LedgerStatistics = part("request_memory_")
    connections: PoolStatistics | None = part("connections_", default=None)
    """The own server's connections (TM-SEC-FAIR); None under another HTTP server."""


class OriginPolicies:
    """The Origin/Host policy for the requests arriving on each local address.

    Served by ``serve()`` the bind address is known. Under another ASGI server (the
    hypercorn command line) it is not, so the address each request arrived on decides: a
    request that came in over loopback gets the loopback Host check (TM-SEC-HOST).
    """

    def __init__(self, config: ServerConfig, bind_hosts: list[str]) -> None:
        self._config = config
        self._bind_hosts = list(bind_hosts)
        self._policies: dict[str | None, OriginPolicy] = {}

    def for_host(self, local_host: str | None) -> OriginPolicy:
        key = None if self._bind_hosts else local_host
        policy = self._policies.get(key)
        if policy is None:
            binds = self._bind_hosts or ([local_host] if local_host else [])
            policy = OriginPolicy.for_bind(binds, self._config.allowed_origins)
            if self._config.allowed_hosts is not None:
                policy = attrs.evolve(
                    policy, allowed_hosts=frozenset(self._config.allowed_hosts) or None
                )
            if len(self._policies) < 64:  # a few local addresses at most
                self._policies[key] = policy
        return policy


class Runtime:
    """Serves ``app`` over HTTP. ``run()`` must be running for requests to be served."""

    def __init__(self, app: App, config: ServerConfig, *, bind_hosts: list[str]) -> None:
        self.app = app
        self.config = config
        #: T-SEC-1 / TM-SEC-HOST: the Origin and Host policy of each local address.
        self.origins = OriginPolicies(config, bind_hosts)
        self._nursery: trio.Nursery | None = None
        #: Errors of our own while serving a request (bugs): logged per place and
        #: rate-limited, so that a client repeating the request that triggers one cannot
        #: fill the log (TM-SEC-LOG).
        self.failures = FailureLog(logger, "unexpected error; answered 500 if nothing was sent")
        #: TM-SEC-UNIT: who a request's client is, for the fair shares.
        self.units = UnitPolicy.of(
            ipv4_prefix=config.client_ipv4_prefix,
            ipv6_prefix=config.client_ipv6_prefix,
            trusted_proxies=config.trusted_proxies,
            header=config.client_address_header,
        )
        #: TM-SEC-FAIR: the long-lived streams of both eras (legacy GETs, listens).
        self.streams: Pool[Any] = Pool(
            "streams", config.max_streams, evict=lambda stream: stream.evict()
        )
        #: Pools kept by the HTTP edges (the own server's connections), counted here.
        self._edge_pools: list[Pool[Any]] = []
        #: T-AUTH-17 / TM-STORE-STREAMS: what a relayed request carries instead of its
        #: client's credentials, under a key only the workers sharing the secret have.
        self.relay_seal = RelaySeal(
            config.derived_key("relay"), address_of=self.units.client_address_of
        )
        #: The other workers serving this endpoint: a Cluster sharing the configured store,
        #: else none (Alone).
        self.peers: Peers = self._peers_for(config)
        # TM-RES-EVENTID / TM-WORK-SECRET: without a shared secret the key lives only in this
        # process, and cursors from before a restart (or from another worker) do not verify.
        self.codec = CursorCodec(config.derived_key("cursor"), origin=self.peers.origin)
        #: Requests by method and outcome, both eras and tasks (/metrics).
        self.requests = RequestMetrics(telemetry_for(config))
        #: TM-SESS-RELEASE: freed memory handed back to the OS.
        self.releaser = MemoryReleaser(config.release_memory_after)
        #: TM-SEC-FAIR: the handlers running, both eras, by client.
        self.handlers = handler_pool(config.max_handlers)
        #: TM-SEC-BODIES: what the HTTP edges hold of bodies still arriving, shared fairly.
        self.bodies = BodyPool(config.max_body_memory)
        #: The legacy sessions, and the endpoint that serves them.
        self.table = SessionTable(
            app, config, peers=self.peers, releaser=self.releaser, codec=self.codec,
            metrics=self.requests, units=self.units, handlers=self.handlers,
        )
        self.legacy = LegacyEndpoint(
            app, config, table=self.table, peers=self.peers, codec=self.codec,
            streams=self.streams, units=self.units,
        )
        #: TM-SEC-MEMORY: what requests hold while they are served, per session, per client
        #: and in all; what each gave back is told to the memory releaser (TM-SESS-RELEASE).
        self.ledger = Ledger(
            server=config.request_memory,
            per_client=config.request_memory_per_client,
            per_session=config.request_memory_per_session,
            releaser=self.releaser,
            enabled=config.memory_accounting,
        )
        # TM-MRTR-STATE: the configured key, shared by the processes that serve the same
        # clients (ML-STATE-2); else one that lives only in this process.
        key = config.request_state_key or config.derived_key("request-state")
        codec = RequestStateCodec(key, ttl=config.request_state_ttl)
        #: Tool calls that outlive their exchange (spec/tasks.md).
        self.tasks = TaskManager(
            app,
            config,
            on_change=lambda snapshot: self.listeners.offer_task(task_notification(snapshot)),
            releaser=self.releaser,
            requests=self.requests,
            origin=self.peers.origin,
            keep=self.peers.keep_task,
            units=self.units,
        )
        self.modern = ModernServer(
            app,
            config,
            spawn=self.spawn,
            state_codec=codec,
            tasks=self.tasks,
            engines={TASKS_EXTENSION: self.tasks},  # TM-EXT-ENGINE
            requests=self.requests,
            handlers=self.handlers,
        )
        self.listeners = Listeners(
            app, config, spawn=self.spawn, stats=self.modern.stats, streams=self.streams,
            releaser=self.releaser,
        )
        self.auth = Authenticator(config.auth) if config.auth is not None else None
        #: The task of run(), once it runs (for the inspector).
        self.run_task: trio.lowlevel.Task | None = None

    def _peers_for(self, config: ServerConfig) -> Peers:
        """The one place a shared store is looked at: a Cluster with it, else Alone."""
        if config.store is None:
            return Alone(config)
        if isinstance(config.store, str):
            raise TypeError(
                "ServerConfig.store is a URL: the serving layer maps it to a store "
                "(trio_mcp.runtime.store._stores.with_store); a Runtime takes a store factory"
            )
        return Cluster(
            config.store(config), config, relay_seal=self.relay_seal, on_notify=self._deliver
        )

    # -- lifetime ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the legacy sessions, the peers, the tasks and the key-set fetches; attach to
        the App."""
        self.run_task = trio.lowlevel.current_task()
        try:
            async with self.app.serving(), trio.open_nursery() as nursery:  # TM-HAND-LIFESPAN
                await nursery.start(self.table.run)
                await nursery.start(self.tasks.run)
                await nursery.start(self.peers.run, self.table, self.tasks, self.modern)
                if self.auth is not None:
                    # TM-AUTH-VERIFY: key-set fetches run here, not in a request's task.
                    nursery.start_soon(self.auth.run)
                self._nursery = nursery
                self.app.attach(self)
                try:
                    task_status.started()
                    await trio.sleep_forever()
                finally:
                    self.app.detach(self)
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None

    @property
    def running(self) -> bool:
        return self._nursery is not None and self.table.running

    def spawn(self, fn: Any, *args: Any, name: str) -> bool:
        """Start a task that outlives the HTTP exchange that needs it (a stream's writer)."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(fn, *args, name=name)
        return True

    async def shutdown(self, grace: float) -> None:
        """Graceful shutdown (TM-SESS-SHUTDOWN): refuse new work, end every subscription
        with its result, give running requests ``grace`` seconds, then end them all."""
        self.listeners.end_all()
        self.tasks.stop()
        # Requests whose handlers run now, in both eras.
        running = self.table.running_handlers() + len(self.modern.running)
        if running:
            # Said, so that an operator who stopped the server knows what it waits for.
            logger.info(
                "shutdown: waiting up to %g s (shutdown_grace) for %d running request "
                "handler(s) to finish; then they are cancelled", grace, running,
            )
        cancelled = [0]

        async def legacy() -> None:
            cancelled[0] = await self.table.shutdown(grace)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(legacy)
            with trio.move_on_after(grace):
                await self.modern.drain()
            for exchange in list(self.modern.running):
                cancelled[0] += 1
                exchange.stop()
        left = cancelled[0]
        if left:
            logger.warning(
                "shutdown: %d request handler(s) still running after %g s: cancelled", left, grace
            )

    # -- the Hub the App sees ---------------------------------------------------------------

    def sessions(self) -> list[SessionPort]:
        return [LegacySessionPort(s) for s in list(self.table.sessions.values()) if not s.closed]

    def broadcast(self, method: str, params: Mapping[str, JSON] | None = None) -> int:
        notification = Notification(method=method, params=params)
        sent = self._deliver(notification)
        # TM-STORE-NOTIFY: the other workers' clients are told too (not counted here).
        self.peers.announce(notification)
        return sent

    def _deliver(self, notification: Notification) -> int:
        """A change notification, made here or at another worker, to this worker's
        clients that asked for it: listeners, and legacy sessions' standalone streams."""
        sent = self.listeners.broadcast(notification.method, notification.params)
        return sent + self.table.broadcast(notification)

    # -- HTTP entry -------------------------------------------------------------------------

    async def handle(self, request: HttpRequest, responder: Responder) -> None:
        """Serve one request to the MCP endpoint, Origin and Host first."""
        try:
            # T-SEC-1 / MT-SEC-1 (MUST): Origin is validated on every request, before its
            # era is known.
            self.policy_for(request.local_host).check(request.headers)
        except RemoteProtocolError as exc:
            await responder.reply(error_reply(exc))
            return
        await self.serve(request, responder)

    async def serve(
        self, request: HttpRequest, responder: Responder, *, relay_port: bool = False
    ) -> None:
        """Serve one request whose Origin and Host the caller has checked (the ASGI adapter
        does, before the path and the body: T-SEC-1); ``relay_port``: it arrived at this
        worker's relay port (TM-STORE-STREAMS)."""
        try:
            if not self.running or self.table.shutting_down:
                raise RemoteProtocolError(
                    "Service Unavailable: the server is not running.",
                    code=ErrorCode.SERVER_BUSY,
                    http_status=503,
                )
            if relay_port:
                # T-AUTH-17, TM-WORK-PEER: nothing but a sealed request is served here, as
                # its client's, for the principal the relaying worker verified.
                request = self.relay_seal.admit(
                    request, time.time(), principal_required=self.auth is not None
                )
            elif self.auth is not None:
                # T-AUTH-EVERY (MUST): every request carries its token, in a session or not.
                principal = await self.auth.authenticate(request.headers)
                request = attrs.evolve(request, principal=principal)
            # TM-SEC-UNIT: whose share of the pools and budgets the request takes.
            unit = self.unit_of(request)
            if request.method != "POST":
                if self.auth is not None:
                    assert request.principal is not None
                    self.auth.check(request.principal, frozenset())
                route_other(request.method, request.headers)
                await self.legacy.serve(request, responder, unit=unit)
                return
            # TM-SEC-MEMORY: a body the client's room cannot hold is not decoded.
            self.ledger.check_body(unit.key, len(request.body))
            # TM-SEC-MEMORY: the body, what it decoded to and its handlers, charged.
            body, charge = await self.ledger.decode_post(
                request, unit.key, max_body_bytes=self.config.max_body_bytes
            )
            try:
                if self.auth is not None:
                    # MT-AUTH-3: the scopes every request needs and those of what it names,
                    # in one challenge, not one after the other.
                    assert request.principal is not None
                    self.auth.check(
                        request.principal, _scopes_for(self.app, body),
                        request_id=request_id_of(body),
                    )
                route = route_post(request.headers, body)
                if isinstance(route, ModernNotification):
                    if (telemetry := self.requests.telemetry) is not None:
                        telemetry.notification(route.notification)
                    # MT-POST-5 (MUST): an accepted notification gets 202 and no body.
                    await responder.reply(Reply(status=202))
                    return
                await self._serve_post(request, body, route, responder, unit, charge)
            finally:
                if charge is not None:
                    charge.exchange_done()
        except RemoteProtocolError as exc:
            await responder.reply(error_reply(exc))

    async def _serve_post(
        self,
        request: HttpRequest,
        body: JSON,
        route: Era | ModernCall,
        responder: Responder,
        unit: Unit,
        charge: Charge | None,
    ) -> None:
        if route is Era.LEGACY:
            await self.legacy.post(request, body, responder, unit=unit, charge=charge)
            return
        assert isinstance(route, ModernCall)
        if route.request.method == "subscriptions/listen":
            self.modern.check(route, request.headers)
            await self.listeners.serve(
                route,
                responder,
                accept_task=self.tasks.follower(request.principal)
                if declares_tasks(route.envelope.client_capabilities)
                else None,
                unit=unit,
                charge=charge,
            )
        elif not await self.peers.relay_task(route, request, responder):
            await self.modern.serve(
                route,
                request.headers,
                responder,
                principal=request.principal,
                peer=self.units.client_address(request.peer_host, request.headers),
                unit=unit, charge=charge,
            )

    def unit_of(self, request: HttpRequest) -> Unit:
        """TM-SEC-UNIT: the request's principal, else its client's address (read from the
        forwarding header only for a connection from a trusted proxy) under the prefix."""
        principal = request.principal
        return self.units.of_request(
            principal.key if principal is not None else None, request.peer_host, request.headers
        )

    async def well_known(self, method: str, path: str) -> Reply | None:
        """The answer to a request outside the MCP endpoint that the server serves anyway:
        its Protected Resource Metadata (T-AUTH-PRM), the application's routes."""
        return await _elsewhere(self, method, path)

    async def serve_guarded(
        self, request: HttpRequest, responder: Responder, *, relay_port: bool = False
    ) -> bool:
        """``serve``, with an error of our own (a bug) logged, and answered with a JSON-RPC
        internal error if no response has started: never a traceback on the wire. False
        when that happened. With telemetry on, its handlers find the request (TM-OTEL-PARENT)."""
        try:
            serve = with_http(self.serve, t) if (t := self.requests.telemetry) else self.serve
            await serve(request, responder, relay_port=relay_port)
        except Exception as exc:
            self.failures.caught(exc, context=f"serving {request.method}")
            if not responder.started:
                await responder.reply(
                    error_reply(
                        RemoteProtocolError(
                            "Internal error.", code=ErrorCode.INTERNAL_ERROR, http_status=500
                        )
                    )
                )
            return False
        return True

    def policy_for(self, local_host: str | None) -> OriginPolicy:
        """The Origin/Host policy for requests arriving on ``local_host`` (OriginPolicies)."""
        return self.origins.for_host(local_host)

    # -- introspection ----------------------------------------------------------------------

    def describe(self) -> RuntimeInfo:
        return RuntimeInfo(task=self.run_task, server=self.app.server_info().get("name"))

    def describe_tree(self) -> TreeIndex:
        """Which of the runtime's tasks is what, now, for the inspector (edges.observe):
        its own, the table's, each session's supervisor and connections, each modern
        exchange and task run. A session's handlers and writers are told for a session
        only when asked (``TreeIndex.session_roles``)."""
        roles: dict[trio.lowlevel.Task, TaskRole] = {}
        if self.run_task is not None:
            roles[self.run_task] = ObjectRole(RoleKind.RUNTIME, self)
        if self.table.task is not None:
            roles[self.table.task] = ObjectRole(RoleKind.TABLE, self.table)
        for session in list(self.table.sessions.values()):
            if session.task is not None:
                roles[session.task] = SessionRole(RoleKind.SESSION, session)
            for view in list(session.views.values()):
                if view.task is not None:
                    roles[view.task] = SessionRole(RoleKind.VIEW, session, view.stream)
        for exchange in list(self.modern.running):
            if exchange.task is not None:
                roles[exchange.task] = ObjectRole(RoleKind.EXCHANGE, exchange)
        for run in list(self.tasks.runs.values()):
            if run.task is not None:
                roles[run.task] = ObjectRole(RoleKind.TASKRUN, run)
        return TreeIndex(
            roles=roles,
            sessions=len(self.table.sessions),
            modern_requests=len(self.modern.running),
            task_runs=len(self.tasks.runs),
        )

    def statistics(self) -> RuntimeStatistics:
        """The counters of TM-BP-COUNTERS, both eras."""
        edges = [pool.statistics() for pool in self._edge_pools]
        return RuntimeStatistics(
            sessions=self.table.statistics(),
            endpoint=self.legacy.statistics(),
            cluster=self.peers.statistics(),
            bodies=self.bodies.statistics(),
            modern=ModernStatistics(
                **attrs.asdict(self.modern.stats), requests_running=len(self.modern.running)
            ),
            listeners_open=len(self.listeners.live),
            tasks=self.tasks.statistics(),
            long_streams_open=len(self.streams),
            streams=self.streams.statistics(),
            handlers_running=len(self.handlers),
            handlers=self.handlers.statistics(),
            request_memory=self.ledger.statistics(),
            connections=sum(edges[1:], edges[0]) if edges else None,
        )

    def count_pool(self, pool: Pool[Any]) -> None:
        """An HTTP edge's pool (the own server's connections, TM-SEC-FAIR): its refusals and
        evictions are among the statistics, summed over the edges that keep one."""
        self._edge_pools.append(pool)


async def _elsewhere(runtime: Runtime, method: str, path: str) -> Reply | None:
    """Runtime.well_known: the Protected Resource Metadata with authorization (T-AUTH-PRM),
    else the application's own route at ``path`` (TM-HAND-ROUTE)."""
    known = runtime.auth.well_known(method, path) if runtime.auth is not None else None
    return known if known is not None else await runtime.app.http_route(method, path)
