# The other workers serving this endpoint, as the runtime sees them (spec/workers.md): the one
# seam between a worker alone and a worker in a cluster. The runtime chooses once, when it is
# built: ``Alone``, below, when no shared store is configured, or a ``Cluster``
# (trio_mcp.runtime.store._cluster), which exists only with a shared store. Nothing else in the
# runtime asks whether a store is shared: where a worker in a cluster must do something more
# (read a session's record, tell the others, copy a stream), the runtime asks its peers, and
# a worker alone answers from what it holds.
from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from ...protocol import JSON, Cursor, ErrorCode, Notification, RemoteProtocolError
from ...protocol._tasks import TaskSnapshot
from ...protocol._transport import HttpRequest
from ...protocol._versions import MODERN_VERSIONS
from .._describe import SessionEnd
from .._stats import counter
from ..legacy._session import SessionPeers
from ..legacy._streamout import NO_COPIES, Copies
from ._store import ControlKind

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...protocol._era import ModernCall
    from ..backpressure._responder import Responder
    from ..legacy._session import Session
    from ..modern._modern import ModernServer
    from ..tasks._taskmanager import TaskManager
    from ._store import SessionRecord

__all__ = ["Alone", "ClusterStatistics", "LocalSessions", "Peers", "Resumed", "legacy_refused"]


class Resumed(enum.Enum):
    """What a resume of another worker's stream came to (TM-STORE-STREAMS)."""

    ANSWERED = "answered"
    """Relayed to the worker holding the stream, or read from the stream's copy."""
    STANDALONE = "standalone"
    """The standalone stream of a worker that is gone: it goes on here, after saying that
    what that worker held is lost."""
    LOST = "lost"
    """Its worker is gone, and nothing of it is kept: an explicit failure."""


class LocalSessions(Protocol):
    """The sessions this worker holds, as its peers see them (the SessionTable)."""

    def get(self, session_id: str) -> Session | None:
        """The session ``session_id`` if it is held here and has not ended."""

    async def enter(self, session: Session) -> bool:
        """Start ``session`` here; False when it did not stay (SessionTable.enter)."""

    def evicted_elsewhere(self, session_ids: tuple[str, ...]) -> None:
        """A shared store deleted these sessions to make room (TM-STORE-BOUND)."""

    def busy(self) -> list[str]:
        """The sessions with work running here (handlers, connections)."""

    def make(self, record: SessionRecord, *, log_base: int) -> Session:
        """A session of this table for ``record`` (not yet entered)."""


@attrs.frozen
class ClusterStatistics:
    """What a worker in a cluster did for and with the others (TM-BP-COUNTERS); all 0 for a
    worker alone."""

    sessions_adopted: int = counter()
    """Sessions another worker created, taken up here for a request (TM-STORE-RECORD)."""
    store_failures: int = counter()
    """Requests answered 503 because the shared store did not answer (TM-STORE-DOWN)."""
    resumes_relayed: int = counter()
    """Resumes passed to the worker holding their stream (TM-STORE-STREAMS)."""
    controls_received: int = counter()
    """Cancellations, client responses and session ends from other workers (TM-STORE-CONTROL),
    and change notifications made at another worker (TM-STORE-NOTIFY)."""
    resumes_from_store: int = counter()
    """Resumes of a stream whose worker was gone, answered from its copy (TM-STORE-STREAMS)."""
    stream_copies_lost: int = counter()
    """Changes of request streams that never reached the store (TM-STORE-STREAMS)."""


class Peers(SessionPeers, Protocol):
    """The other workers serving this endpoint's sessions and tasks (Alone, or a Cluster)."""

    @property
    def origin(self) -> str:
        """This worker's name among those sharing a store ("" alone): in its cursors and
        task ids."""

    @property
    def outbound_base(self) -> int:
        """The first id of the server requests this worker sends."""

    @property
    def copies(self) -> Copies:
        """Where request streams are copied for the others (TM-STORE-STREAMS)."""

    @property
    def idle_end(self) -> SessionEnd:
        """How a session idle past its time to live ends here (TM-SESS-IDLE): EXPIRED, or
        RELEASED when it lives on in a shared store (TM-STORE-RECORD)."""

    @property
    def serves_relays(self) -> bool:
        """Whether this worker listens for requests the others relay (TM-STORE-STREAMS)."""

    async def run(
        self, table: LocalSessions, tasks: TaskManager, modern: ModernServer, *,
        task_status: trio.TaskStatus[None] = ...,
    ) -> None:
        """Serve ``table``'s sessions and ``tasks`` with the others, until cancelled."""

    def legacy_refusal(self, requested: JSON, request_id: object) -> RemoteProtocolError | None:
        """Why a legacy session cannot be created here (TM-WORK-LEGACY), if it cannot."""

    async def create(self, record: SessionRecord) -> bool:
        """A new session, kept where every worker finds it before its client learns its id
        (TM-STORE-RECORD); False when the store refused it for its caps (TM-STORE-BOUND);
        raises RemoteProtocolError 503 when the store does not answer (TM-STORE-DOWN)."""

    async def find(self, session_id: str) -> Session | None:
        """Session ``session_id`` as this worker serves it now: held here, read again from
        a shared store when it was read too long ago, or taken up from it; None when it
        does not exist (any more)."""

    async def delete(self, session: Session) -> None:
        """The client ends ``session`` (T-SESS-9): gone for every worker first."""

    def ended(self, session: Session, reason: SessionEnd) -> None:
        """``session`` ended here for a reason every worker honours (abandoned, evicted)."""

    def deliver(self, session: Session, notification: Notification) -> bool:
        """Send a change notification to ``session`` if it is for it (Session.takes);
        whether it went at once."""

    async def resume_elsewhere(
        self, session: Session, cursor: Cursor, last_event_id: str, request: HttpRequest,
        responder: Responder,
    ) -> Resumed:
        """A resume whose cursor names another worker's stream (TM-STORE-STREAMS)."""

    def announce(self, notification: Notification) -> None:
        """A change notification made here, for the others' clients (TM-STORE-NOTIFY)."""

    def keep_task(self, snapshot: TaskSnapshot, owner: str) -> None:
        """A published task changed: kept for the others (TM-STORE-TASKS)."""

    async def relay_task(
        self, call: ModernCall, request: HttpRequest, responder: Responder
    ) -> bool:
        """A tasks/* request for a task another worker runs: answered through it, or for
        it (TM-STORE-TASKS); False for a task of this worker."""

    def advertise(self, host: str, port: int) -> None:
        """This worker's relay port listens at ``host:port`` (TM-STORE-STREAMS)."""

    def statistics(self) -> ClusterStatistics: ...


def legacy_refused(config: ServerConfig, requested: JSON, request_id: object) -> (
    RemoteProtocolError
):
    """TM-WORK-LEGACY: several workers and no store they share: a session would live in one
    process alone, and the client's next requests reach any of them."""
    return RemoteProtocolError(
        f"Unsupported protocol version: this server runs {config.workers} worker "
        "processes without a shared session store, so it serves only the stateless "
        f"revision{'s' if len(MODERN_VERSIONS) > 1 else ''} {', '.join(MODERN_VERSIONS)}.",
        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        http_status=200,
        data={"supported": list(MODERN_VERSIONS), "requested": requested},
        request_id=request_id,  # type: ignore[arg-type]
    )


class Alone:
    """A worker with no store shared with others: its sessions live in its memory, and
    every question about them is answered from its table."""

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self._table: LocalSessions | None = None

    origin = ""
    outbound_base = 1
    copies: Copies = NO_COPIES
    idle_end = SessionEnd.EXPIRED
    serves_relays = False

    async def run(
        self, table: LocalSessions, tasks: TaskManager, modern: ModernServer, *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._table = table
        task_status.started()

    def legacy_refusal(self, requested: JSON, request_id: object) -> RemoteProtocolError | None:
        if self._config.workers > 1:
            # TM-WORK-LEGACY: refused up front, naming the revision every worker serves
            # alike, rather than half of the session's requests answered 404. In-band
            # (ML-COMPAT-2): a 4xx would send a 2025 client to the old HTTP+SSE transport
            # (T-COMPAT-2), and this message would never reach its user.
            return legacy_refused(self._config, requested, request_id)
        return None

    async def create(self, record: SessionRecord) -> bool:
        return True

    async def find(self, session_id: str) -> Session | None:
        assert self._table is not None
        return self._table.get(session_id)

    async def delete(self, session: Session) -> None:
        return None

    def ended(self, session: Session, reason: SessionEnd) -> None:
        return None

    def deliver(self, session: Session, notification: Notification) -> bool:
        return session.takes(notification) and session.send(notification)

    async def resume_elsewhere(
        self, session: Session, cursor: Cursor, last_event_id: str, request: HttpRequest,
        responder: Responder,
    ) -> Resumed:
        return Resumed.LOST

    def forward(self, session: Session, kind: ControlKind, payload: JSON) -> None:
        return None  # nothing runs elsewhere

    async def save(self, session: Session) -> None:
        return None

    async def subscribe(self, session: Session, uri: str, *, added: bool) -> bool:
        session.subs.change(uri, added=added)
        return True

    def announce(self, notification: Notification) -> None:
        return None

    def keep_task(self, snapshot: TaskSnapshot, owner: str) -> None:
        return None

    async def relay_task(
        self, call: ModernCall, request: HttpRequest, responder: Responder
    ) -> bool:
        return False

    def advertise(self, host: str, port: int) -> None:
        return None

    def statistics(self) -> ClusterStatistics:
        return ClusterStatistics()


#: Checked by mypy: Alone is a Peers.
_ALONE_IS_PEERS: Callable[[ServerConfig], Peers] = Alone
