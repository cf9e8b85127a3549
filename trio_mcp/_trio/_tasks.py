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

import collections
import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from .._ports import App, ClientCapabilityError, InputRequired
from ..protocol import (
    JSON,
    ErrorCode,
    ErrorResponse,
    LocalProtocolError,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
)
from ..protocol._auth import Principal
from ..protocol._era import ModernCall
from ..protocol._fair import UnitPolicy
from ..protocol._headers import Headers
from ..protocol._modern import modern_error
from ..protocol._mrtr import InputRequest, check_input_response
from ..protocol._tasks import (
    TASK_METHODS,
    TaskSnapshot,
    TaskStatus,
    get_task_result,
    read_input_answers,
    read_iso_time,
    read_task_id,
    task_not_found,
)
from ._describe import TaskRunInfo
from ._envport import EnvelopePort
from ._handler import outcome_of
from ._memory import MemoryReleaser
from ._pools import Charge, Pool
from ._reqstats import RequestMetrics

if TYPE_CHECKING:
    from .._config import ServerConfig

__all__ = ["TASK_FOOTPRINT", "TaskManager", "TaskRun", "TaskStats"]

logger = logging.getLogger("trio_mcp.tasks")

#: What a published task holds besides its result (its run, snapshot, handler frame and
#: scope), measured with 1,000 tasks (benchmarks/run.py tasks): about 3.8 KiB.
TASK_FOOTPRINT = 4 * 1024


class Front(Protocol):
    """The exchange a run answers through until it is published (ModernExchange)."""

    @property
    def log_threshold(self) -> str | None: ...

    async def notify(self, notification: Notification) -> bool: ...

    def notify_now(self, notification: Notification) -> bool: ...

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError: ...


class TaskStats:
    """Totals of the tasks since the server started (TM-BP-COUNTERS)."""

    def __init__(self) -> None:
        self.created = 0
        """Runs published as tasks."""
        self.answered_at_once = 0
        """Runs that ended (or asked for input) before they became tasks."""
        self.completed = 0
        self.failed = 0
        self.cancelled = 0
        self.expired = 0
        """Tasks freed at the end of their TTL (those still running were cancelled)."""
        self.refused = 0
        """Calls that found no room (TM-TASK-BOUND): every running slot taken, and their
        client holding its fair share or more (TM-SEC-FAIR)."""
        self.preempted = 0
        """Running tasks ended (failed) to make room for a client holding fewer (TM-SEC-FAIR)."""
        self.evicted = 0
        """Ended tasks deleted before their TTL to make room for a client keeping less
        (TM-SEC-FAIR), or because even their record found no room."""
        self.withdrawn = 0
        """Tasks whose CreateTaskResult could not reach their client (TM-TASK-WITHDRAW)."""
        self.results_too_large = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


def split_answers(
    requests: Mapping[str, InputRequest], answers: Mapping[str, JSON]
) -> tuple[dict[str, Mapping[str, JSON]], dict[str, InputRequest]]:
    """The questions ``answers`` already answers (each answer checked, MU-MRTR-4), and the
    ones still open."""
    got: dict[str, Mapping[str, JSON]] = {}
    missing: dict[str, InputRequest] = {}
    for key, question in requests.items():
        if key in answers:
            got[key] = check_input_response(key, question, answers[key])
        else:
            missing[key] = question
    return got, missing


class TaskRun(EnvelopePort):
    """One tools/call that may become a task, then the task. It is its handler's port
    (trio_mcp._ports.RequestPort)."""

    def __init__(
        self,
        manager: TaskManager,
        call: ModernCall,
        *,
        front: Front,
        principal: Principal | None,
        owner: str,
        answers: Mapping[str, JSON],
        charge: Charge | None = None,
    ) -> None:
        super().__init__(call, manager.config)
        #: What its request is charged (TM-SEC-MEMORY), held until its handler ends.
        self._charge = charge
        #: Set when the running pool took this run for another client (TM-SEC-FAIR).
        self.preempted = False
        #: The bytes the ended task is kept with (TM-TASK-BOUND), its record's included.
        self.kept_bytes = 0
        self._manager = manager
        self._front: Front | None = front
        self.principal = principal
        #: TM-AUTH-BIND / TK-BIND: whose task this is.
        self.principal_key = principal.key if principal is not None else ""
        self.owner = owner
        self.task_id = manager.new_task_id()
        self.scope = trio.CancelScope()
        #: The answers the handler can be given: from the creating request's MRTR rounds,
        #: then from tasks/update.
        self._answers: dict[str, JSON] = dict(answers)
        #: The answers used before publication, to seal into a requestState (MRTR).
        self._used: dict[str, JSON] = {}
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
            status="deciding" if status is None else str(status.value),
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
        self.snapshot = self._manager.published(self)
        self._manager.kept(self)
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
                    message="The result is larger than the server keeps for a task.",
                    error={"code": int(ErrorCode.INTERNAL_ERROR),
                           "message": "Internal error: the task's result is too large to keep."},
                )
                self._manager.keep_ended(self)
                return
            self._result_bytes = size
            self._move(TaskStatus.COMPLETED, result=outcome.result)
            return
        elif isinstance(outcome, ErrorResponse):
            # MJ-ERR-5 / MJ-ERR-7: the error a task shows is the one a modern answer carries.
            outcome = modern_error(outcome)
            error: dict[str, JSON] = {"code": int(outcome.code), "message": outcome.message}
            if outcome.data is not None:
                error["data"] = outcome.data
            # TK-FAILED: a JSON-RPC error during the work; statusMessage says why.
            self._move(TaskStatus.FAILED, message=outcome.message, error=error)
        else:
            # Ended without an outcome: its scope was cancelled by the TTL or by shutdown.
            self._move(
                TaskStatus.FAILED,
                message="The task was ended by the server.",
                error={"code": int(ErrorCode.INTERNAL_ERROR),
                       "message": "Internal error: the server ended the task."},
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
        self._move(
            TaskStatus.FAILED,
            message="The server ended this task to make room for another client's: this "
            "client held more than its fair share of the running tasks. Retry later.",
            error={"code": int(ErrorCode.SERVER_BUSY),
                   "message": "Service Unavailable: ended for another client's task; retry."},
        )
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

    async def request(
        self, method: str, params: Mapping[str, JSON] | None, *, timeout: float
    ) -> Mapping[str, JSON]:
        raise LocalProtocolError(
            f"Cannot send {method} from a task: ask for input with ctx.elicit, ctx.sample or "
            "ctx.list_roots."
        )

    async def ask(
        self, requests: Mapping[str, InputRequest], *, timeout: float
    ) -> dict[str, Mapping[str, JSON]]:
        """Before publication, as a modern request: the answers of its retry, or
        InputRequired. In a task (TK-INPUT): the questions become the task's inputRequests,
        and the answer comes by tasks/update, however long that takes within the TTL (the
        client polls; ``timeout`` does not apply)."""
        await trio.lowlevel.checkpoint()
        for key, question in requests.items():
            if self._asked.setdefault(key, question) != question:
                # TK-KEYS: a key is never given to another question; the answer the client
                # gave under it was to the first.
                raise LocalProtocolError(
                    f"input key {key!r} was asked before for another question; give each "
                    "question a key of its own"
                )
        got, missing = split_answers(requests, self._answers)
        if not self.published:
            self._used.update({k: self._answers[k] for k in got})
            if missing:
                raise InputRequired(missing, self._used)
            return got
        if not missing:
            return got
        reused = [key for key in missing if key in self._open]
        if reused:
            raise LocalProtocolError(
                f"input key {reused[0]!r} is already asked and unanswered in this task"
            )
        self._open.update(missing)
        self._move(TaskStatus.INPUT_REQUIRED, input_requests=self._open)
        while any(key not in self._answers for key in missing):
            await self._answered.wait()
        got.update(split_answers(missing, self._answers)[0])
        return got

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError:
        if self._front is not None:
            return self._front.capability_error(required)
        # Inside a task the client cannot be told on the wire: the task fails with it.
        return ClientCapabilityError(
            f"Missing required client capability: {', '.join(sorted(required))}.",
            code=ErrorCode.MISSING_CLIENT_CAPABILITY,
            data={"requiredCapabilities": dict(required)},
        )


class TaskManager:
    """The tasks of one runtime: their nursery, their table, their bounds and TTLs."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        on_change: Callable[[TaskSnapshot], None] | None = None,
        releaser: MemoryReleaser | None = None,
        requests: RequestMetrics | None = None,
        origin: str = "",
        keep: Callable[[TaskSnapshot, str], None] | None = None,
        units: UnitPolicy | None = None,
    ) -> None:
        self.app = app
        #: TM-SEC-UNIT: whose share a call takes, when its caller does not say.
        self._units = units if units is not None else UnitPolicy.of(
            ipv4_prefix=config.client_ipv4_prefix,
            ipv6_prefix=config.client_ipv6_prefix,
            trusted_proxies=config.trusted_proxies,
            header=config.client_address_header,
        )
        #: This worker's name among those sharing a store: the start of its task ids
        #: (TM-STORE-TASKS); "" for a server alone.
        self.origin = origin
        #: Told of every change of a published task, with its owner's key, to keep it in a
        #: shared store (TM-STORE-TASKS).
        self._keep = keep
        self.requests = requests
        #: TM-SESS-RELEASE: what expired tasks held counts toward the next heap trim.
        self._releaser = releaser
        self.config = config
        self.stats = TaskStats()
        self._on_change = on_change
        self._nursery: trio.Nursery | None = None
        #: Every run alive: published tasks, and runs still deciding.
        self.runs: dict[str, TaskRun] = {}
        #: TM-TASK-BOUND / TM-SEC-FAIR: the runs whose handler runs (deciding or published),
        #: by client; a full pool takes the newest of the client holding the most.
        self.running: Pool[TaskRun] = Pool(
            "tasks_running", config.max_tasks, evict=self._preempt, pick=_newest
        )
        #: TM-TASK-BOUND / TM-SEC-FAIR: the ended tasks kept until their TTL, in bytes (their
        #: result and record), by client, oldest first; a full pool deletes the oldest of the
        #: client keeping the most, or a client's own oldest when it keeps the most.
        self.retained: Pool[TaskRun] = Pool(
            "tasks_retained", config.max_task_results_memory, evict=self._evict_kept,
            replace=_oldest,
        )
        #: Published tasks in order of their TTL's end: one TTL for all, so creation order.
        self._expiry: collections.deque[TaskRun] = collections.deque()
        #: Runs in _expiry forgotten before their TTL (compacted away when they are many).
        self._expiry_dead = 0
        self._expiry_changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery the tasks run in, and the TTLs' end (TK-TTL)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._expire_forever()
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def stop(self) -> None:
        """Shutdown (TM-TASK-SHUTDOWN): every task's work is cancelled now; with the server
        refusing requests, no client could read what they would produce."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _expire_forever(self) -> None:
        while True:
            if not self._expiry:
                await self._expiry_changed.wait()
                self._expiry_changed = trio.Event()
                continue
            head = self._expiry[0]
            await trio.sleep_until(head.deadline)
            now = trio.current_time()
            while self._expiry and self._expiry[0].deadline <= now:
                self._expire(self._expiry.popleft())

    def _expire(self, run: TaskRun) -> None:
        # TK-TTL: nothing of a task outlives its TTL; work still running is cancelled.
        run.scope.cancel()
        if self.runs.get(run.task_id) is run:
            self.stats.expired += 1
            self._forget(run)
        else:
            self._expiry_dead -= 1

    # -- the calls ---------------------------------------------------------------------------

    def start(
        self,
        call: ModernCall,
        *,
        front: Front,
        principal: Principal | None,
        peer: str | None = None,
        unit: str | None = None,
        answers: Mapping[str, JSON],
        publish: bool,
        charge: Charge | None = None,
    ) -> TaskRun | None:
        """Start a call's handler as a run in the tasks' nursery; published at once with
        ``publish``. ``unit`` is its client (TM-SEC-UNIT; without it, the principal's or
        ``peer``'s); ``charge`` what its request is charged, which the run holds until its
        handler ends. None when there is no room (TM-TASK-BOUND) or the server is stopping."""
        if unit is not None:
            owner = unit
        elif principal is not None:
            owner = self._units.of_request(principal.key, None, _NO_HEADERS).key
        else:
            owner = self._units.of_address(peer).key
        if self._nursery is None or not self.running.admit(owner):
            self.stats.refused += 1
            return None
        run = TaskRun(
            self, call, front=front, principal=principal, owner=owner, answers=answers,
            charge=charge,
        )
        if charge is not None:
            charge.hold()
        self.runs[run.task_id] = run
        self.running.add(owner, run)
        if publish:
            run.publish()
        self._nursery.start_soon(run.main, name=f"task {call.request.method}")
        return run

    def published(self, run: TaskRun) -> TaskSnapshot:
        now = time.time()
        ttl_ms = max(1, round(self.config.task_ttl * 1000))
        snapshot = TaskSnapshot(
            task_id=run.task_id,
            status=TaskStatus.WORKING,
            created_at=now,
            updated_at=now,
            ttl_ms=ttl_ms,
            poll_interval_ms=max(1, round(self.config.task_poll_interval * 1000)),
        )
        run.deadline = trio.current_time() + self.config.task_ttl
        self._expiry.append(run)
        self._expiry_changed.set()
        self.stats.created += 1
        return snapshot

    def withdraw(self, run: TaskRun) -> None:
        """TM-TASK-WITHDRAW: a published task whose creator never learnt its id: its work is
        cancelled and it is forgotten at once."""
        run.scope.cancel()
        if self.runs.get(run.task_id) is run:
            self.stats.withdrawn += 1
            self._forget(run)

    def discard(self, run: TaskRun) -> None:
        """A run that ended before it was published: it was never a task."""
        if self.runs.get(run.task_id) is run:
            self.stats.answered_at_once += 1
            self._forget(run)

    def stopped(self, run: TaskRun) -> None:
        """A run's handler has ended: its running slot is free at once (TM-TASK-BOUND)."""
        self.running.discard(run)

    def _preempt(self, run: TaskRun) -> None:
        """The running pool took ``run`` for another client (TM-SEC-FAIR)."""
        self.stats.preempted += 1
        run.preempt()

    def _forget(self, run: TaskRun) -> None:
        del self.runs[run.task_id]
        self.running.discard(run)
        self.retained.discard(run)
        held = run.release()
        if run.published:
            if run.deadline > trio.current_time():
                # Its entry in the expiry queue is dead now; the queue is compacted once
                # dead entries outnumber the live tasks, so that churn cannot grow it.
                self._expiry_dead += 1
                if self._expiry_dead > len(self.runs) + 64:
                    self._expiry = collections.deque(
                        r for r in self._expiry if self.runs.get(r.task_id) is r
                    )
                    self._expiry_dead = 0
            if self._releaser is not None:
                # TM-SESS-RELEASE: what the task kept (its record's share included).
                self._releaser.freed(max(held, TASK_FOOTPRINT))

    def holds(self, run: TaskRun) -> bool:
        return self.runs.get(run.task_id) is run

    def hold_result(self, run: TaskRun, size: int) -> bool:
        """Room in the kept pool for ``run``'s result of ``size`` bytes and its record
        (TM-TASK-BOUND, TM-SEC-FAIR); False: it is too large to keep."""
        amount = TASK_FOOTPRINT + size
        if size > self.config.max_task_result_bytes or not self.retained.admit(run.owner, amount):
            self.stats.results_too_large += 1
            return False
        run.kept_bytes = amount
        self.retained.add(run.owner, run, amount)
        return True

    def keep_ended(self, run: TaskRun) -> None:
        """``run`` ended (TK-LIFE): kept until its TTL in the kept pool, with its result when
        ``hold_result`` found room for it, else its record alone; a record that finds no room
        either is deleted now (TM-SEC-FAIR)."""
        if run in self.retained or not self.holds(run):
            return
        if not self.retained.admit(run.owner, TASK_FOOTPRINT):
            self.stats.evicted += 1
            self._forget(run)
            return
        run.kept_bytes = TASK_FOOTPRINT
        self.retained.add(run.owner, run, TASK_FOOTPRINT)

    def _evict_kept(self, run: TaskRun) -> None:
        """The kept pool deleted ``run`` for another (TM-SEC-FAIR): tasks/get now answers
        that it is unknown, as after its TTL."""
        if self.holds(run):
            self.stats.evicted += 1
            self._forget(run)

    def changed(self, run: TaskRun) -> None:
        status = run.status
        if status is TaskStatus.COMPLETED:
            self.stats.completed += 1
        elif status is TaskStatus.FAILED:
            self.stats.failed += 1
        elif status is TaskStatus.CANCELLED:
            self.stats.cancelled += 1
        if self._on_change is not None and run.snapshot is not None:
            self._on_change(run.snapshot)
        self.kept(run)

    def ended_elsewhere(self, task_id: str, task: Mapping[str, JSON]) -> None:
        """The store holds an end of a task of this worker that another worker wrote
        (TM-STORE-TASKS): the task takes it, if it has not ended here otherwise (logged:
        its clients here and elsewhere have seen two ends)."""
        run = self.runs.get(task_id)
        if run is None or run.snapshot is None or task.get("status") != "failed":
            return
        if not run.ended_elsewhere(task):
            logger.warning(
                "task %s ended %s here, but another worker had declared it failed",
                task_id[:12], run.snapshot.status.value,
            )

    def kept(self, run: TaskRun) -> None:
        """A published task as it is now, for a shared store (TM-STORE-TASKS)."""
        if self._keep is not None and run.snapshot is not None:
            self._keep(run.snapshot, run.principal_key)

    # -- tasks/* ----------------------------------------------------------------------------

    def new_task_id(self) -> str:
        """A fresh task id: 192 random bits, after the name of the worker running it when
        several share a store (``<origin>~<random>``), so that any worker can tell where a
        task runs (TM-STORE-TASKS)."""
        token = secrets.token_urlsafe(24)
        return f"{self.origin}~{token}" if self.origin else token

    def follower(self, principal: Principal | None) -> Callable[[str], bool]:
        """TK-NOTIFY / TK-BIND: which task ids a listener of ``principal`` may follow."""
        return lambda task_id: self.find(task_id, principal) is not None

    def find(self, task_id: str, principal: Principal | None) -> TaskRun | None:
        """TK-BIND: the published task ``task_id`` of this principal; None for any other."""
        run = self.runs.get(task_id)
        key = principal.key if principal is not None else ""
        if run is None or not run.published or run.principal_key != key:
            return None
        return run

    def answer(self, request: Request, principal: Principal | None) -> dict[str, JSON]:
        """The result of a tasks/get, tasks/update or tasks/cancel (after the header and
        capability gates: TK-GATE).

        Raises:
            RemoteProtocolError: -32602 for an unknown id or malformed params.
        """
        assert request.method in TASK_METHODS
        task_id = read_task_id(request)
        answers = read_input_answers(request) if request.method == "tasks/update" else None
        run = self.find(task_id, principal)
        if run is None or run.snapshot is None:
            raise task_not_found(request)
        if request.method == "tasks/get":
            return get_task_result(run.snapshot)
        if request.method == "tasks/cancel":
            run.cancel()
        else:
            assert answers is not None
            run.update(answers, request)
        # TK-ACK: an update and a cancel are acknowledged with an empty complete result.
        return {"resultType": "complete"}

    def statistics(self) -> dict[str, int]:
        return {
            **{f"tasks_{k}": v for k, v in self.stats.as_dict().items()},
            "tasks_alive": len(self.runs),
            "tasks_running": len(self.running),
            "tasks_result_bytes": self.retained.total,
        }


def _newest(runs: dict[TaskRun, None]) -> TaskRun:
    """The run of a client that the running pool takes: its newest, which has done least."""
    return next(reversed(runs))


def _oldest(runs: dict[TaskRun, None]) -> TaskRun | None:
    return next(iter(runs), None)


_NO_HEADERS: Final = Headers([])
