# Interoperability of the tasks extension with the official Python SDK client (`mcp` 2.3.0,
# its v2 `Client` in 2026-07-28 mode) against the live demo server, on both HTTP servers. The
# SDK has the extension machinery but no tasks of its own: tests/support/sdk_tasks.py adds
# them with its public API (a ResultClaim for resultType "task", requests for tasks/*).
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
import pytest
import trio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support.fixtures import LiveServer, StartServer
from support.sdk_tasks import (
    TASKS,
    CreateTaskResult,
    TasksExtension,
    cancel_task,
    get_task,
    poll_to_terminal,
    update_task,
)

TIMEOUT = 20
MODERN = "2026-07-28"

pytestmark = pytest.mark.usefixtures("no_server_errors")


@asynccontextmanager
async def sdk_client(live: LiveServer, **kwargs: Any) -> AsyncIterator[Client]:
    """A pinned 2026-07-28 Client on an HTTP client of its own: leaving it closes every
    connection it made."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(live.url, http_client=http)
        async with Client(transport, mode=MODERN, cache=None, **kwargs) as client:
            yield client


async def confirm(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """The user says yes to every form, and gives the name Ada."""
    return types.ElicitResult(action="accept", content={"confirm": True, "name": "Ada"})


def text_of(result: Any) -> str:
    [block] = result.content
    assert "text" == block.type
    text: str = block.text
    return text


@pytest.mark.spec("TK-CREATE", "TK-GET", "TK-WIRE")
async def test_sdk_client_drives_a_task_from_create_to_result(live_server: StartServer) -> None:
    """With the extension declared, a long slow_compute call answers a CreateTaskResult the
    SDK parses, tasks/get polls it to completed, and the result is the tool's."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, extensions=[TasksExtension()]) as client:
            created = await client.session.call_tool(
                "slow_compute", {"seconds": 1, "label": "sdk"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            first = await get_task(client.session, created.task_id)
            final = await poll_to_terminal(client.session, created.task_id)

    assert "working" == created.status and "working" == first.status
    assert created.created_at.endswith("Z") and created.ttl_ms and created.poll_interval_ms
    assert "completed" == final.status and final.result is not None
    assert "sdk: computed in 1 s" == final.result["content"][0]["text"]


@pytest.mark.spec("TK-UPDATE", "TK-INPUT")
async def test_sdk_client_answers_a_tasks_question_through_its_elicitation_callback(
    live_server: StartServer,
) -> None:
    """confirm_delete asks inside its task; the SDK's resolver reads the inputRequests,
    answers them with the client's elicitation callback through tasks/update, and
    client.call_tool returns the tool's final result as if it had been synchronous."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(
            live, extensions=[TasksExtension()], elicitation_callback=confirm
        ) as client:
            result = await client.call_tool("confirm_delete", {"filename": "old.txt"})
            raw = await client.session.call_tool("multi_input", {}, allow_claimed=True)
            assert isinstance(raw, CreateTaskResult)
            waiting = await get_task(client.session, raw.task_id)
            while waiting.status != "input_required":
                await trio.sleep(0.05)
                waiting = await get_task(client.session, raw.task_id)
            ack = await update_task(client.session, raw.task_id, {
                "name": {"action": "accept", "content": {"name": "Bo"}}})
            after = await get_task(client.session, raw.task_id)
            await update_task(client.session, raw.task_id, {
                "confirm": {"action": "accept", "content": {"confirm": True}}})
            done = await poll_to_terminal(client.session, raw.task_id)

    assert "Deleted old.txt." == text_of(result) and not result.is_error
    assert {"name", "confirm"} == set(waiting.input_requests or {})
    assert "complete" == ack.result_type
    assert "input_required" == after.status and ["confirm"] == list(after.input_requests or {})
    assert done.result is not None and "Bo: going on." == done.result["content"][0]["text"]


@pytest.mark.spec("TK-CANCEL", "TK-ACK")
async def test_sdk_client_cancels_a_task(live_server: StartServer) -> None:
    """tasks/cancel from the SDK is acknowledged, the task reads cancelled, and a second
    cancel gets the same acknowledgement."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, extensions=[TasksExtension()]) as client:
            created = await client.session.call_tool(
                "slow_compute", {"seconds": 60, "label": "long"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            first = await cancel_task(client.session, created.task_id)
            task = await get_task(client.session, created.task_id)
            second = await cancel_task(client.session, created.task_id)

    assert "complete" == first.result_type == second.result_type
    assert "cancelled" == task.status


@pytest.mark.spec("TK-LIFE")
async def test_a_task_outlives_its_client_and_is_read_from_a_new_connection(
    live_server: StartServer,
) -> None:
    """A client that creates a task and goes away (its HTTP client closed: every connection
    gone) leaves the task running; a new client on new connections reads its result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, extensions=[TasksExtension()]) as first:
            created = await first.session.call_tool(
                "slow_compute", {"seconds": 1.5, "label": "away"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
        async with sdk_client(live, extensions=[TasksExtension()]) as second:
            final = await poll_to_terminal(second.session, created.task_id)

    assert "completed" == final.status and final.result is not None
    assert "away: computed in 1.5 s" == final.result["content"][0]["text"]


@pytest.mark.spec("TK-REQUIRED", "TK-OPTIN", "TK-GATE")
async def test_sdk_client_without_the_extension_gets_plain_calls_or_minus_32021(
    live_server: StartServer,
) -> None:
    """Without the extension, a task-only tool is refused with -32021 naming it, tasks/get
    too, and a tool that may be a task answers as a plain call."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("failing_job", {})
            with pytest.raises(MCPError) as gated:
                await get_task(client.session, "gate-test")
            plain = await client.call_tool("slow_compute", {"seconds": 0, "label": "now"})

    requirement = {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert (-32021, requirement) == (refused.value.error.code, refused.value.error.data)
    assert (-32021, requirement) == (gated.value.error.code, gated.value.error.data)
    assert "now: computed in 0 s" == text_of(plain)
