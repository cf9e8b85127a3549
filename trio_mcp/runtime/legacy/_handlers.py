# A legacy session's requests in flight (spec/sessions.md): each client request runs as a
# handler task in the session's nursery, under a cancel scope of its own; its response goes
# to its stream in the session's log (trio_mcp.runtime.legacy._streamout), or, in JSON response
# mode,
# to the POST waiting for it. Ending the session cancels the nursery, and every handler with it.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...base._trace import TraceKind
from ...protocol import (
    ErrorCode,
    ErrorResponse,
    Message,
    RemoteProtocolError,
    Request,
    RequestId,
    StreamClosedError,
    dumps,
)
from ...protocol._auth import Principal
from ...protocol._methods import UNCANCELLABLE
from .._describe import DescribedSession, HandlerInfo, RoleKind, SessionRole
from .._handler import outcome_of
from .._pools import Charge, Pool, pool_busy, preempted
from ..backpressure._responder import Responder, watching_disconnect

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from .._reqstats import RequestMetrics
    from ._streamout import StreamOut

__all__ = ["Handlers", "InFlight", "answered_at_once"]

logger = logging.getLogger("trio_mcp.session")


@attrs.define(eq=False)
class InFlight:
    """A client request being handled."""

    request: Request
    stream: int | None
    """The log stream its response goes to; None when it is answered as application/json."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: Message | None = None
    cancelled_by_client: bool = False
    principal: Principal | None = None
    """Who the request's access token speaks for (None without authorization)."""
    peer: str | None = None
    """The client's address as TM-SEC-UNIT reads it (None when unknown)."""
    task: trio.lowlevel.Task | None = None
    """The handler's task, once it runs (for describe())."""
    charge: Charge | None = None
    """What the request is charged (TM-SEC-MEMORY), held until the handler's task ends."""
    preempted: bool = False
    """The handlers' pool ended it for another client (TM-SEC-FAIR): it answers so."""

    def preempt(self) -> None:
        """TM-SEC-FAIR: the handlers' pool gives this handler's room to a client holding
        fewer. Its handler is cancelled; its client is answered -31002 naming the pool."""
        self.preempted = True
        self.scope.cancel()


class Handlers:
    """The requests of one session in flight, by id."""

    def __init__(
        self,
        config: ServerConfig,
        out: StreamOut,
        *,
        handle: Callable[[InFlight], Awaitable[Mapping[str, Any]]],
        spawn: Callable[..., bool],
        metrics: RequestMetrics,
        ended: Callable[[], None],
        heard: Callable[[], None],
        pool: Pool[Any] | None = None,
        unit: str = "",
    ) -> None:
        self._config = config
        #: TM-SEC-FAIR: every handler of the runtime, both eras, by client; and this
        #: session's client there.
        self._pool = pool
        self._unit = unit
        self._out = out
        #: The session's method table (Session._handle), given the request's port.
        self._handle = handle
        self._spawn = spawn
        self._metrics = metrics
        #: Told when a handler has ended (the session was active).
        self._ended = ended
        #: Told when the client showed itself (a JSON-mode POST's connection ended).
        self._heard = heard
        #: JSON-mode POSTs waiting, with their client connected, for their handlers: open
        #: connections of the session as much as views are (TM-SESS-ABANDONED).
        self.waiting = 0
        self.inflight: dict[RequestId, InFlight] = {}
        #: Requests started since the session began.
        self.started = 0
        #: Cancelled handlers that outlived ``cancel_grace`` and were let go.
        self.cut = 0

    def __len__(self) -> int:
        return len(self.inflight)

    def check(self, requests: tuple[Request, ...], pinned: int) -> None:
        """Refuse ``requests`` when the session has no room for them (503: in flight and
        responses nobody has taken, ``pinned``, count against ``max_inflight_requests``), or
        when an id is in flight or repeats in the batch.

        J-ID-3 (MUST NOT, client): ids are not reused within a session. Two requests with one
        id in a single 2025-03-26 batch count too: their responses could not be told apart,
        and one would overwrite the other's in-flight entry.
        """
        if len(self.inflight) + pinned + len(requests) > self._config.max_inflight_requests:
            raise RemoteProtocolError(
                "Too many requests in flight in this session; retry later.",
                code=ErrorCode.SERVER_BUSY,
                http_status=503,
                headers=(("retry-after", "1"),),
            )
        seen: set[RequestId] = set()
        for req in requests:
            if req.id in self.inflight or req.id in seen:
                why = "is already in flight" if req.id in self.inflight else "repeats in this batch"
                raise RemoteProtocolError(
                    f"Invalid Request: request id {req.id!r} {why}.",
                    request_id=req.id,
                )
            seen.add(req.id)
        # TM-SEC-FAIR: room among all the server's handlers, last, once nothing else refuses.
        if self._pool is not None and not self._pool.admit(self._unit, len(requests)):
            raise pool_busy("handlers", request_id=requests[0].id if requests else None)

    def start(
        self,
        requests: tuple[Request, ...],
        *,
        stream: int | None,
        principal: Principal | None,
        charge: Charge | None,
        peer: str | None = None,
    ) -> list[InFlight]:
        """Start a handler task for each request, in the session's nursery; each holds
        ``charge`` (TM-SEC-MEMORY) until its task ends."""
        flights = []
        run = self._run if self._config.tracer is None else self._run_traced
        for req in requests:
            flight = InFlight(
                request=req, stream=stream, principal=principal, peer=peer, charge=charge
            )
            if charge is not None:
                charge.hold()
            self.inflight[req.id] = flight
            if self._pool is not None:
                self._pool.add(self._unit, flight)
            self.started += 1
            self._spawn(run, flight, name=f"mcp:{req.method}")
            flights.append(flight)
        return flights

    async def wait_json(self, flights: Sequence[InFlight], responder: Responder) -> bool:
        """Wait for JSON-mode handlers to answer, while their client stays (False: it left).
        Closing the connection does not cancel them (T-PSSE-12): they finish and their
        results are dropped. While it waits, the client holds a connection: it has not
        abandoned the session, however long the handlers run (TM-SESS-ABANDONED)."""
        self.waiting += 1
        try:
            # Handlers that answer without waiting on anything have done so after two turns
            # of the scheduler: their answer needs no watch for the client's leaving.
            if await answered_at_once(flights):
                return True
            with trio.CancelScope() as scope:
                async with watching_disconnect(responder, scope.cancel):
                    for flight in flights:
                        await flight.done.wait()
            return not scope.cancelled_caught
        finally:
            self.waiting -= 1
            # The connection's end is a sign of the client, as a view's is.
            self._heard()

    def stream_of(self, related: RequestId) -> int | None:
        """The stream a message related to request ``related`` goes on; None when it has
        nowhere to go: the request finished (U-PROG-11, U-PROG-7), is answered as JSON, or
        was cancelled (U-CANCEL-4: its handler sends nothing more)."""
        flight = self.inflight.get(related)
        if flight is None or flight.cancelled_by_client:
            return None
        return flight.stream

    def holds(self, flight: InFlight) -> bool:
        return self.inflight.get(flight.request.id) is flight

    async def _run_traced(self, flight: InFlight) -> None:
        """_run, told to the tracer: its start, and its end however it ends."""
        req = flight.request
        self._out.trace(TraceKind.HANDLER_START, request=req.id, method=req.method)
        ending = "cancelled"
        try:
            await self._run(flight)
            ending = "cancelled" if flight.cancelled_by_client else "returned"
        finally:
            self._out.trace(TraceKind.HANDLER_END, request=req.id, method=req.method,
                             detail=ending)

    async def _run(self, flight: InFlight) -> None:
        req = flight.request
        flight.task = trio.lowlevel.current_task()
        outcome: Message | None = None
        try:
            with flight.scope:
                outcome = await outcome_of(lambda: self._handle(flight), req, self._metrics)
        finally:
            if self._pool is not None:
                self._pool.discard(flight)
            if flight.charge is not None:
                # TM-SEC-MEMORY: the handler's task, and what it held, is done.
                flight.charge.drop()
        if flight.preempted and not flight.cancelled_by_client:
            code, message, data = preempted("handlers")
            outcome = ErrorResponse(id=req.id, code=code, message=message, data=data)
        if self.inflight.get(req.id) is flight:
            del self.inflight[req.id]
        if flight.cancelled_by_client or outcome is None:
            # U-CANCEL-4 (SHOULD): no response for a cancelled request. Its stream ends.
            self._out.close_request(flight.stream, req.id)
            flight.done.set()
            return
        self._deliver(flight, outcome)

    def _deliver(self, flight: InFlight, outcome: Message) -> None:
        if flight.stream is None:
            flight.outcome = outcome
        else:
            rid = flight.request.id
            try:
                self._out.append(
                    flight.stream, dumps(outcome), answers=rid, request=rid,
                    detail=_outcome_label(outcome),
                )
            except StreamClosedError:
                logger.debug("response to %r has no stream left", rid)
        flight.done.set()
        self._ended()
        self._out.wake()

    def cancel_request(self, request_id: RequestId) -> bool | None:
        """Cancel request ``request_id`` if it runs here (an initialize never is): True;
        False for an initialize; None when no such request runs here."""
        flight = self.inflight.get(request_id)
        if flight is None:
            return None
        if flight.request.method in UNCANCELLABLE:
            return False
        self.cancel(flight)
        return True

    def cancel(self, flight: InFlight) -> None:
        """Cancel a request whose answer the client no longer wants (U-CANCEL-4).

        Its handler is cancelled at once and no response is sent. A handler that shields
        itself from cancellation is let go after ``config.cancel_grace`` seconds (see
        ``_cut_after_grace``).
        """
        flight.cancelled_by_client = True
        flight.scope.cancel()
        if self._config.tracer is not None:
            self._out.trace(
                TraceKind.CANCEL, request=flight.request.id, method=flight.request.method
            )
        if not flight.done.is_set():
            self._spawn(self._cut_after_grace, flight, name="mcp:cut-after-grace")

    async def _cut_after_grace(self, flight: InFlight) -> None:
        """TM-CANCEL-GRACE: bound what a cancelled handler can hold.

        trio cannot pierce a shielded cancel scope from outside, so the task itself runs on
        until it leaves its shield. What the session can take back, it takes back here:
        the request's in-flight slot (max_inflight_requests), its stream (which ends), and
        the idle check that lets the session expire. Ending the session never waits for it.
        """
        with trio.move_on_after(self._config.cancel_grace):
            await flight.done.wait()
        if flight.done.is_set():
            return
        rid = flight.request.id
        logger.warning(
            "handler for %s (request %r) ignored its cancellation for %g s; its slot is freed",
            flight.request.method, rid, self._config.cancel_grace,
        )
        self.cut += 1
        if self.inflight.get(rid) is flight:
            del self.inflight[rid]
        self._out.close_request(flight.stream, rid)
        flight.done.set()

    def stream_event(self, stream: int, name: str, cursor: int) -> None:
        """TM-OTEL-EVENTS: ``name`` on the spans of the requests answered on ``stream``."""
        if (telemetry := self._metrics.telemetry) is not None:
            for flight in [f for f in self.inflight.values() if f.stream == stream]:
                telemetry.request_event(
                    flight.request, name, {"mcp.stream.id": stream, "mcp.stream.cursor": cursor}
                )

    def cancelled_by_client(self) -> bool:
        """Whether a handler in flight was cancelled by its client."""
        return any(f.cancelled_by_client for f in self.inflight.values())

    def describe(self) -> tuple[HandlerInfo, ...]:
        return tuple(
            HandlerInfo(
                task=f.task, request_id=f.request.id, method=f.request.method,
                stream=f.stream, cancel_called=f.scope.cancel_called,
                cancelled_by_client=f.cancelled_by_client,
            )
            for f in list(self.inflight.values())
        )

    def roles(self, owner: DescribedSession) -> dict[trio.lowlevel.Task, SessionRole]:
        """The handlers' tasks, each by its request id, described by ``owner``."""
        return {
            f.task: SessionRole(RoleKind.HANDLER, owner, f.request.id)
            for f in list(self.inflight.values()) if f.task is not None
        }

    def release(self) -> None:
        """The session ends: a cancelled handler never reaches its own done.set(), so
        whoever waits on one (a JSON-mode POST) is woken, and finds the session closed."""
        for flight in self.inflight.values():
            flight.done.set()


def _outcome_label(outcome: Message) -> str:
    """How a trace names a response: a result, or an error and its code."""
    return f"error {outcome.code}" if isinstance(outcome, ErrorResponse) else "response"


async def answered_at_once(flights: Sequence[InFlight]) -> bool:
    """Whether every handler has answered within two turns of the scheduler: those that
    wait on nothing have (trio runs a batch in either order), and their answer needs no
    View, writer or watch for the client's leaving (TM-POST-ATONCE, TM-HTTP-OWN)."""
    for _ in range(2):
        await trio.lowlevel.checkpoint()
        if all(f.done.is_set() for f in flights):
            return True
    return False
