# The contract of a shared session store (spec/workers.md, TM-STORE-*): what several workers
# serving one endpoint keep in one place, so that any of them serves any session. A worker
# alone needs no store (trio_mcp.runtime.store._peers.Alone): its sessions live in its memory.
#
# The contract is five small interfaces, one per job, and records that say what crosses
# them; nothing here is Redis's (trio_mcp.runtime.store._redis) or the in-process store's
# (trio_mcp.runtime.store._memstore) own. A new store (Postgres, NATS) implements the five and
# passes the contract tests (tests/store/), which run against every implementation.
#
#   SessionRecords  what a session is (its record), counted against the store's caps
#   ControlBus      what one worker tells the others (cancellations, answers, ends, changes)
#   Directory       where each worker's relay port listens
#   StreamCopies    request streams copied so that they outlive their worker
#   TaskRecords     tasks as tasks/get shows them
#
# Every call may raise StoreUnavailable: the store did not answer, or not within its
# timeout; the request that needed it gets 503 (TM-STORE-DOWN).
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ...protocol import JSON, RequestId

if TYPE_CHECKING:
    import trio

    from ...base._config import ServerConfig

__all__ = [
    "Claim",
    "ClaimKind",
    "Control",
    "ControlBus",
    "ControlKind",
    "CreateKind",
    "CreateOutcome",
    "Directory",
    "SessionRecord",
    "SessionRecords",
    "SharedState",
    "SharedStore",
    "StoreFactory",
    "StoreLimits",
    "StoreUnavailable",
    "StoredEvent",
    "StoredTask",
    "StreamChange",
    "StreamCopies",
    "SubscriptionChange",
    "TaskRecords",
]


class StoreUnavailable(Exception):
    """The shared store did not answer, or not in time: the request gets 503 (TM-STORE-DOWN)."""


# -- session records ----------------------------------------------------------------------------


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
class SharedState:
    """The part of a record that a save writes whole: small, fixed-size fields. The
    subscriptions change one by one (``SessionRecords.subscribe``, TM-STORE-SUBS)."""

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
    """What ``SessionRecords.create`` did."""

    kind: CreateKind
    evicted: tuple[str, ...] = ()
    """Sessions deleted to make room (their holders end them: an END went to every worker)."""


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


class SessionRecords(Protocol):
    """What a session is, where every worker reads it (TM-STORE-RECORD), within the store's
    bound on sessions (TM-STORE-BOUND)."""

    async def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits
    ) -> CreateOutcome:
        """Keep a new session for ``ttl`` seconds, counted against the store's and its
        unit's caps, after deleting an idle one at a cap (each deleted one is ended for
        every worker, as by ``delete``); or refuse it."""

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None = None,
    ) -> SessionRecord | None:
        """The session's record, its time to live renewed (``idle_ttl`` once initialized,
        ``uninitialized_ttl`` before); None when it has ended or expired. Its subscriptions
        are read only when their version is not ``subscriptions_seen``."""

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        """Record what changed, and renew the record; False when the session has ended
        meanwhile (it is not brought back)."""

    async def subscribe(
        self, session_id: str, uri: str, *, max_subscriptions: int, ttl: float
    ) -> SubscriptionChange:
        """Add one subscription, unless the session has ``max_subscriptions`` already
        (TM-STORE-SUBS)."""

    async def unsubscribe(self, session_id: str, uri: str, *, ttl: float) -> SubscriptionChange:
        """Remove one subscription (TM-STORE-SUBS)."""

    async def keep_alive(self, session_ids: Iterable[str], ttl: float) -> set[str]:
        """Renew these sessions, which have work running here; those that ended meanwhile."""

    async def delete(self, session_id: str, reason: str) -> None:
        """End the session for every worker (an END with ``reason`` goes on the control
        bus), deleting everything the store kept of it: its record, its subscriptions, its
        streams' copies, its place in the counts."""

    async def evict(self, session_id: str, idle_after: float) -> bool:
        """End, as ``delete`` does, a session this worker evicted, unless it was renewed
        within ``idle_after`` seconds (it is in use at another worker); whether it was
        (TM-STORE-BOUND)."""

    async def counts(self, unit: str) -> tuple[int, int]:
        """The sessions the store holds now, expired ones left out (TM-STORE-BOUND): in
        all, and of ``unit``."""


# -- the control bus ----------------------------------------------------------------------------


class ControlKind(enum.Enum):
    """What one worker tells the others about a session (TM-STORE-CONTROL)."""

    #: notifications/cancelled for a request this worker is not running.
    CANCEL = "cancel"
    #: The client's response to a server request this worker did not send.
    RESPONSE = "response"
    #: The session ended (DELETE, eviction, or abandoned): every worker ends its part of it.
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
    """CANCEL: the request id; RESPONSE: the JSON-RPC message; END: the reason; CHANGED:
    None, or one subscription's change (``uri``, ``added``, ``version``); NOTIFY (whose
    ``session_id`` is ""): the notification's ``method`` and ``params``."""


class ControlBus(Protocol):
    """What one worker tells the others, at most once (TM-STORE-CONTROL). What is
    published reaches every other worker listening (``SharedStore.run``), never the one
    that published it; a worker not listening at that moment misses it."""

    async def publish(self, control: Control) -> None:
        """Tell the other workers."""


# -- the directory of relay ports ---------------------------------------------------------------


class Directory(Protocol):
    """Where each worker's relay port listens (TM-STORE-STREAMS, TM-STORE-TASKS)."""

    async def advertise(self, address: str, ttl: float) -> bool:
        """Where this worker's relay port is, for ``ttl`` seconds; True when the store did
        not hold it any more (first said, or lapsed: the other workers may have taken this
        one for gone, TM-STORE-TASKS)."""

    async def locate(self, origin: str) -> str | None:
        """Where the relay port of the worker named ``origin`` is; None when it is gone."""


# -- stream copies ------------------------------------------------------------------------------


@attrs.frozen
class StreamChange:
    """One change of a request stream, for its copy in the store (TM-STORE-STREAMS): a
    message appended (``seq`` set), or only what the stream carries and has lost."""

    session_id: str
    stream: int
    requests: tuple[RequestId, ...]
    """The requests the stream carries a response for."""
    seq: int | None = None
    data: bytes = b""
    answers: RequestId | None = None
    """For a response, the request it answers."""
    first_kept: int = 0
    """The oldest seq of the stream the holder's window still keeps: older ones go."""
    lost: int = -1
    """The newest seq of the stream that left the window or never reached the store."""


@attrs.frozen
class StoredEvent:
    """One event of a claimed copy: a message the holder copied (``data``), or the end the
    claim gave a request the copy holds no response for (``unanswered``): its worker
    stopped, and the reader answers it with an error (protocol._resume.holder_gone_error)."""

    seq: int
    data: bytes = b""
    unanswered: RequestId | None = None


class ClaimKind(enum.Enum):
    """What the store holds of a stream whose worker is gone."""

    #: Nothing: never copied, or expired.
    UNKNOWN = "unknown"
    #: Messages after the cursor have been lost (TM-RES-STALE).
    GAP = "gap"
    #: Every message after the cursor, and an end for each request.
    EVENTS = "events"


@attrs.frozen
class Claim:
    kind: ClaimKind
    requests: tuple[RequestId, ...] = ()
    """The requests the stream carries."""
    answered: Mapping[RequestId, int] = attrs.field(factory=dict)
    """For each request the copy answers (or, once claimed, ends), the seq of that event."""
    events: tuple[StoredEvent, ...] = ()
    """EVENTS: every event after the cursor, in order."""
    lost: int = -1


class StreamCopies(Protocol):
    """Request streams copied, so that a resume outlives the worker holding the stream
    (TM-STORE-STREAMS)."""

    async def copy(self, changes: Sequence[StreamChange], ttl: float) -> list[bool]:
        """Copy these changes of this worker's request streams, in order, each kept for
        ``ttl`` seconds; for each, False when the stream's session has ended, or another
        worker has claimed its stream (then nothing more of it is copied)."""

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int, *, ttl: float
    ) -> Claim:
        """The events after ``after`` of a request stream whose holder ``origin`` is gone.
        The first claim ends the stream: each of its requests without a response gets an
        ``unanswered`` event after the last message, so that every later claim reads the
        same end; the holder copies nothing more, and what is claimed is kept ``ttl``
        seconds more."""


# -- task records -------------------------------------------------------------------------------


@attrs.frozen
class StoredTask:
    """A task as the store keeps it (TM-STORE-TASKS): whose it is, and what tasks/get shows
    of it (its fields, and its questions, result or error)."""

    task_id: str
    owner: str
    """The key of the principal it belongs to ("" without authorization: TK-BIND)."""
    task: Mapping[str, Any]


class TaskRecords(Protocol):
    """Tasks as tasks/get shows them, for the workers that must answer for a task whose
    worker is gone (TM-STORE-TASKS)."""

    async def save_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        """Keep a task for the rest of its time to live; None once kept. An end the store
        already holds is never replaced (TK-STATES: a terminal state never moves): that end
        is returned instead, and nothing is written."""

    async def load_task(self, task_id: str) -> StoredTask | None:
        """A task as it was last kept; None when it never was, or has expired."""


# -- the store as a whole -----------------------------------------------------------------------


class SharedStore(SessionRecords, ControlBus, Directory, StreamCopies, TaskRecords, Protocol):
    """One worker's connection to a store shared by the workers of one endpoint."""

    @property
    def origin(self) -> str:
        """This worker's name among those sharing the store, in event ids of the streams
        it holds and in its task ids: a cursor names the worker holding its stream."""

    @property
    def outbound_base(self) -> int:
        """The first id of the server requests this worker sends, so that a client's
        response names one worker's request only."""

    async def run(
        self,
        on_control: Callable[[Control], None],
        *,
        task_status: trio.TaskStatus[None] = ...,
    ) -> None:
        """Keep the store's connections, and call ``on_control`` with what the other
        workers publish, until cancelled; the store answers calls only while this runs."""


#: What ``ServerConfig.store`` holds besides a URL: a function that makes one runtime's
#: connection to the store (each runtime calls it; two runtimes sharing an in-process store
#: each get a connection of their own, with an origin of its own).
StoreFactory = Callable[["ServerConfig"], SharedStore]
