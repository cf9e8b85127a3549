"""The tasks extension over real sockets, on both HTTP servers (spec/tasks.md): the wire
shapes, the gates, the bounds, the binding to a principal, and what a dropped connection does
before and after a call became a task."""

from __future__ import annotations

import base64
import itertools
import re
from typing import Any

import pytest
import trio
from support.client import Response, open_session
from support.fixtures import StartServer, wait_until
from support.modern import (
    call_tool,
    messages_of,
    modern_headers,
    modern_request,
    open_modern,
    open_raw,
    post,
)
from support.task_tools import tasks_server

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import ErrorCode
from trio_mcp.runtime._runtime import Runtime
from trio_mcp.runtime._stats import as_dict

pytestmark = pytest.mark.usefixtures("no_server_errors")

TIMEOUT = 20
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def runtime_of(live: Any) -> Runtime:
    runtime = live.app.runtime
    assert isinstance(runtime, Runtime)
    return runtime


def result_of(response: Response) -> dict[str, Any]:
    (message,) = messages_of(response)
    assert "result" in message, message
    result = message["result"]
    assert isinstance(result, dict)
    return result


def error_of(response: Response) -> dict[str, Any]:
    (message,) = messages_of(response)
    assert "error" in message, message
    error = message["error"]
    assert isinstance(error, dict)
    return error


async def task_request(url: str, method: str, task_id: str, **params: Any) -> Response:
    return await post(url, modern_request(method, {"taskId": task_id, **params},
                                          capabilities=WITH_TASKS))


async def get(url: str, task_id: str) -> dict[str, Any]:
    return result_of(await task_request(url, "tasks/get", task_id))


async def until_status(url: str, task_id: str, *statuses: str) -> dict[str, Any]:
    while True:
        task = await get(url, task_id)
        if task["status"] in statuses:
            return task
        await trio.sleep(0.02)


async def create(url: str, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    result = result_of(await post(url, call_tool(name, arguments, capabilities=WITH_TASKS)))
    assert "task" == result["resultType"], result
    return result


@pytest.mark.spec("TK-CREATE", "TK-WIRE", "TK-NOSTATE")
async def test_a_required_task_tool_answers_a_flat_create_result_at_once(
    live_server: StartServer,
) -> None:
    """A task tool's call is answered with a flat CreateTaskResult, stored before it is sent:
    an id of 32 URL-safe characters, "working", ISO 8601 times, integer ttlMs and
    pollIntervalMs, and none of the fields a task result must not carry."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), ServerConfig(task_ttl=60, task_poll_interval=0.25))
        created = await create(live.url, "job", {"seconds": 30})
        again = await get(live.url, created["taskId"])

    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", created["taskId"])
    assert "working" == created["status"]
    assert ISO.match(created["createdAt"]) and ISO.match(created["lastUpdatedAt"])
    assert (60_000, 250) == (created["ttlMs"], created["pollIntervalMs"])
    assert not {"task", "result", "error", "inputRequests", "requestState", "ttl",
                "pollInterval"} & set(created)
    assert (created["taskId"], "working", "complete") == (
        again["taskId"], again["status"], again["resultType"])
    assert "requestState" not in again


#: How many task ids the entropy test reads over HTTP.
ID_SAMPLE = 48


def _common_prefix(x: str, y: str) -> int:
    return next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b),
                min(len(x), len(y)))


@pytest.mark.spec("TK-IDS")
async def test_task_ids_are_192_random_bits_that_share_no_pattern(
    live_server: StartServer,
) -> None:
    """Task ids made one after another share nothing a third party could extrapolate:
    each is 192 bits (32 base64url characters), every one of the 192 bit positions takes
    both values across the sample (a counter, a clock or a padded sequence keeps its high
    bits fixed), the bits are about half ones (a sequence is mostly zeros), and no two ids
    share a prefix longer than chance allows. A pseudo-random generator seeded with little
    would pass too; the ids come from `secrets` (TK-IDS)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        ids = [(await create(live.url, "job"))["taskId"] for _ in range(ID_SAMPLE)]

    raw = [base64.urlsafe_b64decode(task_id) for task_id in ids]
    assert {24} == {len(r) for r in raw}
    bits = [int.from_bytes(r, "big") for r in raw]
    fixed = [i for i in range(192) if len({(b >> i) & 1 for b in bits}) == 1]
    ones = sum(b.bit_count() for b in bits) / (192 * len(bits))
    shared = max(_common_prefix(x, y) for x, y in itertools.combinations(ids, 2))
    assert len(set(ids)) == len(ids)
    assert [] == fixed
    assert 0.45 < ones < 0.55, ones
    # Two random ids share a first character with probability 1/64; 48 ids make 1,128
    # pairs, so a shared prefix of 4 characters (1 in 2^24 per pair) is all but impossible.
    assert shared < 4, shared


@pytest.mark.spec("TK-GET", "TK-FAILED", "TK-STATES", "TK-GETSTATES", "TK-TYPE")
async def test_outcomes_map_to_completed_or_failed(live_server: StartServer) -> None:
    """A result and a tool error complete the task (the result inlined); a JSON-RPC error
    fails it, with the error inlined and no result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        done = await until_status(
            live.url, (await create(live.url, "job", {"size": 3}))["taskId"], "completed")
        tool_error = await until_status(
            live.url, (await create(live.url, "tool_error"))["taskId"], "completed", "failed")
        failed = await until_status(
            live.url, (await create(live.url, "broken"))["taskId"], "completed", "failed")

    assert [{"type": "text", "text": "xxx"}] == done["result"]["content"]
    assert "completed" == tool_error["status"] and tool_error["result"]["isError"] is True
    assert "failed" == failed["status"] and "result" not in failed
    assert -32603 == failed["error"]["code"]
    assert "broken" in failed["error"]["message"] and failed["statusMessage"]


@pytest.mark.spec("TK-UPDATE", "TK-INPUT", "TK-ACK", "TM-MOD-STATUS", "TK-GETSTATES")
async def test_a_question_inside_a_task_waits_for_tasks_update(live_server: StartServer) -> None:
    """A handler's question makes the task input_required with the question inlined; an
    update with unknown keys only is acknowledged and changes nothing; a wrong answer is
    refused whole (-32602); the right one resumes the task to completed."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        task_id = (await create(live.url, "ask"))["taskId"]
        waiting = await until_status(live.url, task_id, "input_required")
        ignored = await task_request(live.url, "tasks/update", task_id,
                                     inputResponses={"nobody": {"action": "accept"}})
        still = await get(live.url, task_id)
        wrong = await task_request(live.url, "tasks/update", task_id,
                                   inputResponses={"who": {"action": "accept", "content": 5}})
        right = await task_request(
            live.url, "tasks/update", task_id,
            inputResponses={"who": {"action": "accept", "content": {"name": "Ada"}}})
        after = await get(live.url, task_id)
        done = await until_status(live.url, task_id, "completed")

    question = waiting["inputRequests"]["who"]
    assert "elicitation/create" == question["method"]
    assert "Name?" == question["params"]["message"]
    assert {"resultType": "complete"} == {
        k: v for k, v in result_of(ignored).items() if k != "_meta"}
    assert "input_required" == still["status"] and ["who"] == list(still["inputRequests"])
    assert (200, -32602) == (wrong.status, error_of(wrong)["code"])  # TM-MOD-STATUS
    assert {"resultType": "complete"} == {k: v for k, v in result_of(right).items() if k != "_meta"}
    # Applied before the ack: the very next get shows it (TM-TASK-CONSISTENT).
    assert after["status"] in ("working", "completed") and "inputRequests" not in after
    assert [{"type": "text", "text": "hi Ada"}] == done["result"]["content"]


@pytest.mark.spec("TK-CANCEL", "TM-TASK-CANCEL", "TK-GETSTATES")
async def test_cancel_is_terminal_at_once_idempotent_and_frees_the_work(
    live_server: StartServer,
) -> None:
    """tasks/cancel is acknowledged, the very next get reads cancelled, the handler is
    cancelled, and a second cancel gets the same ack."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        runtime = runtime_of(live)
        task_id = (await create(live.url, "job", {"seconds": 600}))["taskId"]
        first = result_of(await task_request(live.url, "tasks/cancel", task_id))
        task = await get(live.url, task_id)
        second = result_of(await task_request(live.url, "tasks/cancel", task_id))
        await wait_until(lambda: runtime.tasks.runs[task_id].settled.is_set())

    assert first == second and "complete" == first["resultType"]
    assert not {"taskId", "status", "result", "error", "inputRequests"} & set(first)
    assert "cancelled" == task["status"]
    assert 1 == as_dict(runtime.statistics())["tasks_cancelled"]


@pytest.mark.spec(
    "TK-GATE", "TK-UNKNOWN", "TM-TASK-ORDER", "TK-REQUIRED", "TK-NOLIST", "TM-TASK-NOLIST",
    "TM-MOD-STATUS",
)
async def test_gates_come_before_the_lookup(live_server: StartServer) -> None:
    """Without the extension tasks/* get 400 -32021 naming it, before any lookup; with it an
    unknown id gets -32602; a task-only tool without it gets -32021 before it runs;
    tasks/result and tasks/list are not methods."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        gated = [await post(live.url, modern_request(m, {"taskId": "gate-test"}))
                 for m in ("tasks/get", "tasks/update", "tasks/cancel")]
        unknown = await task_request(live.url, "tasks/get", "no-such-task")
        required = await post(live.url, call_tool("job", {}))
        removed = [await post(live.url, modern_request(m, {"taskId": "x"}, capabilities=WITH_TASKS))
                   for m in ("tasks/result", "tasks/list")]

    requirement = {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    for response in (*gated, required):
        assert 400 == response.status
        assert (-32021, requirement) == (error_of(response)["code"], error_of(response)["data"])
    # TM-MOD-STATUS: an id that names no task is the request's params, answered in-band.
    assert (200, -32602) == (unknown.status, error_of(unknown)["code"])
    # TK-NOLIST / TM-TASK-NOLIST: no such methods, as any the server does not have: 404.
    assert [(404, -32601), (404, -32601)] == [(r.status, error_of(r)["code"]) for r in removed]
    assert 0 == as_dict(runtime_of(live).statistics())["tasks_created"]


@pytest.mark.spec("TK-HEADERS", "TM-TASK-HEADERS")
async def test_mcp_name_must_name_the_task(live_server: StartServer) -> None:
    """tasks/get, tasks/update and tasks/cancel carry the task id in Mcp-Name: another value,
    or none, gets 400 -32020."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        task_id = (await create(live.url, "job", {"seconds": 30}))["taskId"]
        message = modern_request("tasks/get", {"taskId": task_id}, capabilities=WITH_TASKS)
        wrong = await post(live.url, message, extra=[("mcp-name", "another-task")])
        headers = [h for h in modern_headers(message) if h[0] != "mcp-name"]
        missing = await post(live.url, message, headers=headers)

    assert [(400, -32020), (400, -32020)] == [
        (r.status, error_of(r)["code"]) for r in (wrong, missing)]


@pytest.mark.spec("TK-OPTIN", "TM-TASK-DECIDE")
async def test_optional_tools_become_tasks_only_when_allowed_and_slow(
    live_server: StartServer,
) -> None:
    """An optional task tool is answered as usual without the extension, or when it ends
    within task_after; with the extension and a longer run it becomes a task; a tool without
    task support never does."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), ServerConfig(task_after=0.2))
        without = result_of(await post(live.url, call_tool("nap", {"seconds": 0.4})))
        quick = result_of(await post(live.url, call_tool("nap", {"seconds": 0},
                                                         capabilities=WITH_TASKS)))
        slow = result_of(await post(live.url, call_tool("nap", {"seconds": 0.4},
                                                        capabilities=WITH_TASKS)))
        plain = result_of(await post(live.url, call_tool("plain", {}, capabilities=WITH_TASKS)))

    assert [{"type": "text", "text": "slept 0.4"}] == without["content"]
    assert "complete" == quick["resultType"] and "taskId" not in quick
    assert "task" == slow["resultType"]
    assert "complete" == plain["resultType"]
    stats = as_dict(runtime_of(live).statistics())
    assert (1, 1) == (stats["tasks_created"], stats["tasks_answered_at_once"])


@pytest.mark.spec("TK-LIFE", "MU-CANCEL-1")
async def test_a_dropped_connection_cancels_a_call_but_not_a_task(
    live_server: StartServer,
) -> None:
    """A client that leaves before its call became a task cancels it, as any modern request;
    one that leaves after the CreateTaskResult leaves the task running to its result."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), ServerConfig(task_after=5))
        runtime = runtime_of(live)
        async with open_raw(live.url, call_tool("nap", {"seconds": 60},
                                                capabilities=WITH_TASKS)):
            await wait_until(lambda: len(runtime.tasks.runs) == 1)
        await wait_until(lambda: not runtime.tasks.runs)
        # post() reads the CreateTaskResult and closes its connection.
        task_id = (await create(live.url, "job", {"seconds": 0.5, "size": 2}))["taskId"]
        done = await until_status(live.url, task_id, "completed")

    assert [{"type": "text", "text": "xx"}] == done["result"]["content"]
    stats = as_dict(runtime.statistics())
    assert (1, 1) == (stats["tasks_created"], stats["tasks_answered_at_once"])


@pytest.mark.spec("TM-TASK-BOUND")
async def test_bounds_refuse_explicitly(live_server: StartServer) -> None:
    """Past max_tasks running, a client holding them all gets 503-class -31002 for a
    task-only call, and an optional one runs as a plain call; a result over
    max_task_result_bytes fails its task with -32603."""
    config = ServerConfig(max_tasks=2, max_task_result_bytes=1000, task_after=0.05)
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), config)
        for _ in range(2):
            await create(live.url, "job", {"seconds": 60})
        refused = await post(live.url, call_tool("job", {}, capabilities=WITH_TASKS))
        fallback = result_of(await post(live.url, call_tool("nap", {"seconds": 0.1},
                                                            capabilities=WITH_TASKS)))
        stats = as_dict(runtime_of(live).statistics())

        live2 = await live_server(tasks_server(), config)
        big = await until_status(
            live2.url, (await create(live2.url, "job", {"size": 5000}))["taskId"], "failed")
        small = await until_status(
            live2.url, (await create(live2.url, "job", {"size": 10}))["taskId"], "completed")

    assert ErrorCode.SERVER_BUSY == error_of(refused)["code"]
    assert "complete" == fallback["resultType"]
    assert 2 == stats["tasks_refused"] and 2 == stats["tasks_alive"]
    assert -32603 == big["error"]["code"] and "result" not in big
    assert "completed" == small["status"]
    assert 1 == as_dict(runtime_of(live2).statistics())["tasks_results_too_large"]


@pytest.mark.slow
@pytest.mark.spec("TK-TTL", "TM-TASK-EXPIRE")
async def test_a_task_lives_its_ttl_then_is_gone_with_its_result(live_server: StartServer) -> None:
    """A task stays readable for its whole TTL after it ends, then tasks/get answers -32602,
    a task still running at its TTL is cancelled, and the result bytes held come back to 0."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), ServerConfig(task_ttl=1.5))
        runtime = runtime_of(live)
        finished = (await create(live.url, "job", {"size": 100}))["taskId"]
        running = (await create(live.url, "job", {"seconds": 600}))["taskId"]
        await until_status(live.url, finished, "completed")
        held = as_dict(runtime.statistics())["tasks_result_bytes"]
        await trio.sleep(0.5)
        still = await get(live.url, finished)
        await wait_until(lambda: not runtime.tasks.runs, poll=0.05)
        gone = [await task_request(live.url, "tasks/get", t) for t in (finished, running)]

    assert held > 100 and "completed" == still["status"]
    assert [-32602, -32602] == [error_of(r)["code"] for r in gone]
    stats = as_dict(runtime.statistics())
    assert (2, 0, 0) == (stats["tasks_expired"], stats["tasks_alive"], stats["tasks_result_bytes"])


@pytest.mark.spec("TK-LEGACY")
async def test_legacy_sessions_see_no_tasks(live_server: StartServer) -> None:
    """In a 2025-11-25 session the extension is not declared, tasks/get is not a method, and
    a task tool runs as a plain call."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        session = await open_session(live.url)
        init = session.initialize_result
        got = await session.call("tasks/get", {"taskId": "x"})
        called = await session.call("tools/call", {"name": "job", "arguments": {"size": 1}})

    assert "extensions" not in init["capabilities"] and "tasks" not in init["capabilities"]
    assert -32601 == got["error"]["code"]
    assert [{"type": "text", "text": "x"}] == called["result"]["content"]



@pytest.mark.spec("TK-BIND", "TM-AUTH-BIND")
async def test_a_task_belongs_to_the_principal_that_created_it(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """With authorization, another principal's tasks/get, tasks/update and tasks/cancel get
    the unknown-id answer (-32602), and its listener is not acknowledged the task; the
    creator's requests work."""
    from support.fixtures import free_port
    from support.oauth import start_auth_server

    from trio_mcp import AuthConfig, JWTVerifier

    issuer = await start_auth_server(nursery)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    auth = AuthConfig(
        resource=resource, authorization_servers=[issuer.issuer],
        verifier=JWTVerifier(issuer=issuer.issuer, audience=resource,
                             jwks_uri=f"{issuer.issuer}/jwks", min_refresh=0.0),
    )
    alice = [("authorization", f"Bearer {issuer.mint(audience=resource, subject='alice')}")]
    mallory = [("authorization", f"Bearer {issuer.mint(audience=resource, subject='mallory')}")]

    async def as_(who: list[tuple[str, str]], method: str, task_id: str, **params: Any) -> Any:
        message = modern_request(method, {"taskId": task_id, **params}, capabilities=WITH_TASKS)
        return await post(live.url, message, extra=who)

    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server(), ServerConfig(auth=auth), port=port)
        created = result_of(await post(
            live.url, call_tool("job", {"seconds": 60}, capabilities=WITH_TASKS), extra=alice))
        task_id = created["taskId"]
        foreign = [await as_(mallory, m, task_id, **extra) for m, extra in (
            ("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {}))]
        async with open_modern(
            live.url,
            modern_request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}},
                           capabilities=WITH_TASKS),
            extra=mallory,
        ) as stream:
            ack = await stream.next_message()
        own = result_of(await as_(alice, "tasks/get", task_id))

    assert [(200, -32602)] * 3 == [(r.status, error_of(r)["code"]) for r in foreign]
    assert [] == ack["params"]["notifications"]["taskIds"]
    assert "working" == own["status"]


@pytest.mark.spec("TK-NOTIFY")
async def test_a_listener_that_names_a_task_hears_each_transition(
    live_server: StartServer,
) -> None:
    """subscriptions/listen with taskIds acknowledges the client's own live tasks and
    reports each later transition as notifications/tasks with the task as tasks/get shows
    it; a client without the extension that names task ids gets 400 and -32021."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(tasks_server())
        task_id = (await create(live.url, "ask"))["taskId"]
        await until_status(live.url, task_id, "input_required")
        listen = modern_request(
            "subscriptions/listen",
            {"notifications": {"taskIds": [task_id, "not-a-task"]}},
            capabilities=WITH_TASKS,
        )
        async with open_modern(live.url, listen) as stream:
            ack = await stream.next_message()
            await task_request(
                live.url, "tasks/update", task_id,
                inputResponses={"who": {"action": "accept", "content": {"name": "Bo"}}})
            seen = [await stream.next_message(), await stream.next_message()]
        refused = await post(live.url, modern_request(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}))

    assert [task_id] == ack["params"]["notifications"]["taskIds"]
    assert ["notifications/tasks"] * 2 == [m["method"] for m in seen]
    assert ["working", "completed"] == [m["params"]["status"] for m in seen]
    assert [{"type": "text", "text": "hi Bo"}] == seen[1]["params"]["result"]["content"]
    assert all(task_id == m["params"]["taskId"] and "resultType" not in m["params"]
               for m in seen)
    assert (400, -32021) == (refused.status, error_of(refused)["code"])


@pytest.mark.spec("TM-TASK-SERVED")
async def test_a_server_without_task_tools_serves_no_tasks(live_server: StartServer) -> None:
    """A server none of whose tools may be a task declares no extension, and tasks/* get
    404 and -32601."""
    server = Server("no-tasks")

    @server.tool()
    async def plain() -> str:
        """Never a task."""
        return "plain"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        discover = result_of(await post(live.url, modern_request("server/discover",
                                                                 capabilities=WITH_TASKS)))
        got = await task_request(live.url, "tasks/get", "x")

    assert "extensions" not in discover["capabilities"]
    assert (404, -32601) == (got.status, error_of(got)["code"])


@pytest.mark.spec("TM-TASK-STREAMLESS")
async def test_progress_goes_on_the_exchange_until_the_call_becomes_a_task(
    live_server: StartServer,
) -> None:
    """An optional task tool's progress before it becomes a task streams on its exchange;
    after, ctx.report_progress reports nothing went out."""
    server = Server("progress")
    sent: list[bool] = []

    @server.tool(task="optional")
    async def steps(ctx: Context) -> str:
        """Reports progress before and after task_after."""
        sent.append(await ctx.report_progress(1, 2))
        await trio.sleep(0.5)
        sent.append(await ctx.report_progress(2, 2))
        return "done"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server, ServerConfig(task_after=0.2))
        response = await post(live.url, call_tool("steps", {}, capabilities=WITH_TASKS,
                                                  progress_token="p"))
        messages = messages_of(response)
        task_id = messages[-1]["result"]["taskId"]
        await until_status(live.url, task_id, "completed")

    assert ["notifications/progress"] == [m.get("method") for m in messages[:-1]]
    assert "task" == messages[-1]["result"]["resultType"]
    assert [True, False] == sent


@pytest.mark.spec("TM-TASK-SHUTDOWN")
async def test_shutdown_ends_tasks_and_answers_a_deciding_call(live_server: StartServer) -> None:
    """At shutdown a call still deciding whether to be a task is answered 503 with -31002,
    and every task's work is cancelled: the task fails, ended by the server."""
    server = tasks_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server, ServerConfig(task_after=30, shutdown_grace=0.2))
        runtime = runtime_of(live)
        task_id = (await create(live.url, "job", {"seconds": 600}))["taskId"]
        task = runtime.tasks.runs[task_id]
        async with trio.open_nursery() as nursery:
            answers: list[Response] = []

            async def deciding() -> None:
                answers.append(await post(live.url, call_tool("nap", {"seconds": 600},
                                                              capabilities=WITH_TASKS)))

            nursery.start_soon(deciding)
            await wait_until(lambda: len(runtime.tasks.runs) == 2)
            await runtime.shutdown(0.2)
        await wait_until(task.settled.is_set)

    assert (503, ErrorCode.SERVER_BUSY) == (answers[0].status, error_of(answers[0])["code"])
    assert task.snapshot is not None and "failed" == task.snapshot.status.value
    assert "ended by the server" in (task.snapshot.status_message or "")


@pytest.mark.spec("TM-TASK-WITHDRAW")
async def test_a_task_its_client_was_never_told_of_is_withdrawn_at_once() -> None:
    """A published task withdrawn because its CreateTaskResult could not be sent has its
    work cancelled and its slot and table entry freed at once, not at its TTL; a second
    withdrawal changes nothing."""
    from trio_mcp.protocol import Request
    from trio_mcp.protocol._era import Envelope, ModernCall
    from trio_mcp.runtime.tasks._taskmanager import TaskManager

    manager = TaskManager(tasks_server(), ServerConfig(max_tasks=1))
    call = ModernCall(
        request=Request(id=1, method="tools/call", params={"name": "job",
                                                          "arguments": {"seconds": 600}}),
        envelope=Envelope(version="2026-07-28", client_capabilities=WITH_TASKS),
    )
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            run = manager.start(call, front=None,  # type: ignore[arg-type]
                                principal=None, peer="127.0.0.1", answers={}, publish=True)
            assert run is not None and run.published
            manager.withdraw(run)
            manager.withdraw(run)
            await run.settled.wait()
            again = manager.start(call, front=None,  # type: ignore[arg-type]
                                  principal=None, peer="127.0.0.1", answers={}, publish=True)
            nursery.cancel_scope.cancel()

    assert run.scope.cancel_called and run.task_id not in manager.runs
    assert again is not None  # the one slot was given back
    assert (1, 2) == (manager.stats.withdrawn, manager.stats.created)


def _rekeying_server() -> Server:
    server = Server("rekeying")
    form = {"type": "object", "properties": {"name": {"type": "string"}}}

    @server.tool(task="required")
    async def twice(ctx: Context, change: bool = False) -> str:
        """Asks "who" once, then under the same key again: the same question, or another."""
        first = await ctx.elicit("Name?", form, key="who")
        second = await ctx.elicit("Other name?" if change else "Name?", form, key="who")
        return f"{(first.content or {}).get('name')} / {(second.content or {}).get('name')}"

    return server


@pytest.mark.spec("TK-KEYS", "TK-INPUT")
async def test_a_key_answered_is_never_asked_again_nor_given_to_another_question(
    live_server: StartServer,
) -> None:
    """Inside a task, a question asked again under a key already answered gets that answer
    at once: the key is not sent to the client a second time. Another question under that
    key is the handler's error (the task fails, -32603): the client's answer was to the
    first question, and a key names one question for the task's whole life."""
    answer = {"who": {"action": "accept", "content": {"name": "Ada"}}}
    with trio.fail_after(TIMEOUT):
        live = await live_server(_rekeying_server())
        results = {}
        for change in (False, True):
            task_id = (await create(live.url, "twice", {"change": change}))["taskId"]
            asked = await until_status(live.url, task_id, "input_required")
            await task_request(live.url, "tasks/update", task_id, inputResponses=answer)
            results[change] = (asked, await until_status(
                live.url, task_id, "completed", "failed"))

    same_asked, same = results[False]
    assert ["who"] == list(same_asked["inputRequests"])
    assert "completed" == same["status"]
    assert [{"type": "text", "text": "Ada / Ada"}] == same["result"]["content"]
    _, other = results[True]
    assert "failed" == other["status"] and -32603 == other["error"]["code"]


@pytest.mark.spec("TK-NOPROGRESS", "TM-TASK-STREAMLESS")
async def test_a_tasks_listener_hears_its_transitions_and_never_its_progress_or_logs(
    live_server: StartServer,
) -> None:
    """A task that reports progress and logs after it became a task, listened to with
    taskIds and the lowest log level, puts only notifications/tasks on the listen stream:
    its progress and its log messages go nowhere."""
    server = Server("chatty")
    gate = trio.Event()

    @server.tool(task="required")
    async def chatty(ctx: Context) -> str:
        """Waits for the listener, then reports progress and logs."""
        await gate.wait()
        await ctx.report_progress(1, 2)
        await ctx.log("info", "half way")
        await ctx.report_progress(2, 2)
        return "done"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        task_id = (await create(live.url, "chatty"))["taskId"]
        listen = modern_request(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}},
            capabilities=WITH_TASKS, log_level="debug", progress_token="p",
        )
        async with open_modern(live.url, listen) as stream:
            ack = await stream.next_message()
            gate.set()
            done = await stream.next_message()

    assert [task_id] == ack["params"]["notifications"]["taskIds"]
    assert "notifications/tasks" == done["method"], done
    assert "completed" == done["params"]["status"]


def asking_server() -> Server:
    """The same two handlers run on their exchange and as tasks: one asks for sampling
    (a capability the tests' requests never declare), one sends the client a request."""
    server = Server("tasks-asking")

    async def sample(ctx: Context) -> str:
        answer = await ctx.sample("Say hi.", max_tokens=5)
        return str(answer)

    async def ping(ctx: Context) -> str:
        await ctx.ping()
        return "pong"

    for name, fn in (("sample", sample), ("ping", ping)):
        server.add_tool(fn, name=name, description=f"{name} on its exchange")
        server.add_tool(fn, name=f"{name}_task", description=f"{name} as a task", task="required")
    return server


@pytest.mark.spec("ML-META-3", "MJ-PAT-1", "TK-INPUT")
async def test_a_task_asks_the_way_its_exchange_does(live_server: StartServer) -> None:
    """A handler in a task has the port of a handler on its exchange: a question behind a
    capability the creating request did not declare fails the task with the -32021 error
    (message and data) its exchange answers, and a request to the client is refused with
    the same words."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(asking_server())
        errors = {}
        for name in ("sample", "ping"):
            errors[name] = error_of(await post(live.url, call_tool(name, capabilities=WITH_TASKS)))
            task_id = (await create(live.url, f"{name}_task"))["taskId"]
            failed = await until_status(live.url, task_id, "failed", "completed")
            errors[f"{name}_task"] = failed["error"]

    assert ErrorCode.MISSING_CLIENT_CAPABILITY == errors["sample"]["code"]
    assert errors["sample"] == errors["sample_task"]
    assert {"requiredCapabilities": {"sampling": {}}} == errors["sample_task"]["data"]
    assert errors["ping"] == errors["ping_task"]
    assert "servers send no requests" in errors["ping_task"]["message"]
