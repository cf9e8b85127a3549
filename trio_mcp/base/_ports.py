# The interfaces between the application (Server, Context, the method table) and the runtime
# that serves it over HTTP (trio_mcp.runtime). Neither side imports the other: the runtime is
# handed an App, and hands each handler a port; a legacy session's request and a modern
# request each implement the port in their own way (spec/modern.md, TM-ERA-PORT).
#
#   App          what the runtime asks of the application: its identity, capabilities and
#                method table, the hooks for client notifications, where to broadcast.
#   SessionPort  what a handler may ask of the client it serves: who it is, what it
#                declared, messages to it, and input from it.
#   RequestPort  the same, for one request: its stream, and whether it has finished.
#   Hub          what the application may ask of the runtime: every live session, and a
#                change announced to everyone subscribed.
#   Engine       what the runtime keeps for an extension across requests, connections and
#                workers (the tasks extension's tasks), reached by the extension's methods
#                through their request's port (TM-EXT-ENGINE).
from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ..protocol import JSON, LocalProtocolError, Notification, RemoteProtocolError, Request
from ..protocol._auth import Principal
from ..protocol._modern import CacheHint
from ..protocol._mrtr import InputRequest
from ..protocol._tasks import TaskSupport
from ..protocol._transport import Reply
from ..protocol._versions import Era

__all__ = [
    "App",
    "ClientCapabilityError",
    "ClientTimeoutError",
    "Engine",
    "Hub",
    "InputRequired",
    "NotificationHandler",
    "RequestPort",
    "SessionPort",
]


class ClientCapabilityError(LocalProtocolError):
    """A request to the client needs a capability it did not declare.

    L-CAP-1 (MUST): only negotiated capabilities are used, so the request is not sent. In a
    legacy session that is the application's mistake (-32603); in the modern era the client
    is told which capabilities the request needs (400 and -32021, ML-META-3). Check first
    with ``client_supports`` to offer a fallback.
    """


class ClientTimeoutError(RemoteProtocolError):
    """The client did not answer a server-to-client request in time (L-TIME-1).

    The request has been cancelled with notifications/cancelled (L-TIME-2).
    """


class InputRequired(BaseException):
    """Raised through a modern handler that asked for input it has no answer to yet: the
    request's answer is an InputRequiredResult (MU-TOOL-5, TM-MRTR-RERUN).

    A BaseException, so that a handler's ``except Exception`` does not swallow it: like a
    cancellation, it unwinds the handler and is caught by the runtime that raised it.
    """

    def __init__(self, requests: Mapping[str, InputRequest], answers: Mapping[str, JSON]):
        super().__init__(f"input required: {', '.join(requests)}")
        #: The questions still open, by key.
        self.requests = dict(requests)
        #: The answers the handler used before it asked, to seal into the requestState.
        self.answers = dict(answers)


class SessionPort(Protocol):
    """One client seen by a handler or hook: who it is, and how to reach it."""

    @property
    def session_id(self) -> str | None:
        """The legacy session's id; None in the modern era (there are no sessions)."""

    @property
    def protocol_version(self) -> str: ...

    @property
    def client_info(self) -> Mapping[str, JSON]: ...

    @property
    def client_capabilities(self) -> Mapping[str, JSON]: ...

    @property
    def log_threshold(self) -> str | None:
        """The least severe log level the client gets now; None: it gets no log messages."""

    @property
    def client_request_timeout(self) -> float: ...

    async def notify(self, notification: Notification) -> bool:
        """Send a notification where this port's messages go; False if it could not go."""

    def notify_now(self, notification: Notification) -> bool:
        """``notify`` without waiting on a slow reader (for broadcasts outside a handler)."""

    async def request(
        self, method: str, params: Mapping[str, JSON] | None, *, timeout: float
    ) -> Mapping[str, JSON]:
        """Send a request to the client and wait for its result (legacy sessions only)."""

    async def ask(
        self, requests: Mapping[str, InputRequest], *, timeout: float
    ) -> dict[str, Mapping[str, JSON]]:
        """The client's answers to ``requests``, by key, each one checked to be well formed.

        A legacy session sends them as requests on the stream and waits; a modern request
        takes them from its retry, or raises InputRequired for the ones it lacks.
        """

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError:
        """The error for a request to the client that needs ``required``, undeclared."""


class RequestPort(SessionPort, Protocol):
    """One request being handled."""

    @property
    def finished(self) -> bool:
        """Whether the request has been answered or cancelled: nothing more goes out."""

    @property
    def page_size(self) -> int: ...

    @property
    def principal(self) -> Principal | None:
        """Who the request's access token speaks for (None without authorization)."""

    @property
    def peer(self) -> str | None:
        """The client's address as the fair shares read it (TM-SEC-UNIT: a trusted proxy's
        forwarded address, else the connection's peer); None when there is none."""

    def close_stream(self) -> bool:
        """Close the request's SSE connection so the client resumes it (legacy polling)."""

    def engine(self, identifier: str) -> Engine | None:
        """The runtime's engine for the extension ``identifier`` where this request is
        served, None where it has none (TM-EXT-ENGINE)."""


class Engine(Protocol):
    """State the runtime keeps for an extension beyond one request (the tasks extension's
    tasks, in memory or in the workers' shared store), answering the extension's requests
    about it (TM-EXT-ENGINE)."""

    def answer(self, request: Request, principal: Principal | None) -> Mapping[str, JSON]:
        """The result of ``request`` (raises RemoteProtocolError to refuse it)."""


NotificationHandler = Callable[[SessionPort, Mapping[str, JSON]], Awaitable[None]]


class Hub(Protocol):
    """A runtime serving an App, as the App sees it."""

    def sessions(self) -> list[SessionPort]:
        """A port for each live legacy session (its standalone stream)."""

    def broadcast(self, method: str, params: Mapping[str, JSON] | None = None) -> int:
        """Announce a change to every client that asked for it: legacy sessions (on their
        standalone stream; ``notifications/resources/updated`` only to those subscribed to
        its URI) and modern listeners whose filter takes it. Returns how many got it."""


class TokenVerifier(Protocol):
    """Checks an access token (T-AUTH): ``trio_mcp.JWTVerifier`` and
    ``trio_mcp.IntrospectionVerifier`` are two; an application may bring its own."""

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` speaks for; raises ``InvalidToken`` when it does not
        verify (a bad signature, expired, for another audience...)."""
        ...


class App(Protocol):
    """What the runtime serves: the application, whatever era its client speaks."""

    @property
    def name(self) -> str: ...

    def server_info(self) -> dict[str, JSON]:
        """``serverInfo``: the name and version, and the title when there is one."""

    @property
    def instructions(self) -> str | None: ...

    def capabilities(self, era: Era = Era.LEGACY) -> dict[str, JSON]:
        """What the server declares (L-CAP-1: exactly what it serves)."""

    def serves(self, method: str) -> bool:
        """Whether the method table answers ``method`` with its capabilities as they are."""

    async def dispatch(self, port: RequestPort, request: Request) -> Mapping[str, JSON]:
        """Answer one request from the method table.

        Raises:
            ProtocolError: the JSON-RPC error to answer with.
            InputRequired: (through a modern port) the input to ask for first.
        """

    def has_resource(self, uri: str) -> bool:
        """Whether ``uri`` names a resource (or matches a template)."""

    def input_schema(self, tool: str) -> Mapping[str, Any] | None:
        """The inputSchema of ``tool``; None for a tool that does not exist."""

    def required_scopes(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """The OAuth scopes a request for ``method`` with ``params`` needs: those of the
        tool, prompt or resource it names (T-AUTH; empty when it names none)."""

    def mirrored_params(self, tool: str) -> Mapping[str, tuple[str, ...]]:
        """The parameters of ``tool`` mirrored into Mcp-Param headers, by header name:
        each one's path in the arguments (MT-HDR-7)."""

    def required_client_capabilities(self, request: Request) -> Mapping[str, JSON]:
        """The client capabilities ``request`` needs before it runs (ML-META-3)."""

    def task_support(self, request: Request, client_capabilities: Mapping[str, JSON]) -> (
        TaskSupport
    ):
        """Whether ``request`` may outlive its exchange as a run of the runtime's engine,
        as the installed extension that runs calls there says (TM-EXT-ENGINE)."""

    def notification_handler(self, method: str) -> NotificationHandler | None:
        """What to run for a notification from a legacy client, if anything."""

    def cache_hint(self, method: str, params: Mapping[str, Any]) -> CacheHint | None:
        """The caching hints the application gives a cacheable request's result (a
        resource's own, TM-HAND-CACHE); None leaves them to the configuration."""

    async def http_route(self, method: str, path: str) -> Reply | None:
        """The application's answer to ``method`` on ``path``, a path outside the MCP
        endpoint; None when it has no route there (TM-HAND-ROUTE)."""

    def serving(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Entered around a runtime serving the App, before its first request and after its
        last: the application's lifespan (TM-HAND-LIFESPAN)."""

    def attach(self, hub: Hub) -> None:
        """A runtime starts serving this App."""

    def detach(self, hub: Hub) -> None:
        """A runtime stops serving it."""
