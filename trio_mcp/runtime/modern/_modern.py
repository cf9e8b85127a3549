# The 2026-07-28 ("modern") request path (spec/modern.md): a request that passed the envelope
# ladder (protocol._era) is checked here (the method, the mirrored headers, the client's
# capabilities) and answered on its own HTTP exchange, statelessly, by a ModernExchange
# (trio_mcp.runtime.modern._exchange): its handler runs in the exchange's task, cancelled by
# its client's leaving (MU-CANCEL-1); it asks for input by answering input_required
# (MU-TOOL-5), and nothing of it outlives the exchange.
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...base._ports import App, Engine
from ...protocol import (
    JSON,
    Request,
    Response,
    dumps,
)
from ...protocol._auth import Principal
from ...protocol._era import ModernCall
from ...protocol._fair import Unit
from ...protocol._headers import Headers
from ...protocol._methods import ScopeKind, named
from ...protocol._modern import (
    NOT_CACHEABLE,
    CacheHint,
    check_method,
    check_param_headers,
    complete_result,
    discover_result,
    is_retry,
    missing_capability,
    undeclared,
)
from ...protocol._mrtr import (
    RequestStateCodec,
)
from ...protocol._transport import modern_reply
from ...protocol._versions import Era
from .._pools import Charge, Pool, handler_pool, pool_busy
from .._reqstats import RequestMetrics
from ..backpressure._responder import Responder
from ..tasks._taskmanager import TaskManager
from ._exchange import ModernExchange, ModernStats

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["ModernServer", "ModernStats"]


class ModernServer:
    """Answers the modern requests of one runtime."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        spawn: Callable[..., bool],
        state_codec: RequestStateCodec,
        tasks: TaskManager,
        engines: Mapping[str, Engine] | None = None,
        requests: RequestMetrics | None = None,
        handlers: Pool[Any] | None = None,
    ) -> None:
        self.app = app
        #: TM-SEC-FAIR: the handlers running, both eras, by client.
        self.handlers = handlers if handlers is not None else handler_pool(config.max_handlers)
        self.config = config
        self._spawn = spawn
        self.codec = state_codec
        #: The engine that runs calls that outlive their exchange (TM-EXT-ENGINE).
        self.tasks = tasks
        #: The runtime's engines, by extension: what their methods' handlers reach.
        self.engines: Mapping[str, Engine] = dict(engines or {})
        self.requests = requests
        self.stats = ModernStats()
        #: The exchanges running now, for shutdown (TM-SESS-SHUTDOWN).
        self.running: set[ModernExchange] = set()
        self._drained = trio.Event()

    def server_info(self) -> dict[str, Any]:
        return self.app.server_info()

    def spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> bool:
        """Start a task outside an exchange's own (a stream's writer and watcher)."""
        return self._spawn(fn, *args, name=name)

    def cache_hint(self, request: Request) -> CacheHint:
        """The caching hints of a complete result of ``request`` (MU-CACHE-1): its method's,
        as configured (TM-CACHE-DEFAULT), but never cacheable for an MRTR retry, whose result
        depends on answers no cache key holds (MU-CACHE-6)."""
        if is_retry(request.params or {}):
            return NOT_CACHEABLE
        # TM-HAND-CACHE: the hint of the resource read, when the application gave it one.
        own = self.app.cache_hint(request.method, request.params or {})
        return own or self.config.cache_hints.get(request.method, self.config.cache_hint)

    def check(self, call: ModernCall, headers: Headers) -> None:
        """The rungs after the envelope: a method served here, headers mirroring tool
        parameters that agree with the body, and the client capabilities the request needs.

        Raises:
            RemoteProtocolError: 404 -32601, 400 -32020 or 400 -32021.
        """
        request = call.request
        check_method(request, self.app.serves)
        params = request.params or {}
        tool = named(request.method, params, ScopeKind.TOOL)
        if tool is not None:
            arguments = params.get("arguments")
            mirrored = self.app.mirrored_params(tool)
            if mirrored:
                check_param_headers(
                    mirrored,
                    arguments if isinstance(arguments, Mapping) else {},
                    headers,
                    request,
                )
        # An extension's method or tool needs it declared (TK-GATE, TK-REQUIRED) before it
        # runs, as a tool's own requirements are.
        required = self.app.required_client_capabilities(request)
        missing = undeclared(required, call.envelope.client_capabilities)
        if missing:
            # ML-META-3 (MUST), decided before the first byte of the answer.
            raise missing_capability(missing, request.id)

    async def serve(
        self,
        call: ModernCall,
        headers: Headers,
        responder: Responder,
        *,
        principal: Principal | None = None,
        peer: str | None = None,
        unit: Unit | None = None,
        charge: Charge | None = None,
    ) -> None:
        """Answer one modern request on its exchange (raises RemoteProtocolError for a
        refusal before anything ran); ``principal`` is who its token speaks for, ``peer``
        the address it came from, ``unit`` its client for the fair shares (TM-SEC-UNIT),
        ``charge`` what it is charged (TM-SEC-MEMORY), which a task it becomes holds too."""
        self.check(call, headers)
        self.stats.requests += 1
        if call.request.method == "server/discover":
            # EX-DECLARE, TK-DISCOVER: this era's extensions among them (TM-EXT-ERAS).
            capabilities = self.app.capabilities(Era.MODERN)
            result = discover_result(
                capabilities=capabilities,
                server_info=self.server_info(),
                instructions=self.app.instructions,
                cache=self.cache_hint(call.request),
            )
            await responder.reply(
                modern_reply(200, dumps(Response(id=call.request.id, result=result)))
            )
            return
        key = "" if unit is None else unit.key
        if not self.handlers.admit(key):
            raise pool_busy("handlers", request_id=call.request.id)
        exchange = ModernExchange(
            self, call, responder, principal=principal, peer=peer,
            unit=None if unit is None else unit.key, charge=charge,
        )
        self.running.add(exchange)
        self.handlers.add(key, exchange)
        try:
            await exchange.run()
        finally:
            self.handlers.discard(exchange)
            self.running.discard(exchange)
            if not self.running:
                self._drained.set()
                self._drained = trio.Event()

    async def reply_complete(
        self, call: ModernCall, answer: Mapping[str, JSON], responder: Responder
    ) -> None:
        """Send a complete result given for ``call`` elsewhere than in an exchange (a task's,
        by the worker that holds it: TM-STORE-TASKS)."""
        result = complete_result(
            call.request.method, dict(answer), server_info=self.server_info(), cache=None
        )
        await responder.reply(
            modern_reply(200, dumps(Response(id=call.request.id, result=result)))
        )

    async def drain(self) -> None:
        """Wait until no modern request is running."""
        while self.running:
            await self._drained.wait()
