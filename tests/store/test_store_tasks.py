# Tasks (the io.modelcontextprotocol/tasks extension) across two workers sharing a Redis store
# (TM-STORE-TASKS): a task runs in the worker that created it; its id names that worker; a
# tasks/get, tasks/update or tasks/cancel reaching the other worker is relayed to it; a task
# whose worker has stopped is reported lost, explicitly.
from __future__ import annotations

from typing import Any

import pytest
import trio
from support.fixtures import LiveServer, StartServer, wait_until
from support.modern import call_tool, messages_of, modern_request, post
from support.redis import RedisServer
from support.task_tools import tasks_server

from trio_mcp import ServerConfig

TIMEOUT = 20
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
SECRET = bytes(range(32))


async def _workers(live_server: StartServer, store: str) -> tuple[LiveServer, LiveServer]:
    config = ServerConfig(store=store, secret=SECRET, workers=2)
    return (await live_server(tasks_server(), config),
            await live_server(tasks_server(), config))


def _result(response: Any) -> dict[str, Any]:
    (message,) = messages_of(response)
    assert "result" in message, message
    result: dict[str, Any] = message["result"]
    return result


async def _task(url: str, method: str, task_id: str, **params: Any) -> Any:
    return await post(url, modern_request(method, {"taskId": task_id, **params},
                                          capabilities=WITH_TASKS))


async def _until(url: str, task_id: str, *statuses: str) -> dict[str, Any]:
    while True:
        task = _result(await _task(url, "tasks/get", task_id))
        if task["status"] in statuses:
            return task
        await trio.sleep(0.02)


@pytest.mark.spec("TM-STORE-TASKS")
async def test_a_task_is_read_answered_and_cancelled_through_the_other_worker(
    live_server: StartServer, redis_url: str
) -> None:
    """A task created at worker A is polled, given its answer and read to its result at
    worker B; another is cancelled at B: each request is relayed to A, which runs them."""
    a, b = await _workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        asked = _result(await post(a.url, call_tool("ask", {}, capabilities=WITH_TASKS)))
        task_id = asked["taskId"]
        waiting = await _until(b.url, task_id, "input_required")
        answer = {"who": {"action": "accept", "content": {"name": "Ada"}}}
        ack = _result(await _task(b.url, "tasks/update", task_id, inputResponses=answer))
        done = await _until(b.url, task_id, "completed")
        long = _result(await post(a.url, call_tool("job", {"seconds": 60},
                                                   capabilities=WITH_TASKS)))
        cancel = _result(await _task(b.url, "tasks/cancel", long["taskId"]))
        cancelled = await _until(b.url, long["taskId"], "cancelled")
    assert task_id.split("~")[0] == a.manager.store.origin
    assert "who" in waiting["inputRequests"]
    assert {"resultType": "complete"} == {k: v for k, v in ack.items() if k != "_meta"}
    assert "hi Ada" == done["result"]["content"][0]["text"]
    assert "cancelled" == cancelled["status"] and cancel["resultType"] == "complete"
    assert b.manager.stats.resumes_relayed == 0  # resumes are counted apart from tasks
    assert a.app.runtime.tasks.runs.keys() >= {task_id, long["taskId"]}  # type: ignore[union-attr]
    assert not b.app.runtime.tasks.runs  # type: ignore[union-attr]


@pytest.mark.spec("TM-STORE-TASKS")
async def test_when_a_tasks_worker_is_gone_the_store_answers_for_it(
    live_server: StartServer, redis_url: str, shared_redis: RedisServer
) -> None:
    """When the worker running a task cannot be reached, another worker answers from what
    the store kept: a task still working is failed (and stays failed), a completed one keeps
    its result, and an id the store never saw is reported lost (-32602, holder-gone)."""
    a, b = await _workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        running = _result(await post(a.url, call_tool("job", {"seconds": 60},
                                                      capabilities=WITH_TASKS)))
        quick = _result(await post(a.url, call_tool("job", {"seconds": 0, "size": 3},
                                                    capabilities=WITH_TASKS)))
        await _until(b.url, quick["taskId"], "completed")
        keys = [f"trio-mcp:task:{t['taskId']}".encode() for t in (running, quick)]
        # Kept in order, after the change: the completed task's last state is there.
        await wait_until(lambda: all(b'"completed"' in shared_redis.command(b"GET", k)
                                     for k in keys[1:]), poll=0.01)
        await a.manager.store.advertise("127.0.0.1:1", 5.0)  # A's relay port, unreachable
        failed = _result(await _task(b.url, "tasks/get", running["taskId"]))
        again = _result(await _task(b.url, "tasks/get", running["taskId"]))
        cancel = _result(await _task(b.url, "tasks/cancel", running["taskId"]))
        completed = _result(await _task(b.url, "tasks/get", quick["taskId"]))
        origin = running["taskId"].split("~")[0]
        unknown = await _task(b.url, "tasks/get", f"{origin}~{'x' * 32}")
    assert "failed" == failed["status"] and -32603 == failed["error"]["code"]
    assert failed == again
    assert "complete" == cancel["resultType"]
    assert "completed" == completed["status"]
    assert "xxx" == completed["result"]["content"][0]["text"]
    (message,) = messages_of(unknown)
    assert -32602 == message["error"]["code"]
    assert "holder-gone" == message["error"]["data"]["reason"]
