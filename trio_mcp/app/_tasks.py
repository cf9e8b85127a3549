# The tasks extension (io.modelcontextprotocol/tasks, SEP-2663; spec/tasks.md) as an
# extension of the extension API (app/_extension.py): it declares itself in server/discover
# while some tool may run as a task, serves tasks/get, tasks/update and tasks/cancel (its rows,
# protocol/_tasks.py TASK_ROWS) from the runtime's engine for it, asks a client to declare it
# for a task-only tool, and tells the runtime which calls may become tasks. The tasks
# themselves (their runs, store, relays between workers) are that engine's:
# trio_mcp.runtime.tasks.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..protocol import ErrorCode, RemoteProtocolError, Request
from ..protocol._tasks import TASK_ROWS, TASKS_EXTENSION, TaskSupport
from ._context import Context
from ._extension import Extension, ExtensionMethod

__all__ = ["Tasks"]


class Tasks(Extension):
    """The tasks extension. A ``Server`` installs one when a tool is registered with
    ``task="optional"`` or ``task="required"`` (TM-TASK-EXT); until then no method of it is
    served and nothing declares it."""

    identifier = TASKS_EXTENSION
    #: TK-GATE: a tasks/* request of a client that did not declare the extension is refused
    #: (-32021) before its task is looked up.
    mandatory = True
    #: TK-DISCOVER: a 2026-07-28 extension, declared in server/discover's capabilities only.
    eras = "modern"

    def __init__(self) -> None:
        #: The server it serves, once installed (``contribute``).
        self._server: Any = None

    def contribute(self, server: Any) -> None:
        if self._server is not None and self._server is not server:
            raise ValueError("a Tasks extension serves one server")
        self._server = server

    def offered(self) -> bool:
        # TM-TASK-SERVED: declared, and its methods served, while some tool may run as a task.
        return self._server is not None and bool(self._server.runs_tasks())

    def methods(self) -> Sequence[ExtensionMethod]:
        return [ExtensionMethod(row, self._answer) for row in TASK_ROWS]

    def tool_requirements(self, tool: str) -> Mapping[str, Any]:
        # TK-REQUIRED: a task-only tool needs the extension (-32021 before it runs).
        if self._support(tool) is TaskSupport.REQUIRED:
            return {"extensions": {self.identifier: {}}}
        return {}

    def task_support(self, tool: str) -> TaskSupport:
        # TM-TASK-DECIDE: as the application said of the tool (``task=``).
        return self._support(tool)

    def _support(self, tool: str) -> TaskSupport:
        if self._server is None:
            return TaskSupport.FORBIDDEN
        support: TaskSupport = self._server.tool_task_support(tool)
        return support

    async def _answer(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """TK-GET, TK-UPDATE, TK-CANCEL: answered from the runtime's tasks (after TK-GATE)."""
        engine = ctx.engine(self.identifier)
        if engine is None:
            # A runtime with no tasks (a session: the rows are of 2026-07-28 alone).
            raise RemoteProtocolError(
                f"Method not found: {ctx.method}", code=ErrorCode.METHOD_NOT_FOUND
            )
        request = Request(id=ctx.request_id, method=ctx.method, params=dict(params))
        return engine.answer(request, ctx.principal)
