# trio_mcp.Client: an MCP client on trio for any Streamable HTTP server, or for a trio_mcp
# Server in this process with no socket (the same runtime code as over HTTP, driven through
# its ASGI application). One set of methods in both eras; the era objects (_legacy,
# _modern) speak the wire, the ledger (_ledger) applies each message once.
from __future__ import annotations

import contextlib
import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx2
import trio

from ..protocol._versions import LATEST_LEGACY_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS
from ._bearer import BearerAuth, TokenProvider
from ._errors import ClientError, ConnectionLost
from ._inbound import (
    Answerer,
    Callbacks,
    ElicitCallback,
    LogCallback,
    Notification,
    NotificationCallback,
    RootsSource,
    SampleCallback,
)
from ._ledger import Ledger, ProgressCallback, Tally
from ._legacy import DEFAULT_IDLE_REATTACH, LegacySession
from ._memory import MemoryTransport
from ._modern import ModernClient
from ._oauth import OAuth

if TYPE_CHECKING:
    from ..app._server import Server
    from ..base._config import ServerConfig

__all__ = ["Client", "ClientEra", "Listening"]

#: Pages a listing follows before it stops (a server whose cursors never end).
MAX_PAGES: Final = 1000
#: Notifications a listen holds for a reader that has not taken them.
LISTEN_BUFFER: Final = 1024
_CLIENT_INFO: Final = {"name": "trio-mcp-client", "version": "0.1.0"}
_MEMORY_URL: Final = "http://127.0.0.1"


class ClientEra(enum.Enum):
    """Which era the client speaks with its server."""

    LEGACY = "legacy"
    MODERN = "modern"


@attrs.frozen
class _Filter:
    tools: bool
    prompts: bool
    resources: bool
    uris: frozenset[str]

    def wants(self, method: str, params: Mapping[str, Any]) -> bool:
        if method == "notifications/tools/list_changed":
            return self.tools
        if method == "notifications/prompts/list_changed":
            return self.prompts
        if method == "notifications/resources/list_changed":
            return self.resources
        if method == "notifications/resources/updated":
            return params.get("uri") in self.uris
        return False


class Listening:
    """The notifications of a listen, as an async iterator (``async for``)."""

    def __init__(self, receive: trio.MemoryReceiveChannel[Notification]) -> None:
        self._receive = receive
        #: Notifications not kept because the reader was LISTEN_BUFFER behind.
        self.dropped = 0

    def __aiter__(self) -> Listening:
        return self

    async def __anext__(self) -> Notification:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class Client:
    """An MCP client: ``async with Client(url) as client`` over Streamable HTTP, or
    ``async with Client(server)`` in this process.

    Args:
        target: the server's MCP endpoint URL, or a ``trio_mcp.Server``.
        mode: ``"auto"`` (probe with server/discover, else a 2025-11-25 session),
            ``"legacy"`` (a 2025-11-25 session), or a protocol version to pin.
        on_elicit, on_sample, roots: the answers to the server's questions; each one given
            declares its capability.
        on_log: called with each log message's params.
        on_notification: called with every other notification (a ``Notification``).
        extensions: the extensions the client supports, by identifier, with their settings
            (``{"io.modelcontextprotocol/ui": {"mimeTypes": [...]}}``): declared under
            ``capabilities.extensions`` in both eras, so the server serves their methods and
            wrappers to this client.
        headers: extra HTTP headers on every request (an ``Authorization``, say).
        http: an httpx2.AsyncClient to use (its transport, TLS and proxy settings).
        client_info: the ``clientInfo`` sent to the server.
        idle_reattach: seconds a resumed stream may bring nothing before it is re-attached
            (None: never), for servers that lose events while a resume attaches.
        token: ``await token()`` gives a bearer token for every request; asked again once
            when the server answers 401.
        oauth: an ``OAuth``: on a 401, the authorization code flow of MCP's authorization
            spec gets a token (and on a 403 insufficient_scope, one with more scope).
        config: for ``Client(server)``, the server's settings (its page size, its limits);
            the defaults otherwise.
    """

    def __init__(
        self,
        target: str | Server,
        *,
        mode: str = "auto",
        on_elicit: ElicitCallback | None = None,
        on_sample: SampleCallback | None = None,
        roots: RootsSource | None = None,
        on_log: LogCallback | None = None,
        on_notification: NotificationCallback | None = None,
        extensions: Mapping[str, Mapping[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
        http: httpx2.AsyncClient | None = None,
        client_info: Mapping[str, Any] | None = None,
        idle_reattach: float | None = DEFAULT_IDLE_REATTACH,
        token: TokenProvider | None = None,
        config: ServerConfig | None = None,
        oauth: OAuth | None = None,
    ) -> None:
        if mode not in ("auto", "legacy", *LEGACY_VERSIONS, *MODERN_VERSIONS):
            raise ValueError(f"mode must be 'auto', 'legacy' or a protocol version, not {mode!r}")
        self._target = target
        self._mode = mode
        #: TM-CLIENT-STANDALONE: whether the application hears what a server may send
        #: outside any request (questions, log messages, notifications), so that a legacy
        #: session opens its GET stream at once.
        self._hears = any(x is not None for x in (on_elicit, on_sample, roots, on_log,
                                                  on_notification))
        self._answerer = Answerer(Callbacks(on_elicit=on_elicit, on_sample=on_sample,
                                            roots=roots, on_log=on_log,
                                            on_notification=on_notification,
                                            extensions=dict(extensions or {})))
        self._headers = dict(headers or {})
        self._given_http = http
        self._client_info = dict(client_info or _CLIENT_INFO)
        self._idle_reattach = idle_reattach
        if token is not None and oauth is not None:
            raise ValueError("give token or oauth, not both")
        self._auth: httpx2.Auth | None = BearerAuth(token) if token is not None else oauth
        self._config = config
        self._ledger = Ledger()
        self._listeners: list[tuple[_Filter, trio.MemorySendChannel[Notification],
                                    Listening]] = []
        self._era: LegacySession | ModernClient | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._subscribed: set[str] = set()

    # -- opening and closing ------------------------------------------------------------

    async def __aenter__(self) -> Client:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            nursery = await stack.enter_async_context(trio.open_nursery())
            url, http = await self._open_http(stack, nursery)
            try:
                self._era = await self._connect(url, http, nursery)
            except httpx2.TransportError as error:
                raise ConnectionLost(f"cannot reach {url}: {error}") from error
            if isinstance(self._era, LegacySession):
                stack.push_async_callback(self._era.close)
            stack.callback(nursery.cancel_scope.cancel)
        except BaseException:
            await stack.__aexit__(None, None, None)
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        stack, self._stack = self._stack, None
        self._era = None
        assert stack is not None
        try:
            return await stack.__aexit__(*exc_info)
        except BaseExceptionGroup as group:
            # The client's nursery wraps what the block raised; the block's own exception
            # alone is raised as itself, as if no nursery were there.
            body = exc_info[1]
            if body is not None and list(group.exceptions) == [body]:
                raise body from None
            raise

    async def _open_http(
        self, stack: contextlib.AsyncExitStack, nursery: trio.Nursery
    ) -> tuple[str, httpx2.AsyncClient]:
        timeout = httpx2.Timeout(30.0, read=None)
        if isinstance(self._target, str):
            if self._given_http is not None:
                return self._target, self._given_http
            return self._target, await stack.enter_async_context(
                httpx2.AsyncClient(timeout=timeout, headers=self._headers, auth=self._auth))
        # Client(server): the server's ASGI application, run for the client's lifetime.
        from ..base._config import ServerConfig

        config = self._config or ServerConfig()
        app = self._target.asgi_app(config)
        await stack.enter_async_context(app.running())
        http = await stack.enter_async_context(httpx2.AsyncClient(
            transport=MemoryTransport(app, nursery), timeout=timeout, headers=self._headers,
            auth=self._auth))
        return _MEMORY_URL + config.path, http

    async def _connect(
        self, url: str, http: httpx2.AsyncClient, nursery: trio.Nursery
    ) -> LegacySession | ModernClient:
        if self._mode in ("auto", *MODERN_VERSIONS):
            version = self._mode if self._mode in MODERN_VERSIONS else MODERN_VERSIONS[0]
            modern = ModernClient(http, url, self._ledger, self._answerer, self._deliver,
                                  version=version, client_info=self._client_info)
            if self._mode != "auto":
                return modern
            probe = await modern.discover()
            if probe.modern:
                modern.adopt(probe)
                return modern
        version = self._mode if self._mode in LEGACY_VERSIONS else LATEST_LEGACY_VERSION
        session = LegacySession(http, url, self._ledger, self._answerer, nursery,
                                self._deliver, version=version,
                                client_info=self._client_info,
                                idle_reattach=self._idle_reattach)
        await session.start()
        if self._hears:
            await session.standalone()
        return session

    @property
    def _open(self) -> LegacySession | ModernClient:
        if self._era is None:
            raise ClientError("the client is not open: use it in `async with Client(...)`")
        return self._era

    # -- what the server is ---------------------------------------------------------------

    @property
    def era(self) -> ClientEra:
        return ClientEra.LEGACY if isinstance(self._open, LegacySession) else ClientEra.MODERN

    @property
    def protocol_version(self) -> str:
        return self._open.version

    @property
    def session_id(self) -> str | None:
        """The 2025-11-25 session's id (None in 2026-07-28, which has none)."""
        era = self._open
        return era.session_id if isinstance(era, LegacySession) else None

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self._open.server_info)

    @property
    def server_capabilities(self) -> dict[str, Any]:
        return dict(self._open.capabilities)

    @property
    def instructions(self) -> str | None:
        return self._open.instructions

    def tally(self) -> Tally:
        """How many responses and notifications were applied, and how many duplicates
        (replays) were dropped (TM-CLIENT-ONCE)."""
        return self._ledger.tally()

    # -- requests -----------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send any request; its result object. Raises ErrorAnswer for an error answer,
        ResumptionFailed or ConnectionLost when the answer can no longer come."""
        try:
            return await self._open.request(method, params, on_progress)
        except httpx2.TransportError as error:
            raise ConnectionLost(f"{method}: {error}") from error

    async def _pages(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = await self.request(method, {"cursor": cursor} if cursor else None)
            items.extend(item for item in result.get(key) or [] if isinstance(item, dict))
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                break
            cursor = next_cursor
        return items

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools (every page); in 2026-07-28, without those whose
        ``x-mcp-header`` annotations are invalid (they cannot be called correctly)."""
        tools = await self._pages("tools/list", "tools")
        if isinstance(self._open, ModernClient):
            return self._open.learn_tools(tools)
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Call a tool; the CallToolResult (``content``, ``isError``, …). Cancelling the
        calling scope cancels the call on the server."""
        return await self.request("tools/call", {"name": name, "arguments": dict(arguments or {})},
                                  on_progress=on_progress)

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._pages("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def subscribe(self, uri: str) -> None:
        """Follow ``uri``'s updates: a legacy session subscribes now; a 2026-07-28 client
        names it in its next listen. Updates arrive through ``listen``."""
        if isinstance(self._open, LegacySession):
            await self.request("resources/subscribe", {"uri": uri})
        self._subscribed.add(uri)

    async def unsubscribe(self, uri: str) -> None:
        if isinstance(self._open, LegacySession):
            await self.request("resources/unsubscribe", {"uri": uri})
        self._subscribed.discard(uri)

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._pages("prompts/list", "prompts")

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        return await self.request("prompts/get", {"name": name, "arguments": dict(arguments or {})})

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """completion/complete: ``ref`` is ``{"type": "ref/prompt", "name": …}`` or
        ``{"type": "ref/resource", "uri": …}``; the result's ``completion``."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        result = await self.request("completion/complete", params)
        completion = result.get("completion")
        return dict(completion) if isinstance(completion, Mapping) else {}

    async def set_logging_level(self, level: str) -> None:
        """The lowest level of log message to receive: a legacy session's logging/setLevel;
        in 2026-07-28 every later request names it."""
        era = self._open
        if isinstance(era, ModernClient):
            era.log_level = level
        else:
            await self.request("logging/setLevel", {"level": level})

    async def ping(self) -> None:
        """Whether the server answers: ping in a session; 2026-07-28 has none, so
        server/discover."""
        if isinstance(self._open, ModernClient):
            await self.request("server/discover")
        else:
            await self.request("ping")

    # -- notifications ------------------------------------------------------------------

    async def _deliver(self, method: str, params: Mapping[str, Any]) -> None:
        await self._answerer.notify(method, params)
        for wanted, send, listening in self._listeners:
            if wanted.wants(method, params):
                try:
                    send.send_nowait(Notification(method, dict(params)))
                except trio.WouldBlock:
                    listening.dropped += 1

    @contextlib.asynccontextmanager
    async def listen(
        self,
        *,
        tools: bool = True,
        prompts: bool = True,
        resources: bool = True,
        resource_uris: Sequence[str] = (),
    ) -> AsyncIterator[Listening]:
        """``async with client.listen() as changes: async for n in changes: …``: the
        server's list changes and the updates of the subscribed resources (and of
        ``resource_uris``), from subscriptions/listen (2026-07-28) or the session's GET
        stream (2025-11-25). The block is listening once it starts."""
        era = self._open
        uris = frozenset(self._subscribed | set(resource_uris))
        wanted = _Filter(tools, prompts, resources, uris)
        send, receive = trio.open_memory_channel[Notification](LISTEN_BUFFER)
        listening = Listening(receive)
        entry = (wanted, send, listening)
        async with trio.open_nursery() as nursery:
            if isinstance(era, ModernClient):
                filters: dict[str, Any] = {"toolsListChanged": tools,
                                           "promptsListChanged": prompts,
                                           "resourcesListChanged": resources}
                if uris:
                    filters["resourceSubscriptions"] = sorted(uris)
                await nursery.start(self._listen_modern, era, filters, send, listening)
            else:
                await era.standalone()
                if not era.standalone_open:
                    raise ClientError("the server offers no stream for notifications (GET)")
                for uri in resource_uris:
                    if uri not in self._subscribed:
                        await self.request("resources/subscribe", {"uri": uri})
                self._listeners.append(entry)
            try:
                yield listening
            finally:
                nursery.cancel_scope.cancel()
                if entry in self._listeners:
                    self._listeners.remove(entry)
                send.close()

    async def _listen_modern(
        self,
        era: ModernClient,
        filters: Mapping[str, Any],
        send: trio.MemorySendChannel[Notification],
        listening: Listening,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        async for note in era.listen(filters):
            if note.method == "notifications/subscriptions/acknowledged":
                if not started:
                    started = True
                    task_status.started()
                continue
            await self._answerer.notify(note.method, note.params)
            try:
                send.send_nowait(note)
            except trio.WouldBlock:
                listening.dropped += 1
        send.close()
        if not started:
            task_status.started()

