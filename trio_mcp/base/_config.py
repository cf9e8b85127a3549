# Server settings: every limit and default the runtime applies, in one frozen object.
# The defaults are documented in spec/ (each setting names the rule it serves).
from __future__ import annotations

import enum
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..protocol import Retention
from ..protocol._methods import CACHEABLE_METHODS
from ..protocol._modern import CacheHint

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ._ports import TokenVerifier
    from ._trace import Tracer

__all__ = ["CONNECTION_BUFFERS", "DECODE_ON_LOOP", "DECODING_FACTOR", "SECRET_ENV", "AuthConfig",
           "HttpParser", "MemoryBound", "ResponseMode", "ServerConfig"]

#: The environment variable that carries the secret processes share, in hex (TM-WORK-SECRET).
SECRET_ENV = "TRIO_MCP_SECRET"
#: What one connection of the own HTTP server may hold whatever its client sends: a read of
#: 64 KiB, pipelined bytes up to 64 KiB (less what it read), a head up to 16 KiB, and its
#: state (about 15 KiB measured: tests/limits/test_limit_fair.py row 3).
CONNECTION_BUFFERS = 96 * 1024
#: What decoding one body may take for a moment, in multiples of ``max_body_bytes``, before it
#: is priced (TM-SEC-MEMORY): its bytes, its text (up to 4 bytes a character, when one
#: character needs them) and what it decodes to (a chain of ``{"":`` takes 47 times its text).
#: A body of more than ``DECODE_ON_LOOP`` bytes is decoded and priced one at a time, pausing
#: in its pricing, and one of at most that size may be decoded meanwhile: so there are at
#: most those two such moments at once.
DECODING_FACTOR = 52
#: The largest body priced without a pause (TM-SEC-DECODE): pricing a larger one at once
#: could hold the event loop, and every other request, for the 0.4 s a 4 MiB body of empty
#: objects takes.
DECODE_ON_LOOP = 64 * 1024


@attrs.frozen(kw_only=True)
class MemoryBound:
    """What clients can make one server process hold, by budget, in bytes (the README's
    memory promise; TM-SEC-MEMORY): ``ServerConfig.memory_bound()``."""

    sessions: int
    """The sessions' windows: ``max_sessions`` x ``retention.max_bytes`` (a session's log
    with each message's bookkeeping, its client's state and subscriptions, its own 28 KiB)."""
    requests: int
    """Requests being served: ``request_memory`` (bodies, decoded arguments, handlers,
    listen filters, tasks' arguments while they run)."""
    bodies: int
    """Bodies still arriving: ``max_body_memory``."""
    tasks: int
    """Ended tasks kept until their TTL: ``max_task_results_memory``."""
    connections: int
    """The own server's connections: ``http_max_connections`` x ``CONNECTION_BUFFERS``."""
    decoding: int
    """The bodies being decoded, for a moment: (``max_body_bytes`` + ``DECODE_ON_LOOP``) x
    ``DECODING_FACTOR`` (one in a worker thread, one on the event loop)."""

    @property
    def total(self) -> int:
        return (
            self.sessions + self.requests + self.bodies + self.tasks + self.connections
            + self.decoding
        )


def _scopes(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _implications(value: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    return {broader: frozenset(narrower) for broader, narrower in value.items()}


@attrs.frozen(kw_only=True)
class AuthConfig:
    """trio-mcp as an OAuth 2.1 resource server (spec/authorization.md, T-AUTH-*): every
    request to the endpoint needs a bearer token that ``verifier`` accepts."""

    resource: str
    """This server's canonical URI, e.g. ``https://mcp.example.com/mcp``: the audience its
    tokens must name (RFC 8707), and where its metadata says it is (RFC 9728)."""
    authorization_servers: tuple[str, ...] = attrs.field(converter=tuple)
    """Issuer URLs of the authorization servers whose tokens it accepts."""
    verifier: TokenVerifier
    scopes_supported: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    """Published in the metadata, and the scope a 401 challenge names."""
    required_scopes: frozenset[str] = attrs.field(default=frozenset(), converter=_scopes)
    """Scopes every request needs, whatever it asks for (a tool's own come on top)."""
    resource_name: str | None = None
    scope_implies: Mapping[str, frozenset[str]] = attrs.field(
        factory=dict, converter=_implications
    )
    """Scope hierarchies: each broader scope with the narrower ones it grants (``{"mcp:admin":
    {"mcp:write"}, "mcp:write": {"mcp:read"}}``); a token holding one holds what it implies,
    transitively (MT-AUTH-2)."""


class ResponseMode(enum.Enum):
    """How a POSTed request is answered (T-POST-7 lets the server pick; TM-HTTP-MODE)."""

    #: Every request gets a text/event-stream response: progress, logs and server-to-client
    #: requests can ride it, and it can be resumed. The default.
    SSE = "sse"
    #: Every request gets one application/json body. Request-scoped notifications have no
    #: wire form and are dropped; server-to-client requests from a handler fail.
    JSON = "json"


class HttpParser(enum.Enum):
    """What reads the requests trio-mcp's own HTTP server receives (TM-HTTP-PARSER); as
    uvicorn's ``--http``."""

    #: httptools when it can be imported (it is a dependency), else h11.
    AUTO = "auto"
    #: httptools: llhttp, the parser of Node.js, in C.
    HTTPTOOLS = "httptools"
    #: h11, in pure Python: the reference, and the fallback.
    H11 = "h11"


@attrs.frozen(kw_only=True)
class ServerConfig:
    """Settings of one trio-mcp server. All times are in seconds unless the name says ms."""

    path: str = "/mcp"
    """The MCP endpoint (T-EP-1: one path for POST, GET and DELETE)."""
    response_mode: ResponseMode = ResponseMode.SSE
    max_body_bytes: int = 4 * 1024 * 1024
    """POST bodies above this get 413."""
    max_body_memory: int = 64 * 1024 * 1024
    """Bytes of request bodies the server holds while reading them, all connections
    together, shared fairly by client address: a full pool takes the largest body of the
    client holding the most for a client holding less, and refuses one at its share; either
    gets 503 with ``Retry-After`` (TM-SEC-BODIES, TM-SEC-FAIR)."""
    allowed_origins: frozenset[str] = frozenset()
    """Origins accepted besides loopback ones (T-SEC-1). ``"*"`` accepts any."""
    allowed_hosts: frozenset[str] | None = None
    """Host names accepted; None derives them from the bind (loopback binds: loopback only)."""
    retention: Retention = attrs.field(factory=Retention)
    """Each session's replay window (TM-RES-WINDOW)."""
    retry_ms: int = 1000
    """The SSE ``retry`` sent before the server closes a connection (T-PSSE-4)."""
    keepalive_interval: float = 15.0
    """An SSE comment goes out on a stream idle this long."""
    stall_budget: float = 10.0
    """A connection whose reader drains slower than ``min_read_rate`` for this long, while the
    server has data for it, is cut and told to resume (TM-BP-STALL)."""
    min_read_rate: float = 2048.0
    """Bytes per second below which a busy connection counts as stalled."""
    window_pacing: bool = True
    """Keep what a stream's reader has not read to a fifth of what a reader at
    ``min_read_rate`` takes in one ``stall_budget`` (4 KiB by default), until it proves fast,
    so that a reader that stopped is told from a slow one within the budget whatever its
    buffers hold (TM-BP-PACE). Needs Linux (TCP_INFO) and HTTP/1.x; elsewhere, no effect."""
    signal_timeout: float = 0.5
    """How long a cut connection gets to take its ``resumption-required`` signal (TM-BP-SIGNAL).

    Short, because the connection has already been judged too slow to keep: waiting longer
    holds it open for a reader the signal cannot reach anyway (one at 1 KiB/s needs seconds
    to take the rest of the write in progress first). A reader that gets no signal resumes
    from the last id it read, which loses and doubles nothing. Half a second keeps a cut
    connection on trio-mcp's own server closed within a second of its cut."""
    max_stream_lag: int | None = None
    """Unsent events a stream with an attached reader may hold before a handler that sends
    more waits (producer backpressure, TM-BP-PRODUCER); None: half the retention window."""
    producer_wait: float | None = None
    """The longest a handler waits on a slow reader before its message is appended anyway;
    None: the stall budget."""
    max_inflight_requests: int = 64
    """Requests a session may have running or with an unsent response (TM-RES-PIN)."""
    max_handlers: int = 8192
    """Handlers running at once, both eras and all clients together: a legacy session's
    requests in flight and 2026-07-28 requests on their exchanges (tasks have ``max_tasks``).
    A full pool ends the newest handler of the client holding the most, which is answered
    -31002 naming the pool, for a client holding fewer; else the request is refused with 503
    (TM-SEC-FAIR)."""
    max_client_state_bytes: int = 16 * 1024
    """What a legacy client's ``clientInfo`` and ``capabilities`` may take together, as
    compact JSON; a larger ``initialize`` is refused with -32602 (TM-SEC-STATE)."""
    max_subscriptions: int = 256
    """Resources one legacy session may be subscribed to at once (TM-SEC-STATE)."""
    max_uri_bytes: int = 8 * 1024
    """The longest resource URI a session may subscribe to, in UTF-8 (TM-SEC-STATE)."""
    max_pending_notifications: int = 16
    """Notifications from a legacy client that may wait for their hooks in one session;
    past it (or past a sixteenth of the window in bytes) the newest are dropped and counted
    (TM-SEC-NOTIFY). The hooks run one at a time, in one task of the session."""
    session_idle_ttl: float = 30 * 60
    """A session with nothing in flight and no open stream ends after this long."""
    abandoned_ttl: float | None = 30 * 60
    """A session with requests still running but no open stream, whose client has sent
    nothing for this long, ends and cancels them (TM-SESS-ABANDONED); None: never."""
    evict_abandoned_after: float = 60.0
    """A session with requests still running but no open stream, whose client has sent
    nothing for this long, counts as idle when a full table takes a session from a client
    (TM-SESS-CAP): such sessions, and idle ones, go before busy ones."""
    uninitialized_ttl: float = 60.0
    """A session whose client never sent notifications/initialized ends after this long."""
    max_sessions: int = 10_000
    """Sessions at once. A full table takes a session from the client holding the most, for a
    client holding fewer, or refuses it 503 (TM-SEC-FAIR, TM-SESS-CAP). With a shared store,
    also the store's count of sessions, every worker's together (TM-STORE-BOUND)."""
    store_max_sessions_per_client: int | None = 2_500
    """With a shared store (TM-STORE-BOUND): the sessions one client (TM-SEC-UNIT) may hold
    in the store, every worker's together; past it its own least recently renewed idle one is
    deleted, else 503. None: no such cap. A worker's own table needs none: it shares its
    sessions by the fair rule (TM-SEC-FAIR)."""
    release_memory_after: int | None = 16 * 1024 * 1024
    """Once ended sessions have freed this many bytes of log (plus a fixed charge per
    session), the expiry loop collects garbage and trims the C heap, so that the process's
    resident size falls back (TM-SESS-RELEASE); None: never."""
    shutdown_grace: float = 10.0
    """On shutdown, how long running handlers may finish before they are cancelled."""
    cancel_grace: float = 5.0
    """How long a cancelled handler may run on (ignoring cancellation) before it is cut."""
    client_request_timeout: float = 60.0
    """Default timeout of a server-to-client request (sampling, elicitation, roots, ping)."""
    page_size: int = 50
    """Items per page of tools/list, resources/list, prompts/list (U-PAGE-1)."""
    cache_hint: CacheHint = attrs.field(factory=CacheHint)
    """The caching hints of modern cacheable results (MU-CACHE-1, TM-CACHE-DEFAULT): by
    default ``ttlMs: 0`` and ``private``, fresh for no time and for no one else, since the
    lists change and list_changed reaches only clients that listen for it."""
    cache_hints: Mapping[str, CacheHint] = attrs.field(factory=dict)
    """Hints for some of the cacheable methods (``server/discover``, ``tools/list``,
    ``prompts/list``, ``resources/list``, ``resources/templates/list``, ``resources/read``),
    in place of ``cache_hint``: lists that are the same for every caller may be
    ``public`` while reads that depend on the caller stay ``private`` (TM-CACHE-DEFAULT).
    Whatever they say, the result of an MRTR retry is never cacheable (MU-CACHE-6)."""
    request_state_ttl: float = 600.0
    """How long a modern requestState stays valid after it is issued (TM-MRTR-STATE)."""
    request_state_key: bytes | None = attrs.field(default=None, repr=False)
    """The key that seals modern requestStates (at least 32 bytes). None: one derived from
    ``secret``, else a random key of this process, so a retry that reaches another process
    (several workers, a restart) is refused; give every process the same key to accept it
    there (ML-STATE-2)."""
    secret: bytes | None = attrs.field(default=None, repr=False)
    """The secret every process serving the same clients shares (at least 32 bytes): the keys
    of event ids (TM-RES-EVENTID) and of requestStates (TM-MRTR-STATE) are derived from it,
    so that a cursor or a requestState one process made verifies in another (TM-WORK-SECRET).
    None: keys that live only in this process. ``trio-mcp serve --workers N`` makes one for
    its workers; ``$TRIO_MCP_SECRET`` (hex) gives one to processes started apart."""
    max_listen_resources: int = 256
    """Resource URIs one subscriptions/listen request may subscribe to."""
    task_after: float = 0.5
    """TM-TASK-DECIDE: how long a tools/call of a tool that may run as a task (``task="optional"``)
    runs on its own exchange before it becomes a task, when its client allows tasks: quicker
    calls are answered as usual."""
    task_ttl: float = 900.0
    """TK-TTL: how long a task and its result are kept, counted from its creation (ttlMs);
    then a task still running is cancelled and every trace of it freed."""
    task_poll_interval: float = 0.5
    """TK-WIRE: the pollIntervalMs a task suggests to its client."""
    max_tasks: int = 4096
    """TM-TASK-BOUND: tasks running at once (those still deciding included); a task that ends
    gives its slot back at once. A full pool takes the newest running task of the client
    holding the most (it fails) for a client holding fewer (TM-SEC-FAIR); else a tool that
    must run as a task is refused with 503, and one that may runs on its exchange."""
    max_task_result_bytes: int = 1024 * 1024
    """TM-TASK-BOUND: the largest result a task keeps; a larger one fails the task (-32603)."""
    max_task_results_memory: int = 64 * 1024 * 1024
    """TM-TASK-BOUND: what ended tasks keep until their TTL, together: their results, and 4 KiB
    each. When it is full, the oldest ended tasks of the client keeping the most are deleted
    (TM-SEC-FAIR); a client keeping the most loses its own oldest ones first."""
    max_streams: int = 2048
    """Long-lived streams at once, both eras: legacy GET streams (fresh or resumed) and
    ``subscriptions/listen`` streams. A full pool closes the oldest stream of the client
    holding the most (it resumes or reconnects, as after any close) for a client holding
    fewer, or answers 503 (TM-SEC-FAIR)."""
    request_memory: int = 1024 * 1024 * 1024
    """TM-SEC-MEMORY: what requests being served may hold together, in bytes: their bodies,
    what those decoded to (a tool's arguments, a listen's filter), and 6 KiB each for the
    handler. A request that would pass it is refused with 503 and -31002 naming the budget;
    nothing accepted is taken back."""
    request_memory_per_client: int = 64 * 1024 * 1024
    """TM-SEC-MEMORY: the same, for the requests of one client (TM-SEC-UNIT), so that sixteen
    clients at least always fit in ``request_memory``."""
    request_memory_per_session: int = 32 * 1024 * 1024
    """TM-SEC-MEMORY: the same, for the requests in flight in one legacy session."""
    memory_accounting: bool = True
    """TM-SEC-MEMORY: charge requests to the budgets above. Off only to measure what the
    accounting costs (benchmarks/bench_memory.py): without it nothing bounds them."""
    client_ipv4_prefix: int = 32
    """TM-SEC-UNIT: without authorization, the IPv4 addresses within a network of this prefix
    length count as one client for the fair shares (32: each address)."""
    client_ipv6_prefix: int = 64
    """TM-SEC-UNIT: the same for IPv6 (64: a /64, which one host can hold whole)."""
    trusted_proxies: frozenset[str] = frozenset()
    """TM-SEC-UNIT: addresses or networks (``10.0.0.0/8``) of reverse proxies in front of this
    server: for a connection from one of them, the client's address is read from
    ``client_address_header``. Empty: the connection's own address is the client's."""
    client_address_header: str = "x-forwarded-for"
    """TM-SEC-UNIT: where a trusted proxy puts the client's address: ``x-forwarded-for``,
    ``forwarded`` (RFC 7239) or ``x-real-ip``. Read only from trusted proxies' connections."""
    http_header_timeout: float = 10.0
    """trio-mcp's own HTTP server (TM-HTTP-OWN): how long a new connection may take to send a
    request's head (and a TLS handshake): slowloris is cut here."""
    http_idle_timeout: float = 5.0
    """How long a kept-alive connection may wait for its next request (under hypercorn too:
    its ``keep_alive_timeout``)."""
    http_body_timeout: float = 30.0
    """How long a request's body may take to arrive, once its head has."""
    http_max_header_bytes: int = 16 * 1024
    """The request line and headers of one request; beyond, 431 and the connection closes."""
    http_max_connections: int = 4096
    """Connections open at once, own server. A full server closes a connection of the client
    holding the most (an idle one first) for a client holding fewer; else the new one gets
    503 and is closed (TM-SEC-FAIR). Connections from ``trusted_proxies`` are not counted."""
    http_parser: HttpParser = HttpParser.AUTO
    """What reads requests on trio-mcp's own server (TM-HTTP-PARSER): httptools or h11."""
    http_linger_timeout: float = 5.0
    """A refusal that leaves request bytes unread (413, 431, a 400 mid-body) is followed by a
    lingering close (TM-HTTP-LINGER): the server stops sending, then reads and discards what
    still arrives for at most this long, so that the client can read the answer."""
    http_linger_bytes: int = 16 * 1024 * 1024
    """The most a lingering close reads and discards before it closes anyway."""
    workers: int = 1
    """How many processes serve this endpoint together (``trio-mcp serve --workers``). A
    2025-11-25 session lives in the memory of the process that created it, so with more than
    one, and no session store they share, a legacy ``initialize`` is refused with a clear
    error rather than half of a session's requests answered 404 (TM-WORK-LEGACY)."""
    store: str | Callable[[ServerConfig], Any] | None = None
    """Where 2025-11-25 sessions are kept so that every worker serves them
    (TM-STORE-RECORD): a store factory, called by each runtime for its connection to the
    store (a SharedStore, trio_mcp.runtime.store._store: ``SharedMemory().connect`` for runtimes of
    one process, trio_mcp.runtime.store._memstore), or a store's URL, which the serving layer maps
    to its factory: Redis (``redis://host:port/db``, ``rediss://``, ``unix:///path``; needs
    ``coredis``, the ``redis`` extra). None: in this process's memory only."""
    store_timeout: float = 1.0
    """How long one call to the store may take before the request gets 503 (TM-STORE-DOWN)."""
    store_recheck: float = 0.5
    """How long a worker serves a session it holds before it reads the session's record
    again (which also renews its time to live): an end or a change made at another worker
    reaches it at once over the control channel, and within this even if that message is
    lost (TM-STORE-RECORD). 0: at every request."""
    relay_host: str = "127.0.0.1"
    """With a shared store, each worker listens here (on a port of its own) for the resumes
    other workers relay to it (TM-STORE-STREAMS); the address the others reach it at, so
    loopback serves the workers of one machine."""
    store_prefix: str = "trio-mcp"
    """The start of every key the store writes: servers of different endpoints may share one
    Redis under different prefixes."""
    auth: AuthConfig | None = None
    """Authorization (T-AUTH-*): None serves every client, as a local server may."""
    telemetry: bool = True
    """OpenTelemetry (TM-OTEL-*): a SERVER span per JSON-RPC request and the MCP metrics, when
    ``opentelemetry-api`` can be imported and OTEL_SDK_DISABLED is not true. False: nothing
    of OpenTelemetry is imported or called."""
    tracer_provider: TracerProvider | None = attrs.field(default=None, eq=False, repr=False)
    """The OpenTelemetry tracer provider this server's spans go to (TM-OTEL-PROVIDERS); None,
    the default, is the API's global one (opentelemetry-instrument's, or the application's).
    Servers in one process may each have their own; tests give theirs here and never touch
    the process's global providers."""
    meter_provider: MeterProvider | None = attrs.field(default=None, eq=False, repr=False)
    """The OpenTelemetry meter provider this server's metrics go to; None is the global one."""
    tracer: Tracer | None = attrs.field(default=None, eq=False, repr=False)
    """Told what each session does, for recorded timelines (trio_mcp.base._trace); None, the
    default, costs one attribute check at each point it would be told."""

    def __attrs_post_init__(self) -> None:
        if min(self.max_sessions, self.max_streams, self.max_tasks, self.max_handlers,
               self.http_max_connections) < 1:
            raise ValueError("every pool holds at least one")
        unknown = sorted(set(self.cache_hints) - CACHEABLE_METHODS)
        if unknown:
            raise ValueError(f"cache_hints names methods that are not cacheable: {unknown}")
        if self.request_state_key is not None and len(self.request_state_key) < 32:
            raise ValueError("request_state_key must be at least 32 bytes (HMAC-SHA256)")
        if self.secret is not None and len(self.secret) < 32:
            raise ValueError("secret must be at least 32 bytes")

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, **settings: object
    ) -> ServerConfig:
        """``settings``, with what the environment says of a deployment of several
        processes (TM-WORK-SECRET): ``$TRIO_MCP_SECRET`` (hex, at least 32 bytes), the
        secret they share; ``$TRIO_MCP_STORE``, the session store's URL; and
        ``$TRIO_MCP_WORKERS``, how many processes serve the endpoint. ``Server.asgi_app()``
        reads them, for ``hypercorn -w N``, whose workers have no other way to agree."""
        env = os.environ if environ is None else environ
        found: dict[str, object] = {}
        if value := env.get(SECRET_ENV):
            try:
                found["secret"] = bytes.fromhex(value)
            except ValueError:
                raise ValueError(f"${SECRET_ENV} must be hex") from None
        if value := env.get("TRIO_MCP_STORE"):
            found["store"] = value
        if value := env.get("TRIO_MCP_WORKERS"):
            found["workers"] = int(value)
        return cls(**{**found, **settings})  # type: ignore[arg-type]

    def memory_bound(self) -> MemoryBound:
        """What clients can make this server hold, whatever they do, over what it holds
        of its own (the README's memory promise, TM-SEC-MEMORY)."""
        return MemoryBound(
            sessions=self.max_sessions * self.retention.max_bytes,
            requests=self.request_memory,
            bodies=self.max_body_memory,
            tasks=self.max_task_results_memory,
            connections=self.http_max_connections * CONNECTION_BUFFERS,
            decoding=(self.max_body_bytes + DECODE_ON_LOOP) * DECODING_FACTOR,
        )

    def derived_key(self, purpose: str) -> bytes:
        """A 32-byte key for ``purpose`` ("cursor", "request-state") from ``secret``, or a
        random one of this process without it. Keys for different purposes are independent,
        so that a MAC made for one use never verifies as another."""
        if self.secret is None:
            return os.urandom(32)
        return hashlib.blake2b(
            self.secret, digest_size=32, person=purpose.encode()[:16]
        ).digest()
