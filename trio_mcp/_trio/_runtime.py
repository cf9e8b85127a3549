# The runtime that serves one App over HTTP: the entry every request to the MCP endpoint
# takes. It checks what holds for every request (Origin and Host, a running server), lets
# trio_mcp.protocol decide the request's era, and hands it to that era's path: legacy
# sessions (SessionManager) or stateless modern requests (ModernServer, Listeners). It is the
# Hub the App reaches its clients through.
from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._ports import App, SessionPort
from ..protocol import JSON, ErrorCode, Notification, OriginPolicy, RemoteProtocolError
from ..protocol._era import Era, ModernCall, ModernNotification, route_other, route_post
from ..protocol._logtext import LogLimiter
from ..protocol._mrtr import RequestStateCodec
from ..protocol._tasks import (
    TASK_METHODS,
    TaskSnapshot,
    declares_tasks,
    lost_task,
    task_lost,
    task_notification,
    task_origin,
)
from ..protocol._transport import HttpRequest, Reply, error_reply, read_post_body
from ._announce import Announcer
from ._auth import Authenticator
from ._budget import ByteBudget
from ._failures import FailureLog
from ._listen import Listeners
from ._manager import SessionManager
from ._modern import ModernServer
from ._relay import RELAYED_HEADER, relay
from ._responder import Responder
from ._session import SessionPort as LegacySessionPort
from ._store import MemoryStore, SessionStore, StoredTask, StoreUnavailable
from ._tasks import TaskManager

if TYPE_CHECKING:
    from .._config import ServerConfig

logger = logging.getLogger("trio_mcp.runtime")


__all__ = ["Runtime"]


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
        self.manager = SessionManager(
            app, config, bind_hosts=bind_hosts, store=_store_for(config),
            on_notify=self._deliver,
        )
        #: TM-STORE-NOTIFY: this worker's change notifications, for the other workers.
        self._announcer = Announcer(self.manager.store) if self.manager.store.shared else None
        #: TM-SEC-BODIES: what the HTTP edges hold of bodies still arriving (the manager
        #: keeps it, so that its counters are among the server's).
        self.bodies: ByteBudget = self.manager.bodies
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
        self.listeners = Listeners(app, config, spawn=self.spawn, stats=self.modern.stats)
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
        with a log line: the task lives on here, and only a worker's death reads the store."""
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
                    await self.manager.store.save_task(kept, ttl)
                except StoreUnavailable:
                    tail = self._task_store_log.tail("task changes")
                    if tail is not None:
                        logger.warning("a task's change could not be kept in the store%s", tail)

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
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.manager.shutdown, grace)
            with trio.move_on_after(grace):
                await self.modern.drain()
            for exchange in list(self.modern.running):
                exchange.stop()

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

    async def serve(self, request: HttpRequest, responder: Responder) -> None:
        """Serve one request whose Origin and Host the caller has checked (the ASGI adapter
        does, before the path and the body: T-SEC-1)."""
        try:
            if not self.running or self.manager.shutting_down:
                raise RemoteProtocolError(
                    "Service Unavailable: the server is not running.",
                    code=ErrorCode.SERVER_BUSY,
                    http_status=503,
                )
            if self.auth is not None:
                # T-AUTH-EVERY (MUST): every request carries its token, in a session or not.
                principal = await self.auth.authenticate(request.headers)
                request = attrs.evolve(request, principal=principal)
            if request.method != "POST":
                route_other(request.method, request.headers)
                await self.manager.serve(request, responder)
                return
            body = read_post_body(request, max_body_bytes=self.config.max_body_bytes)
            if self.auth is not None:
                assert request.principal is not None
                self.auth.check(request.principal, self._scopes_for(body))
            route = route_post(request.headers, body)
            if route is Era.LEGACY:
                await self.manager.post(request, body, responder)
            elif isinstance(route, ModernCall):
                if route.request.method == "subscriptions/listen":
                    self.modern.check(route, request.headers)
                    await self.listeners.serve(
                        route,
                        responder,
                        accept_task=self.tasks.follower(request.principal)
                        if declares_tasks(route.envelope.client_capabilities)
                        else None,
                    )
                elif not await self._relay_task(route, request, responder):
                    await self.modern.serve(
                        route,
                        request.headers,
                        responder,
                        principal=request.principal,
                        peer=request.peer_host,
                    )
            else:
                assert isinstance(route, ModernNotification)
                # MT-POST-5 (MUST): an accepted notification gets 202 and no body.
                await responder.reply(Reply(status=202))
        except RemoteProtocolError as exc:
            await responder.reply(error_reply(exc))

    async def _relay_task(
        self, call: ModernCall, request: HttpRequest, responder: Responder
    ) -> bool:
        """TM-STORE-TASKS: a tasks/* request for a task another worker runs goes to that
        worker, once; True when it was answered so (or the task found lost)."""
        if call.request.method not in TASK_METHODS or not self.manager.store.shared:
            return False
        task_id = (call.request.params or {}).get("taskId")
        origin = task_origin(task_id) if isinstance(task_id, str) else ""
        if origin in ("", self.manager.store.origin):
            return False
        address = None
        if request.headers.get(RELAYED_HEADER) is None:
            address = await self.manager.locate(origin)
        if address is not None and await relay(
            address, request, responder,
            connect_timeout=self.config.store_timeout, write_timeout=self.config.stall_budget,
        ):
            return True
        assert isinstance(task_id, str)
        await self._answer_lost_task(call, task_id, request, responder)
        return True

    async def _answer_lost_task(
        self, call: ModernCall, task_id: str, request: HttpRequest, responder: Responder
    ) -> None:
        """TM-STORE-TASKS: the worker running ``task_id`` cannot be reached. As the store
        kept it: failed if it had not ended (and kept so, for the next worker asked), else as
        it ended; unknown to the store (or another principal's), lost."""
        try:
            stored = await self.manager.store.load_task(task_id)
        except StoreUnavailable:
            stored = None
        principal = request.principal.key if request.principal is not None else ""
        if stored is None or stored.owner != principal:
            raise task_lost(call.request, task_id)
        task = lost_task(stored.task, time.time())
        if task != stored.task:
            with contextlib.suppress(StoreUnavailable):
                await self.manager.store.save_task(
                    attrs.evolve(stored, task=task), self.config.task_ttl
                )
        if call.request.method == "tasks/get":
            await self.modern.reply_task(call, {"resultType": "complete", **task}, responder)
        else:
            # TK-ACK: an update or a cancel of an ended task changes nothing, and is acked.
            await self.modern.reply_task(call, {"resultType": "complete"}, responder)

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

    async def serve_guarded(self, request: HttpRequest, responder: Responder) -> bool:
        """``serve``, with an error of our own (a bug) logged, and answered with a JSON-RPC
        internal error if no response has started: never a traceback on the wire. False
        when that happened."""
        try:
            await self.serve(request, responder)
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
        }
