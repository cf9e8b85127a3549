"""The pure rules of the tasks extension (trio_mcp.protocol._tasks): the state machine of one
task, the wire shapes of its results, the reading of tasks/* requests; and the log limiter
whose one line per interval the runtime uses for what clients can repeat."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trio_mcp.protocol import RemoteProtocolError, Request
from trio_mcp.protocol._logtext import LogLimiter
from trio_mcp.protocol._mrtr import InputRequest
from trio_mcp.protocol._tasks import (
    IllegalTransition,
    TaskSnapshot,
    TaskStatus,
    create_task_result,
    declares_tasks,
    get_task_result,
    iso_time,
    read_input_answers,
    read_task_id,
    task_notification,
)

TERMINAL = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
QUESTION = InputRequest("elicitation/create", {"message": "Name?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string"}}}})


def task(**changes: Any) -> TaskSnapshot:
    fields: dict[str, Any] = {
        "task_id": "t1", "status": TaskStatus.WORKING, "created_at": 1000.0,
        "updated_at": 1000.0, "ttl_ms": 60_000, "poll_interval_ms": 500,
    }
    fields.update(changes)
    return TaskSnapshot(**fields)


def move(snapshot: TaskSnapshot, status: TaskStatus, at: float = 1001.0) -> TaskSnapshot:
    extra: dict[str, Any] = {}
    if status is TaskStatus.INPUT_REQUIRED:
        extra["input_requests"] = {"q": QUESTION}
    return snapshot.moved(status, at, **extra)


@pytest.mark.spec("TK-STATES")
@pytest.mark.parametrize(("start", "to"), list(itertools.product(TaskStatus, TaskStatus)))
def test_only_the_extensions_moves_are_allowed(start: TaskStatus, to: TaskStatus) -> None:
    """working and input_required move to each other and to any terminal state; a terminal
    state moves nowhere, not even to itself."""
    begin = task() if start is TaskStatus.WORKING else move(task(), start)
    allowed = not start.terminal and (to is not start or to is TaskStatus.INPUT_REQUIRED
                                      or to is TaskStatus.WORKING)
    if allowed:
        assert to == move(begin, to, 1002.0).status
    else:
        with pytest.raises(IllegalTransition):
            move(begin, to, 1002.0)


@pytest.mark.spec("TK-STATES")
def test_last_updated_moves_forward_only_and_payloads_follow_the_status() -> None:
    """Each transition bumps lastUpdatedAt, never backwards; only input_required keeps
    questions, only completed a result, only failed an error; input_required needs a
    question."""
    waiting = move(task(), TaskStatus.INPUT_REQUIRED, 1005.0)
    back = waiting.moved(TaskStatus.WORKING, 1003.0)
    done = back.moved(TaskStatus.COMPLETED, 1010.0, result={"content": []},
                      error={"code": 1, "message": "x"})

    assert (1005.0, 1005.0, 1010.0) == (waiting.updated_at, back.updated_at, done.updated_at)
    assert {} == back.input_requests and done.error is None
    assert {"content": []} == done.result
    with pytest.raises(IllegalTransition):
        task().moved(TaskStatus.INPUT_REQUIRED, 1001.0)


@pytest.mark.spec("TK-CREATE", "TK-WIRE", "TK-NOSTATE")
def test_create_result_is_flat_with_iso_times() -> None:
    """A CreateTaskResult is resultType "task" and the task's fields at the top level, times
    in ISO 8601 UTC with milliseconds; nothing else."""
    result = create_task_result(task(status_message="started"))

    assert {
        "resultType": "task", "taskId": "t1", "status": "working",
        "createdAt": "1970-01-01T00:16:40.000Z", "lastUpdatedAt": "1970-01-01T00:16:40.000Z",
        "ttlMs": 60_000, "pollIntervalMs": 500, "statusMessage": "started",
    } == result
    assert "2026-12-02T18:00:00.250Z" == iso_time(1796234400.25)


@pytest.mark.spec("TK-GET", "TM-TASK-GETTYPE", "TK-GETSTATES", "TK-TYPE")
def test_get_result_carries_what_the_status_carries() -> None:
    """tasks/get is resultType "complete": input_required lists its questions, completed its
    result, failed its error, the others nothing more; notifications/tasks carries the same
    without resultType."""
    waiting = get_task_result(move(task(), TaskStatus.INPUT_REQUIRED))
    done = get_task_result(task().moved(TaskStatus.COMPLETED, 1001, result={"content": []}))
    failed = get_task_result(task().moved(TaskStatus.FAILED, 1001, message="boom",
                                          error={"code": -32603, "message": "boom"}))
    cancelled = get_task_result(task().moved(TaskStatus.CANCELLED, 1001))

    assert {"q": {"method": "elicitation/create", "params": dict(QUESTION.params or {})}} == (
        waiting["inputRequests"])
    assert {"content": []} == done["result"] and "error" not in done
    assert {"code": -32603, "message": "boom"} == failed["error"] and "result" not in failed
    assert "boom" == failed["statusMessage"]
    assert not {"result", "error", "inputRequests"} & set(cancelled)
    assert {"complete"} == {r["resultType"] for r in (waiting, done, failed, cancelled)}
    note = task_notification(move(task(), TaskStatus.INPUT_REQUIRED))
    assert "resultType" not in note and "q" in note["inputRequests"]


@pytest.mark.spec("TK-OPTIN")
@pytest.mark.parametrize(("caps", "declared"), [
    ({}, False),
    ({"extensions": {}}, False),
    ({"extensions": {"io.modelcontextprotocol/tasks": {}}}, True),
    ({"extensions": {"io.modelcontextprotocol/tasks": True}}, False),
    ({"extensions": ["io.modelcontextprotocol/tasks"]}, False),
    ({"tasks": {}}, False),
])
def test_only_the_extension_object_declares_tasks(caps: dict[str, Any], declared: bool) -> None:
    """A request declares the extension with an object under capabilities.extensions, never
    with the 2025-11-25 ``tasks`` capability."""
    assert declared == declares_tasks(caps)


@pytest.mark.spec("TK-UNKNOWN", "TK-UPDATE")
@pytest.mark.parametrize("params", [
    {}, {"taskId": 5}, {"taskId": ""}, {"taskId": "x" * 129},
])
def test_a_task_request_without_a_usable_id_is_invalid_params(params: dict[str, Any]) -> None:
    """A tasks/* request whose taskId is missing, not a string, empty or far longer than any
    id this server makes gets -32602; tasks/update needs inputResponses to be an object."""
    with pytest.raises(RemoteProtocolError) as info:
        read_task_id(Request(id=1, method="tasks/get", params=params))
    assert -32602 == info.value.code
    with pytest.raises(RemoteProtocolError):
        read_input_answers(Request(id=1, method="tasks/update",
                                   params={"taskId": "t", "inputResponses": []}))
    assert {"k": 1} == read_input_answers(
        Request(id=1, method="tasks/update", params={"taskId": "t", "inputResponses": {"k": 1}}))


@pytest.mark.spec("TM-SEC-LOG")
def test_log_limiter_tail_lets_one_line_through_per_interval_and_counts_the_rest() -> None:
    """tail() is None while the interval runs, then the end of the next line says how many
    were held back."""
    now = [0.0]
    limiter = LogLimiter(10.0, clock=lambda: now[0])

    first = limiter.tail("failures")
    held = [limiter.tail("failures") for _ in range(3)]
    now[0] = 10.0
    after = limiter.tail("failures")
    now[0] = 20.0

    assert "" == first and [None, None, None] == held
    assert " (3 more failures not logged)" == after
    assert "" == limiter.tail()
