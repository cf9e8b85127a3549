# The names the official Python SDK's MCPServer and FastMCP give to what trio-mcp already has
# (spec/handlers.md TM-HAND-COMPAT-SERVER and the rules after it), so that a server written
# against either is served with only its imports changed. A thin layer of names over Server
# and its Context, never a second implementation: each call here is one of trio-mcp's. What
# trio-mcp cannot honour (an asyncio transport, Starlette routes, an SDK object it has no
# counterpart for) raises ``Unsupported`` at once, naming what to use instead;
# docs/server-guide.md lists them.
from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from ..base._config import ResponseMode, ServerConfig
from ..protocol._methods import APP_METHODS
from ._context import Context as _Ctx
from ._depends import Depends
from ._display import Icon
from ._invoke import DEFAULT_THREADS
from ._middleware import CallNext as _CallNext
from ._server import Lifespan, Server

__all__ = [
    "AcceptedElicitation", "CancelledElicitation", "Context", "CurrentContext",
    "DeclinedElicitation", "FastMCP", "MCPServer", "Middleware", "MiddlewareContext",
    "ReadResourceContents", "RequestContext", "Unsupported",
]

_log = logging.getLogger("trio_mcp.compat")


class Unsupported(NotImplementedError):
    """A feature of the SDK's MCPServer or of FastMCP that trio-mcp does not serve; the
    message names what to use instead (TM-HAND-COMPAT-REFUSE)."""

    def __init__(self, what: str, instead: str) -> None:
        super().__init__(f"trio_mcp.compat: {what} is not supported; {instead}")


# -- what a handler's Context gives back -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReadResourceContents:
    """One content of a resource read by ``ctx.read_resource``: text or bytes."""

    content: str | bytes
    mime_type: str | None = None


@dataclasses.dataclass(frozen=True)
class AcceptedElicitation:
    """The user accepted: ``data`` is the answer, validated into the schema's model."""

    data: Any
    action: Literal["accept"] = "accept"


@dataclasses.dataclass(frozen=True)
class DeclinedElicitation:
    action: Literal["decline"] = "decline"


@dataclasses.dataclass(frozen=True)
class CancelledElicitation:
    action: Literal["cancel"] = "cancel"


class RequestContext:
    """What the SDK calls ``ctx.request_context`` (and hands a middleware as its ``ctx``):
    the request, and the lifespan's value as ``lifespan_context``."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: _Ctx) -> None:
        self._ctx = ctx

    @property
    def lifespan_context(self) -> Any:
        return self._ctx.lifespan

    @property
    def request_id(self) -> str | int:
        return self._ctx.request_id

    @property
    def method(self) -> str:
        return self._ctx.method

    @property
    def params(self) -> Mapping[str, Any]:
        return self._ctx.params

    @property
    def meta(self) -> Mapping[str, Any]:
        return self._ctx.meta

    @property
    def session(self) -> _Ctx:
        """trio-mcp's Context: what the SDK's session object does, by trio-mcp's names."""
        return self._ctx

    @property
    def protocol_version(self) -> str:
        return self._ctx.protocol_version


#: Context methods of the SDK or FastMCP with no counterpart here, and what to use instead.
_NOT_SERVED = {
    "notify_tools_changed": "the server announces list changes itself when tools are added "
                            "or removed (server.add_tool / remove_tool)",
    "notify_prompts_changed": "the server announces prompt list changes itself",
    "notify_resources_changed": "the server announces resource list changes itself",
    "notify_resource_updated": "call server.notify_resource_updated(uri)",
    "input_responses": "use trio-mcp's ctx.trio.ask(...): the 2026-07-28 input_required "
                       "rounds are run for the handler",
    "request_state": "use trio-mcp's ctx.trio.ask(...)",
    "close_standalone_sse_stream": "trio-mcp's standalone streams are resumed by the client",
    "sample": "use trio-mcp's ctx.trio.sample(messages, max_tokens=...)",
    "get_state": "keep request state in a dependency (Depends)",
    "set_state": "keep request state in a dependency (Depends)",
    "mcp_server": "use the module's server object",
    "fastmcp": "use the module's server object",
}


class Context:
    """A handler's context under the SDK's and FastMCP's names (TM-HAND-COMPAT-CONTEXT): a
    view of trio-mcp's Context (``ctx.trio``). A parameter annotated with it (``Context`` or
    ``Context[...]``) receives it, in tools, resources, prompts and dependencies."""

    __slots__ = ("_ctx",)
    #: How trio-mcp fills a parameter annotated with this class (_depends.find_depends).
    __trio_mcp_depends__: Depends

    def __init__(self, ctx: _Ctx) -> None:
        self._ctx = ctx

    def __class_getitem__(cls, _params: Any) -> type[Context]:
        # Context[ServerSession, AppContext], as the SDK's README writes it: the same class.
        return cls

    def __getattr__(self, name: str) -> Any:
        instead = _NOT_SERVED.get(name)
        if instead is not None:
            raise Unsupported(f"ctx.{name}", instead)
        raise AttributeError(f"trio_mcp.compat.Context has no attribute {name!r}")

    @property
    def trio(self) -> _Ctx:
        """trio-mcp's own Context, with everything it offers."""
        return self._ctx

    @property
    def request_context(self) -> RequestContext:
        return RequestContext(self._ctx)

    @property
    def lifespan_context(self) -> Any:
        return self._ctx.lifespan

    @property
    def session(self) -> _Ctx:
        return self._ctx

    @property
    def request_id(self) -> str:
        return str(self._ctx.request_id)

    @property
    def client_id(self) -> str | None:
        principal = self._ctx.principal
        return None if principal is None else principal.client_id

    @property
    def protocol_version(self) -> str:
        return self._ctx.protocol_version

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._ctx.client_capabilities

    @property
    def headers(self) -> None:
        """None: trio-mcp does not hand a request's headers to its handlers (the SDK gives
        None too where a transport has none)."""
        return None

    async def log(self, level: str, data: Any, *, logger_name: str | None = None) -> None:
        await self._ctx.log(level, data, logger=logger_name)

    async def debug(self, data: Any, *, logger_name: str | None = None) -> None:
        await self._ctx.log("debug", data, logger=logger_name)

    async def info(self, data: Any, *, logger_name: str | None = None) -> None:
        await self._ctx.log("info", data, logger=logger_name)

    async def warning(self, data: Any, *, logger_name: str | None = None) -> None:
        await self._ctx.log("warning", data, logger=logger_name)

    async def error(self, data: Any, *, logger_name: str | None = None) -> None:
        await self._ctx.log("error", data, logger=logger_name)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await self._ctx.report_progress(progress, total, message)

    async def read_resource(self, uri: Any) -> list[ReadResourceContents]:
        """This server's resource ``uri``, as ``ReadResourceContents`` (text or bytes)."""
        contents = await self._ctx.read_resource(str(uri))
        return [
            ReadResourceContents(
                content=c["text"] if "text" in c else base64.b64decode(c.get("blob", "")),
                mime_type=c.get("mimeType"),
            )
            for c in contents
        ]

    async def elicit(
        self, message: str, schema: Any = None, *, response_type: Any = None
    ) -> AcceptedElicitation | DeclinedElicitation | CancelledElicitation:
        """Ask the user to fill in a form described by a pydantic model (``schema``, or
        FastMCP's ``response_type``); an accepted answer is validated into the model."""
        model = schema if schema is not None else response_type
        json_schema = getattr(model, "model_json_schema", None)
        if not callable(json_schema):
            raise Unsupported(
                "eliciting anything but a pydantic model",
                "use trio-mcp's ctx.trio.elicit(message, requested_schema) with a JSON Schema",
            )
        answer = await self._ctx.elicit(message, json_schema())
        if answer.action == "accept":
            return AcceptedElicitation(data=model.model_validate(dict(answer.content or {})))
        return DeclinedElicitation() if answer.action == "decline" else CancelledElicitation()

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> Any:
        return await self._ctx.elicit_url(message, url, elicitation_id=elicitation_id)

    async def close_sse_stream(self) -> None:
        self._ctx.close_sse_stream()


async def _context_view(ctx: _Ctx) -> Context:
    # An async dependency: awaited in the request's task, never sent to a worker thread.
    return Context(ctx)


Context.__trio_mcp_depends__ = Depends(_context_view)


def CurrentContext() -> Any:
    """FastMCP's ``ctx: Context = CurrentContext()``: the same as annotating ``Context``."""
    return Context.__trio_mcp_depends__


# -- middleware ----------------------------------------------------------------------------------


class _Message:
    """A request's params by attribute, as FastMCP's middleware reads them
    (``context.message.name``, ``.arguments``, ``.uri``)."""

    __slots__ = ("_params",)

    def __init__(self, params: Mapping[str, Any]) -> None:
        self._params = params

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        head, *rest = name.split("_")
        return self._params.get(head + "".join(p.title() for p in rest))


@dataclasses.dataclass(frozen=True)
class MiddlewareContext:
    """What a FastMCP middleware hook receives: the request's method and params
    (``message``), the handler Context (``fastmcp_context``), and when it came."""

    message: Any
    fastmcp_context: Context | None
    method: str
    timestamp: datetime.datetime
    source: str = "client"
    type: str = "request"

    def copy(self, **changes: Any) -> MiddlewareContext:
        return dataclasses.replace(self, **changes)


def _hook_of(method: str) -> str:
    """FastMCP's hook for ``method``, named from its spelling in the method table:
    ``tools/call`` on_call_tool, ``tools/list`` on_list_tools,
    ``resources/templates/list`` on_list_resource_templates."""
    *nouns, verb = method.split("/")
    kept = nouns[-1:] if verb == "list" else []
    named = [noun.removesuffix("s") for noun in nouns[:len(nouns) - len(kept)]] + kept
    return f"on_{verb}_{'_'.join(named)}"


#: FastMCP's hook for each method trio-mcp's middleware wraps (the application's).
_HOOKS: Final = {method: _hook_of(method) for method in APP_METHODS}

Hook = Callable[[MiddlewareContext, Callable[[MiddlewareContext], Awaitable[Any]]], Awaitable[Any]]


class Middleware:
    """FastMCP's middleware class (TM-HAND-COMPAT-MIDDLEWARE): override ``on_message``,
    ``on_request`` or a method's hook (``on_call_tool``, ``on_read_resource``,
    ``on_get_prompt``, ``on_list_tools``...), each ``async (context, call_next)``, calling
    ``await call_next(context)``. A request passes ``on_message``, then ``on_request``, then
    its method's hook. Results are the JSON-RPC result mappings."""

    async def __call__(self, ctx: _Ctx, call_next: _CallNext) -> Mapping[str, Any]:
        context = MiddlewareContext(
            message=_Message(ctx.params), fastmcp_context=Context(ctx), method=ctx.method,
            timestamp=datetime.datetime.now(datetime.UTC),
        )

        async def handler(passed: MiddlewareContext) -> Any:
            if passed.message is not context.message:
                raise Unsupported(
                    "a middleware passing call_next a request of its own",
                    "answer in the handler's place (return a result, or raise McpError)",
                )
            return await call_next()

        chain: Callable[[MiddlewareContext], Awaitable[Any]] = handler
        for hook in (_HOOKS.get(ctx.method), "on_request", "on_message"):
            # A method FastMCP has no hook for (completion/complete) passes the other two.
            step = getattr(self, hook, None) if hook is not None else None
            if step is not None:
                chain = functools.partial(step, call_next=chain)
        result: Mapping[str, Any] = await chain(context)
        return result

    async def _next(self, context: MiddlewareContext, call_next: Any) -> Any:
        return await call_next(context)

    on_message = on_request = on_call_tool = on_list_tools = on_read_resource = _next
    on_list_resources = on_list_resource_templates = on_get_prompt = on_list_prompts = _next


class _SdkMiddleware:
    """The SDK's ``async def mw(ctx, call_next)`` with ``await call_next(ctx)``."""

    def __init__(self, fn: Callable[[RequestContext, Any], Awaitable[Any]]) -> None:
        self._fn = fn

    async def __call__(self, ctx: _Ctx, call_next: _CallNext) -> Mapping[str, Any]:
        view = RequestContext(ctx)

        async def forward(passed: RequestContext) -> Mapping[str, Any]:
            if passed is not view:
                raise Unsupported(
                    "a middleware passing call_next a request of its own",
                    "answer in the handler's place (return a result, or raise McpError)",
                )
            return await call_next()

        result: Mapping[str, Any] = await self._fn(view, forward)
        return result


def _middleware_of(mw: Any) -> Any:
    return mw if isinstance(mw, Middleware) else _SdkMiddleware(mw)


# -- the server ----------------------------------------------------------------------------------


def _transport_config(path: str, options: dict[str, Any]) -> ServerConfig:
    json_response = bool(options.pop("json_response", False))
    options.pop("stateless_http", None)  # both eras are served (TM-HAND-COMPAT-RUN)
    size = options.pop("max_request_body_size", None)
    if options:
        raise Unsupported(
            f"run() option(s) {sorted(options)}",
            "pass a trio_mcp.ServerConfig to server.serve(config=...) for trio-mcp's settings",
        )
    config = ServerConfig(
        path=path, response_mode=ResponseMode.JSON if json_response else ResponseMode.SSE
    )
    return config if size is None else attrs.evolve(config, max_body_bytes=int(size))


class MCPServer(Server):
    """``trio_mcp.Server`` under the name and constructor of the SDK's ``MCPServer`` (and
    FastMCP's ``FastMCP``): ``@mcp.tool()``, ``@mcp.resource(uri)``, ``@mcp.prompt()``,
    ``mcp.run(...)``, ``lifespan(server)``, ``middleware=[...]`` and ``add_middleware``."""

    def __init__(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: Iterable[Icon] | None = None,
        version: str = "",
        *,
        lifespan: Lifespan | None = None,
        middleware: Sequence[Any] | None = None,
        max_threads: int = DEFAULT_THREADS,
        debug: bool = False,
        log_level: str = "INFO",
        warn_on_duplicate_tools: bool = True,
        warn_on_duplicate_resources: bool = True,
        warn_on_duplicate_prompts: bool = True,
        dependencies: Sequence[str] | None = None,
        **unsupported: Any,
    ) -> None:
        given = {k: v for k, v in unsupported.items() if v is not None}
        if description is not None:
            given["description"] = description
        if given:
            raise Unsupported(
                f"MCPServer option(s) {sorted(given)}",
                "authorization is ServerConfig(auth=AuthConfig(...)), resumption and limits "
                "are ServerConfig's, path screening is @resource(..., screen_paths=...); see "
                "docs/server-guide.md 'From the SDK or FastMCP'",
            )
        super().__init__(
            name or "mcp-server", version=version or "0.1.0", instructions=instructions,
            title=title, lifespan=lifespan, website_url=website_url, icons=icons or (),
            middleware=[_middleware_of(mw) for mw in middleware or ()],
            max_threads=max_threads,
        )

    def add_middleware(self, middleware: Any) -> None:
        """FastMCP's ``mcp.add_middleware(Timing())``: after those already added."""
        self.middleware(_middleware_of(middleware))

    def resource(
        self, uri: str, *, security: Any = None, **options: Any
    ) -> Callable[[Any], Any]:
        if security is not None:
            raise Unsupported("ResourceSecurity", "pass screen_paths=False to opt out of "
                              "trio-mcp's path screening (TM-HAND-TEMPLATE)")
        return super().resource(uri, **options)

    def custom_route(self, path: str, methods: Sequence[str], **_: Any) -> Any:
        raise Unsupported(
            "custom_route (a Starlette handler)",
            f'use @server.route("{path}", methods={list(methods)!r}) on an async function '
            "of no arguments that returns a str, bytes, dict or (status, body)",
        )

    def completion(self) -> Any:  # type: ignore[override]
        raise Unsupported(
            "the SDK's completion handler",
            "use @server.complete() (ref, argument, value, arguments) -> list of strings, or "
            "@server.completion(ref_type, name, argument) for one argument",
        )

    def sse_app(self, *_: Any, **__: Any) -> Any:
        raise Unsupported("the HTTP+SSE transport", "serve Streamable HTTP: streamable_http_app()")

    def streamable_http_app(self, **options: Any) -> Any:
        """The ASGI application (under hypercorn's trio worker)."""
        return self.asgi_app(_transport_config(options.pop("path", "/mcp"), options))

    http_app = streamable_http_app

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until interrupted: ``"stdio"``, or ``"streamable-http"`` (FastMCP's
        ``"http"``) on ``host``:``port`` at ``streamable_http_path`` (``path``)."""
        import trio

        if transport == "stdio":
            if options:
                raise Unsupported(f"stdio option(s) {sorted(options)}", "run it without")
            self.run_stdio()
            return
        if transport not in ("streamable-http", "http"):
            raise Unsupported(f"transport {transport!r}", 'use "streamable-http" or "stdio"')
        host = str(options.pop("host", "127.0.0.1"))
        port = int(options.pop("port", 8000))
        path = str(options.pop("streamable_http_path", options.pop("path", "/mcp")))
        config = _transport_config(path, options)
        trio.run(functools.partial(self.serve, host=host, port=port, config=config))


#: FastMCP's name for the same server.
FastMCP = MCPServer
