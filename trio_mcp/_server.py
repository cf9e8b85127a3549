# The user's server: a registry of tools (and later resources and prompts) and the method
# table that serves them (spec/lifecycle.md, spec/tools.md). It knows nothing of HTTP: the
# session runtime calls _dispatch() with a Context and a Request.
from __future__ import annotations

import base64
import binascii
import inspect
import json
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from . import _completion, _prompts, _resources, _schema
from ._completion import GenericHandler, SpecificHandler
from ._content import CONTENT_TYPES, ToolResult, is_content, json_text, to_content_list
from ._context import LOG_LEVELS, Context, SessionContext, log_params
from .protocol import ErrorCode, LocalProtocolError, Notification, RemoteProtocolError, Request

if TYPE_CHECKING:
    from ._config import ServerConfig
    from ._trio._manager import SessionManager
    from ._trio._session import Session

__all__ = ["Server", "ToolError"]

logger = logging.getLogger("trio_mcp.server")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
G = TypeVar("G", bound=GenericHandler)
Handler = Callable[["Server", Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
NotificationHook = Callable[[SessionContext, Mapping[str, Any]], Awaitable[None]]


class ToolError(Exception):
    """Raise from a tool to return a tool error (``isError: true``) with this message.

    U-TOOL-7: errors that come from the tool are results, not protocol errors.
    """


@attrs.frozen(kw_only=True)
class ToolDef:
    name: str
    title: str | None
    description: str
    fn: Callable[..., Awaitable[Any]]
    signature: _schema.Signature
    annotations: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    input_schema: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }
        if self.title is not None:
            d["title"] = self.title
        if self.signature.output_schema is not None:
            d["outputSchema"] = self.signature.output_schema
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        if self.meta:
            d["_meta"] = dict(self.meta)
        return d


def encode_cursor(kind: str, after: str) -> str:
    """An opaque page cursor: the last item's name, so pages stay stable (U-PAGE-2)."""
    raw = json.dumps({"k": kind, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(kind: str, cursor: Any) -> str:
    try:
        if not isinstance(cursor, str):
            raise ValueError
        obj = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if not isinstance(obj, dict) or obj.get("k") != kind or not isinstance(obj.get("a"), str):
            raise ValueError
        return str(obj["a"])
    except (ValueError, binascii.Error, UnicodeError):
        # U-PAGE-4 (SHOULD): an invalid cursor is -32602.
        raise RemoteProtocolError(
            "Invalid params: unknown pagination cursor.", code=ErrorCode.INVALID_PARAMS
        ) from None


def paginate(
    kind: str, items: Sequence[tuple[str, dict[str, Any]]], params: Mapping[str, Any], size: int
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``items`` (sorted by key) after the cursor in ``params``."""
    ordered = sorted(items, key=lambda kv: kv[0])
    start = 0
    if params.get("cursor") is not None:
        after = decode_cursor(kind, params["cursor"])
        start = next((i for i, (k, _) in enumerate(ordered) if k > after), len(ordered))
    page = ordered[start : start + size]
    more = start + size < len(ordered)
    return [v for _, v in page], (encode_cursor(kind, page[-1][0]) if more and page else None)


def list_result(
    field: str,
    kind: str,
    items: Sequence[tuple[str, dict[str, Any]]],
    params: Mapping[str, Any],
    size: int,
) -> dict[str, Any]:
    """A paginated list result: ``{field: page, nextCursor?}`` (U-PAGE-1, U-PAGE-2)."""
    page, next_cursor = paginate(kind, items, params, size)
    result: dict[str, Any] = {field: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


class Server:
    """An MCP server: register tools with ``@server.tool()``, then serve it.

    Args:
        name: the ``serverInfo.name`` sent at initialization.
        version: the ``serverInfo.version``.
        instructions: optional usage hints for the client's model.
        title: optional display name.
    """

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.1.0",
        instructions: str | None = None,
        title: str | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.title = title
        self._tools: dict[str, ToolDef] = {}
        self._managers: list[SessionManager] = []
        self._methods: dict[str, Handler] = {
            "ping": _ping,
            "tools/list": _tools_list,
            "tools/call": _tools_call,
            "logging/setLevel": _set_level,
            **_resources.METHODS,
            **_prompts.METHODS,
            **_completion.METHODS,
        }
        #: Extra capability entries contributed by features (resources, prompts, ...).
        self._extra_capabilities: dict[str, dict[str, Any]] = {"logging": {}}
        self._resources = _resources.ResourceRegistry()
        self._prompts = _prompts.PromptRegistry()
        self._completions = _completion.CompletionRegistry()
        #: Hooks for notifications from the client, by method (see on_notification).
        self._notification_hooks: dict[str, list[NotificationHook]] = {}

    # -- registration -------------------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register an async function as a tool.

        The name, description and ``inputSchema`` come from the function's name, docstring
        and signature unless given. A parameter annotated ``Context`` receives the context.
        """

        def decorate(fn: F) -> F:
            self.add_tool(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                structured_output=structured_output,
                input_schema=input_schema,
                meta=meta,
            )
            return fn

        return decorate

    def add_tool(
        self,
        fn: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {fn!r} must be an async function (it runs as a trio task)")
        if structured_output is None and _returns_content(fn):
            # Content blocks are the result itself, not structured data with a schema.
            structured_output = False
        sig = _schema.derive_signature(
            fn,
            name=name,
            description=description,
            context_type=Context,
            structured_output=structured_output,
        )
        _check_tool_name(sig.name)
        if input_schema is not None and (
            not isinstance(input_schema, Mapping) or input_schema.get("type") != "object"
        ):
            # U-TOOL-3 (MUST): inputSchema is a valid JSON Schema object (not null); MCP
            # arguments are an object, so the schema must describe one.
            raise TypeError(f"tool {sig.name}: input_schema must be a JSON Schema of type object")
        if not sig.description and description is None:
            logger.warning("tool %s has no description (give it a docstring)", sig.name)
        self._tools[sig.name] = ToolDef(
            name=sig.name,
            title=title,
            description=sig.description,
            fn=fn,
            signature=sig,
            annotations=annotations,
            meta=meta,
            input_schema=input_schema if input_schema is not None else sig.input_schema,
        )
        self._list_changed("tools")

    def remove_tool(self, name: str) -> None:
        del self._tools[name]
        self._list_changed("tools")

    @property
    def tools(self) -> Mapping[str, ToolDef]:
        return dict(self._tools)

    # -- resources, prompts, completion (spec25/server/resources.mdx, prompts.mdx) -----------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register an async function as the resource at ``uri``.

        A ``{var}`` in ``uri`` makes it a URI template (RFC 6570 level 1): the function's
        parameters are the variables (str, int or float), taken from the URI being read.
        It returns a str (text), bytes (a base64 blob), a ``Blob``/``EmbeddedResource``, a
        list of these, or any JSON value. Raise ``ResourceNotFound`` for a URI that names
        nothing. A parameter annotated ``Context`` receives the context.
        """

        def decorate(fn: F) -> F:
            self.add_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                annotations=annotations,
                meta=meta,
            )
            return fn

        return decorate

    def add_resource(
        self,
        fn: Callable[..., Awaitable[Any]],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._resources.add(
            _resources.make_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                annotations=annotations,
                meta=meta,
            )
        )
        self._list_changed("resources")

    def remove_resource(self, uri: str) -> None:
        """Remove the resource or template registered under ``uri``."""
        self._resources.remove(uri)
        self._list_changed("resources")

    @property
    def resources(self) -> Mapping[str, _resources.ResourceDef]:
        return dict(self._resources.fixed)

    @property
    def resource_templates(self) -> Mapping[str, _resources.ResourceDef]:
        return dict(self._resources.templates)

    def notify_resource_updated(self, uri: str) -> int:
        """Tell every session subscribed to ``uri`` that it changed
        (notifications/resources/updated, on the standalone stream). Returns how many."""
        return _resources.notify_updated(self, uri)

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register an async function as a prompt.

        Its arguments come from the signature (they are strings; a default makes one
        optional) and their descriptions from the docstring's ``Args:``. It returns a str
        (one user message), a ``UserMessage``/``AssistantMessage``, a content block, a list
        of these, or a ``PromptResult``.
        """

        def decorate(fn: F) -> F:
            self.add_prompt(fn, name=name, title=title, description=description, meta=meta)
            return fn

        return decorate

    def add_prompt(
        self,
        fn: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._prompts.add(
            _prompts.make_prompt(fn, name=name, title=title, description=description, meta=meta)
        )
        self._list_changed("prompts")

    def remove_prompt(self, name: str) -> None:
        self._prompts.remove(name)
        self._list_changed("prompts")

    @property
    def prompts(self) -> Mapping[str, _prompts.PromptDef]:
        return dict(self._prompts.prompts)

    def completion(
        self, ref_type: typing.Literal["prompt", "resource"], name: str, argument: str
    ) -> Callable[[F], F]:
        """Register the completion of one argument of a prompt (``ref_type="prompt"``, its
        name) or one variable of a resource template (``"resource"``, its URI template).

        The function receives the partial value, and optionally ``arguments`` (the other
        arguments already given) and a ``Context``; it returns a list of strings (at most
        100 are sent) or a ``Completion``.
        """

        def decorate(fn: F) -> F:
            handler: SpecificHandler = fn
            self._completions.add(ref_type, name, argument, handler)
            return fn

        return decorate

    def complete(self) -> Callable[[G], G]:
        """Register the completion handler for every argument without a specific one.

        It receives ``(ref, argument, value, arguments)`` and returns a list of strings, a
        ``Completion``, or None (no suggestions).
        """

        def decorate(fn: G) -> G:
            self._completions.set_generic(fn)
            return fn

        return decorate

    # -- notifications from the client, and messages to every session ---------------------

    def on_notification(self, method: str) -> Callable[[NotificationHook], NotificationHook]:
        """Register an async hook for a notification from the client, e.g.
        ``notifications/roots/list_changed``. It receives a ``SessionContext`` (to answer
        on that session's standalone stream) and the notification's params, and runs as a
        task of the session."""

        def decorate(fn: NotificationHook) -> NotificationHook:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(f"notification hook {fn!r} must be an async function")
            self._notification_hooks.setdefault(method, []).append(fn)
            return fn

        return decorate

    def on_roots_list_changed(
        self, fn: Callable[[SessionContext], Awaitable[None]]
    ) -> Callable[[SessionContext], Awaitable[None]]:
        """Register an async hook for ``notifications/roots/list_changed``; it receives the
        session's ``SessionContext`` (call ``await session.list_roots()`` there)."""

        async def hook(session: SessionContext, params: Mapping[str, Any]) -> None:
            await fn(session)

        self.on_notification("notifications/roots/list_changed")(hook)
        return fn

    def _live_sessions(self) -> list[Session]:
        return [
            s for m in self._managers for s in list(m.sessions.values()) if not s.closed
        ]

    def sessions(self) -> list[SessionContext]:
        """A SessionContext for each open session (server-initiated requests and messages
        go on its standalone stream)."""
        return [SessionContext(session=s) for s in self._live_sessions()]

    def log(self, level: str, data: Any, *, logger: str | None = None) -> int:
        """Send a log message (notifications/message) to every session whose level lets it
        through (U-LOG-3), on its standalone stream. Returns how many sessions got it.

        It is not async: it only queues the message. A handler logs with ``ctx.log``, which
        goes on its request's stream instead.
        """
        sent = 0
        for session in self._live_sessions():
            params = log_params(session, level, data, logger)
            if params is not None and session.send(
                Notification(method="notifications/message", params=params)
            ):
                sent += 1
        return sent

    def _list_changed(self, kind: str) -> None:
        # U-TOOL-2 (SHOULD): a change of the list is announced to every session, on its
        # standalone stream (T-GET-5: it relates to no request).
        for manager in self._managers:
            manager.notify_all(f"notifications/{kind}/list_changed")

    # -- serving ------------------------------------------------------------------------

    def asgi_app(self, config: ServerConfig | None = None, *, bind: Sequence[str] = ()) -> Any:
        """This server as an ASGI application (runs under hypercorn's trio worker)."""
        from ._asgi import ASGIApp
        from ._config import ServerConfig

        return ASGIApp(self, config or ServerConfig(), bind_hosts=list(bind))

    async def serve(self, *args: Any, **kwargs: Any) -> None:
        """Serve over HTTP with hypercorn; see :func:`trio_mcp.serve` for the arguments."""
        from ._serve import serve

        await serve(self, *args, **kwargs)

    # -- protocol surface (called by the runtime) ---------------------------------------

    def capabilities(self) -> dict[str, Any]:
        # U-TOOL-1 / L-CAP-1: declare exactly what is served.
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        # U-RES-1 / U-PROMPT-1: declared once something is registered.
        if self._resources.enabled:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self._prompts.enabled:
            caps["prompts"] = {"listChanged": True}
        if self._prompts.enabled or self._resources.templates or self._completions.enabled:
            caps["completions"] = {}
        caps.update(self._extra_capabilities)
        return caps

    def _capabilities_has(self, key: str) -> bool:
        return key in self.capabilities()

    def _initialize_result(self, version: str) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": info,
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        return result

    async def _dispatch(self, ctx: Context, request: Request) -> Mapping[str, Any]:
        handler = self._methods.get(request.method)
        if handler is None:
            # Unknown methods (server/discover among them, in a legacy session) are a
            # JSON-RPC error, which also makes dual-era clients fall back to initialize.
            raise RemoteProtocolError(
                f"Method not found: {request.method}", code=ErrorCode.METHOD_NOT_FOUND
            )
        return await handler(self, ctx, request.params or {})

    def _on_client_notification(self, session: Session, note: Notification) -> None:
        params = dict(note.params or {})
        for hook in self._notification_hooks.get(note.method, ()):
            session.spawn(
                _run_hook, hook, SessionContext(session=session), params, name=f"mcp:{note.method}"
            )

    def attach_manager(self, manager: SessionManager) -> None:
        self._managers.append(manager)

    def detach_manager(self, manager: SessionManager) -> None:
        if manager in self._managers:
            self._managers.remove(manager)


async def _run_hook(
    hook: NotificationHook, session: SessionContext, params: Mapping[str, Any]
) -> None:
    try:
        await hook(session, params)
    except Exception:
        # A failing hook must not end the session: it is logged, like a failing handler.
        logger.exception("notification hook %r failed", hook)


def _returns_content(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s return annotation is made of content blocks (or a ToolResult)."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:
        return False
    if hint is None:
        return False
    stack = [hint]
    seen_any = False
    while stack:
        t = stack.pop()
        args = typing.get_args(t)
        if args:
            stack.extend(a for a in args if a is not type(None) and a is not Ellipsis)
            continue
        if isinstance(t, type) and issubclass(t, (*CONTENT_TYPES, ToolResult)):
            seen_any = True
            continue
        return False
    return seen_any


def _check_tool_name(name: str) -> None:
    # U-TOOL-4 (SHOULD): 1-128 characters of A-Z a-z 0-9 _ - . ; checked when registering, so
    # a bad name is the application's error, not the client's.
    ok = 1 <= len(name) <= 128 and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name)
    if not ok:
        raise ValueError(f"tool name {name!r}: use 1-128 characters of A-Z a-z 0-9 _ - .")


async def _ping(server: Server, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
    # L-PING-1 (MUST): answer promptly with an empty result.
    return {}


async def _set_level(server: Server, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
    level = params.get("level")
    if level not in LOG_LEVELS:
        # U-LOG-4 (SHOULD): an invalid level is -32602.
        raise RemoteProtocolError(
            f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}.",
            code=ErrorCode.INVALID_PARAMS,
        )
    ctx._session.log_level = str(level)
    return {}


async def _tools_list(server: Server, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
    return list_result(
        "tools",
        "tools",
        [(t.name, t.to_dict()) for t in server._tools.values()],
        params,
        ctx._session.config.page_size,
    )


async def _tools_call(server: Server, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
    name = params.get("name")
    if not isinstance(name, str):
        raise RemoteProtocolError(
            "Invalid params: tools/call needs a tool name.", code=ErrorCode.INVALID_PARAMS
        )
    tool = server._tools.get(name)
    if tool is None:
        # U-TOOL-7: an unknown tool is a protocol error (-32602), not a tool error.
        raise RemoteProtocolError(f"Unknown tool: {name}", code=ErrorCode.INVALID_PARAMS)
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise RemoteProtocolError(
            "Invalid params: arguments must be an object.", code=ErrorCode.INVALID_PARAMS
        )
    try:
        kwargs = _schema.convert_arguments(tool.signature, arguments)
    except _schema.ArgumentError as exc:
        # U-TOOL-7 / U-TOOL-8: input validation failures are tool errors the model can read.
        return ToolResult(content=[], is_error=True).to_dict() | {
            "content": to_content_list(f"Invalid arguments for tool {name}: {exc}")
        }
    if tool.signature.context_param is not None:
        kwargs[tool.signature.context_param] = ctx
    try:
        value = await tool.fn(**kwargs)
    except ToolError as exc:
        return {"content": to_content_list(str(exc)), "isError": True}
    except LocalProtocolError:
        raise
    except RemoteProtocolError:
        raise
    except Exception as exc:
        logger.exception("tool %s raised", name)
        return {
            "content": to_content_list(f"Tool {name} failed: {type(exc).__name__}: {exc}"),
            "isError": True,
        }
    return _tool_result(tool, value)


def _check_output(tool: ToolDef, structured: Any) -> None:
    assert tool.signature.output_schema is not None
    problems = _schema.validate(structured, tool.signature.output_schema)
    if problems:
        # U-TOOL-6 (MUST): structured results conform to the outputSchema. A tool that
        # breaks its own schema is a server bug: an internal error, not a tool result.
        raise LocalProtocolError(
            f"Tool {tool.name} returned a value that does not match its outputSchema: "
            + "; ".join(problems[:3])
        )


def _tool_result(tool: ToolDef, value: Any) -> dict[str, Any]:
    sig = tool.signature
    if isinstance(value, ToolResult):
        result = value.to_dict()
        if value.structured is not None and not value.is_error:
            if sig.output_schema is not None:
                _check_output(tool, value.structured)
            if not value.content:
                # U-TOOL-5 (SHOULD): structured content also goes out as JSON text.
                result["content"] = to_content_list(json_text(value.structured))
        return result
    if sig.output_schema is None or is_content(value):
        return {"content": to_content_list(value)}
    data = _schema.dump_value(value)
    structured = {"result": data} if sig.wrap_output else data
    _check_output(tool, structured)
    # U-TOOL-5 (SHOULD): structured content also goes out as serialized JSON text.
    return {"content": to_content_list(json_text(structured)), "structuredContent": structured}
