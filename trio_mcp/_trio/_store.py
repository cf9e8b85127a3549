# Where 2025-11-25 sessions are kept (spec/workers.md, TM-STORE-*). The runtime keeps every
# session it serves in memory; a store decides whether other processes can serve it too.
# MemoryStore, the default, shares nothing: a session lives in the process that created it.
# A shared store (RedisStore, trio_mcp/_trio/_redis.py) keeps what a session is (its
# record) where every worker reads it, and carries what must reach the worker running a
# request: a cancellation, the client's answer to a server request, the session's end.
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from ..protocol import JSON

__all__ = [
    "Claim",
    "ClaimKind",
    "Control",
    "ControlKind",
    "CreateKind",
    "CreateOutcome",
    "MemoryStore",
    "MirrorOp",
    "SessionRecord",
    "SessionStore",
    "StoreLimits",
    "StoreUnavailable",
    "StoredEvent",
    "StoredTask",
    "SubscriptionChange",
]


class StoreUnavailable(Exception):
    """The shared store did not answer, or not in time: the request gets 503 (TM-STORE-DOWN)."""


@attrs.frozen(kw_only=True)
class SessionRecord:
    """What every worker must know of a session to serve its next request (TM-STORE-RECORD).
    What a session is doing (its handlers, streams and connections) is not here: it stays in
    the worker doing it."""

    id: str
    version: str
    client_info: Mapping[str, Any]
    client_capabilities: Mapping[str, Any]
    server_capabilities: Mapping[str, Any]
    client_state_bytes: int
    peer: str | None
    principal: str
    unit: str = ""
    """Whom the session is counted against (TM-STORE-BOUND): an opaque key, the principal's
    or the peer address's."""
    initialized: bool = False
    """Whether notifications/initialized has arrived (at any worker)."""
    log_level: str | None = None
    subscriptions: frozenset[str] | None = frozenset()
    """The resources subscribed to; None when they have not changed since the version the
    reader said it holds (``fetch``'s ``subscriptions_seen``)."""
    subscriptions_version: int = 0
    """How many times the subscriptions changed: a holder that has seen this version has
    them all (TM-STORE-SUBS)."""


@attrs.frozen
class StoredTask:
    """A task as the store keeps it (TM-STORE-TASKS): whose it is, and what tasks/get shows
    of it (its fields, and its questions, result or error)."""

    task_id: str
    owner: str
    """The key of the principal it belongs to ("" without authorization: TK-BIND)."""
    task: Mapping[str, Any]


@attrs.frozen
class SharedState:
    """The part of a record that a save writes whole: small, fixed-size fields. The
    subscriptions change one by one (``SessionStore.subscribe``, TM-STORE-SUBS)."""

    initialized: bool
    log_level: str | None


@attrs.frozen
class StoreLimits:
    """The store's bound on sessions (TM-STORE-BOUND), given at each creation: at most
    ``max_sessions`` records in all and ``max_per_unit`` of one unit (None: no such cap).
    At a cap, the oldest record that has not been renewed for ``idle_after`` seconds (no
    request named it and no worker ran anything of it) is deleted to make room; with none
    such, the new session is refused."""

    max_sessions: int | None
    max_per_unit: int | None
    idle_after: float


class CreateKind(enum.Enum):
    CREATED = "created"
    #: Refused: the store holds ``max_sessions`` records, none of them idle.
    STORE_FULL = "store-full"
    #: Refused: the unit holds ``max_per_unit`` records, none of them idle.
    UNIT_FULL = "unit-full"


@attrs.frozen
class CreateOutcome:
    """What ``SessionStore.create`` did."""

    kind: CreateKind
    evicted: tuple[str, ...] = ()
    """Sessions deleted to make room (their holders must end them)."""


@attrs.frozen
class SubscriptionChange:
    """What ``subscribe`` or ``unsubscribe`` did to a session's subscriptions."""

    changed: bool
    """False: already so (or, for a subscribe, refused: ``full``)."""
    version: int
    """The subscriptions' version after it (TM-STORE-SUBS)."""
    full: bool = False
    """A subscribe refused: the session has ``max_subscriptions`` already."""
    gone: bool = False
    """The session has ended (or expired) meanwhile."""


@attrs.frozen
class MirrorOp:
    """One change of a request stream, for its copy in the store (TM-STORE-STREAMS): a
    message appended (``seq`` set), or only what the stream carries and has lost."""

    session_id: str
    stream: int
    requests: str
    """The stream's request ids, each as JSON, one per line."""
    seq: int | None = None
    data: bytes = b""
    answers: str | None = None
    """For a response, the id it answers, as JSON."""
    first_kept: int = 0
    """The oldest seq of the stream the holder's window still keeps: older ones go."""
    lost: int = -1
    """The newest seq of the stream that left the window or never reached the store."""


@attrs.frozen
class StoredEvent:
    seq: int
    data: bytes


class ClaimKind(enum.Enum):
    """What the store holds of a stream whose worker is gone."""

    #: Nothing: never copied, or expired.
    UNKNOWN = "unknown"
    #: Messages after the cursor have been lost (TM-RES-STALE).
    GAP = "gap"
    #: Every message after the cursor, and a response for each request.
    EVENTS = "events"


@attrs.frozen
class Claim:
    kind: ClaimKind
    requests: tuple[str, ...] = ()
    """The stream's request ids, each as JSON."""
    answered: Mapping[str, int] = attrs.field(factory=dict)
    """For each request answered in the stream, the seq of its response."""
    events: tuple[StoredEvent, ...] = ()
    lost: int = -1


class ControlKind(enum.Enum):
    """What one worker tells the others about a session (TM-STORE-CONTROL)."""

    #: notifications/cancelled for a request this worker is not running.
    CANCEL = "cancel"
    #: The client's response to a server request this worker did not send.
    RESPONSE = "response"
    #: The session ended (DELETE, or abandoned): every worker ends its part of it.
    END = "end"
    #: Its record changed (initialized, log level, subscriptions): holders read it again.
    CHANGED = "changed"
    #: A change notification (a list changed, a resource updated) made at another worker:
    #: not a session's, every worker delivers it to its own clients (TM-STORE-NOTIFY).
    NOTIFY = "notify"


@attrs.frozen
class Control:
    kind: ControlKind
    session_id: str
    payload: JSON
    """CANCEL: the request id; RESPONSE: the JSON-RPC message; END: the reason; NOTIFY
    (whose ``session_id`` is ""): the notification's ``method`` and ``params``."""


class SessionStore(Protocol):
    """Where sessions are kept, as the SessionManager sees it."""

    @property
    def shared(self) -> bool:
        """Whether other processes read the same records (False: this process alone)."""

    @property
    def origin(self) -> str:
        """This process's name among those sharing the store, in event ids of the streams
        it holds ("" when nothing is shared): a cursor names the worker holding its stream."""

    @property
    def outbound_base(self) -> int:
        """The first id of the server requests this process sends, so that a client's
        response names one process's request only."""

    async def run(
        self,
        on_control: Callable[[Control], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep the store's connections, and call ``on_control`` with what other processes
        publish, until cancelled."""

    async def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits
    ) -> CreateOutcome:
        """Keep a new session for ``ttl`` seconds, counted against the store's and its
        unit's caps, after deleting an idle one at a cap (TM-STORE-BOUND); or refuse it
        (raises StoreUnavailable)."""

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None = None,
    ) -> SessionRecord | None:
        """The session's record, its time to live renewed; None when it has ended or
        expired. Its subscriptions are read only when their version is not
        ``subscriptions_seen`` (raises StoreUnavailable)."""

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        """Record what changed; False when the session has ended meanwhile (it is not
        brought back)."""

    async def subscribe(
        self, session_id: str, uri: str, *, max_subscriptions: int, ttl: float
    ) -> SubscriptionChange:
        """Add one subscription, unless the session has ``max_subscriptions`` already
        (TM-STORE-SUBS; raises StoreUnavailable)."""

    async def unsubscribe(self, session_id: str, uri: str, *, ttl: float) -> SubscriptionChange:
        """Remove one subscription (TM-STORE-SUBS; raises StoreUnavailable)."""

    async def delete(self, session_id: str, reason: str) -> None:
        """End the session for every process, deleting everything the store kept of it
        (raises StoreUnavailable)."""

    async def evict(self, session_id: str, idle_after: float) -> bool:
        """End, as ``delete`` does, a session this process evicted, unless it was renewed
        within ``idle_after`` seconds (it is in use at another process); whether it was
        (TM-STORE-BOUND; raises StoreUnavailable)."""

    async def publish(self, control: Control) -> None:
        """Tell the other processes (at most once: TM-STORE-CONTROL)."""

    async def keep_alive(self, session_ids: Iterable[str], ttl: float) -> set[str]:
        """Renew these sessions, which have work running here; those that ended meanwhile."""

    async def advertise(self, address: str, ttl: float) -> bool:
        """Where this process's relay port is, for ``ttl`` seconds (TM-STORE-STREAMS); True
        when the store did not hold it any more (first said, or lapsed: the other processes
        may have taken this one for gone, TM-STORE-TASKS)."""

    async def save_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        """Keep a task as tasks/get shows it, for the rest of its time to live
        (TM-STORE-TASKS; raises StoreUnavailable); None once kept. An end the store already
        holds is never replaced (TK-STATES: a terminal state never moves): that end is
        returned instead, and nothing is written."""

    async def load_task(self, task_id: str) -> StoredTask | None:
        """A task as it was last kept; None when it never was, or has expired."""

    async def locate(self, origin: str) -> str | None:
        """Where the relay port of the process named ``origin`` is; None when it is gone."""

    async def mirror(self, ops: Sequence[MirrorOp], ttl: float) -> list[bool]:
        """Copy these changes of this process's request streams, in order, each kept for
        ``ttl`` seconds; for each, False when another process has claimed its stream
        (raises StoreUnavailable)."""

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int,
        prefix: bytes, suffix: bytes, *, ttl: float,
    ) -> Claim:
        """The messages after ``after`` of a request stream whose holder ``origin`` is gone.
        The first claim ends the stream: each request not answered in it gets the response
        ``prefix + <its id as JSON> + suffix``, and the holder copies nothing more; what is
        claimed is kept ``ttl`` seconds more (raises StoreUnavailable)."""


@attrs.define
class MemoryStore:
    """Nothing shared: the session table of the process is all there is (the default)."""

    @property
    def shared(self) -> bool:
        return False

    @property
    def origin(self) -> str:
        return ""

    @property
    def outbound_base(self) -> int:
        return 1

    async def run(
        self,
        on_control: Callable[[Control], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        await trio.sleep_forever()

    async def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits
    ) -> CreateOutcome:
        return CreateOutcome(CreateKind.CREATED)

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None = None,
    ) -> SessionRecord | None:
        return None

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        return True

    async def subscribe(
        self, session_id: str, uri: str, *, max_subscriptions: int, ttl: float
    ) -> SubscriptionChange:
        return SubscriptionChange(changed=True, version=0)

    async def unsubscribe(self, session_id: str, uri: str, *, ttl: float) -> SubscriptionChange:
        return SubscriptionChange(changed=True, version=0)

    async def delete(self, session_id: str, reason: str) -> None:
        return None

    async def evict(self, session_id: str, idle_after: float) -> bool:
        return True

    async def publish(self, control: Control) -> None:
        return None

    async def keep_alive(self, session_ids: Iterable[str], ttl: float) -> set[str]:
        return set()

    async def advertise(self, address: str, ttl: float) -> bool:
        return False

    async def save_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        return None

    async def load_task(self, task_id: str) -> StoredTask | None:
        return None

    async def locate(self, origin: str) -> str | None:
        return None

    async def mirror(self, ops: Sequence[MirrorOp], ttl: float) -> list[bool]:
        return [True] * len(ops)

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int,
        prefix: bytes, suffix: bytes, *, ttl: float,
    ) -> Claim:
        return Claim(ClaimKind.UNKNOWN)
