# The 2026-07-28 ("modern") request path (spec/modern.md): a request that passed the envelope
# ladder (protocol._era) is answered on its own HTTP exchange, statelessly. Its handler runs in
# the exchange's task under a cancel scope that the client's leaving cancels (MU-CANCEL-1);
# its answer is JSON until it sends a notification, then an SSE stream that keeps nothing
# (MT-SSE-6); it asks for input by answering input_required (MU-TOOL-5), and nothing of it
# outlives the exchange.
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...base._ports import App, InputRequired
from ...base._trace import TraceKind, TraceRecord
from ...protocol import (
    JSON,
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
)
from ...protocol._auth import Principal
from ...protocol._era import ModernCall
from ...protocol._fair import Unit
from ...protocol._headers import Headers
from ...protocol._jsonrpc import error_response
from ...protocol._methods import INPUT_METHODS, METHODS, TASK_METHODS, ScopeKind, named
from ...protocol._modern import (
    NOT_CACHEABLE,
    CacheHint,
    check_method,
    check_param_headers,
    complete_result,
    discover_result,
    error_status,
    is_interim,
    is_retry,
    missing_capability,
    modern_error,
    undeclared,
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
    TASKS_EXTENSION,
    TaskSupport,
    create_task_result,
    declares_tasks,
    tasks_requirement,
)
from ...protocol._transport import modern_reply
from .._describe import ExchangeInfo
from .._handler import outcome_of
from .._pools import Charge, Pool, handler_pool, pool_busy, preempted
from .._reqstats import RequestMetrics
from ..backpressure._responder import Responder, watching_disconnect
from ..tasks._taskmanager import TaskManager
from ..tasks._tasks import TaskRun
from ._envport import EnvelopePort
from ._stream import EventStream

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["ModernServer", "ModernStats"]


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


class ModernServer:
    """Answers the modern requests of one runtime."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        spawn: Callable[..., bool],
        state_codec: RequestStateCodec,
        tasks: TaskManager,
        requests: RequestMetrics | None = None,
        handlers: Pool[Any] | None = None,
    ) -> None:
        self.app = app
        #: TM-SEC-FAIR: the handlers running, both eras, by client.
        self.handlers = handlers if handlers is not None else handler_pool(config.max_handlers)
        self.config = config
        self._spawn = spawn
        self.codec = state_codec
        self.tasks = tasks
        self.requests = requests
        self.stats = ModernStats()
        #: The exchanges running now, for shutdown (TM-SESS-SHUTDOWN).
        self.running: set[ModernExchange] = set()
        self._drained = trio.Event()

    def server_info(self) -> dict[str, Any]:
        return self.app.server_info()

    def spawn(self, fn: Callable[..., Any], *args: Any, name: str) -> bool:
        """Start a task outside an exchange's own (a stream's writer and watcher)."""
        return self._spawn(fn, *args, name=name)

    def cache_hint(self, request: Request) -> CacheHint:
        """The caching hints of a complete result of ``request`` (MU-CACHE-1): its method's,
        as configured (TM-CACHE-DEFAULT), but never cacheable for an MRTR retry, whose result
        depends on answers no cache key holds (MU-CACHE-6)."""
        if is_retry(request.params or {}):
            return NOT_CACHEABLE
        # TM-HAND-CACHE: the hint of the resource read, when the application gave it one.
        own = self.app.cache_hint(request.method, request.params or {})
        return own or self.config.cache_hints.get(request.method, self.config.cache_hint)

    def _serves(self, method: str) -> bool:
        if method in TASK_METHODS:
            # TM-TASK-SERVED: served when some tool may run as a task.
            return self.app.runs_tasks()
        return self.app.serves(method)

    def check(self, call: ModernCall, headers: Headers) -> None:
        """The rungs after the envelope: a method served here, headers mirroring tool
        parameters that agree with the body, and the client capabilities the request needs.

        Raises:
            RemoteProtocolError: 404 -32601, 400 -32020 or 400 -32021.
        """
        request = call.request
        check_method(request, self._serves)
        params = request.params or {}
        tool = named(request.method, params, ScopeKind.TOOL)
        if tool is not None:
            arguments = params.get("arguments")
            mirrored = self.app.mirrored_params(tool)
            if mirrored:
                check_param_headers(
                    mirrored,
                    arguments if isinstance(arguments, Mapping) else {},
                    headers,
                    request,
                )
        required = self.app.required_client_capabilities(request)
        if request.method in TASK_METHODS:
            # TK-GATE: the extension is checked before the task is looked up.
            required = tasks_requirement()
        missing = undeclared(required, call.envelope.client_capabilities)
        if missing:
            # ML-META-3 (MUST), decided before the first byte of the answer.
            raise missing_capability(missing, request.id)

    async def serve(
        self,
        call: ModernCall,
        headers: Headers,
        responder: Responder,
        *,
        principal: Principal | None = None,
        peer: str | None = None,
        unit: Unit | None = None,
        charge: Charge | None = None,
    ) -> None:
        """Answer one modern request on its exchange (raises RemoteProtocolError for a
        refusal before anything ran); ``principal`` is who its token speaks for, ``peer``
        the address it came from, ``unit`` its client for the fair shares (TM-SEC-UNIT),
        ``charge`` what it is charged (TM-SEC-MEMORY), which a task it becomes holds too."""
        self.check(call, headers)
        self.stats.requests += 1
        if call.request.method == "server/discover":
            capabilities = self.app.capabilities()
            if self.app.runs_tasks():
                # TK-DISCOVER: the extension is declared under capabilities.extensions.
                extensions = capabilities.get("extensions")
                capabilities = {
                    **capabilities,
                    "extensions": {
                        **(extensions if isinstance(extensions, Mapping) else {}),
                        TASKS_EXTENSION: {},
                    },
                }
            result = discover_result(
                capabilities=capabilities,
                server_info=self.server_info(),
                instructions=self.app.instructions,
                cache=self.cache_hint(call.request),
            )
            await responder.reply(
                modern_reply(200, dumps(Response(id=call.request.id, result=result)))
            )
            return
        if call.request.method in TASK_METHODS:
            await self.reply_task(call, self.tasks.answer(call.request, principal), responder)
            return
        key = "" if unit is None else unit.key
        if not self.handlers.admit(key):
            raise pool_busy("handlers", request_id=call.request.id)
        exchange = ModernExchange(
            self, call, responder, principal=principal, peer=peer,
            unit=None if unit is None else unit.key, charge=charge,
        )
        self.running.add(exchange)
        self.handlers.add(key, exchange)
        try:
            await exchange.run()
        finally:
            self.handlers.discard(exchange)
            self.running.discard(exchange)
            if not self.running:
                self._drained.set()
                self._drained = trio.Event()

    async def reply_task(
        self, call: ModernCall, answer: Mapping[str, JSON], responder: Responder
    ) -> None:
        """Send the answer to a tasks/* request (TK-GET, TK-ACK)."""
        result = complete_result(
            call.request.method, dict(answer), server_info=self.server_info(), cache=None
        )
        await responder.reply(
            modern_reply(200, dumps(Response(id=call.request.id, result=result)))
        )

    async def drain(self) -> None:
        """Wait until no modern request is running."""
        while self.running:
            await self._drained.wait()


class ModernExchange(EnvelopePort):
    """One modern request, from its handler's start to its answer. It is the handler's port
    (trio_mcp.base._ports.RequestPort)."""

    def __init__(
        self,
        server: ModernServer,
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
        self._peer = peer
        #: TM-AUTH-BIND: a requestState is valid only for the principal it was sealed for.
        self._principal = principal.key if principal is not None else ""
        self._responder = responder
        self._scope = trio.CancelScope()
        self._stream: EventStream | None = None
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
            binding = (
                Binding.of(request, self._principal) if request.method in INPUT_METHODS else None
            )
            if binding is not None:
                self._load_answers(binding)
            with self._scope:
                async with watching_disconnect(self._responder, self.cancel):
                    outcome = await self._outcome(binding)
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

    async def _outcome(self, binding: Binding | None) -> Response | ErrorResponse:
        request = self._request
        support = self._task_support()
        if support is not TaskSupport.FORBIDDEN:
            run = self._server.tasks.start(
                self._call,
                front=self,
                principal=self.principal,
                peer=self._peer,
                unit=self._unit,
                answers=self._answers,
                publish=support is TaskSupport.REQUIRED,
                charge=self._charge,
            )
            if run is not None:
                return await self._via_task(run, binding)
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
            return self._input_required(ask, binding)

    def _input_required(self, ask: InputRequired, binding: Binding | None) -> Response:
        assert binding is not None
        self._server.stats.input_required += 1
        if self._server.config.tracer is not None:
            self._trace(TraceKind.INPUT_REQUIRED, detail=", ".join(ask.requests))
        state = self._server.codec.seal(binding, ask.answers, time.time())
        return Response(
            id=self._request.id, result=input_required_result(ask.requests, state)
        )

    def _task_support(self) -> TaskSupport:
        """TM-TASK-DECIDE: whether this call may run as a task: a call of a method that may
        (the method table's task_capable: tools/call) to a tool that may, from a client whose
        request declares the extension (TK-OPTIN)."""
        request = self._request
        spec = METHODS.get(request.method)
        if spec is None or not spec.task_capable or not declares_tasks(
            self._envelope.client_capabilities
        ):
            return TaskSupport.FORBIDDEN
        tool = named(request.method, request.params, ScopeKind.TOOL)
        return TaskSupport.FORBIDDEN if tool is None else self._server.app.task_support(tool)

    async def _via_task(self, run: TaskRun, binding: Binding | None) -> Response | ErrorResponse:
        """Wait for a run to end or to be worth a task (TM-TASK-DECIDE), and answer for it: its
        own outcome, its question (MRTR), or the task it became."""
        try:
            if not run.published:
                with trio.move_on_after(self._server.config.task_after):
                    await run.settled.wait()
            if not run.published and run.settled.is_set():
                outcome = run.outcome
                if isinstance(outcome, InputRequired):
                    return self._input_required(outcome, binding)
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

    def _load_answers(self, binding: Binding) -> None:
        params = self._request.params or {}
        fresh = read_input_responses(params, self._request.id)
        if "requestState" in params:
            self._answers = self._server.codec.open(params["requestState"], binding, time.time())
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
            status = error_status(message, started=self._stream is not None)
        body = dumps(message)
        if self._stream is None:
            await self._responder.reply(modern_reply(status, body))
            if server.config.tracer is not None:
                self._trace(TraceKind.REPLY, status=status, detail=_result_type(message))
            return self._responder.finished
        # MT-SSE-4 (SHOULD): the final response ends the stream.
        return await self._stream.finish(encode_message_event(data=body))

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
        return stream if await stream.open() else None


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
