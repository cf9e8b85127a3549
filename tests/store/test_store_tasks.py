# Tasks (the io.modelcontextprotocol/tasks extension) across two workers sharing a store (a
# real Redis, and the in-process store; TM-STORE-TASKS): a task runs in the worker that
# created it; its id names that worker; a tasks/get, tasks/update or tasks/cancel reaching the
# other worker is relayed to it; a task whose worker has stopped is reported lost, explicitly.
from __future__ import annotations

from typing import Any

import pytest
import trio
from support.fixtures import LiveServer, StartServer, start_live, wait_until
from support.modern import call_tool, messages_of, modern_headers, modern_request, post
from support.stores import StoreBackend
from support.task_tools import tasks_server

from trio_mcp.runtime.store._store import StoredTask

TIMEOUT = 20
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
SECRET = bytes(range(32))


async def _workers(
    live_server: StartServer, store: StoreBackend
) -> tuple[LiveServer, LiveServer]:
    config = store.config(secret=SECRET, workers=2)
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
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A task created at worker A is polled, given its answer and read to its result at
    worker B; another is cancelled at B: each request is relayed to A, which runs them."""
    a, b = await _workers(live_server, shared_store)
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
    assert task_id.split("~")[0] == a.cluster.store.origin
    assert "who" in waiting["inputRequests"]
    assert {"resultType": "complete"} == {k: v for k, v in ack.items() if k != "_meta"}
    assert "hi Ada" == done["result"]["content"][0]["text"]
    assert "cancelled" == cancelled["status"] and cancel["resultType"] == "complete"
    assert b.stats()["resumes_relayed"] == 0  # resumes are counted apart from tasks
    assert a.app.runtime.tasks.runs.keys() >= {task_id, long["taskId"]}  # type: ignore[union-attr]
    assert not b.app.runtime.tasks.runs  # type: ignore[union-attr]


async def _forget_address(store: StoreBackend, worker: LiveServer) -> None:
    """Remove ``worker``'s relay address from the store, as its expiry would: once the
    worker has written it (a task of its own writes it after the worker starts listening;
    written after the removal, it would undo it, and the other worker would relay to this
    one, which knows nothing of the task: one run in five failed so, alone)."""
    origin = worker.cluster.store.origin
    await wait_until(lambda: store.holds_relay(origin))
    store.forget_relay(origin)


def _error(response: Any) -> dict[str, Any]:
    (message,) = messages_of(response)
    assert "error" in message, message
    error: dict[str, Any] = message["error"]
    return error


@pytest.mark.spec("TM-STORE-TASKS", "TK-STATES", "TM-STORE-DOWN")
async def test_when_a_tasks_worker_is_gone_the_store_answers_for_it(
    nursery: trio.Nursery, http_server: str, shared_store: StoreBackend
) -> None:
    """When the worker running a task has stopped and its address has expired, another
    worker answers from what the store kept: a task still working is failed (and stays
    failed), a completed one keeps its result, and an id the store never saw is reported
    lost (-32602, holder-gone), in-band."""
    config = shared_store.config(secret=SECRET, workers=2)
    b = await start_live(nursery, tasks_server(), config, http_server=http_server)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as a_nursery:
            a = await start_live(a_nursery, tasks_server(), config, http_server=http_server)
            running = _result(await post(a.url, call_tool("job", {"seconds": 60},
                                                          capabilities=WITH_TASKS)))
            quick = _result(await post(a.url, call_tool("job", {"seconds": 0, "size": 3},
                                                        capabilities=WITH_TASKS)))
            await _until(b.url, quick["taskId"], "completed")
            kept = [t["taskId"] for t in (running, quick)]
            # Kept in order, after the change: the completed task's last state is there.
            await wait_until(lambda: all(b'"completed"' in shared_store.task(k)
                                         for k in kept[1:]), poll=0.01)
            a_nursery.cancel_scope.cancel()  # A stops, and its running task with it
        await _forget_address(shared_store, a)
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
    assert 200 == unknown.status
    assert -32602 == _error(unknown)["code"]
    assert "holder-gone" == _error(unknown)["data"]["reason"]


@pytest.mark.spec("TM-STORE-TASKS", "TK-STATES")
async def test_a_worker_out_of_reach_for_a_moment_keeps_its_tasks(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A worker whose address is still kept but does not answer (a refused connection) may
    be alive: a task of it that the store holds as running is not declared failed, the
    request is to be retried (503, Retry-After, -31002) and the store is left as it was; an
    end the store holds is answered as it is. Once the worker answers again, its task goes
    on to its own end, which every worker then reports."""
    a, b = await _workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        running = _result(await post(a.url, call_tool("job", {"seconds": 1.5},
                                                      capabilities=WITH_TASKS)))
        quick = _result(await post(a.url, call_tool("job", {"seconds": 0, "size": 3},
                                                    capabilities=WITH_TASKS)))
        await wait_until(lambda: b'"completed"' in shared_store.task(quick["taskId"]),
                         poll=0.01)
        address = await a.cluster.store.locate(a.cluster.store.origin)
        assert address is not None
        await a.cluster.store.advertise("127.0.0.1:1", 5.0)  # A's port, refusing
        refused = await _task(b.url, "tasks/get", running["taskId"])
        update = await _task(b.url, "tasks/update", running["taskId"], inputResponses={})
        completed = _result(await _task(b.url, "tasks/get", quick["taskId"]))
        kept = shared_store.task(running["taskId"])
        await a.cluster.store.advertise(address, 5.0)  # A answers again
        done = await _until(b.url, running["taskId"], "completed", "failed")
    for answer in (refused, update):
        assert 503 == answer.status, answer.body
        assert answer.header("retry-after") == "1"
        assert -31002 == _error(answer)["code"]
        assert "holder-unreachable" == _error(answer)["data"]["reason"]
    assert b'"working"' in kept and b'"failed"' not in kept
    assert "completed" == completed["status"]
    assert "completed" == done["status"]


@pytest.mark.spec("TM-STORE-TASKS", "TK-STATES")
async def test_a_worker_taken_for_gone_ends_its_task_as_the_store_says(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A worker alive but taken for gone (its address lapsed in the store) has its running
    task declared failed by another worker. The store never gives that end up: the worker,
    once it finds its address had lapsed, ends the task the same way and cancels its work,
    so that both workers report one end, failed, and its own later change cannot replace
    it."""
    a, b = await _workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        running = _result(await post(a.url, call_tool("job", {"seconds": 60},
                                                      capabilities=WITH_TASKS)))
        task_id = running["taskId"]
        await wait_until(lambda: b'"working"' in shared_store.task(task_id), poll=0.01)
        address = await a.cluster.store.locate(a.cluster.store.origin)
        assert address is not None
        await _forget_address(shared_store, a)
        declared = _result(await _task(b.url, "tasks/get", task_id))
        # A says where it is again (its next tick), finds its address had lapsed, and
        # takes the end the store holds.
        assert await a.cluster.store.advertise(address, 5.0)
        await a.cluster.tasks.reconcile()
        at_a = _result(await _task(a.url, "tasks/get", task_id))
        via_b = _result(await _task(b.url, "tasks/get", task_id))
        run = a.app.runtime.tasks.runs[task_id]  # type: ignore[union-attr]
        await wait_until(lambda: run.settled.is_set(), poll=0.01)
        # A change of A's after the end (here: the same end, written again) leaves it.
        a.app.runtime.tasks.kept(run)  # type: ignore[union-attr]
        await trio.sleep(0.1)
    assert "failed" == declared["status"]
    assert {k: v for k, v in declared.items() if k != "_meta"} == {
        k: v for k, v in at_a.items() if k != "_meta"}
    assert declared["error"] == via_b["error"] and "failed" == via_b["status"]
    assert run.scope.cancel_called
    assert b'"failed"' in shared_store.task(task_id)


@pytest.mark.spec("TM-STORE-TASKS", "TK-STATES")
async def test_the_store_never_replaces_the_end_of_a_task(shared_store: StoreBackend) -> None:
    """The store's save_task keeps every change of a running task, but once the store holds
    an end (completed, failed or cancelled), whichever worker wrote it, a later write is
    refused and that end is returned: a terminal state never moves."""
    store = shared_store.connect()

    def task(status: str) -> StoredTask:
        return StoredTask(task_id="o~t", owner="", task={"taskId": "o~t", "status": status})

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            written = [await store.save_task(task(s), 60) for s in ("working", "input_required")]
            failed = await store.save_task(task("failed"), 60)
            refused = await store.save_task(task("completed"), 60)
            again = await store.save_task(task("working"), 60)
            kept = await store.load_task("o~t")
            nursery.cancel_scope.cancel()
    assert [None, None, None] == [*written, failed]
    assert refused is not None and "failed" == refused.task["status"]
    assert again is not None and "failed" == again.task["status"]
    assert kept is not None and "failed" == kept.task["status"]


@pytest.mark.spec("TK-GATE", "TM-TASK-ORDER", "TM-STORE-TASKS")
@pytest.mark.parametrize("holder", ["reachable", "gone"])
async def test_a_task_of_another_worker_meets_the_gates_first(
    live_server: StartServer, shared_store: StoreBackend, holder: str
) -> None:
    """A tasks/* request for a task another worker runs meets the same gates, in the same
    order, as one for a task of this worker: the headers (-32020), then the extension
    (-32021), before anything is relayed or read from the store, whether that worker
    answers or is gone."""
    a, b = await _workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        running = _result(await post(a.url, call_tool("job", {"seconds": 60},
                                                      capabilities=WITH_TASKS)))
        task_id = running["taskId"]
        await wait_until(lambda: b'"working"' in shared_store.task(task_id), poll=0.01)
        if holder == "gone":
            await _forget_address(shared_store, a)
        undeclared = await post(b.url, modern_request("tasks/get", {"taskId": task_id},
                                                      capabilities={}))
        message = modern_request("tasks/get", {"taskId": task_id}, capabilities=WITH_TASKS)
        nameless = await post(b.url, message, headers=[
            (k, v) for k, v in modern_headers(message) if k.lower() != "mcp-name"])
        stored = shared_store.task(task_id)
    assert 400 == undeclared.status
    assert -32021 == _error(undeclared)["code"]
    assert {"extensions": {TASKS: {}}} == _error(undeclared)["data"]["requiredCapabilities"]
    assert 400 == nameless.status and -32020 == _error(nameless)["code"]
    assert b'"working"' in stored  # nothing was declared for the refused requests
    assert a.app.runtime.tasks.runs[task_id].status is not None  # type: ignore[union-attr]


@pytest.mark.spec("TM-STORE-DOWN", "TM-STORE-TASKS")
async def test_a_store_that_cannot_be_read_is_503_not_a_lost_task(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """When the worker of a task is gone and the store does not answer for the task (here:
    its key holds what the store cannot read), the request gets 503 with Retry-After and
    -31004, as any request the store fails: never "the task is lost"."""
    a, b = await _workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        origin = a.cluster.store.origin
        task_id = f"{origin}~{'y' * 32}"
        shared_store.break_task(task_id)
        await _forget_address(shared_store, a)
        refused = await _task(b.url, "tasks/get", task_id)
    assert 503 == refused.status, refused.body
    assert "1" == refused.header("retry-after")
    assert -31004 == _error(refused)["code"]


@pytest.mark.spec("TK-DURABLE", "TK-CREATE")
async def test_a_task_created_at_one_worker_is_read_at_once_at_another(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """Twenty tasks created at worker A, each read at worker B the moment its
    CreateTaskResult arrives, with no wait between: every tasks/get resolves, at the
    status the task has, never as an unknown task."""
    a, b = await _workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        seen = []
        for _ in range(20):
            created = _result(await post(a.url, call_tool("job", {"seconds": 30},
                                                          capabilities=WITH_TASKS)))
            seen.append(_result(await _task(b.url, "tasks/get", created["taskId"])))
    assert ["working"] * 20 == [task["status"] for task in seen]
