# Interoperability of the tasks extension (io.modelcontextprotocol/tasks, SEP-2663) with the
# official Python SDK client (`mcp` 2.3.0, its v2 `Client` pinned to 2026-07-28) against the
# live demo server, on both HTTP servers (the live_server fixture runs each test on trio-mcp's
# own and on hypercorn).
#
# The SDK has the extension machinery (SEP-2133: ClientExtension, ResultClaim) but no tasks of
# its own; tests/support/sdk_tasks.py adds them with its public API only. Where a rule is about
# the wire (a flat CreateTaskResult, the exact ack), the result is read untyped through
# ClientSession.send_request with a dict adapter, since typed models drop unknown keys.
from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import mcp.types as types
import pytest
import trio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter
from support.fixtures import LiveServer, StartServer
from support.sdk_tasks import (
    TASKS,
    CancelTaskRequest,
    CreateTaskResult,
    GetTaskResult,
    TaskIdParams,
    TasksExtension,
    get_task,
    poll_to_terminal,
    update_task,
)

from trio_mcp import ServerConfig

TIMEOUT = 20
MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
REQUIRES_TASKS: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS: {}}}}

#: Any result, as the server sent it (after the SDK's own checks, before any model).
RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])

pytestmark = pytest.mark.usefixtures("no_server_errors")


@attrs.frozen
class Exchange:
    """One HTTP exchange a client made: its MCP method and name headers, and the local port
    of the connection it went over."""

    mcp_method: str | None
    mcp_name: str | None
    client_port: int | None


@asynccontextmanager
async def sdk_client(
    live: LiveServer, *, wire: list[Exchange] | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    """A pinned 2026-07-28 Client on an HTTP client of its own: leaving it closes every
    connection it made. With ``wire``, every exchange is appended to it."""

    async def record(response: httpx2.Response) -> None:
        if wire is None:
            return
        stream = response.extensions.get("network_stream")
        address = stream.get_extra_info("client_addr") if stream is not None else None
        wire.append(
            Exchange(
                mcp_method=response.request.headers.get("mcp-method"),
                mcp_name=response.request.headers.get("mcp-name"),
                client_port=address[1] if address else None,
            )
        )

    async with httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=60), event_hooks={"response": [record]}
    ) as http:
        transport = streamable_http_client(live.url, http_client=http)
        async with Client(transport, mode=MODERN, cache=None, **kwargs) as client:
            assert MODERN == client.protocol_version
            yield client


async def poll_until(
    session: Any, task_id: str, wanted: Collection[str], *, seen: list[str] | None = None
) -> GetTaskResult:
    """tasks/get until the task's status is one of ``wanted`` (bound it with fail_after);
    each status read is appended to ``seen``."""
    while True:
        got = await get_task(session, task_id)
        if seen is not None:
            seen.append(got.status)
        if got.status in wanted:
            return got
        await trio.sleep(0.05)


async def send_raw(session: Any, request: Any) -> dict[str, Any]:
    raw: dict[str, Any] = await session.send_request(request, RAW)
    return raw


def call(name: str, arguments: dict[str, Any]) -> types.CallToolRequest:
    return types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))


def text_of(result: Any) -> str:
    [block] = result.content
    assert "text" == block.type
    text: str = block.text
    return text


def iso(stamp: str) -> datetime.datetime:
    """An ISO 8601 UTC time as the server writes it (milliseconds, "Z")."""
    assert stamp.endswith("Z")
    moment = datetime.datetime.fromisoformat(stamp)
    assert datetime.UTC == moment.tzinfo
    return moment


async def refuse(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """Declares elicitation for a client that answers its tasks by hand: never called."""
    raise AssertionError(f"the SDK answered a question itself: {params}")


# -- creating and polling --------------------------------------------------------------------------


@pytest.mark.spec("TK-CREATE", "TK-GET")
async def test_a_long_call_answers_a_flat_create_result_and_tasks_get_polls_it_to_the_result(
    live_server: StartServer,
) -> None:
    """TK-CREATE, TK-GET: a call that outlasts task_after answers a flat CreateTaskResult
    ("working", readable at once by tasks/get), and tasks/get ends with the tool's result."""
    defaults = ServerConfig()
    seen: list[str] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, extensions=[TasksExtension()]) as client:
            created = await client.session.call_tool(
                "slow_compute", {"seconds": 1, "label": "sdk"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            first = await get_task(client.session, created.task_id)
            final = await poll_until(client.session, created.task_id, TERMINAL, seen=seen)
            # A second such call, read untyped: only the Task's fields, at the top level.
            flat = await send_raw(client.session, call("slow_compute", {"seconds": 1}))
            flat_final = await poll_to_terminal(client.session, flat["taskId"])

    assert "task" == created.result_type
    assert isinstance(created.task_id, str) and created.task_id
    assert "working" == created.status
    assert iso(created.created_at) <= iso(created.last_updated_at)
    assert int(defaults.task_ttl * 1000) == created.ttl_ms
    assert int(defaults.task_poll_interval * 1000) == created.poll_interval_ms

    assert (created.task_id, created.created_at) == (first.task_id, first.created_at)
    assert "complete" == first.result_type and first.status in ("working", "completed")

    assert {"working"} >= set(seen[:-1]) and "completed" == seen[-1]
    assert "completed" == final.status and final.result is not None and final.error is None
    result = types.CallToolResult.model_validate(final.result, by_name=False)
    assert "sdk: computed in 1 s" == text_of(result) and not result.is_error
    assert iso(final.created_at) < iso(final.last_updated_at)

    fields = ["resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"]
    assert {*fields, "pollIntervalMs", "_meta"} == set(flat)
    assert ("task", "working") == (flat["resultType"], flat["status"])
    assert "trio-mcp-demo" == flat["_meta"][SERVER_INFO]["name"]
    assert "completed" == flat_final.status


# -- answering a task's question ---------------------------------------------------------------


@pytest.mark.spec("TK-UPDATE", "TK-GET")
async def test_sdk_client_answers_confirm_delete_through_its_elicitation_callback(
    live_server: StartServer,
) -> None:
    """TK-UPDATE, TK-GET: the task's elicitation/create inputRequest, read by tasks/get, is
    answered by the SDK's elicitation callback through tasks/update, and client.call_tool
    returns the tool's final result."""
    asked: list[types.ElicitRequestParams] = []

    async def confirm(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    wire: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(
            live, wire=wire, extensions=[TasksExtension()], elicitation_callback=confirm
        ) as client:
            result = await client.call_tool("confirm_delete", {"filename": "old.txt"})

    assert "Deleted old.txt." == text_of(result) and not result.is_error
    [question] = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert "Delete old.txt?" == question.message
    assert ["confirm"] == question.requested_schema["required"]
    methods = [exchange.mcp_method for exchange in wire]
    assert "tools/call" == methods[0] and 1 == methods.count("tools/call")
    assert 1 == methods.count("tasks/update")
    assert methods.index("tasks/get") < methods.index("tasks/update")
    assert "tasks/get" == methods[methods.index("tasks/update") + 1]


@pytest.mark.spec("TK-UPDATE", "TK-GET")
async def test_a_raw_tasks_update_answers_confirm_delete_and_an_unknown_key_is_ignored(
    live_server: StartServer,
) -> None:
    """TK-UPDATE, TK-GET: tasks/update with a key never asked is acknowledged and changes
    nothing the next tasks/get shows; the answer to the open key ends the question and its
    content reaches the tool."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(
            live, extensions=[TasksExtension()], elicitation_callback=refuse
        ) as client:
            created = await client.session.call_tool(
                "confirm_delete", {"filename": "raw.txt"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            asking = await poll_until(client.session, created.task_id, {"input_required"})
            [key] = asking.input_requests or {}
            ignored = await update_task(
                client.session,
                created.task_id,
                {f"{key}-never-asked": {"action": "accept", "content": {"confirm": True}}},
            )
            still = await get_task(client.session, created.task_id)
            answered = await update_task(
                client.session,
                created.task_id,
                {key: {"action": "accept", "content": {"confirm": False}}},
            )
            after = await get_task(client.session, created.task_id)
            final = await poll_until(client.session, created.task_id, TERMINAL)

    question = (asking.input_requests or {})[key]
    assert "elicitation/create" == question["method"]
    assert "Delete raw.txt?" == question["params"]["message"]
    assert {"confirm": {"type": "boolean"}} == question["params"]["requestedSchema"]["properties"]
    assert "complete" == ignored.result_type == answered.result_type
    assert "input_required" == still.status and asking.input_requests == still.input_requests
    assert after.status in ("working", "completed") and after.input_requests is None
    assert "completed" == final.status and final.result is not None
    assert "Kept raw.txt (accept)." == final.result["content"][0]["text"]


# -- cancelling --------------------------------------------------------------------------------


@pytest.mark.spec("TK-CANCEL")
async def test_tasks_cancel_ends_a_task_at_once_and_a_second_cancel_gets_the_same_ack(
    live_server: StartServer,
) -> None:
    """TK-CANCEL: tasks/cancel on a working task is acknowledged with {resultType: complete},
    the next tasks/get reads cancelled, and cancelling again gets the same ack."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, extensions=[TasksExtension()]) as client:
            created = await client.session.call_tool(
                "slow_compute", {"seconds": 60, "label": "long"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
            cancel = CancelTaskRequest(params=TaskIdParams(task_id=created.task_id))
            with trio.fail_after(2):
                first = await send_raw(client.session, cancel)
                task = await get_task(client.session, created.task_id)
            second = await send_raw(client.session, cancel)
            again = await get_task(client.session, created.task_id)

    assert "working" == created.status
    assert {"resultType", "_meta"} >= set(first) and "complete" == first["resultType"]
    assert first == second
    assert "cancelled" == task.status == again.status
    assert task.result is None and task.error is None
    assert task.last_updated_at == again.last_updated_at


# -- a task outlives its client ----------------------------------------------------------------


@pytest.mark.spec("TK-LIFE")
async def test_a_task_outlives_its_clients_disconnect_and_a_new_connection_reads_its_result(
    live_server: StartServer,
) -> None:
    """TK-LIFE: a client that creates a task and goes away (Client and HTTP client closed)
    does not cancel it; a new client on a new connection polls it to its result."""
    before: list[Exchange] = []
    after: list[Exchange] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live, wire=before, extensions=[TasksExtension()]) as first:
            created = await first.session.call_tool(
                "slow_compute", {"seconds": 2, "label": "away"}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult)
        async with sdk_client(live, wire=after, extensions=[TasksExtension()]) as second:
            back = await get_task(second.session, created.task_id)
            final = await poll_until(second.session, created.task_id, TERMINAL)

    old_ports = {exchange.client_port for exchange in before}
    new_ports = {exchange.client_port for exchange in after}
    assert None not in old_ports | new_ports and not old_ports & new_ports
    assert "working" == created.status == back.status
    assert "completed" == final.status and final.result is not None
    assert "away: computed in 2 s" == final.result["content"][0]["text"]


# -- only a client that declares the extension gets tasks --------------------------------------


@pytest.mark.spec("TK-OPTIN", "TK-REQUIRED")
async def test_a_client_without_the_extension_gets_minus_32021_or_a_plain_result(
    live_server: StartServer,
) -> None:
    """TK-OPTIN, TK-REQUIRED: without the extension, a task-only tool is refused with -32021
    naming it, and a tool that may be a task answers with a plain CallToolResult, even when
    it outlasts task_after."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with sdk_client(live) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("failing_job", {})
            now = await client.call_tool("slow_compute", {"seconds": 0, "label": "now"})
            slow = await client.call_tool("slow_compute", {"seconds": 1, "label": "slow"})

    assert -32021 == refused.value.error.code
    assert REQUIRES_TASKS == refused.value.error.data
    assert "now: computed in 0 s" == text_of(now) and not now.is_error
    assert "slow: computed in 1 s" == text_of(slow) and not slow.is_error


@pytest.mark.spec("TK-UPDATE", "TK-INPUT", "TM-TASK-CONSISTENT")
async def test_a_partial_tasks_update_leaves_only_the_other_question_open(
    live_server: StartServer,
) -> None:
    """multi_input asks two questions at once; answering one through the SDK leaves the task
    input_required with only the other at the very next tasks/get, and answering that one
    completes it with both answers."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        # The callback only declares elicitation: every answer here goes by tasks/update.
        async with sdk_client(
            live, extensions=[TasksExtension()], elicitation_callback=refuse
        ) as client:
            raw = await client.session.call_tool("multi_input", {}, allow_claimed=True)
            assert isinstance(raw, CreateTaskResult)
            waiting = await get_task(client.session, raw.task_id)
            while waiting.status == "working":
                await trio.sleep(0.05)
                waiting = await get_task(client.session, raw.task_id)
            ack = await update_task(client.session, raw.task_id, {
                "name": {"action": "accept", "content": {"name": "Bo"}}})
            after = await get_task(client.session, raw.task_id)
            await update_task(client.session, raw.task_id, {
                "confirm": {"action": "accept", "content": {"confirm": True}}})
            done = await poll_to_terminal(client.session, raw.task_id)

    assert {"name", "confirm"} == set(waiting.input_requests or {})
    assert "complete" == ack.result_type
    assert "input_required" == after.status and ["confirm"] == list(after.input_requests or {})
    assert done.result is not None and "Bo: going on." == done.result["content"][0]["text"]
