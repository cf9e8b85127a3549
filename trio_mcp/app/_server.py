# The user's server: decorators that register tools, resources, prompts and completions with
# the method table (trio_mcp.app._dispatch), and the ways to serve it. It is the App the runtime
# serves (trio_mcp.base._ports); it reaches the clients through the runtimes serving it (Hub), for
# what concerns all of them: list changes, resource updates, log messages.
from __future__ import annotations

import contextlib
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..base._ports import Hub, NotificationHandler, RequestPort
from ..protocol import CacheHint, CacheScope, Notification, Request
from ..protocol._jsonschema import preload as preload_schemas
from ..protocol._methods import BROADCASTS, METHODS, ScopeKind, named
from ..protocol._tasks import TASKS_EXTENSION, TaskSupport
from ..protocol._transport import Reply
from ..protocol._versions import Era
from . import _apps, _prompts, _resources
from ._completion import GenericHandler, SpecificHandler
from ._content import EmbeddedResource
from ._context import SessionContext, log_params
from ._dispatch import Dispatcher, NotificationHook
from ._display import Icon, ToolAnnotations, check_website, icons_list
from ._extension import Extension
from ._invoke import DEFAULT_THREADS
from ._middleware import Middleware
from ._prompts import PromptDef
from ._resources import ResourceDef
from ._routes import RouteHandler, Routes
from ._tasks import Tasks
from ._tools import ToolDef, ToolError, make_tool

if TYPE_CHECKING:
    import socket

    from trio import TaskStatus

    from ..base._config import ServerConfig

__all__ = ["Server", "ToolError"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
#: A tool: an ``async def``, or a plain ``def`` that runs in a worker thread.
T = TypeVar("T", bound=Callable[..., Any])
M = TypeVar("M", bound=Middleware)
#: ``lifespan=``: called with the server, an async context manager around serving.
Lifespan = Callable[["Server"], contextlib.AbstractAsyncContextManager[Any]]
G = TypeVar("G", bound=GenericHandler)


class Server:
    """An MCP server: register tools with ``@server.tool()``, then serve it.

    Args:
        name: the ``serverInfo.name`` sent at initialization (or in every modern result).
        version: the ``serverInfo.version``.
        instructions: optional usage hints for the client's model.
        title: optional display name.
        lifespan: ``fn(server)``, an async context manager factory (an
            ``@asynccontextmanager``): entered once per process before the first request is
            served and left after the last (per worker with ``--workers``; in the ASGI
            lifespan under hypercorn); what it yields is ``ctx.lifespan`` in every handler
            (TM-HAND-LIFESPAN).
        middleware: ``async def mw(ctx, call_next)`` functions wrapping every request, the
            first outermost (more with ``@server.middleware``, TM-HAND-MIDDLEWARE).
        max_threads: how many plain ``def`` handlers run at once, each in a worker thread
            (TM-HAND-THREAD); the others wait for a thread.
        website_url: the ``serverInfo.websiteUrl`` (TM-HAND-DISPLAY).
        icons: the ``serverInfo.icons``, ``Icon`` values (tools, resources and prompts take
            ``icons=`` too).
        extensions: ``Extension`` objects to install (SEP-2133; ``add_extension``).
    """

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.1.0",
        instructions: str | None = None,
        title: str | None = None,
        lifespan: Lifespan | None = None,
        middleware: Sequence[Middleware] = (),
        max_threads: int = DEFAULT_THREADS,
        website_url: str | None = None,
        icons: Iterable[Icon] = (),
        extensions: Iterable[Extension] = (),
    ) -> None:
        self._name = name
        self._website_url = check_website(website_url)
        self._icons = icons_list(icons)
        self.version = version
        self._instructions = instructions
        self.title = title
        self._dispatcher = Dispatcher(max_threads)
        self._routes = Routes()
        self._lifespan = lifespan
        #: Whether a runtime serves this server now (with a lifespan, only one may).
        self._serving = False
        for mw in middleware:
            self._dispatcher.add_middleware(mw)
        self._hubs: list[Hub] = []
        #: The OAuth scopes of each tool, prompt and resource that has any (T-AUTH-STEPUP).
        self._scopes: dict[tuple[ScopeKind, str], frozenset[str]] = {}
        #: MCP Apps: the ui:// pages and the tools that show them (trio_mcp.app._apps).
        self._apps = _apps.AppRegistry()
        for extension in extensions:
            self.add_extension(extension)

    def add_extension(self, extension: Extension) -> None:
        """Install an extension (SEP-2133, docs/extensions.md): declare it under
        ``capabilities.extensions``, serve its methods, add its tools, resources and prompts,
        and put its wrapper around ``tools/call``."""
        self._dispatcher.install(extension)
        extension.contribute(self)

    @property
    def extensions(self) -> Mapping[str, Extension]:
        return dict(self._dispatcher.extensions.installed)

    @property
    def name(self) -> str:
        return self._name

    @property
    def instructions(self) -> str | None:
        return self._instructions

    # -- registration -------------------------------------------------------------------

    @typing.overload
    def tool(self, fn: T, /) -> T: ...

    @typing.overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | ToolAnnotations | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        requires: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        scopes: Iterable[str] = (),
        task: TaskSupport | str = TaskSupport.FORBIDDEN,
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> Callable[[T], T]: ...

    def tool(
        self,
        name: str | T | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | ToolAnnotations | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        requires: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        scopes: Iterable[str] = (),
        task: TaskSupport | str = TaskSupport.FORBIDDEN,
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> T | Callable[[T], T]:
        """Register a function as a tool: ``@server.tool`` or ``@server.tool(...)``. An
        ``async def`` runs as a trio task; a plain ``def`` runs in a worker thread, at most
        ``max_threads`` at once (TM-HAND-THREAD: a cancelled call stops waiting for its
        thread at once, and the thread runs on to its end, its result dropped; it can poll
        ``trio.from_thread.check_cancelled()``, and reach the context as ``ctx.sync``).

        The name, description and ``inputSchema`` come from the function's name, docstring
        and signature unless given. A parameter annotated ``Context`` receives the context.
        A name already registered is refused (ValueError) unless ``replace`` (U-TOOL-13).
        ``requires`` names client capabilities the tool cannot run without, as a
        ClientCapabilities object (``{"sampling": {}}``): a 2026-07-28 client that did not
        declare them is refused with -32021 before the tool runs (ML-META-3). ``headers``
        mirrors parameters into HTTP headers, ``{parameter: header name}``: a 2026-07-28
        client sends ``Mcp-Param-<name>`` with the argument's value (MT-HDR-7; never a
        secret, MT-HDR-9). ``scopes`` are the OAuth scopes a call needs when the server
        has authorization (T-AUTH-STEPUP). ``task`` says whether a 2026-07-28 call may
        run as a task (the tasks extension, TM-TASK-DECIDE): "forbidden" (the default),
        "optional" (when the client allows it and the call outlasts ``task_after``) or
        "required" (a client without the extension is refused with -32021).

        ``input_schema``, a hand-written JSON Schema, is enforced as written (TM-TOOL-INPUT),
        and so is an elicitation's ``requested_schema`` against its answer. A schema without
        ``$schema`` is JSON Schema 2020-12; one may name draft-03, draft-04, draft-06,
        draft-07, 2019-09 or 2020-12 in ``$schema`` (MJ-SCHEMA-4); any other dialect is
        refused by name when a value is checked against it.
        """
        if callable(name):
            # @server.tool without parentheses: the function itself, with every default.
            self.add_tool(name)
            return name

        def decorate(fn: T) -> T:
            self.add_tool(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                structured_output=structured_output,
                input_schema=input_schema,
                meta=meta,
                requires=requires,
                headers=headers,
                scopes=scopes,
                task=task,
                replace=replace,
                icons=icons,
            )
            return fn

        return decorate

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | ToolAnnotations | None = None,
        structured_output: bool | None = None,
        input_schema: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        requires: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        scopes: Iterable[str] = (),
        task: TaskSupport | str = TaskSupport.FORBIDDEN,
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> None:
        """Register ``fn`` as a tool (the arguments of :meth:`tool`)."""
        tool = make_tool(
            fn,
            name=name,
            title=title,
            description=description,
            annotations=annotations,
            structured_output=structured_output,
            input_schema=input_schema,
            meta=meta,
            requires=requires,
            headers=headers,
            task=task,
            icons=icons,
        )
        self._dispatcher.tools.add(tool, replace=replace)
        if tool.task is not TaskSupport.FORBIDDEN and TASKS_EXTENSION not in (
            self._dispatcher.extensions.installed
        ):
            # TM-TASK-EXT: a tool that may run as a task is the opt-in to the extension.
            self.add_extension(Tasks())
        self._set_scopes(ScopeKind.TOOL, tool.name, scopes)
        self._list_changed("tools")

    def remove_tool(self, name: str) -> None:
        self._dispatcher.tools.remove(name)
        self._apps.unbind(name)
        self._set_scopes(ScopeKind.TOOL, name, ())
        self._list_changed("tools")

    @property
    def tools(self) -> Mapping[str, ToolDef]:
        return dict(self._dispatcher.tools.tools)

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
        scopes: Iterable[str] = (),
        replace: bool = False,
        screen_paths: bool = True,
        icons: Iterable[Icon] = (),
        cache: CacheHint | None = None,
    ) -> Callable[[T], T]:
        """Register a function (async, or a plain ``def`` run in a worker thread) as the
        resource at ``uri``:
        ``@server.resource("file:///notes.txt")``.

        An expression in ``uri`` makes it a URI template (RFC 6570, TM-HAND-TEMPLATE):
        ``{var}`` (one segment), ``{+var}`` (a path, with ``/``), ``{#var}``, ``{.var}``,
        ``{/var}``, ``{/var*}`` (segments: a ``list[str]``, or a str joined with ``/``) and
        ``{?a,b}`` / ``{&c}`` (query parameters, optional unless the function needs them).
        The function's parameters are the variables (str, int or float), percent-decoded
        from the URI being read. A value decoding to an absolute path, a ``..`` step or a
        NUL makes the URI name nothing, unless ``screen_paths=False``. ``cache`` gives a
        2026-07-28 read of it its own caching hints (TM-HAND-CACHE).
        It returns a str (text), bytes (a base64 blob), a ``Blob``/``EmbeddedResource``, a
        list of these, or any JSON value. Raise ``ResourceNotFound`` for a URI that names
        nothing. A parameter annotated ``Context`` receives the context. A URI already
        registered is refused (ValueError) unless ``replace``.
        """
        if not isinstance(uri, str):
            # @server.resource without its URI would otherwise register nothing, silently.
            raise TypeError(
                "@server.resource needs the resource's URI: "
                '@server.resource("file:///notes.txt"), or a template such as '
                '@server.resource("notes://{name}")'
            )

        def decorate(fn: T) -> T:
            self.add_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                annotations=annotations,
                meta=meta,
                scopes=scopes,
                replace=replace,
                screen_paths=screen_paths,
                icons=icons,
                cache=cache,
            )
            return fn

        return decorate

    def add_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Iterable[str] = (),
        replace: bool = False,
        screen_paths: bool = True,
        icons: Iterable[Icon] = (),
        cache: CacheHint | None = None,
    ) -> None:
        """Register ``fn`` as the resource at ``uri`` (the arguments of :meth:`resource`)."""
        scopes = scopes if isinstance(scopes, str) else tuple(scopes)
        if cache is not None and cache.scope is CacheScope.PUBLIC and scopes:
            # MU-CACHE-7: a public result may be given to any caller; one that needs scopes
            # would reach callers without them from a shared cache.
            raise ValueError(f"resource {uri!r} needs scopes, so its cache scope is private")
        self._dispatcher.resources.add(
            _resources.make_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                annotations=annotations,
                meta=meta,
                screen_paths=screen_paths,
                icons=icons,
                cache=cache,
            ),
            replace=replace,
        )
        self._set_scopes(ScopeKind.RESOURCE, uri, scopes)
        self._list_changed("resources")

    def remove_resource(self, uri: str) -> None:
        """Remove the resource or template registered under ``uri``."""
        self._dispatcher.resources.remove(uri)
        self._apps.remove_page(uri)
        self._set_scopes(ScopeKind.RESOURCE, uri, ())
        self._list_changed("resources")

    @property
    def resources(self) -> Mapping[str, ResourceDef]:
        return dict(self._dispatcher.resources.fixed)

    @property
    def resource_templates(self) -> Mapping[str, ResourceDef]:
        return dict(self._dispatcher.resources.templates)

    def notify_resource_updated(self, uri: str) -> int:
        """Tell every client subscribed to ``uri`` that it changed
        (notifications/resources/updated): legacy sessions on their standalone stream,
        modern listeners on their listen stream. Returns how many got it."""
        return self._broadcast("notifications/resources/updated", {"uri": uri})

    @typing.overload
    def prompt(self, fn: T, /) -> T: ...

    @typing.overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Iterable[str] = (),
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> Callable[[T], T]: ...

    def prompt(
        self,
        name: str | T | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Iterable[str] = (),
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> T | Callable[[T], T]:
        """Register a function (async, or a plain ``def`` run in a worker thread) as a
        prompt: ``@server.prompt`` or ``@server.prompt(...)``. A name already registered is
        refused (ValueError) unless ``replace``.

        Its arguments come from the signature (they are strings; a default makes one
        optional) and their descriptions from the docstring's ``Args:``. It returns a str
        (one user message), a ``UserMessage``/``AssistantMessage``, a content block, a list
        of these, or a ``PromptResult``.
        """
        if callable(name):
            # @server.prompt without parentheses: the function itself, with every default.
            self.add_prompt(name)
            return name

        def decorate(fn: T) -> T:
            self.add_prompt(
                fn, name=name, title=title, description=description, meta=meta, scopes=scopes,
                replace=replace, icons=icons,
            )
            return fn

        return decorate

    def add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Iterable[str] = (),
        replace: bool = False,
        icons: Iterable[Icon] = (),
    ) -> None:
        """Register ``fn`` as a prompt (the arguments of :meth:`prompt`)."""
        prompt = _prompts.make_prompt(
            fn, name=name, title=title, description=description, meta=meta, icons=icons
        )
        self._dispatcher.prompts.add(prompt, replace=replace)
        self._set_scopes(ScopeKind.PROMPT, prompt.name, scopes)
        self._list_changed("prompts")

    def remove_prompt(self, name: str) -> None:
        self._dispatcher.prompts.remove(name)
        self._set_scopes(ScopeKind.PROMPT, name, ())
        self._list_changed("prompts")

    @property
    def prompts(self) -> Mapping[str, PromptDef]:
        return dict(self._dispatcher.prompts.prompts)

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
            self._dispatcher.completions.add(ref_type, name, argument, handler)
            return fn

        return decorate

    def complete(self) -> Callable[[G], G]:
        """Register the completion handler for every argument without a specific one.

        It receives ``(ref, argument, value, arguments)`` and returns a list of strings, a
        ``Completion``, or None (no suggestions).
        """

        def decorate(fn: G) -> G:
            self._dispatcher.completions.set_generic(fn)
            return fn

        return decorate

    # -- MCP Apps (io.modelcontextprotocol/ui, spec/apps.md) ---------------------------------

    def app_tool(
        self,
        name: str | None = None,
        *,
        resource_uri: str,
        visibility: Sequence[_apps.Visibility] | None = None,
        meta: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Callable[[T], T]:
        """Register a tool whose results a host shows in the MCP Apps page at
        ``resource_uri`` (a ``ui://`` URI registered with :meth:`add_app_resource`; serving
        does not start until it is): ``_meta.ui.resourceUri`` names the page, and
        ``visibility`` (``["model", "app"]`` by default) says whether the model, the page, or
        both may call it. The other arguments are :meth:`tool`'s. The tool's result is its
        text for every client (UI-FALLBACK): a host without the extension shows that alone;
        ``trio_mcp.apps_supported(ctx)`` says whether this client declared it."""
        app_meta = _apps.tool_meta(resource_uri, visibility, meta)

        def decorate(fn: T) -> T:
            # A copy per function: its identity finds the tool registered (under whatever
            # name it took), even when one decorator is applied twice.
            own = dict(app_meta)
            self.add_tool(fn, name=name, meta=own, **options)
            tool = next(t for t in self._dispatcher.tools.tools.values() if t.meta is own)
            self._apps.bind(tool.name, resource_uri)
            return fn

        return decorate

    def add_app_resource(
        self,
        uri: str,
        html: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        csp: _apps.AppCsp | Mapping[str, Any] | None = None,
        permissions: _apps.AppPermissions | Mapping[str, Any] | Iterable[str] | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        max_bytes: int = _apps.MAX_APP_HTML,
        scopes: Iterable[str] = (),
        replace: bool = False,
        cache: CacheHint | None = None,
    ) -> None:
        """Serve ``html``, an HTML document, as the MCP Apps page at ``uri`` (``ui://...``):
        listed and read as ``text/html;profile=mcp-app``, with ``_meta.ui`` holding ``csp``
        (the origins the page may reach: an ``AppCsp`` or ``{"connectDomains": [...]}``,
        each entry checked to be an origin), ``permissions`` (``["camera"]``...),
        ``domain`` and ``prefers_border``. A page over ``max_bytes`` (2 MiB) of UTF-8, a URI
        with a ``..`` step, query or fragment, or a CSP entry that is not an origin is
        refused with ValueError (TM-APPS-URI, TM-APPS-SIZE, TM-APPS-CSP)."""
        page = _apps.make_app_resource(
            uri, html, csp=csp, permissions=permissions, domain=domain,
            prefers_border=prefers_border, max_bytes=max_bytes,
        )
        if uri in self._apps.pages and not replace:
            raise ValueError(f"app resource {uri} is already registered (replace=True)")
        contents = page.contents()

        async def read() -> EmbeddedResource:
            return contents

        self.add_resource(
            read, uri, name=name or uri, title=title, description=description,
            mime_type=_apps.APP_MIME_TYPE, meta=page.meta(), scopes=scopes, replace=replace,
            cache=cache,
        )
        self._apps.add_page(page, replace=True)

    # -- middleware and the lifespan ----------------------------------------------------

    def middleware(self, fn: M) -> M:
        """Register ``async def mw(ctx, call_next)`` to wrap every request the server's
        tools, resources, prompts and completions answer, in both eras (TM-HAND-MIDDLEWARE).
        It reads the request from ``ctx`` (``ctx.method``, ``ctx.params``,
        ``ctx.principal``, ``ctx.era``), returns ``await call_next()`` (the result), or
        answers in the handler's place: a result of its own, or ``raise McpError(...)``.
        Middleware registered earlier wraps middleware registered later
        (TM-HAND-MW-ORDER)."""
        self._dispatcher.add_middleware(fn)
        return fn

    def route(
        self, path: str, *, methods: Iterable[str] = ("GET",)
    ) -> Callable[[RouteHandler], RouteHandler]:
        """Answer HTTP requests for ``path`` beside the MCP endpoint, on either HTTP server:
        ``@server.route("/health")`` on ``async def health()``, which returns a str
        (text/plain), bytes, a dict or list (JSON), or ``(status, body)``; a method not in
        ``methods`` gets 405 with ``Allow``. Routes are served without
        authorization, after the Origin and Host checks (TM-HAND-ROUTE)."""

        def decorate(fn: RouteHandler) -> RouteHandler:
            self._routes.add(path, fn, methods)
            return fn

        return decorate

    def cache_hint(self, method: str, params: Mapping[str, Any]) -> CacheHint | None:
        """The App port's ``cache_hint``: a read resource's own hints (TM-HAND-CACHE)."""
        # The method's row says whether it names a resource and is cacheable (a read).
        spec = METHODS.get(method)
        if spec is None or spec.scope is not ScopeKind.RESOURCE or not spec.cacheable:
            return None
        uri = named(method, params, ScopeKind.RESOURCE)
        found = self._dispatcher.resources.find(uri) if uri is not None else None
        return found[0].cache if found is not None else None

    async def http_route(self, method: str, path: str) -> Reply | None:
        """The App port's ``http_route``: the reply of the route at ``path``, or None."""
        return await self._routes.answer(method, path)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Around a runtime serving this server (the runtime enters it): the lifespan, once
        (TM-HAND-LIFESPAN)."""
        if self._lifespan is None:
            yield
            return
        if self._serving:
            raise RuntimeError(
                f"server {self._name!r} is already served in this process: its lifespan runs "
                "once per process, around one runtime (serve it once, or make two servers)"
            )
        self._serving = True
        try:
            async with self._lifespan(self) as value:
                with self._dispatcher.state.lifespan_value(value):
                    yield
        finally:
            self._serving = False

    # -- notifications from the client, and messages to every client -----------------------

    def on_notification(self, method: str) -> Callable[[NotificationHook], NotificationHook]:
        """Register an async hook for a notification from a legacy client, e.g.
        ``notifications/roots/list_changed``. It receives a ``SessionContext`` (to answer
        on that session's standalone stream) and the notification's params, and runs as a
        task of the session."""
        if not isinstance(method, str):
            raise TypeError(
                "@server.on_notification needs the notification's method: "
                '@server.on_notification("notifications/roots/list_changed")'
            )

        def decorate(fn: NotificationHook) -> NotificationHook:
            self._dispatcher.add_hook(method, fn)
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

    def sessions(self) -> list[SessionContext]:
        """A SessionContext for each open legacy session (server-initiated requests and
        messages go on its standalone stream). Modern clients have no session."""
        return [SessionContext(port) for hub in self._hubs for port in hub.sessions()]

    def log(self, level: str, data: Any, *, logger: str | None = None) -> int:
        """Send a log message (notifications/message) to every legacy session whose level
        lets it through (U-LOG-3), on its standalone stream. Returns how many sessions got
        it. Modern clients get log messages only on the requests that ask for them
        (MU-LOG-3).

        It is not async: it only queues the message. A handler logs with ``ctx.log``, which
        goes on its request's stream instead.
        """
        sent = 0
        for hub in self._hubs:
            for port in hub.sessions():
                params = log_params(port, level, data, logger)
                if params is not None and port.notify_now(
                    Notification(method="notifications/message", params=params)
                ):
                    sent += 1
        return sent

    def _list_changed(self, kind: str) -> None:
        # U-TOOL-2 / MU-TOOL-4 (SHOULD): a change of the list is announced to every client
        # that listens for it.
        self._broadcast(f"notifications/{kind}/list_changed")

    def _broadcast(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        # Only the table's broadcasts reach other workers' clients (TM-STORE-NOTIFY).
        assert method in BROADCASTS, method
        return sum(hub.broadcast(method, params) for hub in self._hubs)

    # -- serving ------------------------------------------------------------------------

    def asgi_app(self, config: ServerConfig | None = None, *, bind: Sequence[str] = ()) -> Any:
        """This server as an ASGI application (runs under hypercorn's trio worker). Without
        ``config``, the settings of ``ServerConfig.from_environment()``: under ``hypercorn -w
        N``, ``$TRIO_MCP_SECRET`` and ``$TRIO_MCP_STORE`` let the workers serve each other's
        clients (spec/workers.md)."""
        from ..base._config import ServerConfig
        from ..edges._asgi import ASGIApp

        return ASGIApp(self, config or ServerConfig.from_environment(), bind_hosts=list(bind))

    async def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        config: ServerConfig | None = None,
        http_server: Literal["trio-mcp", "hypercorn"] = "trio-mcp",
        certfile: str | None = None,
        keyfile: str | None = None,
        shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
        stats_port: int | None = None,
        inspect_port: int | None = None,
        inspect_host: str = "127.0.0.1",
        sock: socket.socket | None = None,
        announce: bool = True,
        task_status: TaskStatus[list[str]] | None = None,
    ) -> None:
        """Serve this server over Streamable HTTP until cancelled, or until
        ``shutdown_trigger`` returns; ``await nursery.start(server.serve, port=0)`` returns
        once it listens, with the URLs it serves.

        Args:
            host: the address to listen on; the default, loopback, is reachable from this
                machine only (T-SEC-4).
            port: the port; 0 picks a free one (the URLs reported say which).
            config: the limits and settings (``ServerConfig``); its ``path`` is the
                endpoint's, ``/mcp`` by default.
            http_server: ``"trio-mcp"`` (the default), trio-mcp's own HTTP/1.1 server, or
                ``"hypercorn"``, which hosts the ASGI app (and speaks HTTP/2 over TLS).
            certfile: a PEM certificate chain: serve HTTPS (with ``keyfile``).
            keyfile: the PEM private key of ``certfile``.
            shutdown_trigger: an async function whose return starts the graceful shutdown:
                streams are told to retry, running handlers get ``config.shutdown_grace``
                (10 s) to finish, then they are cancelled (TM-SESS-SHUTDOWN).
            stats_port: also serve the counters on ``127.0.0.1:stats_port``: JSON at
                ``/stats``, the Prometheus format at ``/metrics``.
            inspect_port: also serve the live task tree on ``inspect_host:inspect_port``
                (loopback only, TM-SEC-INSPECT).
            inspect_host: the inspector's loopback address.
            sock: a bound socket to serve instead of binding ``host`` and ``port``.
            announce: log each URL served at start-up (INFO, logger ``trio_mcp.serve``; to
                stderr when the program has not configured logging).
            task_status: given by ``nursery.start``: reports the URLs served, the MCP
                endpoint first, with its path (``http://127.0.0.1:8000/mcp``), then those
                of the counters and the inspector.

        Raises:
            OSError: the address cannot be bound (a port in use names itself).
            ValueError: ``inspect_host`` is not a loopback address, or ``http_server`` is
                not one of the two.
        """
        import trio

        from ..edges._serve import serve

        await serve(
            self, host=host, port=port, config=config, certfile=certfile, keyfile=keyfile,
            shutdown_trigger=shutdown_trigger, stats_port=stats_port, http_server=http_server,
            sock=sock, inspect_port=inspect_port, inspect_host=inspect_host, announce=announce,
            task_status=trio.TASK_STATUS_IGNORED if task_status is None else task_status,
        )

    async def serve_stdio(self, *, config: ServerConfig | None = None) -> None:
        """Serve this server to one host on this process's stdin and stdout (the MCP stdio
        transport, spec/stdio.md) until stdin ends; stdout carries the messages alone (a
        print() goes to stderr meanwhile), logs go to stderr."""
        from ..edges._stdio import serve_stdio

        await serve_stdio(self, config=config)

    def run_stdio(self, *, config: ServerConfig | None = None) -> None:
        """``serve_stdio`` in a trio run of its own: ``server.run_stdio()`` at the bottom of
        the module a host launches."""
        import trio

        trio.run(lambda: self.serve_stdio(config=config))

    # -- the App the runtime serves (trio_mcp.base._ports.App) ------------------------------------

    def server_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self._name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        if self._website_url is not None:
            info["websiteUrl"] = self._website_url
        if self._icons:
            info["icons"] = [dict(i) for i in self._icons]
        return info

    def capabilities(self, era: Era = Era.LEGACY) -> dict[str, Any]:
        caps = self._dispatcher.capabilities(era)
        apps = self._apps.capabilities()
        if apps:
            # UI-CAP: the extension is declared in capabilities.extensions, in both eras.
            caps["extensions"] = {**caps.get("extensions", {}), **apps}
        return caps

    def serves(self, method: str) -> bool:
        return self._dispatcher.serves(method)

    async def dispatch(self, port: RequestPort, request: Request) -> Mapping[str, Any]:
        return await self._dispatcher.dispatch(port, request)

    def has_resource(self, uri: str) -> bool:
        return self._dispatcher.has_resource(uri)

    def _set_scopes(self, kind: ScopeKind, name: str, scopes: Iterable[str]) -> None:
        if isinstance(scopes, str):
            raise TypeError("scopes is a collection of scope names, not one string")
        needed = frozenset(scopes)
        if needed:
            self._scopes[kind, name] = needed
        else:
            self._scopes.pop((kind, name), None)

    def required_scopes(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        if not self._scopes:
            return frozenset()
        # What the scopes are keyed on is the method's row in the method table.
        spec = METHODS.get(method)
        kind = spec.scope if spec is not None else None
        if kind is ScopeKind.REFERENCE:
            # U-COMP-5: completing a prompt's or a resource template's arguments needs what
            # using them needs: suggestions may tell what the primitive holds.
            ref = params.get("ref")
            ref = ref if isinstance(ref, Mapping) else {}
            if ref.get("type") == "ref/prompt":
                key = (ScopeKind.PROMPT, ref.get("name"))
            elif ref.get("type") == "ref/resource":
                key = (ScopeKind.RESOURCE, ref.get("uri"))
            else:
                return frozenset()
        elif kind is ScopeKind.RESOURCE:
            # A resource's scopes are its own or, for a URI of a template, the template's.
            uri = named(method, params, kind)
            found = self._dispatcher.resources.find(uri) if uri is not None else None
            key = (kind, found[0].uri if found else None)
        elif kind is not None:
            key = (kind, named(method, params, kind))
        else:
            return frozenset()
        return self._scopes.get(key, frozenset())  # type: ignore[arg-type]

    def input_schema(self, tool: str) -> Mapping[str, Any] | None:
        return self._dispatcher.input_schema(tool)

    def mirrored_params(self, tool: str) -> Mapping[str, tuple[str, ...]]:
        return self._dispatcher.mirrored_params(tool)

    def required_client_capabilities(self, request: Request) -> Mapping[str, Any]:
        return self._dispatcher.required_client_capabilities(request)

    def task_support(self, request: Request, client_capabilities: Mapping[str, Any]) -> (
        TaskSupport
    ):
        return self._dispatcher.task_support(request, client_capabilities)

    def tool_task_support(self, tool: str) -> TaskSupport:
        """What ``task=`` said of ``tool`` (FORBIDDEN for an unknown one)."""
        return self._dispatcher.tool_task_support(tool)

    def runs_tasks(self) -> bool:
        return self._dispatcher.runs_tasks()

    def notification_handler(self, method: str) -> NotificationHandler | None:
        return self._dispatcher.notification_handler(method)

    def attach(self, hub: Hub) -> None:
        # A runtime starts serving: the schemas' library is loaded before the first call.
        preload_schemas()
        self._apps.check()
        self._hubs.append(hub)

    def detach(self, hub: Hub) -> None:
        if hub in self._hubs:
            self._hubs.remove(hub)
