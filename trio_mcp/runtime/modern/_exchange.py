# One 2026-07-28 request on its exchange (spec/modern.md), from its handler's start to its
# answer: ModernServer (trio_mcp.runtime.modern._modern) checks and routes it, and a
# ModernExchange runs it. The handler runs in the exchange's task under a cancel scope that
# the client's leaving cancels (MU-CANCEL-1), watched from the handler's first yield: an
# answer ready at once costs no watch (TM-MOD-ATONCE). The answer is JSON until the handler
# notifies, then SSE: sent whole when the handler did not wait, else streamed (MT-SSE-6).
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio

from ...base._ports import App, Engine, InputRequired
from ...base._trace import TraceKind, TraceRecord
from ...protocol import (
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Reply,
    Request,
    Response,
    dumps,
)
from ...protocol._auth import Principal
from ...protocol._era import ModernCall
from ...protocol._jsonrpc import error_response
from ...protocol._methods import INPUT_METHODS
from ...protocol._modern import (
    CacheHint,
    complete_result,
    error_status,
    is_interim,
    modern_error,
    with_server_info,
)
from ...protocol._mrtr import (
    Binding,
    RequestStateCodec,
    input_required_result,
    read_input_responses,
)
from ...protocol._sse import encode_message_event
from ...protocol._tasks import (
    TaskSupport,
    create_task_result,
)
from ...protocol._transport import SSE_HEADERS, modern_reply
from .._describe import ExchangeInfo
from .._handler import outcome_of
from .._pools import Charge, preempted
from .._reqstats import RequestMetrics
from ..backpressure._responder import Responder, run_watching_disconnect
from ..tasks._taskmanager import TaskManager
from ..tasks._tasks import TaskRun
from ._envport import EnvelopePort
from ._stream import EventStream

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["ExchangeHost", "ModernExchange", "ModernStats"]

#: TM-MOD-ATONCE: what a handler that has not waited may notify before its notifications
#: go out as a stream (the bytes are the legacy era's bound for an answer sent whole).
AT_ONCE_BYTES: Final = 16384
_EARLY_EVENTS: Final = 16


@attrs.define
class ModernStats:
    """Totals of the modern path since the server started (TM-BP-COUNTERS)."""

    requests: int = 0
    requests_streamed: int = 0
    """Requests whose answer became an SSE stream (they sent a notification first)."""
    requests_cancelled: int = 0
    """Requests whose client left before the answer (MU-CANCEL-1)."""
    input_required: int = 0
    streams_cut: int = 0


class ExchangeHost(Protocol):
    """What an exchange needs of the server that runs it (``_modern.ModernServer``)."""

    app: App
    config: ServerConfig
    codec: RequestStateCodec
    tasks: TaskManager
    engines: Mapping[str, Engine]
    requests: RequestMetrics | None
    stats: ModernStats

    def spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> bool: ...

    def server_info(self) -> dict[str, Any]: ...

    def cache_hint(self, request: Request) -> CacheHint: ...


class ModernExchange(EnvelopePort):
    """One modern request, from its handler's start to its answer. It is the handler's port
    (trio_mcp.base._ports.RequestPort)."""

    def __init__(
        self,
        server: ExchangeHost,
        call: ModernCall,
        responder: Responder,
        *,
        principal: Principal | None = None,
        peer: str | None = None,
        unit: str | None = None,
        charge: Charge | None = None,
    ) -> None:
        super().__init__(call, server.config)
        self._unit = unit
        self._charge = charge
        self._server = server
        #: The task this call became, until its CreateTaskResult is sent.
        self._task: TaskRun | None = None
        self.principal = principal
        #: The client's address as TM-SEC-UNIT reads it (RequestPort.peer).
        self.peer = peer
        #: TM-AUTH-BIND: a requestState is valid only for the principal it was sealed for.
        self._principal = principal.key if principal is not None else ""
        self._responder = responder
        self._scope = trio.CancelScope()
        self._stream: EventStream | None = None
        #: TM-MOD-ATONCE: the notifications held until the handler first yields (None once
        #: a stream took them or the answer went out), and their bytes.
        self._early: list[bytes] | None = []
        self._early_bytes = 0
        #: Whether the handler has yielded to the scheduler yet.
        self._waited = False
        self._bound: Binding | None = None
        self._finished = False
        #: The answer when the server, not the client, ended the request (shutdown, or the
        #: handlers' pool).
        self._ended_by: ErrorResponse | None = None
        #: The HTTP request's task that runs the handler, once it runs (describe()).
        self.task: trio.lowlevel.Task | None = None

    # -- the exchange -----------------------------------------------------------------------

    def describe(self) -> ExchangeInfo:
        """This request as the inspector shows it; reads only."""
        return ExchangeInfo(
            task=self.task,
            request_id=self._request.id,
            method=self._request.method,
            cancel_called=self._scope.cancel_called,
            streaming=self._stream is not None,
        )

    def cancel(self) -> None:
        """End the handler: its client left, or its stream was cut."""
        self._scope.cancel()

    def stop(self) -> None:
        """End the handler because the server shuts down: the client is told so."""
        self._ended_by = ErrorResponse(
            id=self._request.id,
            code=ErrorCode.SERVER_BUSY,
            message="Service Unavailable: the server is shutting down; retry the request.",
        )
        self._scope.cancel()

    def preempt(self) -> None:
        """TM-SEC-FAIR: the handlers' pool gives this handler's room to a client holding
        fewer: it ends, and its client is told so (-31002 naming the pool)."""
        code, message, data = preempted("handlers")
        self._ended_by = ErrorResponse(id=self._request.id, code=code, message=message, data=data)
        self._scope.cancel()

    async def run(self) -> None:
        request = self._request
        server = self._server
        self.task = trio.lowlevel.current_task()
        outcome: Response | ErrorResponse | None = None
        if server.config.tracer is not None:
            self._trace(TraceKind.REQUEST, http="POST", detail=_request_label(request))
            self._trace(TraceKind.HANDLER_START, method=request.method)
        try:
            if request.method in INPUT_METHODS:
                self._load_answers()
            with self._scope:
                # MU-CANCEL-1, watched from the handler's first yield (TM-MOD-ATONCE): a
                # handler that answers without yielding has no moment in which its
                # client's leaving could cancel it, and needs no reader task for it.
                outcome = await run_watching_disconnect(
                    self._responder, self.cancel, self._outcome(), then=self._waits
                )
        except RemoteProtocolError as exc:
            # A requestState or inputResponses refused: answered in-band, as any error of the
            # request's params (MU-MRTR-3).
            outcome = error_response(request.id, exc)
        finally:
            self._finished = True
            if server.config.tracer is not None:
                self._trace(TraceKind.HANDLER_END, method=request.method, detail=(
                    "cancelled" if outcome is None or self._scope.cancelled_caught
                    else _result_type(outcome)
                ))
        if self._ended_by is not None and self._scope.cancelled_caught:
            # TM-SESS-SHUTDOWN, TM-SEC-FAIR: a request the server ends still gets an answer
            # (MT-POST-7): an error that says to retry, 503 when nothing was sent yet.
            await self._answer(self._ended_by)
            return
        if outcome is None or self._scope.cancelled_caught:
            # MT-CANCEL-2: a cancelled request gets nothing more.
            server.stats.requests_cancelled += 1
            self._early = None
            if self._stream is not None:
                self._stream.close()
            self._withdraw_task()
            return
        if self._stream is not None and self._stream.closed:
            # Cut, or its client left as the answer was ready: it cannot be told of a task.
            self._withdraw_task()
        if not await self._answer(outcome):
            # TM-TASK-WITHDRAW: its client left while its answer was going out, and it was
            # not written: the task it names is known to nobody.
            self._withdraw_task()

    def _withdraw_task(self) -> None:
        """TM-TASK-WITHDRAW: a task whose CreateTaskResult cannot reach its client is known
        to nobody: it is ended and freed now, not left to hold a slot for its whole TTL."""
        if self._task is not None:
            self._server.tasks.withdraw(self._task)

    async def _outcome(self) -> Response | ErrorResponse:
        request = self._request
        support = self._task_support()
        if support is not TaskSupport.FORBIDDEN:
            run = self._server.tasks.start(
                self._call,
                front=self,
                principal=self.principal,
                peer=self.peer,
                unit=self._unit,
                answers=self._answers,
                publish=support is TaskSupport.REQUIRED,
                charge=self._charge,
            )
            if run is not None:
                return await self._via_task(run)
            if support is TaskSupport.REQUIRED:
                # TM-TASK-BOUND: no room for another task: retry later.
                return ErrorResponse(
                    id=request.id,
                    code=ErrorCode.SERVER_BUSY,
                    message="Service Unavailable: the server has too many tasks; retry later.",
                )
        try:
            return await outcome_of(
                lambda: self._server.app.dispatch(self, request), request, self._server.requests
            )
        except InputRequired as ask:
            return self._input_required(ask)

    def _input_required(self, ask: InputRequired) -> Response:
        self._server.stats.input_required += 1
        if self._server.config.tracer is not None:
            self._trace(TraceKind.INPUT_REQUIRED, detail=", ".join(ask.requests))
        state = self._server.codec.seal(self._binding(), ask.answers, time.time())
        return Response(
            id=self._request.id, result=input_required_result(ask.requests, state)
        )

    def _task_support(self) -> TaskSupport:
        """TM-TASK-DECIDE, TM-EXT-ENGINE: whether this call may run as a task, as the
        extension that runs calls in the tasks' engine says (a tools/call of a tool that
        may, from a client whose request declares the extension: TK-OPTIN)."""
        return self._server.app.task_support(self._request, self._envelope.client_capabilities)

    def engine(self, identifier: str) -> Engine | None:
        return self._server.engines.get(identifier)

    async def _via_task(self, run: TaskRun) -> Response | ErrorResponse:
        """Wait for a run to end or to be worth a task (TM-TASK-DECIDE), and answer for it: its
        own outcome, its question (MRTR), or the task it became."""
        try:
            if not run.published:
                with trio.move_on_after(self._server.config.task_after):
                    await run.settled.wait()
            if not run.published and run.settled.is_set():
                outcome = run.outcome
                if isinstance(outcome, InputRequired):
                    return self._input_required(outcome)
                if outcome is not None:
                    return outcome
                if run.preempted:
                    # TM-SEC-FAIR: the running tasks' pool took it for another client's.
                    return ErrorResponse(
                        id=self._request.id,
                        code=ErrorCode.SERVER_BUSY,
                        message="Service Unavailable: the server ended this call to make room "
                        "for another client's task; retry later.",
                    )
                # Ended with no outcome while its client waited: the server is stopping.
                return ErrorResponse(
                    id=self._request.id,
                    code=ErrorCode.SERVER_BUSY,
                    message="Service Unavailable: the server is shutting down; retry.",
                )
            snapshot = run.snapshot if run.published else run.publish()
            assert snapshot is not None
            self._task = run
            return Response(id=self._request.id, result=create_task_result(snapshot))
        finally:
            # Until it is a task, a call ends with its client (MU-CANCEL-1).
            run.abandon()

    def _binding(self) -> Binding:
        """What a requestState of this request is bound to (MU-MRTR-3): made when one is
        opened or sealed, not for every call (a digest of the arguments' canonical JSON)."""
        if self._bound is None:
            # Only a request of a method that asks for input (INPUT_METHODS) has one.
            assert self._request.method in INPUT_METHODS
            self._bound = Binding.of(self._request, self._principal)
        return self._bound

    def _load_answers(self) -> None:
        params = self._request.params or {}
        fresh = read_input_responses(params, self._request.id)
        if "requestState" in params:
            self._answers = self._server.codec.open(
                params["requestState"], self._binding(), time.time()
            )
        self._answers.update(fresh)

    async def _answer(self, outcome: Response | ErrorResponse) -> bool:
        """Send the answer; whether it was written to the connection."""
        server = self._server
        if isinstance(outcome, Response):
            result = outcome.result
            if is_interim(result):
                # MU-CACHE-4: an interim result carries no caching hints.
                result = with_server_info(result, server.server_info())
            else:
                result = complete_result(
                    self._request.method,
                    result,
                    server_info=server.server_info(),
                    cache=server.cache_hint(self._request),
                )
            message: Response | ErrorResponse = Response(id=outcome.id, result=result)
            status = 200
        else:
            message = modern_error(outcome)
            status = error_status(message, started=self._stream is not None or bool(self._early))
        body = dumps(message)
        if self._stream is None:
            early, self._early = self._early, None
            if early:
                # TM-MOD-ATONCE: notified, and answered without waiting: the whole stream in
                # one response, the same events a stream would carry (MT-SSE-4: the
                # response last), with no writer, watcher or reader task.
                server.stats.requests_streamed += 1
                early.append(encode_message_event(data=body))
                reply = Reply(status=status, headers=SSE_HEADERS, body=b"".join(early))
            else:
                reply = modern_reply(status, body)
            await self._responder.reply(reply)
            if server.config.tracer is not None:
                self._trace(TraceKind.REPLY, status=status, detail=_result_type(message))
            return self._responder.finished
        # A stream opened (or opening, by _flush): MT-SSE-4 (SHOULD), the final response
        # ends it.
        stream = await self._open_stream()
        if stream is None:
            return False
        return await stream.finish(encode_message_event(data=body))

    def _trace(self, kind: TraceKind, **fields: Any) -> None:
        """Tell the tracer (there is one: callers check) what this request did. It has no
        session: the exchange is its connection, and the handler its only one."""
        tracer = self._server.config.tracer
        assert tracer is not None
        tracer.record(TraceRecord(
            kind=kind, conn=id(self._responder), request=self._request.id, **fields
        ))

    def _cut(self) -> None:
        self._server.stats.streams_cut += 1
        requests = self._server.requests
        if requests is not None and requests.telemetry is not None:
            # TM-OTEL-EVENTS: on the request's span, which its cancellation ends.
            requests.telemetry.request_event(self._request, "mcp.stream.cut", {})
        self.cancel()

    # -- the port ---------------------------------------------------------------------------

    @property
    def log_threshold(self) -> str | None:
        # MU-LOG-3 (MUST NOT): no log messages without the request's own level.
        return self._envelope.log_level

    @property
    def finished(self) -> bool:
        return self._finished

    async def notify(self, notification: Notification) -> bool:
        if self._early is not None and not self._waited:
            # TM-MOD-ATONCE: the handler has not yielded yet, so its client's leaving cannot
            # have been heard: the notification is held, to go out with the answer in one
            # response if the handler does not wait. Held without a checkpoint (a yield
            # would end the holding), and only so much: beyond, it goes out as a stream.
            if self._finished or self._scope.cancel_called:
                return False
            data = encode_message_event(data=dumps(notification))
            self._early.append(data)
            self._early_bytes += len(data)
            if self._early_bytes <= AT_ONCE_BYTES and len(self._early) <= _EARLY_EVENTS:
                return True
            return await self._open_stream() is not None
        # Always a checkpoint, as trio's own async functions are, and before anything else:
        # a handler whose only awaits are its notifications must still see its
        # cancellation (MT-CANCEL-2) once its client has gone.
        await trio.lowlevel.checkpoint()
        if self._finished or self._scope.cancel_called:
            # MU-PROG-5: nothing goes out once the request has finished.
            return False
        stream = await self._open_stream()
        if stream is None:
            return False
        # MT-SSE-7: a notification of this request goes on this request's stream.
        return await stream.send(encode_message_event(data=dumps(notification)))

    def notify_now(self, notification: Notification) -> bool:
        stream = self._stream
        if self._finished or stream is None:
            return False
        return stream.offer(encode_message_event(data=dumps(notification)))

    async def _open_stream(self) -> EventStream | None:
        stream = self._stream
        if stream is None:
            # MT-POST-7 / TM-MOD-JSON: JSON until the first notification, then SSE.
            stream = self._stream = EventStream(
                self._responder,
                self._server.config,
                spawn=self._server.spawn,
                on_cut=self._cut,
            )
            self._server.stats.requests_streamed += 1
        if not await stream.open():
            return None
        # The notifications held while the handler had not waited go first (TM-MOD-ATONCE).
        early, self._early = self._early, None
        for data in early or ():
            if not stream.offer(data):
                return None
        return stream

    def _waits(self) -> None:
        """The handler yields for the first time (``run_watching_disconnect``'s ``then``): an
        answer may now be long in coming, and what it notified so far goes out now."""
        self._waited = True
        if self._early and not self._finished:
            self._server.spawn(self._flush, name="mcp:stream-open")

    async def _flush(self) -> None:
        if self._early and not self._finished:
            await self._open_stream()


def _request_label(request: Request) -> str:
    """How a trace names a modern request: its method, and the answers it brings."""
    answers = (request.params or {}).get("inputResponses")
    if isinstance(answers, Mapping) and answers:
        return f"{request.method} + inputResponses: {', '.join(map(str, answers))}"
    return request.method


def _result_type(outcome: Response | ErrorResponse) -> str:
    """How a trace names a modern answer: its resultType, or an error and its code."""
    if isinstance(outcome, ErrorResponse):
        return f"error {outcome.code}"
    return str(outcome.result.get("resultType", "complete"))
