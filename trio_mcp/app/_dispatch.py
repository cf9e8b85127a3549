# The application's methods: tools, prompts, resources and completion, served to whoever
# asks. It knows nothing of sessions, HTTP or eras: the runtime hands it a port
# (trio_mcp.base._ports) and a request, and it hands back a result or raises the JSON-RPC error to
# answer with. What the server knows of each method (its capability, eras, scopes) is its row
# in the method table (protocol/_methods.py), whose APP rows are exactly what the registries
# here serve; methods only one era has (ping and logging/setLevel in a session,
# server/discover in the modern era) belong to that era's runtime, not here.
from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..base._ports import NotificationHandler, RequestPort, SessionPort
from ..protocol import ErrorCode, RemoteProtocolError, Request
from ..protocol._logtext import LogLimiter
from ..protocol._methods import (
    METHOD_CAPABILITY,
    METHODS,
    ScopeKind,
    check_served,
    declared,
    named,
)
from ..protocol._tasks import TaskSupport
from ..protocol._versions import Era
from ._completion import CompletionRegistry
from ._context import Context, SessionContext
from ._extension import Extension, ExtensionRegistry
from ._invoke import DEFAULT_THREADS, ServerState
from ._middleware import Middleware, check_middleware, run_chain
from ._prompts import PromptRegistry
from ._resources import ResourceRegistry
from ._tools import ToolRegistry

__all__ = ["Dispatcher", "NotificationHook"]

logger = logging.getLogger("trio_mcp.server")

Method = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
NotificationHook = Callable[[SessionContext, Mapping[str, Any]], Awaitable[None]]


class Dispatcher:
    """The registries of one server and the methods that serve them."""

    def __init__(self, max_threads: int = DEFAULT_THREADS) -> None:
        #: What every handler of this server shares: the thread limiter, the lifespan.
        self.state = ServerState(max_threads)
        #: Wrapping every request the registries answer, the first outermost.
        self.middleware: list[Middleware] = []
        self.tools = ToolRegistry(self.state)
        self.resources = ResourceRegistry(self.state)
        self.prompts = PromptRegistry(self.state)
        self.completions = CompletionRegistry(self.prompts, self.resources)
        #: TM-SEC-LOG: a client can make a hook fail as often as it sends its
        #: notification: one traceback per interval, the rest counted in the next one.
        self._hook_failures = LogLimiter(interval=10.0)
        self._methods: dict[str, Method] = {
            **self.tools.methods(),
            **self.resources.methods(),
            **self.prompts.methods(),
            **self.completions.methods(),
        }
        # A method a registry offers is a row of the method table, and every row the
        # application serves has a registry's handler (raises ValueError otherwise).
        check_served(self._methods)
        #: The tool registry's method whose row names a tool (tools/call), as the registry
        #: serves it, before the extensions' wrappers (TM-EXT-WRAP).
        self._tool_call = next(
            name for name in self.tools.methods() if METHODS[name].scope is ScopeKind.TOOL
        )
        self._tools_call = self._methods[self._tool_call]
        #: The extensions installed (SEP-2133, app/_extension.py) and their methods.
        self.extensions = ExtensionRegistry()
        #: Hooks for notifications from the client, by method.
        self._hooks: dict[str, list[NotificationHook]] = {}

    def add_middleware(self, fn: Middleware) -> None:
        """Wrap every request in ``fn``, inside those added before it (TM-HAND-MW-ORDER)."""
        self.middleware.append(check_middleware(fn))

    def install(self, extension: Extension) -> None:
        """Serve ``extension``'s methods and put its wrapper around tools/call (TM-EXT-ROWS,
        TM-EXT-WRAP)."""
        self.extensions.install(extension, self._methods)
        self._methods[self._tool_call] = self.extensions.wrap_tool_call(self._tools_call)

    def capabilities(self, era: Era = Era.LEGACY) -> dict[str, Any]:
        """What the server declares in ``era``: initialize's (LEGACY) or server/discover's
        (MODERN) capabilities, alike but for the extensions of one era (TM-EXT-ERAS)."""
        # U-TOOL-1 / L-CAP-1 / MU-TOOL-1: declare exactly what is served.
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        # U-RES-1 / U-PROMPT-1: declared once something is registered.
        if self._declares("resources"):
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self._declares("prompts"):
            caps["prompts"] = {"listChanged": True}
        if self._declares("completions"):
            caps["completions"] = {}
        # U-LOG-1 / MU-LOG-2: handlers may always log.
        caps["logging"] = {}
        if self.extensions.installed:
            # EX-DECLARE: each extension and its settings, in initialize's and
            # server/discover's capabilities, those offered now of the era's.
            declaration = self.extensions.declaration(era)
            if declaration:
                caps["extensions"] = declaration
        return caps

    def _declares(self, capability: str) -> bool:
        """Whether ``capability`` is declared, without building the whole declaration."""
        if capability in self.extensions.capabilities:
            # SK-CAPABILITY: an extension's methods that need a core capability declare it,
            # even before anything of it is registered (skills with no skill yet).
            return True
        if capability == "resources":
            return self.resources.enabled
        if capability == "prompts":
            return self.prompts.enabled
        if capability == "completions":
            return (
                self.prompts.enabled
                or bool(self.resources.templates)
                or self.completions.enabled
            )
        return capability in ("tools", "logging")

    def serves(self, method: str) -> bool:
        """Whether ``method`` is in the table and its capability is declared."""
        if method not in self._methods:
            # An installed extension's method is served while what its row needs is
            # declared (its extension, a settings flag, a capability: TM-EXT-DECLARED).
            # A row of the 2026-07-28 era alone is declared in server/discover's.
            row = METHODS.get(method)
            era = Era.LEGACY if row is None or Era.LEGACY in row.eras else Era.MODERN
            return (
                self.extensions.handler(method) is not None
                and declared(self.capabilities(era), method)
            )
        capability = METHOD_CAPABILITY.get(method)
        return capability is None or self._declares(capability)

    async def dispatch(self, port: RequestPort, request: Request) -> Mapping[str, Any]:
        method = self._methods.get(request.method) or self.extensions.handler(request.method)
        if method is None or not self.serves(request.method):
            # Unknown methods, and methods of a capability not declared, are -32601.
            raise RemoteProtocolError(
                f"Method not found: {request.method}", code=ErrorCode.METHOD_NOT_FOUND
            )
        ctx = Context(port, request, self.state)
        params = request.params or {}
        if not self.middleware:
            return await method(ctx, params)
        return await run_chain(self.middleware, ctx, functools.partial(method, ctx, params))

    def has_resource(self, uri: str) -> bool:
        return self.resources.find(uri) is not None

    def input_schema(self, tool: str) -> Mapping[str, Any] | None:
        found = self.tools.tools.get(tool)
        return None if found is None else found.input_schema

    def mirrored_params(self, tool: str) -> Mapping[str, tuple[str, ...]]:
        found = self.tools.tools.get(tool)
        return {} if found is None else found.mirrored

    def required_client_capabilities(self, request: Request) -> Mapping[str, Any]:
        name = named(request.method, request.params, ScopeKind.TOOL)
        if name is not None:
            tool = self.tools.tools.get(name)
            if tool is not None:
                extra = self.extensions.tool_requirements(name)
                if extra:
                    # TM-EXT-TOOLREQ (TK-REQUIRED: a task-only tool needs the tasks
                    # extension, -32021 before it runs).
                    return {**tool.requires, **extra}
                return tool.requires
            return {}
        # TM-EXT-DEGRADE: a mandatory extension's method needs it declared.
        return self.extensions.requirement(request.method) or {}

    def task_support(self, request: Request, client_capabilities: Mapping[str, Any]) -> (
        TaskSupport
    ):
        """TM-EXT-ENGINE: whether a call may outlive its exchange in the runtime's engine:
        a tools/call, when an installed extension runs calls there and the client declared
        it, as that extension says for the tool."""
        if self.extensions.runner is None or request.method != self._tool_call:
            return TaskSupport.FORBIDDEN
        tool = named(request.method, request.params, ScopeKind.TOOL)
        if tool is None:
            return TaskSupport.FORBIDDEN
        return self.extensions.task_support(tool, client_capabilities)

    def tool_task_support(self, tool: str) -> TaskSupport:
        """What the application said of ``tool`` (``task=``; TM-TASK-DECIDE)."""
        found = self.tools.tools.get(tool)
        return TaskSupport.FORBIDDEN if found is None else found.task

    def runs_tasks(self) -> bool:
        """Whether a tool may run as a task (TM-TASK-SERVED)."""
        return any(t.task is not TaskSupport.FORBIDDEN for t in self.tools.tools.values())

    # -- notifications from the client ----------------------------------------------------

    def add_hook(self, method: str, fn: NotificationHook) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"notification hook {fn!r} must be an async function")
        self._hooks.setdefault(method, []).append(fn)

    def notification_handler(self, method: str) -> NotificationHandler | None:
        hooks = self._hooks.get(method)
        if not hooks:
            return None

        failures = self._hook_failures

        async def run(port: SessionPort, params: Mapping[str, Any]) -> None:
            session = SessionContext(port)
            for hook in hooks:
                await _run_hook(hook, session, params, failures)

        return run


async def _run_hook(
    hook: NotificationHook,
    session: SessionContext,
    params: Mapping[str, Any],
    failures: LogLimiter,
) -> None:
    try:
        await hook(session, params)
    except Exception:
        # A failing hook must not end the session: it is logged, like a failing handler.
        tail = failures.tail("hook failures")
        if tail is not None:
            logger.exception("notification hook %r failed%s", hook, tail)
