# Extensions (SEP-2133): an object that declares an identifier and settings, advertised under
# capabilities.extensions in both eras (initialize's result and server/discover's), and that
# contributes tools, resources, prompts and JSON-RPC methods and may wrap tools/call. Its
# methods are rows of the method table (protocol/_methods.py, Handler.EXTENSION), with the
# same rules as the core's: eras, capability, extension settings flag, caching, scopes.
# Beside those, an extension may say in which eras and when it is declared, what a call of
# a tool needs the client to declare, and that a tools/call may outlive its exchange as a
# run of the runtime's engine for it (the tasks extension, app/_tasks.py, is built so).
# spec/extensions.md holds the rules; docs/extensions.md shows how to write one.
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ..protocol import ErrorCode, RemoteProtocolError
from ..protocol._methods import Handler, Input, Kind, Method, ScopeKind, Sender, register
from ..protocol._tasks import TaskSupport
from ..protocol._versions import Era
from ._context import Context

__all__ = [
    "Extension",
    "ExtensionMethod",
    "ExtensionRegistry",
    "MethodHandler",
    "ToolCallNext",
    "check_identifier",
    "client_declares",
]

MethodHandler = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
ToolCallNext = Callable[[], Awaitable[Mapping[str, Any]]]

#: SEP-2133: ``{vendor-prefix}/{extension-name}``, the prefix a dotted (reversed) domain and
#: the name a _meta key's name: alphanumerics at both ends, hyphens, dots and underscores
#: between.
_IDENTIFIER = re.compile(
    r"^[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"
)
_ERAS = {"legacy": frozenset({Era.LEGACY}), "modern": frozenset({Era.MODERN}),
         "both": frozenset({Era.LEGACY, Era.MODERN})}


def check_identifier(identifier: object) -> str:
    """EX-ID: an extension identifier has a mandatory vendor prefix (TM-EXT-ID).

    Raises:
        ValueError: naming the identifier and the form it must have.
    """
    if not isinstance(identifier, str) or not _IDENTIFIER.match(identifier):
        raise ValueError(
            f"extension identifier {identifier!r} is not of the form "
            "'{vendor-prefix}/{extension-name}', e.g. 'com.example/my-extension'"
        )
    return identifier


def client_declares(client_capabilities: Mapping[str, Any], identifier: str) -> bool:
    """Whether a client's capabilities declare the extension (a settings object under
    ``capabilities.extensions``): in a session its initialize's, in 2026-07-28 the
    request's own."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(identifier), Mapping)


@attrs.frozen
class ExtensionMethod:
    """A JSON-RPC method an extension serves: its row of the method table and its handler,
    ``async def handler(ctx, params) -> result``."""

    row: Method
    handler: MethodHandler

    @classmethod
    def make(
        cls,
        extension: str,
        name: str,
        handler: MethodHandler,
        *,
        eras: str = "both",
        capability: str | None = None,
        feature: str | None = None,
        cacheable: bool = False,
        target: str | None = None,
        scope: ScopeKind | None = None,
        asks: bool = False,
    ) -> ExtensionMethod:
        """The row says what the core's rows say (TM-EXT-ROWS): ``eras`` ("legacy",
        "modern" or "both"), the server ``capability`` the client must see declared besides
        the extension, the extension setting ``feature`` that must be true
        (``directoryRead``), whether a 2026-07-28 result carries caching hints, the params
        field ``target`` that names what it is about (Mcp-Name repeats it) and the
        primitive its authorization ``scope`` is keyed on, and whether its handler may ask
        the client for input (MRTR)."""
        if eras not in _ERAS:
            raise ValueError(f"eras is one of {sorted(_ERAS)}, not {eras!r}")
        row = Method(
            name=name, kind=Kind.REQUEST, sent_by=Sender.CLIENT, eras=_ERAS[eras],
            handler=Handler.EXTENSION, extension=check_identifier(extension),
            capability=capability, feature=feature, cacheable=cacheable, target=target,
            scope=scope, input=Input.ASKS if asks else None,
        )
        return cls(row, handler)


class Extension:
    """An opt-in extension (SEP-2133). Subclass it, set ``identifier``, and override what
    applies: ``settings`` (advertised under ``capabilities.extensions[identifier]``),
    ``methods`` (new JSON-RPC methods), ``contribute`` (tools, resources and prompts, added
    through the server's own API) and ``call_tool`` (around every ``tools/call`` of a client
    that declared the extension). Install it with ``Server(extensions=[...])`` or
    ``server.add_extension(ext)``."""

    #: ``{vendor-prefix}/{extension-name}`` (SEP-2133).
    identifier: ClassVar[str]
    #: SEP-2133 Graceful Degradation: a mandatory extension's methods are refused to a client
    #: that did not declare it (-32021); an optional one's are served to any client, which
    #: calls them only after seeing them declared (TM-EXT-DEGRADE).
    mandatory: ClassVar[bool] = False
    #: The eras whose capabilities declare it: "both" (initialize's and server/discover's),
    #: "legacy" (initialize's) or "modern" (server/discover's) (TM-EXT-ERAS).
    eras: ClassVar[str] = "both"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "identifier" in cls.__dict__:
            check_identifier(cls.__dict__["identifier"])
        if cls.eras not in _ERAS:
            raise ValueError(f"{cls.__name__}.eras is one of {sorted(_ERAS)}, not {cls.eras!r}")

    def settings(self) -> Mapping[str, Any]:
        """The settings object advertised for the extension; empty: no optional features."""
        return {}

    def methods(self) -> Sequence[ExtensionMethod]:
        """The methods the extension serves."""
        return ()

    def offered(self) -> bool:
        """Whether the extension is declared now; its methods are served only while it is
        (TM-EXT-OFFERED). Asked each time capabilities are built: keep it cheap."""
        return True

    def tool_requirements(self, tool: str) -> Mapping[str, Any]:
        """The client capabilities a 2026-07-28 ``tools/call`` of ``tool`` needs besides the
        tool's own (``{"extensions": {identifier: {}}}``): a request that lacks them is
        refused with 400 and -32021 before anything runs (TM-EXT-TOOLREQ)."""
        return {}

    def task_support(self, tool: str) -> TaskSupport:
        """Whether a 2026-07-28 ``tools/call`` of ``tool``, from a client that declared the
        extension, may outlive its exchange as a run of the runtime's engine for this
        extension (TM-EXT-ENGINE): FORBIDDEN (the default), OPTIONAL or REQUIRED. Only the
        extension the runtime has an engine for (the tasks extension) is asked."""
        return TaskSupport.FORBIDDEN

    def contribute(self, server: Any) -> None:
        """Add the extension's tools, resources and prompts to ``server`` (the
        ``trio_mcp.Server`` installing it: typed Any, as the server's module imports this
        one), through its own API: ``server.add_tool(...)``, ``server.add_resource(...)``."""

    async def call_tool(
        self, ctx: Context, params: Mapping[str, Any], call_next: ToolCallNext
    ) -> Mapping[str, Any]:
        """Around ``tools/call`` for a client that declared the extension: return
        ``await call_next()`` (the rest of the chain and the tool) or a result of its own.
        A client that did not declare it gets the core behaviour: this is not called."""
        return await call_next()

    @property
    def wraps_tool_calls(self) -> bool:
        return type(self).call_tool is not Extension.call_tool

    @property
    def requires_per_tool(self) -> bool:
        return type(self).tool_requirements is not Extension.tool_requirements

    @property
    def runs_tool_calls(self) -> bool:
        return type(self).task_support is not Extension.task_support


def _guarded(extension: Extension, method: ExtensionMethod) -> MethodHandler:
    """The method's handler, behind what its row and its extension ask of the request: an
    era of the row (a 2026-07-28 request of another is refused before it gets here,
    MT-HDR-4; a session's is refused here), and, for a mandatory extension, the client's
    declaration of it (TM-EXT-DEGRADE)."""
    row, handler = method.row, method.handler
    if not extension.mandatory and len(row.eras) == len(_ERAS["both"]):
        return handler

    async def guarded(ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        if ctx.era not in row.eras:
            raise RemoteProtocolError(
                f"Method not found: {row.name}", code=ErrorCode.METHOD_NOT_FOUND
            )
        if extension.mandatory and not client_declares(
            ctx.client_capabilities, extension.identifier
        ):
            raise RemoteProtocolError(
                f"{row.name} needs the {extension.identifier} extension declared in the "
                "client's capabilities", code=ErrorCode.MISSING_CLIENT_CAPABILITY,
                data={"requiredCapabilities": {"extensions": {extension.identifier: {}}}},
            )
        return await handler(ctx, params)

    return guarded


class ExtensionRegistry:
    """The extensions one server installed, and what they serve."""

    def __init__(self) -> None:
        self._installed: dict[str, Extension] = {}
        self._methods: dict[str, MethodHandler] = {}
        self._capabilities: frozenset[str] = frozenset()
        #: The mandatory extensions' methods, by name: their extension's identifier.
        self._mandatory: dict[str, str] = {}
        #: The extensions that say what a call of a tool needs (TM-EXT-TOOLREQ).
        self._per_tool: tuple[Extension, ...] = ()
        #: The extension whose tools/call may run in the runtime's engine (TM-EXT-ENGINE).
        self.runner: Extension | None = None

    def install(self, extension: Extension, core: Iterable[str]) -> None:
        """Record ``extension`` and register its method rows (process-wide, as the table is).

        Raises:
            ValueError: a second extension of one identifier, a method another extension
                or the core serves, or a row the table refuses.
        """
        if not isinstance(extension, Extension):
            raise TypeError(f"{extension!r} is not a trio_mcp.Extension")
        identifier = check_identifier(getattr(extension, "identifier", None))
        if identifier in self._installed:
            raise ValueError(f"extension {identifier} is installed already")
        methods = list(extension.methods())
        core = frozenset(core)
        for method in methods:
            if method.row.extension != identifier:
                raise ValueError(
                    f"extension {identifier}: method {method.row.name} is declared by "
                    f"{method.row.extension}"
                )
            if method.row.name in core or method.row.name in self._methods:
                raise ValueError(
                    f"extension {identifier}: method {method.row.name} is served already"
                )
        if extension.runs_tool_calls and self.runner is not None:
            raise ValueError(
                f"extension {identifier}: tools/call runs in {self.runner.identifier}'s "
                "engine already"
            )
        register(m.row for m in methods)
        self._installed[identifier] = extension
        if extension.mandatory:
            self._mandatory.update((m.row.name, identifier) for m in methods)
        if extension.requires_per_tool:
            self._per_tool += (extension,)
        if extension.runs_tool_calls:
            self.runner = extension
        for method in methods:
            self._methods[method.row.name] = _guarded(extension, method)
        self._capabilities |= {m.row.capability for m in methods if m.row.capability}

    @property
    def capabilities(self) -> frozenset[str]:
        """The core capabilities the installed extensions' methods need declared."""
        return self._capabilities

    @property
    def installed(self) -> Mapping[str, Extension]:
        return self._installed

    def declaration(self, era: Era = Era.LEGACY) -> dict[str, Any]:
        """``capabilities.extensions`` in ``era``: each identifier and its settings, for the
        extensions of the era that are offered now (TM-EXT-ERAS, TM-EXT-OFFERED)."""
        return {
            i: dict(e.settings()) for i, e in self._installed.items()
            if era in _ERAS[e.eras] and e.offered()
        }

    def requirement(self, method: str) -> Mapping[str, Any] | None:
        """What a mandatory extension's method needs the client to declare (TM-EXT-DEGRADE:
        in 2026-07-28, refused with 400 and -32021 before anything runs), else None."""
        identifier = self._mandatory.get(method)
        return None if identifier is None else {"extensions": {identifier: {}}}

    def tool_requirements(self, tool: str) -> Mapping[str, Any]:
        """What the extensions ask a client to declare for a call of ``tool``, merged
        (TM-EXT-TOOLREQ)."""
        out: dict[str, Any] = {}
        for extension in self._per_tool:
            for key, value in extension.tool_requirements(tool).items():
                old = out.get(key)
                out[key] = (
                    {**old, **value}
                    if isinstance(old, Mapping) and isinstance(value, Mapping) else value
                )
        return out

    def task_support(self, tool: str, client_capabilities: Mapping[str, Any]) -> TaskSupport:
        """TM-EXT-ENGINE: whether this call of ``tool`` may run in the runtime's engine: asked
        of the extension that runs calls there, for a client that declared it."""
        runner = self.runner
        if runner is None or not client_declares(client_capabilities, runner.identifier):
            return TaskSupport.FORBIDDEN
        return runner.task_support(tool)

    def handler(self, method: str) -> MethodHandler | None:
        return self._methods.get(method)

    def wrap_tool_call(self, core: MethodHandler) -> MethodHandler:
        """``tools/call`` inside the wrappers of the extensions that have one, the first
        installed outermost; each runs only for a client that declared its extension."""
        wrappers = [e for e in self._installed.values() if e.wraps_tool_calls]
        if not wrappers:
            return core

        async def call(ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
            async def step(index: int) -> Mapping[str, Any]:
                if index == len(wrappers):
                    return await core(ctx, params)
                extension = wrappers[index]
                if not client_declares(ctx.client_capabilities, extension.identifier):
                    # TM-EXT-DEGRADE: the core behaviour for a client without it.
                    return await step(index + 1)
                return await extension.call_tool(ctx, params, lambda: step(index + 1))

            return await step(0)

        return call
