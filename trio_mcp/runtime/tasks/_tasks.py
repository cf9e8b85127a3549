# Tasks (the io.modelcontextprotocol/tasks extension, spec/tasks.md): a modern tools/call whose
# work outlives its exchange. A task's handler runs in a nursery that belongs to the server,
# under its own cancel scope: a dropped connection does not end it, tasks/cancel does, and so
# does its TTL. The state a client sees is a TaskSnapshot (trio_mcp.protocol._tasks), replaced
# at every transition; the questions a handler asks inside a task wait for tasks/update.
#
# A call starts as a TaskRun that is not yet published. The exchange that started it waits:
# a run that ends (or asks for input) before it is published is answered on that exchange as
# any modern request; a run that is published is answered with a CreateTaskResult, and from
# then on lives on its own until it ends and its TTL passes.
from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...base._ports import App, InputRequired
from ...protocol import (
    JSON,
    ErrorResponse,
    LocalProtocolError,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
)
from ...protocol._auth import Principal
from ...protocol._era import ModernCall
from ...protocol._mrtr import InputRequest, check_input_response, split_answers
from ...protocol._tasks import (
    ENDED_BY_SERVER,
    PREEMPTED,
    RESULT_TOO_LARGE,
    TaskFailure,
    TaskSnapshot,
    TaskStatus,
    read_iso_time,
)
from .._describe import TaskRunInfo
from .._handler import outcome_of
from .._pools import Charge
from .._reqstats import RequestMetrics
from ..modern._envport import EnvelopePort

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["TASK_FOOTPRINT", "RunOwner", "TaskRun", "split_answers"]

logger = logging.getLogger("trio_mcp.tasks")

#: What a published task holds besides its result (its run, snapshot, handler frame and
#: scope), measured with 1,000 tasks (benchmarks/run.py tasks): about 3.8 KiB.
TASK_FOOTPRINT = 4 * 1024


class RunOwner(Protocol):
    """What a run needs of the tasks it is one of (the TaskManager)."""

    app: App
    config: ServerConfig
    requests: RequestMetrics | None

    def new_task_id(self) -> str: ...

    def stopped(self, run: TaskRun) -> None:
        """The run's handler has ended: its running slot is free."""

    def discard(self, run: TaskRun) -> None:
        """A run that ended before it was published: it was never a task."""

    def published(self, run: TaskRun) -> tuple[TaskSnapshot, float]:
        """The run becomes a task: its first snapshot, and when its TTL ends (trio time)."""

    def kept(self, run: TaskRun) -> None:
        """A published task as it is now, for a shared store."""

    def changed(self, run: TaskRun) -> None: ...

    def holds(self, run: TaskRun) -> bool: ...

    def hold_result(self, run: TaskRun, size: int) -> bool: ...

    def keep_ended(self, run: TaskRun) -> None: ...


class Front(Protocol):
    """The exchange a run answers through until it is published (ModernExchange)."""

    @property
    def log_threshold(self) -> str | None: ...

    async def notify(self, notification: Notification) -> bool: ...

    def notify_now(self, notification: Notification) -> bool: ...




class TaskRun(EnvelopePort):
    """One tools/call that may become a task, then the task. It is its handler's port
    (trio_mcp.base._ports.RequestPort)."""

    def __init__(
        self,
        manager: RunOwner,
        call: ModernCall,
        *,
        front: Front,
        principal: Principal | None,
        owner: str,
        answers: Mapping[str, JSON],
        charge: Charge | None = None,
        peer: str | None = None,
    ) -> None:
        #: The answers the handler can be given: from the creating request's MRTR rounds,
        #: then from tasks/update.
        super().__init__(call, manager.config, answers)
        #: What its request is charged (TM-SEC-MEMORY), held until its handler ends.
        self._charge = charge
        #: Set when the running pool took this run for another client (TM-SEC-FAIR).
        self.preempted = False
        #: The bytes the ended task is kept with (TM-TASK-BOUND), its record's included.
        self.kept_bytes = 0
        self._manager = manager
        self._front: Front | None = front
        self.principal = principal
        #: The creating request's client address (RequestPort.peer).
        self.peer = peer
        #: TM-AUTH-BIND / TK-BIND: whose task this is.
        self.principal_key = principal.key if principal is not None else ""
        self.owner = owner
        self.task_id = manager.new_task_id()
        self.scope = trio.CancelScope()
        #: The questions open now, by key (input_required), and the event their answers set.
        self._open: dict[str, InputRequest] = {}
        #: Every question the handler has asked in this run, by key (TK-KEYS: a key names
        #: one question for the task's whole life).
        self._asked: dict[str, InputRequest] = {}
        self._answered = trio.Event()
        #: What the handler ended with, before publication: read by the front.
        self.outcome: Response | ErrorResponse | InputRequired | None = None
        self.settled = trio.Event()
        self.snapshot: TaskSnapshot | None = None
        #: When its TTL ends (trio time), once published.
        self.deadline = math.inf
        self._result_bytes = 0
        #: The handler's task, once it runs (describe()).
        self.task: trio.lowlevel.Task | None = None

    # -- lifetime ---------------------------------------------------------------------------

    def describe(self) -> TaskRunInfo:
        """This run as the inspector shows it; reads only."""
        status = self.status
        return TaskRunInfo(
            task=self.task,
            task_id=self.task_id,
            method=self._request.method,
            status=status,
            cancel_called=self.scope.cancel_called,
        )

    @property
    def published(self) -> bool:
        return self.snapshot is not None

    @property
    def status(self) -> TaskStatus | None:
        return None if self.snapshot is None else self.snapshot.status

    async def main(self) -> None:
        """The handler, in the tasks' nursery (TK-LIFE)."""
        self.task = trio.lowlevel.current_task()
        outcome: Response | ErrorResponse | InputRequired | None = None
        try:
            with self.scope:
                try:
                    outcome = await outcome_of(
                        lambda: self._manager.app.dispatch(self, self._request),
                        self._request,
                        self._manager.requests,
                    )
                except InputRequired as ask:
                    outcome = ask
        finally:
            self.outcome = outcome
            # A task that ended gives its running slot back at once (TM-TASK-BOUND).
            self._manager.stopped(self)
            if self.published:
                self._end(outcome)
            else:
                self._manager.discard(self)
            self.settled.set()
            # TM-SEC-MEMORY: the arguments are the handler's, and it is done with them.
            self._forget_arguments()
            if self._charge is not None:
                self._charge.drop()
                self._charge = None

    def publish(self) -> TaskSnapshot:
        """The run becomes a task: visible to tasks/* from now (TK-CREATE: stored before the
        CreateTaskResult goes out)."""
        assert self.snapshot is None
        self._front = None
        self.snapshot, self.deadline = self._manager.published(self)
        self._manager.kept(self)
        self._told()
        return self.snapshot

    def abandon(self) -> None:
        """The exchange that started the run left before it was published: a request like
        any other, it ends with its client (MU-CANCEL-1)."""
        if not self.published:
            self.scope.cancel()

    def _move(self, status: TaskStatus, *, at: float | None = None, **kwargs: Any) -> None:
        assert self.snapshot is not None
        self.snapshot = self.snapshot.moved(
            status, time.time() if at is None else at, **kwargs
        )
        self._manager.changed(self)
        self._told()

    def _told(self) -> None:
        """TM-OTEL-EVENTS: the task's status, on the span of its request while it runs."""
        requests = self._manager.requests
        if requests is not None and requests.telemetry is not None and self.snapshot:
            requests.telemetry.request_event(self._request, "mcp.task.status", {
                "mcp.task.id": self.task_id, "mcp.task.status": self.snapshot.status.value,
            })

    def _end(self, outcome: Response | ErrorResponse | InputRequired | None) -> None:
        assert self.snapshot is not None
        self._open.clear()
        if self.snapshot.status.terminal or not self._manager.holds(self):
            # TK-CANCEL: a cancelled task keeps nothing its work produced later; an expired
            # one (TK-TTL) is gone already.
            return
        if isinstance(outcome, Response):
            size = len(dumps(outcome.result))
            if not self._manager.hold_result(self, size):
                self._move(
                    TaskStatus.FAILED,
                    message=RESULT_TOO_LARGE.message,
                    error=RESULT_TOO_LARGE.error,
                )
                self._manager.keep_ended(self)
                return
            self._result_bytes = size
            self._move(TaskStatus.COMPLETED, result=outcome.result)
            return
        elif isinstance(outcome, ErrorResponse):
            # TK-FAILED: a JSON-RPC error during the work; statusMessage says why.
            failure = TaskFailure.of_error(outcome)
            self._move(TaskStatus.FAILED, message=failure.message, error=failure.error)
        else:
            # Ended without an outcome: its scope was cancelled by the TTL or by shutdown.
            self._move(
                TaskStatus.FAILED,
                message=ENDED_BY_SERVER.message,
                error=ENDED_BY_SERVER.error,
            )
        self._manager.keep_ended(self)

    def preempt(self) -> None:
        """TM-SEC-FAIR: the running pool takes this run for a client holding fewer. A task
        fails, saying why, and its work is cancelled; a run still deciding ends, and its
        exchange answers 503 (``ModernExchange._via_task``)."""
        self.preempted = True
        self.scope.cancel()
        if self.snapshot is None or self.snapshot.status.terminal:
            return
        self._open.clear()
        self._move(TaskStatus.FAILED, message=PREEMPTED.message, error=PREEMPTED.error)
        self._answered.set()
        self._manager.keep_ended(self)

    def ended_elsewhere(self, task: Mapping[str, JSON]) -> bool:
        """TM-STORE-TASKS: another worker declared this task failed (this one had been out
        of its reach for longer than its address lives), and the store keeps that end. The
        task ends here the same way, its work cancelled (TK-STATES: one end for everyone).
        False when it had ended here already, in another way."""
        assert self.snapshot is not None
        if self.snapshot.status.terminal:
            return self.snapshot.status.value == task.get("status")
        error = task.get("error")
        message = task.get("statusMessage")
        self._open.clear()
        self._move(
            TaskStatus.FAILED,
            at=read_iso_time(task.get("lastUpdatedAt")),
            message=message if isinstance(message, str) else None,
            error=error if isinstance(error, Mapping) else None,
        )
        self.scope.cancel()
        self._answered.set()
        return True

    def kept_with(self, nbytes: int) -> None:
        """The ended task is kept with ``nbytes`` (TM-TASK-BOUND), its record's included."""
        self.kept_bytes = nbytes

    def release(self) -> int:
        """The bytes this ended task was kept with, given back (TK-TTL); what it held of its
        work is dropped with it."""
        held, self.kept_bytes = self.kept_bytes, 0
        self._result_bytes = 0
        return held

    @property
    def result_bytes(self) -> int:
        return self._result_bytes

    # -- what tasks/* do --------------------------------------------------------------------

    def cancel(self) -> None:
        """TK-CANCEL: cancelled at once (terminal within the request), its work's scope
        cancelled; a task already terminal is left as it is (idempotent)."""
        if self.snapshot is None or self.snapshot.status.terminal:
            return
        self._open.clear()
        self._move(TaskStatus.CANCELLED, message="Cancelled by the client.")
        self.scope.cancel()
        self._answered.set()
        self._manager.keep_ended(self)

    def update(self, answers: Mapping[str, JSON], request: Request) -> None:
        """TK-UPDATE: answers to open questions, applied before the ack, so the very next
        tasks/get shows them (TM-TASK-CONSISTENT). Keys of no open question are ignored; an
        answer of the wrong shape refuses the whole update (-32602), nothing applied."""
        assert self.snapshot is not None
        if self.snapshot.status.terminal:
            return
        fresh = {k: v for k, v in answers.items() if k in self._open}
        for key, value in fresh.items():
            try:
                check_input_response(key, self._open[key], value)
            except RemoteProtocolError as exc:
                raise RemoteProtocolError(
                    exc.message, code=exc.code, http_status=200, data=exc.data,
                    request_id=request.id,
                ) from None
        if not fresh:
            return
        for key, value in fresh.items():
            self._answers[key] = value
            del self._open[key]
        if self._open:
            self._move(TaskStatus.INPUT_REQUIRED, input_requests=self._open)
        else:
            self._move(TaskStatus.WORKING)
        self._answered.set()
        self._answered = trio.Event()

    # -- the port ---------------------------------------------------------------------------

    @property
    def log_threshold(self) -> str | None:
        # A published task has no stream to log to.
        return self._front.log_threshold if self._front is not None else None

    @property
    def finished(self) -> bool:
        return self.snapshot is not None and self.snapshot.status.terminal

    async def notify(self, notification: Notification) -> bool:
        await trio.lowlevel.checkpoint()
        if self._front is not None:
            return await self._front.notify(notification)
        # TM-TASK-STREAMLESS: a published task's own notifications have no stream to go on.
        return False

    def notify_now(self, notification: Notification) -> bool:
        return self._front.notify_now(notification) if self._front is not None else False

    def _keep_keys(self, requests: Mapping[str, InputRequest]) -> None:
        for key, question in requests.items():
            if self._asked.setdefault(key, question) != question:
                # TK-KEYS: a key is never given to another question; the answer the client
                # gave under it was to the first.
                raise LocalProtocolError(
                    f"input key {key!r} was asked before for another question; give each "
                    "question a key of its own"
                )

    async def _answers_later(
        self, missing: Mapping[str, InputRequest]
    ) -> dict[str, Mapping[str, JSON]]:
        """Before publication, as any modern request: InputRequired. In a task (TK-INPUT):
        the questions become the task's inputRequests, and the answers come by
        tasks/update, however long that takes within the TTL (the client polls)."""
        if not self.published:
            return await super()._answers_later(missing)
        reused = [key for key in missing if key in self._open]
        if reused:
            raise LocalProtocolError(
                f"input key {reused[0]!r} is already asked and unanswered in this task"
            )
        self._open.update(missing)
        self._move(TaskStatus.INPUT_REQUIRED, input_requests=self._open)
        while any(key not in self._answers for key in missing):
            await self._answered.wait()
        return split_answers(missing, self._answers)[0]
