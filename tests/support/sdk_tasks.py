"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on the client side, for the
interop tests: the `mcp` 2.3.0 SDK has the generic extension machinery (SEP-2133:
ClientExtension, ResultClaim) but no tasks of its own, so these few models and requests are
ours. Plain SDK API: nothing patched, nothing private imported.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


# -- wire models (MCPModel's alias generator turns snake_case into camelCase) ---------------------


class CreateTaskResult(types.Result):
    """The flat `resultType: "task"` answer to tools/call."""

    # ResultClaim insists on exactly Literal["task"] here.
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class GetTaskResult(types.Result):
    """tasks/get: resultType "complete" + the Task fields + the status payload."""

    result_type: str = "complete"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, Any] | None = None  # status input_required
    result: dict[str, Any] | None = None  # status completed: a CallToolResult
    error: dict[str, Any] | None = None  # status failed: {code, message, data?}


class TaskAck(types.Result):
    """tasks/update and tasks/cancel answer exactly {resultType: "complete"}."""

    result_type: str = "complete"


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


# `name_param` is the SDK's hook (mcp_types.Request.name_param) for mirroring a params key
# into the Mcp-Name header; assign it bare (no annotation), as the SDK's docstring says.
class GetTaskRequest(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTaskRequest(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTaskRequest(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


# -- calls ----------------------------------------------------------------------------------------


async def get_task(session: Any, task_id: str) -> GetTaskResult:
    request = GetTaskRequest(params=TaskIdParams(task_id=task_id))
    result: GetTaskResult = await session.send_request(request, GetTaskResult)
    return result


async def update_task(session: Any, task_id: str, input_responses: dict[str, Any]) -> TaskAck:
    params = UpdateTaskParams(task_id=task_id, input_responses=input_responses)
    ack: TaskAck = await session.send_request(UpdateTaskRequest(params=params), TaskAck)
    return ack


async def cancel_task(session: Any, task_id: str) -> TaskAck:
    request = CancelTaskRequest(params=TaskIdParams(task_id=task_id))
    ack: TaskAck = await session.send_request(request, TaskAck)
    return ack


_InputRequest: TypeAdapter[Any] = TypeAdapter(types.InputRequest)


async def poll_to_terminal(session: Any, task_id: str, *, interval: float = 0.2) -> GetTaskResult:
    """Poll tasks/get; answer input_required through the session's own callbacks."""
    answered: set[str] = set()
    while True:
        got = await get_task(session, task_id)
        if got.status in TERMINAL:
            return got
        if got.status == "input_required" and got.input_requests:
            responses: dict[str, Any] = {}
            for key, raw in got.input_requests.items():
                if key in answered:
                    continue
                request = _InputRequest.validate_python(raw, by_name=False)
                ctx = types_ctx(session)
                answer = await session.dispatch_input_request(ctx, request)
                responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                answered.add(key)
            if responses:
                await update_task(session, task_id, responses)
                continue
        await anyio.sleep((got.poll_interval_ms or interval * 1000) / 1000)


def types_ctx(session: Any) -> Any:
    from mcp.client import ClientRequestContext

    return ClientRequestContext(session=session, request_id="task-input", meta=None)


class TasksExtension(ClientExtension):
    """Advertises the extension (in every request's _meta clientCapabilities.extensions) and
    claims resultType "task" on tools/call; Client.call_tool then resolves it by polling."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(
        self, created: CreateTaskResult, ctx: ClaimContext
    ) -> types.CallToolResult:
        final = await poll_to_terminal(ctx.session, created.task_id)
        if final.status == "completed" and final.result is not None:
            return types.CallToolResult.model_validate(final.result, by_name=False)
        message = (final.error or {}).get("message") or final.status_message or final.status
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"task {final.status}: {message}")],
            is_error=True,
        )
