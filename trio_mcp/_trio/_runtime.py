# The runtime that serves one App over HTTP: the entry every request to the MCP endpoint
# takes. It checks what holds for every request (Origin and Host, a running server), lets
# trio_mcp.protocol decide the request's era, and hands it to that era's path: legacy
# sessions (SessionManager) or stateless modern requests (ModernServer, Listeners). It is the
# Hub the App reaches its clients through.
from __future__ import annotations

import collections
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._ports import App, SessionPort
from ..protocol import JSON, ErrorCode, Notification, OriginPolicy, RemoteProtocolError
from ..protocol._era import Era, ModernCall, ModernNotification, route_other, route_post
from ..protocol._fair import Unit, UnitPolicy
from ..protocol._footprint import body_cost
from ..protocol._logtext import LogLimiter
from ..protocol._methods import TASK_METHODS
from ..protocol._mrtr import RequestStateCodec
from ..protocol._tasks import (
    TaskAction,
    TaskQuery,
    TaskSnapshot,
    declares_tasks,
    holder_unreachable,
    is_terminal,
    lost_task,
    read_task_query,
    remaining_ttl,
    stored_task_result,
    task_ack_result,
    task_lost,
    task_notification,
    task_origin,
)
from ..protocol._transport import HttpRequest, Reply, error_reply, read_post_body
from ._announce import Announcer
from ._auth import Authenticator
from ._budget import BodyPool
from ._failures import FailureLog
from ._listen import Listeners
from ._manager import SessionManager
from ._modern import ModernServer
from ._pools import Charge, Ledger, Pool
from ._relay import relay
from ._responder import Responder
from ._session import SessionPort as LegacySessionPort
from ._store import MemoryStore, SessionStore, StoredTask, StoreUnavailable
from ._tasks import TaskManager

if TYPE_CHECKING:
    from .._config import ServerConfig

logger = logging.getLogger("trio_mcp.runtime")


__all__ = ["Runtime"]


def _request_id(body: JSON) -> str | int | None:
    """MJ-ERR-1: the id of a body that is one request, for an error decided before its era
    (a 403 for its scopes); None for a batch, a notification or an id of another type."""
    if isinstance(body, dict):
        rid = body.get("id")
        if isinstance(rid, str | int) and not isinstance(rid, bool):
            return rid
    return None


def _store_for(config: ServerConfig) -> SessionStore:
    """The session store ``config.store`` names (TM-STORE-RECORD)."""
    if config.store is None:
        return MemoryStore()
    from ._redis import RedisStore

    return RedisStore(config.store, timeout=config.store_timeout, prefix=config.store_prefix)


class Runtime:
    """Serves ``app`` over HTTP. ``run()`` must be running for requests to be served."""

    def __init__(self, app: App, config: ServerConfig, *, bind_hosts: list[str]) -> None:
        self.app = app
        self.config = config
        self._bind_hosts = list(bind_hosts)
        self._policies: dict[str | None, OriginPolicy] = {}
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
        self.manager = SessionManager(
            app, config, bind_hosts=bind_hosts, store=_store_for(config),
            on_notify=self._deliver, on_lapse=self.reconcile_tasks, units=self.units,
            streams=self.streams,
        )
        #: TM-SEC-MEMORY: what requests hold while they are served, per session, per client
        #: and in all; what each gave back is told to the memory releaser (TM-SESS-RELEASE).
        self.ledger = Ledger(
            server=config.request_memory,
            per_client=config.request_memory_per_client,
            per_session=config.request_memory_per_session,
            releaser=self.manager.releaser,
            enabled=config.memory_accounting,
        )
        if self.manager.store.shared and config.secret is None and config.workers > 1:
            # TM-WORK-SECRET: each process would draw keys of its own.
            logger.warning(
                "a shared store without a shared secret: the other workers will refuse this "
                "one's cursors, requestStates and relayed requests; set ServerConfig.secret "
                "or $TRIO_MCP_SECRET"
            )
        #: TM-STORE-NOTIFY: this worker's change notifications, for the other workers.
        self._announcer = Announcer(self.manager.store) if self.manager.store.shared else None
        #: TM-SEC-BODIES: what the HTTP edges hold of bodies still arriving (the manager
        #: keeps it, so that its counters are among the server's).
        self.bodies: BodyPool = self.manager.bodies
        # TM-MRTR-STATE: the configured key, shared by the processes that serve the same
        # clients (ML-STATE-2); else one that lives only in this process.
        key = config.request_state_key or config.derived_key("request-state")
        codec = RequestStateCodec(key, ttl=config.request_state_ttl)
        #: Tool calls that outlive their exchange (spec/tasks.md).
        self.tasks = TaskManager(
            app,
            config,
            on_change=self._task_changed,
            releaser=self.manager.releaser,
            requests=self.manager.requests,
            origin=self.manager.store.origin,
            keep=self._keep_task if self.manager.store.shared else None,
            units=self.units,
        )
        #: TM-STORE-TASKS: task changes on their way to the shared store, in order.
        self._kept_tasks: collections.deque[StoredTask] = collections.deque()
        self._kept_tasks_wake = trio.Event()
        self._task_store_log = LogLimiter(interval=10.0)
        self.modern = ModernServer(
            app,
            config,
            spawn=self.spawn,
            state_codec=codec,
            tasks=self.tasks,
            requests=self.manager.requests,
        )
        self.listeners = Listeners(
            app, config, spawn=self.spawn, stats=self.modern.stats, streams=self.streams,
            releaser=self.manager.releaser,
        )
        self.auth = Authenticator(config.auth) if config.auth is not None else None
        #: The task of run(), once it runs (for the inspector; ``tasks`` are the tasks
        #: extension's).
        self.run_task: trio.lowlevel.Task | None = None

    # -- lifetime ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the session manager and the tasks of modern streams; attach to the App."""
        self.run_task = trio.lowlevel.current_task()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.manager.run)
                await nursery.start(self.tasks.run)
                if self.manager.store.shared:
                    nursery.start_soon(self._store_tasks)
                if self._announcer is not None:
                    nursery.start_soon(self._announcer.run)
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
        return self._nursery is not None and self.manager.running

    def _task_changed(self, snapshot: TaskSnapshot) -> None:
        self.listeners.offer_task(task_notification(snapshot))

    def _keep_task(self, snapshot: TaskSnapshot, owner: str) -> None:
        """TM-STORE-TASKS: a published task changed; keep it in the shared store."""
        self._kept_tasks.append(StoredTask(
            task_id=snapshot.task_id, owner=owner, task=task_notification(snapshot)
        ))
        self._kept_tasks_wake.set()

    async def _store_tasks(self) -> None:
        """Write task changes to the shared store one at a time, in the order they happened,
        each for the rest of its task's time to live. One that cannot be written is dropped
        with a log line: the task lives on here, and only a worker's death reads the store.
        One the store refuses, because it holds an end another worker wrote when this one
        could not be reached for longer than its address lives, ends the task here the same
        way (TK-STATES)."""
        while True:
            await self._kept_tasks_wake.wait()
            self._kept_tasks_wake = trio.Event()
            while self._kept_tasks:
                kept = self._kept_tasks.popleft()
                run = self.tasks.runs.get(kept.task_id)
                if run is None or not run.published:
                    continue  # expired or withdrawn meanwhile
                ttl = run.deadline - trio.current_time()
                if ttl <= 0:
                    continue
                try:
                    held = await self.manager.store.save_task(kept, ttl)
                except StoreUnavailable:
                    tail = self._task_store_log.tail("task changes")
                    if tail is not None:
                        logger.warning("a task's change could not be kept in the store%s", tail)
                    continue
                if held is not None:
                    self.tasks.ended_elsewhere(kept.task_id, held.task)

    async def reconcile_tasks(self) -> None:
        """TM-STORE-TASKS: this worker's address had lapsed in the store, so another worker
        may have found it gone and declared its running tasks failed there. Each task the
        store holds an end of ends here the same way, its work cancelled (TK-STATES)."""
        for run in [run for run in self.tasks.runs.values() if run.published]:
            if run.status is None or run.status.terminal:
                continue
            try:
                held = await self.manager.store.load_task(run.task_id)
            except StoreUnavailable:
                return  # the next lapse, or the task's next change, tries again
            if held is not None and is_terminal(held.task):
                self.tasks.ended_elsewhere(run.task_id, held.task)

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
        running = self._running_handlers()
        if running:
            # Said, so that an operator who stopped the server knows what it waits for.
            logger.info(
                "shutdown: waiting up to %g s (shutdown_grace) for %d running request "
                "handler(s) to finish; then they are cancelled", grace, running,
            )
        cancelled = [0]

        async def legacy() -> None:
            cancelled[0] = await self.manager.shutdown(grace)

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

    def _running_handlers(self) -> int:
        """Requests whose handlers run now, in both eras."""
        legacy = sum(len(s.inflight) for s in self.manager.sessions.values())
        return legacy + len(self.modern.running)

    # -- the Hub the App sees ---------------------------------------------------------------

    def sessions(self) -> list[SessionPort]:
        return [LegacySessionPort(s) for s in list(self.manager.sessions.values()) if not s.closed]

    def broadcast(self, method: str, params: Mapping[str, JSON] | None = None) -> int:
        notification = Notification(method=method, params=params)
        sent = self._deliver(notification)
        if self._announcer is not None:
            # TM-STORE-NOTIFY: the other workers' clients are told too (not counted here).
            self._announcer.add(notification)
        return sent

    def _deliver(self, notification: Notification) -> int:
        """A change notification, made here or at another worker, to this worker's
        clients that asked for it: listeners, and legacy sessions' standalone streams."""
        sent = self.listeners.broadcast(notification.method, notification.params)
        return sent + self.manager.broadcast(notification)

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
            if not self.running or self.manager.shutting_down:
                raise RemoteProtocolError(
                    "Service Unavailable: the server is not running.",
                    code=ErrorCode.SERVER_BUSY,
                    http_status=503,
                )
            if relay_port:
                # T-AUTH-17: a relayed request carries no token; the worker that relayed it
                # verified it, and its seal says for whom. Nothing else is served here.
                relayed = self.manager.relay_seal.open(request, time.time())
                if self.auth is not None and relayed.principal is None:
                    raise RemoteProtocolError(
                        "Forbidden: a relayed request names no principal.",
                        code=ErrorCode.INVALID_REQUEST,
                        http_status=403,
                    )
                request = attrs.evolve(request, principal=relayed.principal, relayed=True)
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
                await self.manager.serve(request, responder, unit=unit)
                return
            # TM-SEC-MEMORY: a body the client's room cannot hold is not decoded.
            self.ledger.check_body(unit.key, len(request.body))
            body = read_post_body(request, max_body_bytes=self.config.max_body_bytes)
            if self.auth is not None:
                # MT-AUTH-3: the scopes every request needs and those of what it names, in
                # one challenge, not one after the other.
                assert request.principal is not None
                self.auth.check(
                    request.principal, self._scopes_for(body), request_id=_request_id(body)
                )
            route = route_post(request.headers, body)
            if isinstance(route, ModernNotification):
                # MT-POST-5 (MUST): an accepted notification gets 202 and no body.
                await responder.reply(Reply(status=202))
                return
            charge = self._charge(request, body, unit)
            try:
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
            await self.manager.post(request, body, responder, unit=unit, charge=charge)
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
        elif not await self._relay_task(route, request, responder):
            await self.modern.serve(
                route,
                request.headers,
                responder,
                principal=request.principal,
                unit=unit,
                charge=charge,
            )

    def unit_of(self, request: HttpRequest) -> Unit:
        """TM-SEC-UNIT: the request's principal, else its client's address (read from the
        forwarding header only for a connection from a trusted proxy) under the prefix."""
        principal = request.principal
        return self.units.of_request(
            principal.key if principal is not None else None, request.peer_host, request.headers
        )

    def _charge(self, request: HttpRequest, body: JSON, unit: Unit) -> Charge | None:
        """TM-SEC-MEMORY: charge a POST's body, what it decoded to and its handlers to the
        client and the server (raises RemoteProtocolError 503 naming the budget)."""
        ledger = self.ledger
        if not ledger.enabled:
            return None
        # Each request starts a handler; notifications and responses start none.
        if isinstance(body, dict):
            requests = 1 if "id" in body and "method" in body else 0
        elif isinstance(body, list):
            requests = sum(isinstance(m, dict) and "id" in m and "method" in m for m in body)
        else:
            requests = 0
        raw = request.body
        cost = body_cost(raw, body, requests=requests, limit=ledger.room(unit.key))
        return ledger.charge(unit.key, cost, raw=len(raw), request_id=_request_id(body))

    async def _relay_task(
        self, call: ModernCall, request: HttpRequest, responder: Responder
    ) -> bool:
        """TM-STORE-TASKS: a tasks/* request for a task another worker runs goes to that
        worker, once, after the gates every tasks/* request meets (TM-TASK-ORDER); True when
        it was answered so, or here for a worker that cannot be reached."""
        if call.request.method not in TASK_METHODS or not self.manager.store.shared:
            return False
        task_id = (call.request.params or {}).get("taskId")
        origin = task_origin(task_id) if isinstance(task_id, str) else ""
        if origin in ("", self.manager.store.origin):
            return False
        # TK-GATE / TM-TASK-ORDER: the extension (and whether tasks are served at all) is
        # checked here as at the worker running the task, before any lookup.
        self.modern.check(call, request.headers)
        query = read_task_query(call.request)
        address = None
        if not request.relayed:
            address = await self.manager.locate(origin)
        if address is not None and await relay(
            address, request, responder,
            seal=self.manager.relay_seal.seal(request, time.time()),
            connect_timeout=self.config.store_timeout, write_timeout=self.config.stall_budget,
        ):
            return True
        # Only an address the store no longer has says the worker stopped (it renews it
        # while it runs); one that is there but does not answer may be a worker briefly out
        # of reach, or a stale address reached by a relayed request, whose tasks live on.
        gone = address is None and not request.relayed
        await self._answer_unreached(call, query, request, responder, gone=gone)
        return True

    async def _answer_unreached(
        self, call: ModernCall, query: TaskQuery, request: HttpRequest, responder: Responder,
        *, gone: bool,
    ) -> None:
        """TM-STORE-TASKS: the worker running the task ``query`` names was not reached. An
        end the store holds is final (TK-STATES), and answered as it is. Otherwise, a worker
        that is ``gone`` took the task's work with it: failed, and kept so for the next worker
        asked, unless the store holds an end by then; the store without the task (or with
        another principal's), lost. A worker not known to be gone may still run the task,
        and move it: the request is to be retried (503, -31002), nothing said of the task."""
        stored = await self.manager.load_task(query.task_id)
        principal = request.principal.key if request.principal is not None else ""
        mine = stored is not None and stored.owner == principal
        if stored is None or not mine or not is_terminal(stored.task):
            if not gone:
                raise holder_unreachable(call.request, query.task_id)
            if stored is None or not mine:
                raise task_lost(call.request, query.task_id)
            failed = attrs.evolve(stored, task=lost_task(stored.task, time.time()))
            ttl = remaining_ttl(stored.task, time.time())
            held = await self.manager.end_task(failed, ttl) if ttl > 0 else None
            stored = held or failed
        if query.action is TaskAction.GET:
            await self.modern.reply_task(call, stored_task_result(stored.task), responder)
            return
        # TK-ACK: an update or a cancel of an ended task changes nothing, and is acked.
        await self.modern.reply_task(call, task_ack_result(), responder)

    def well_known(self, method: str, path: str) -> Reply | None:
        """The answer to a request outside the MCP endpoint that the server serves anyway:
        its Protected Resource Metadata (T-AUTH-PRM), when it has authorization."""
        return self.auth.well_known(method, path) if self.auth is not None else None

    def _scopes_for(self, body: JSON) -> frozenset[str]:
        """T-AUTH-STEPUP: the scopes of whatever the POSTed messages name."""
        needed: frozenset[str] = frozenset()
        for message in body if isinstance(body, list) else [body]:
            if isinstance(message, dict) and isinstance(message.get("method"), str):
                params = message.get("params")
                needed |= self.app.required_scopes(
                    message["method"], params if isinstance(params, dict) else {}
                )
        return needed

    async def serve_guarded(
        self, request: HttpRequest, responder: Responder, *, relay_port: bool = False
    ) -> bool:
        """``serve``, with an error of our own (a bug) logged, and answered with a JSON-RPC
        internal error if no response has started: never a traceback on the wire. False
        when that happened."""
        try:
            await self.serve(request, responder, relay_port=relay_port)
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
        """The Origin/Host policy for requests arriving on ``local_host``.

        Served by ``serve()`` the bind address is known. Under another ASGI server (the
        hypercorn command line) it is not, so the address each request arrived on decides:
        a request that came in over loopback gets the loopback Host check (TM-SEC-HOST).
        """
        key = None if self._bind_hosts else local_host
        policy = self._policies.get(key)
        if policy is None:
            binds = self._bind_hosts or ([local_host] if local_host else [])
            policy = OriginPolicy.for_bind(binds, self.config.allowed_origins)
            if self.config.allowed_hosts is not None:
                policy = attrs.evolve(
                    policy, allowed_hosts=frozenset(self.config.allowed_hosts) or None
                )
            if len(self._policies) < 64:  # a few local addresses at most
                self._policies[key] = policy
        return policy

    # -- introspection ----------------------------------------------------------------------

    def statistics(self) -> dict[str, Any]:
        """The counters of TM-BP-COUNTERS, both eras."""
        modern = attrs.asdict(self.modern.stats)
        return {
            **self.manager.statistics(),
            **{f"modern_{k}": v for k, v in modern.items()},
            "modern_requests_running": len(self.modern.running),
            "listeners_open": len(self.listeners.live),
            **self.tasks.statistics(),
            "long_streams_open": len(self.streams),
            **self.streams.statistics(),
            **self.ledger.statistics(),
            **self._edge_statistics(),
        }

    def count_pool(self, pool: Pool[Any]) -> None:
        """An HTTP edge's pool (the own server's connections, TM-SEC-FAIR): its refusals and
        evictions are among the statistics, summed over the edges that keep one."""
        self._edge_pools.append(pool)

    def _edge_statistics(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for pool in self._edge_pools:
            for name, value in pool.statistics().items():
                totals[name] = totals.get(name, 0) + value
        return totals
