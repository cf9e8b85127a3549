"""What the attack tests (tests/limits/) share: a neighbour client whose latency is watched
while an attack runs, and how a run's log and tasks are counted."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.lowlevel

from .client import McpSession

#: The neighbour's p99 latency the attack tests allow (issue 20: 250 ms on this machine).
NEIGHBOUR_P99 = 0.25


@attrs.define
class Neighbour:
    """A legitimate client pinging on its own session, one request after the other."""

    latencies: list[float] = attrs.field(factory=list)
    failures: list[str] = attrs.field(factory=list)

    def p99(self) -> float:
        ordered = sorted(self.latencies)
        assert ordered, "the neighbour made no request"
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@asynccontextmanager
async def neighbour_pinging(session: McpSession) -> AsyncIterator[Neighbour]:
    """Ping on ``session`` in a loop for as long as the block runs."""
    neighbour = Neighbour()

    async def loop() -> None:
        while True:
            began = trio.current_time()
            answer = await session.call("ping")
            neighbour.latencies.append(trio.current_time() - began)
            if "result" not in answer:
                neighbour.failures.append(str(answer))
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop)
        yield neighbour
        nursery.cancel_scope.cancel()


def tasks_named(prefix: str) -> list[trio.lowlevel.Task]:
    """Every running task whose name begins with ``prefix``."""
    found = []
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if task.name.startswith(prefix):
            found.append(task)
        todo.extend(t for n in task.child_nurseries for t in n.child_tasks)
    return found


@attrs.frozen
class LogSize:
    records: int
    chars: int


def server_log_size(caplog: pytest.LogCaptureFixture) -> LogSize:
    """How many records trio_mcp logged, and their characters with tracebacks."""
    records = [r for r in caplog.records if r.name.startswith("trio_mcp")]
    formatter = logging.Formatter()
    return LogSize(records=len(records), chars=sum(len(formatter.format(r)) for r in records))
