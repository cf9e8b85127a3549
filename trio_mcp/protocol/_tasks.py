# The tasks extension (io.modelcontextprotocol/tasks, SEP-2663; spec/tasks.md): a modern
# tools/call answered at once with a task id while its work goes on, then polled, answered
# and cancelled by id from any connection. Pure: the state machine of one task, the wire
# shapes of its results, the rows of its requests in the method table, and the reading of
# tasks/* requests. The runtime owns the tasks
# (trio_mcp.runtime.tasks._tasks) and hands in ids, clocks and results.
from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from typing import Final

import attrs

from ._errors import ErrorCode, RemoteProtocolError
from ._jsonrpc import JSON, ErrorResponse, Request
from ._methods import Handler, Kind, Method, Sender, register
from ._modern import modern_error
from ._mrtr import InputRequest
from ._versions import Era

__all__ = [
    "ENDED_BY_SERVER",
    "PREEMPTED",
    "RESULT_TOO_LARGE",
    "TASKS_EXTENSION",
    "TASK_METHODS",
    "TASK_ROWS",
    "WORKER_STOPPED",
    "IllegalTransition",
    "TaskAction",
    "TaskFailure",
    "TaskQuery",
    "TaskSnapshot",
    "TaskStatus",
    "TaskSupport",
    "create_task_result",
    "declares_tasks",
    "get_task_result",
    "holder_unreachable",
    "is_terminal",
    "iso_time",
    "lost_task",
    "read_input_answers",
    "read_iso_time",
    "read_task_id",
    "read_task_query",
    "remaining_ttl",
    "stored_task_result",
    "task_ack_result",
    "task_lost",
    "task_not_found",
    "task_notification",
    "task_origin",
    "tasks_requirement",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"


class TaskSupport(enum.Enum):
    """Whether a tool runs as a task (TK-OPTIN: the server decides, per tool)."""

    #: Never: always answered on its own exchange.
    FORBIDDEN = "forbidden"
    #: When the client allows it and the work outlasts the server's short wait
    #: (``task_after``): quick calls stay synchronous.
    OPTIONAL = "optional"
    #: Always: a client without the extension gets -32021 before the tool runs.
    REQUIRED = "required"


class TaskStatus(enum.Enum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL: Final = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})

#: TK-STATES: working <-> input_required; either -> completed | failed | cancelled; a
#: terminal state never changes.
_MOVES: Final = {
    TaskStatus.WORKING: frozenset({TaskStatus.INPUT_REQUIRED, *_TERMINAL}),
    TaskStatus.INPUT_REQUIRED: frozenset({TaskStatus.WORKING, *_TERMINAL}),
}


class IllegalTransition(Exception):
    """A move the state machine does not have (a bug of the runtime, never the client's)."""


def declares_tasks(client_capabilities: Mapping[str, JSON]) -> bool:
    """TK-OPTIN: whether this request's own capabilities declare the extension."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION),
                                                          Mapping)


def tasks_requirement() -> dict[str, JSON]:
    """The client capabilities a task request needs, as -32021 names them (TK-GATE)."""
    return {"extensions": {TASKS_EXTENSION: {}}}


def iso_time(epoch: float) -> str:
    """TK-WIRE: an ISO 8601 UTC timestamp with date, "T", seconds and milliseconds."""
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen(kw_only=True)
class TaskSnapshot:
    """One task as clients see it, at one moment. A transition makes a new snapshot."""

    task_id: str
    status: TaskStatus
    created_at: float
    updated_at: float
    ttl_ms: int
    poll_interval_ms: int
    status_message: str | None = None
    #: The questions still open (input_required), by key.
    input_requests: Mapping[str, InputRequest] = attrs.field(factory=dict)
    #: The tool's CallToolResult (completed).
    result: Mapping[str, JSON] | None = None
    #: The JSON-RPC error the work ended with (failed): code, message, data.
    error: Mapping[str, JSON] | None = None

    def moved(
        self,
        status: TaskStatus,
        at: float,
        *,
        message: str | None = None,
        input_requests: Mapping[str, InputRequest] | None = None,
        result: Mapping[str, JSON] | None = None,
        error: Mapping[str, JSON] | None = None,
    ) -> TaskSnapshot:
        """The task after a transition at ``at`` (TK-STATES; TK-STATES: every transition,
        and every change of the open questions, bumps lastUpdatedAt).

        Raises:
            IllegalTransition: from a terminal state, or a move the machine lacks.
        """
        if self.status.terminal or (
            status is not self.status and status not in _MOVES[self.status]
        ):
            raise IllegalTransition(f"{self.status.value} -> {status.value}")
        if status is TaskStatus.INPUT_REQUIRED and not input_requests:
            raise IllegalTransition("input_required needs open questions")
        return attrs.evolve(
            self,
            status=status,
            updated_at=max(at, self.updated_at),
            status_message=message,
            input_requests=dict(input_requests or {}) if status is TaskStatus.INPUT_REQUIRED
            else {},
            result=result if status is TaskStatus.COMPLETED else None,
            error=error if status is TaskStatus.FAILED else None,
        )

    def expires_at(self) -> float:
        """TK-TTL: counted from creation."""
        return self.created_at + self.ttl_ms / 1000

    def fields(self) -> dict[str, JSON]:
        """The Task fields every task result carries (TK-WIRE)."""
        out: dict[str, JSON] = {
            "taskId": self.task_id,
            "status": self.status.value,
            "createdAt": iso_time(self.created_at),
            "lastUpdatedAt": iso_time(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out


def create_task_result(task: TaskSnapshot) -> dict[str, JSON]:
    """TK-CREATE: a tools/call answered with a task: flat, resultType "task", no
    requestState, no inputRequests, no result."""
    return {"resultType": "task", **task.fields()}


def get_task_result(task: TaskSnapshot) -> dict[str, JSON]:
    """TK-GET: the task and what its status carries: the open questions (all of them), the
    tool's result, or the error. resultType is "complete" (TM-TASK-GETTYPE)."""
    out: dict[str, JSON] = {"resultType": "complete", **task.fields()}
    if task.status is TaskStatus.INPUT_REQUIRED:
        out["inputRequests"] = {
            key: {"method": q.method, "params": dict(q.params or {})}
            for key, q in task.input_requests.items()
        }
    elif task.status is TaskStatus.COMPLETED and task.result is not None:
        out["result"] = dict(task.result)
    elif task.status is TaskStatus.FAILED and task.error is not None:
        out["error"] = dict(task.error)
    return out


def stored_task_result(task: Mapping[str, JSON]) -> dict[str, JSON]:
    """TK-GET for a task as a shared store keeps it (tasks/get's fields): the same answer
    as ``get_task_result`` gives for a task of this worker's."""
    return {"resultType": "complete", **task}


def task_ack_result() -> dict[str, JSON]:
    """TK-ACK: tasks/update and tasks/cancel are acknowledged with an empty complete
    result."""
    return {"resultType": "complete"}


@attrs.frozen
class TaskFailure:
    """TK-FAILED: why a task failed, as tasks/get shows it: its statusMessage, and the
    JSON-RPC error it ended with."""

    message: str | None
    error: Mapping[str, JSON] | None

    @classmethod
    def of_error(cls, response: ErrorResponse) -> TaskFailure:
        """A JSON-RPC error during the work; the message says why. MJ-ERR-5 / MJ-ERR-7: the
        error a task shows is the one a modern answer would carry."""
        response = modern_error(response)
        error: dict[str, JSON] = {"code": int(response.code), "message": response.message}
        if response.data is not None:
            error["data"] = response.data
        return cls(response.message, error)


def _internal(status: str, message: str) -> TaskFailure:
    return TaskFailure(status, {"code": int(ErrorCode.INTERNAL_ERROR), "message": message})


#: TM-TASK-BOUND: the result was larger than the server keeps for a task.
RESULT_TOO_LARGE: Final = _internal(
    "The result is larger than the server keeps for a task.",
    "Internal error: the task's result is too large to keep.",
)
#: The work ended with no outcome: its TTL ended it (TK-TTL), or shutdown did.
ENDED_BY_SERVER: Final = _internal(
    "The task was ended by the server.", "Internal error: the server ended the task."
)
#: TM-STORE-TASKS: the worker running it stopped, and its work with it.
WORKER_STOPPED: Final = _internal(
    "The worker of this server running this task has stopped.",
    "Internal error: the worker running this task stopped.",
)
#: TM-SEC-FAIR: the running tasks' pool took it for a client holding fewer.
PREEMPTED: Final = TaskFailure(
    "The server ended this task to make room for another client's: this client held more "
    "than its fair share of the running tasks. Retry later.",
    {"code": int(ErrorCode.SERVER_BUSY),
     "message": "Service Unavailable: ended for another client's task; retry."},
)


def task_notification(task: TaskSnapshot) -> dict[str, JSON]:
    """TK-NOTIFY: the params of notifications/tasks: the task as tasks/get shows it."""
    out = get_task_result(task)
    del out["resultType"]
    return out


def _invalid(why: str, request: Request) -> RemoteProtocolError:
    # TM-MOD-STATUS: the request passed every gate of the envelope; what its params name is
    # answered in-band.
    return RemoteProtocolError(
        f"Invalid params: {why}.", code=ErrorCode.INVALID_PARAMS, http_status=200,
        request_id=request.id,
    )


#: Task ids this server makes are 32 URL-safe characters; anything much longer is no id of
#: ours, and is refused before it is looked up or echoed.
_MAX_TASK_ID: Final = 128


def read_task_id(request: Request) -> str:
    """The taskId a tasks/* request names.

    Raises:
        RemoteProtocolError: -32602 when it is missing or not a string.
    """
    task_id = (request.params or {}).get("taskId")
    if not isinstance(task_id, str) or not task_id or len(task_id) > _MAX_TASK_ID:
        raise _invalid("taskId must be a task id string", request)
    return task_id


class TaskAction(enum.Enum):
    """What a tasks/* request asks of its task; each value is one of the extension's rows
    (TASK_ROWS), and every row is one of them."""

    #: TK-GET: its state, and its result or error once it has ended.
    GET = "tasks/get"
    #: TK-UPDATE: answers to the questions it is waiting on.
    UPDATE = "tasks/update"
    #: TK-CANCEL: stop it.
    CANCEL = "tasks/cancel"


#: TK-GET, TK-UPDATE, TK-CANCEL: the extension's requests, rows of the method table as any
#: extension's are (TM-EXT-ROWS, TM-TASK-EXT), registered when this module loads so that a
#: client in this process sends their Mcp-Name (TK-HEADERS: the task id); a server serves
#: them only once it installed the extension (``trio_mcp.app._tasks.Tasks``). tasks/result
#: and tasks/list are not among them (TM-TASK-NOLIST).
TASK_ROWS: Final = tuple(
    Method(
        name=action.value, kind=Kind.REQUEST, sent_by=Sender.CLIENT,
        eras=frozenset({Era.MODERN}), handler=Handler.EXTENSION, extension=TASKS_EXTENSION,
        target="taskId",
    )
    for action in TaskAction
)
register(TASK_ROWS)

#: TM-TASK-SERVED: the requests about a task that exists.
TASK_METHODS: Final = frozenset(row.name for row in TASK_ROWS)


@attrs.frozen
class TaskQuery:
    """A tasks/* request, read: which task, what of it, and an update's answers."""

    action: TaskAction
    task_id: str
    answers: Mapping[str, JSON] | None = None
    """tasks/update's inputResponses; None for any other action."""


def read_task_query(request: Request) -> TaskQuery:
    """Read a tasks/* request (after its header and capability gates: TM-TASK-ORDER).

    Raises:
        RemoteProtocolError: -32602 for a missing or malformed taskId, or an update's
            inputResponses that is not an object.
    """
    action = TaskAction(request.method)
    task_id = read_task_id(request)
    answers = read_input_answers(request) if action is TaskAction.UPDATE else None
    return TaskQuery(action, task_id, answers)


def task_not_found(request: Request) -> RemoteProtocolError:
    """TK-UNKNOWN: an id that names no task of this principal (never made, expired, or
    another's: one answer for all, so that ids leak nothing)."""
    return _invalid("no such task (unknown, expired, or not yours)", request)


def task_origin(task_id: str) -> str:
    """The worker a task id names (TM-STORE-TASKS): what comes before its "~", or ""."""
    origin, sep, _ = task_id.partition("~")
    return origin if sep else ""


_TERMINAL_VALUES: Final = frozenset(s.value for s in _TERMINAL)


def is_terminal(task: Mapping[str, JSON]) -> bool:
    """Whether a task as tasks/get shows it has ended (TK-STATES: it never moves again)."""
    return task.get("status") in _TERMINAL_VALUES


def read_iso_time(value: JSON) -> float | None:
    """The moment a timestamp of iso_time's names, as epoch seconds; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def remaining_ttl(task: Mapping[str, JSON], now: float) -> float:
    """The seconds a task as tasks/get shows it has left to live (TK-TTL: counted from its
    creation), 0 when it has none left or says nothing readable of it."""
    start, ttl_ms = read_iso_time(task.get("createdAt")), task.get("ttlMs")
    if start is None or isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        return 0.0
    return max(0.0, start + ttl_ms / 1000 - now)


def lost_task(task: Mapping[str, JSON], at: float) -> dict[str, JSON]:
    """TM-STORE-TASKS: a task as kept in a shared store (tasks/get's fields), once the
    worker running it is known to have stopped: failed, if it had not ended; an ended task
    stays as it ended, its result or error with it."""
    if is_terminal(task):
        return dict(task)
    kept = {k: v for k, v in task.items() if k not in ("inputRequests", "statusMessage")}
    return {
        **kept,
        "status": TaskStatus.FAILED.value,
        "lastUpdatedAt": iso_time(at),
        "statusMessage": WORKER_STOPPED.message,
        "error": dict(WORKER_STOPPED.error or {}),
    }


def task_lost(request: Request, task_id: str) -> RemoteProtocolError:
    """TM-STORE-TASKS: the worker that ran this task has stopped, and the task with it."""
    return RemoteProtocolError(
        "Invalid params: the worker of this server that ran this task has stopped; the "
        "task and its result are lost.",
        code=ErrorCode.INVALID_PARAMS,
        http_status=200,
        request_id=request.id,
        data={"taskId": task_id, "reason": "holder-gone"},
    )


def holder_unreachable(request: Request, task_id: str) -> RemoteProtocolError:
    """TM-STORE-TASKS: the worker running this task did not answer, yet its address is
    still kept: it may be out of reach for a moment, and its task live. Nothing is said of
    the task (TK-STATES: no state that its worker could contradict); the client retries."""
    return RemoteProtocolError(
        "Service Unavailable: the worker of this server running this task cannot be "
        "reached now; retry.",
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", "1"),),
        request_id=request.id,
        data={"taskId": task_id, "reason": "holder-unreachable"},
    )


def read_input_answers(request: Request) -> dict[str, JSON]:
    """tasks/update's inputResponses: a map of key to answer (TK-UPDATE; which keys count is
    the task's to say).

    Raises:
        RemoteProtocolError: -32602 when it is not an object.
    """
    answers = (request.params or {}).get("inputResponses")
    if not isinstance(answers, Mapping):
        raise _invalid("inputResponses must be an object of answers by key", request)
    return dict(answers)
