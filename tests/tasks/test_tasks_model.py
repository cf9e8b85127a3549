# Hypothesis over schedules of tasks, in memory under trio's MockClock: creates of every kind
# of task, polls, updates (right, partial, unknown, malformed), cancels, clock jumps across
# the TTL and clients that leave, in any order, against the real runtime behind its ASGI app.
# A model follows what each task may be; after every step the server's answers must agree
# with it: no illegal transition, no lost or changed result, nothing alive after its TTL, and
# a client that leaves after the CreateTaskResult never cancels its task.
from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from features.feat_support import Exchange, MemoryServer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.modern import META_CAPS, META_INFO, META_VERSION, MODERN

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import ErrorCode, RemoteProtocolError

TTL = 30.0
TASK_AFTER = 0.5
CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}}
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TERMINAL = {"completed", "failed", "cancelled"}
MOVES = {
    "working": {"working", "input_required", *TERMINAL},
    "input_required": {"working", "input_required", *TERMINAL},
}


def model_server() -> Server:
    server = Server("tasks-model")

    @server.tool(task="required")
    async def work(seconds: float = 1.0) -> str:
        """Works, then answers."""
        await trio.sleep(seconds)
        return f"worked {seconds:g}"

    @server.tool(task="required")
    async def ask(ctx: Context) -> str:
        """Asks two names at once, then answers with them."""
        answers = await ctx.ask({
            "a": _question(), "b": _question(),
        })
        return "+".join(str((answers[k].get("content") or {}).get("name")) for k in "ab")

    @server.tool(task="required")
    async def fail(seconds: float = 1.0) -> str:
        """Works, then ends with a JSON-RPC error."""
        await trio.sleep(seconds)
        raise RemoteProtocolError("Internal error: fail", code=ErrorCode.INTERNAL_ERROR)

    @server.tool(task="optional")
    async def maybe(seconds: float = 0.0) -> str:
        """A task only if it outlasts task_after."""
        await trio.sleep(seconds)
        return f"maybe {seconds:g}"

    return server


def _question() -> Any:
    from trio_mcp import elicitation_request

    return elicitation_request("Name?", FORM)


def modern(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    meta = {META_VERSION: MODERN, META_INFO: {"name": "model", "version": "0"}, META_CAPS: CAPS}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


async def send(ms: MemoryServer, message: dict[str, Any], name: str | None = None) -> Exchange:
    headers = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", message["method"]),
    ]
    if name is not None:
        headers.append(("mcp-name", name))
    return await ms.request("POST", headers, json.dumps(message).encode())


def start(
    ms: MemoryServer, nursery: trio.Nursery, message: dict[str, Any], name: str
) -> Exchange:
    """Send a request without waiting for its answer to begin (MemoryServer.request waits for
    the response head)."""
    ex = Exchange(json.dumps(message).encode())
    headers = [
        ("host", "127.0.0.1:8000"), ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"), ("mcp-protocol-version", MODERN),
        ("mcp-method", message["method"]), ("mcp-name", name),
    ]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": ms.config.path, "raw_path": ms.config.path.encode(),
        "query_string": b"", "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    nursery.start_soon(ms.app, scope, ex._receive, ex._send)
    return ex


async def answer(ex: Exchange) -> dict[str, Any]:
    if ex.content_type == "application/json":
        final = json.loads(await ex.body())
    else:
        final = (await ex.messages())[-1]
    assert isinstance(final, dict)
    return final


@attrs.define
class Seen:
    """What the model knows of one task."""

    task_id: str
    kind: str
    created: float
    statuses: list[str] = attrs.field(factory=list)
    updated: list[str] = attrs.field(factory=list)
    result: Any = None
    expired: bool = False
    cancel_sent: bool = False


# Steps: (what, which task, a parameter).
CREATE = st.tuples(st.just("create"), st.sampled_from(["work", "ask", "fail", "maybe"]),
                   st.sampled_from([0.0, 0.2, 1.0, 5.0, 60.0]))
STEP = st.one_of(
    CREATE,
    CREATE,
    st.tuples(st.just("get"), st.integers(0, 7), st.just(0.0)),
    st.tuples(st.just("update"), st.integers(0, 7),
              st.sampled_from(["a", "b", "ab", "unknown", "malformed"])),
    st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0.0)),
    st.tuples(st.just("sleep"), st.just(0), st.sampled_from([0.1, 1.0, 7.0, 31.0])),
    st.tuples(st.just("leave"), st.sampled_from(["work", "maybe"]), st.just(2.0)),
)


async def run_schedule(steps: list[tuple[str, Any, Any]]) -> None:
    config = ServerConfig(task_ttl=TTL, task_after=TASK_AFTER, task_poll_interval=0.2)
    rid = 0
    seen: list[Seen] = []
    async with trio.open_nursery() as nursery:
        ms = MemoryServer(model_server(), config, nursery)
        await nursery.start(ms.run)
        runtime = ms.app.runtime

        async def get(s: Seen) -> dict[str, Any]:
            nonlocal rid
            rid += 1
            return await answer(await send(ms, modern("tasks/get", {"taskId": s.task_id}, rid),
                                           s.task_id))

        def check(s: Seen, message: dict[str, Any]) -> None:
            """One tasks/get answer against the model."""
            now = trio.current_time()
            if "error" in message:
                # Only a task past its TTL may be unknown, and never comes back.
                assert -32602 == message["error"]["code"], message
                assert now >= s.created + TTL, (s, now)
                s.expired = True
                return
            assert not s.expired, ("an expired task came back", s)
            result = message["result"]
            status = result["status"]
            if s.statuses:
                last = s.statuses[-1]
                # No illegal transition; a terminal state never changes.
                assert status in MOVES.get(last, {last}), (s.statuses, status)
                # lastUpdatedAt never goes back (ISO strings of one format sort as times).
                assert result["lastUpdatedAt"] >= s.updated[-1]
            if status == "cancelled":
                # TK-LIFE: only tasks/cancel cancels a task; leaving does not.
                assert s.cancel_sent, s
            # TK-FAILED: only the tool that ends with a JSON-RPC error fails its task, and it
            # never completes.
            assert (status == "failed") <= (s.kind == "fail"), (s, status)
            assert (status == "completed") <= (s.kind != "fail"), (s, status)
            s.statuses.append(status)
            s.updated.append(result["lastUpdatedAt"])
            if status == "completed":
                # No lost or changed result.
                if s.result is None:
                    s.result = result["result"]
                assert s.result == result["result"]
            if status == "input_required":
                assert set(result["inputRequests"]) <= {"a", "b"} and result["inputRequests"]

        for what, which, param in steps:
            if what == "create":
                rid += 1
                message = modern("tools/call", {"name": which, "arguments": (
                    {} if which == "ask" else {"seconds": param})}, rid)
                final = await answer(await send(ms, message, which))
                result = final["result"]
                if result["resultType"] == "task":
                    s = Seen(result["taskId"], which, trio.current_time())
                    check(s, {"result": result})
                    seen.append(s)
                else:
                    # Only a call that may be a task and ended within task_after is plain.
                    assert "maybe" == which and param <= TASK_AFTER, (which, param, result)
            elif what == "leave":
                rid += 1
                message = modern("tools/call", {"name": which, "arguments": {"seconds": param}},
                                 rid)
                if which == "work":
                    # After the CreateTaskResult: the task lives on, and the model follows it
                    # (a later "cancelled" without tasks/cancel would fail check()).
                    ex = await send(ms, message, which)
                    result = (await answer(ex))["result"]
                    ex.disconnect()
                    s = Seen(result["taskId"], which, trio.current_time())
                    check(s, {"result": result})
                    seen.append(s)
                else:
                    # While the call is still deciding (its answer not begun): it is a
                    # request like any other, and ends with its client.
                    before = runtime.statistics()["tasks_created"]
                    ex = start(ms, nursery, message, which)
                    await trio.sleep(TASK_AFTER / 5)
                    ex.disconnect()
                    await trio.sleep(TASK_AFTER * 2)
                    assert before == runtime.statistics()["tasks_created"]
            elif what == "sleep":
                await trio.sleep(param)
            elif seen:
                s = seen[which % len(seen)]
                rid += 1
                if what == "get":
                    check(s, await get(s))
                elif what == "cancel":
                    s.cancel_sent = True
                    final = await answer(await send(
                        ms, modern("tasks/cancel", {"taskId": s.task_id}, rid), s.task_id))
                    if "error" in final:
                        assert trio.current_time() >= s.created + TTL
                    else:
                        assert {"resultType"} <= set(final["result"])
                        got = await get(s)
                        check(s, got)
                        if "result" in got:
                            # TM-TASK-CANCEL: terminal by the very next get.
                            assert got["result"]["status"] in TERMINAL
                else:
                    keys = {"a": ["a"], "b": ["b"], "ab": ["a", "b"], "unknown": ["zz"],
                            "malformed": ["a"]}[param]
                    responses = {k: ({"action": "accept", "content": {"name": 5}}
                                     if param == "malformed" else
                                     {"action": "accept", "content": {"name": k.upper()}})
                                 for k in keys}
                    final = await answer(await send(ms, modern(
                        "tasks/update", {"taskId": s.task_id, "inputResponses": responses},
                        rid), s.task_id))
                    if "error" in final:
                        # Unknown task (past its TTL), or a malformed answer to an open one.
                        assert final["error"]["code"] == -32602
            # After every step: nothing alive past its TTL (one expiry tick of slack).
            now = trio.current_time()
            for run in runtime.tasks.runs.values():
                if run.published:
                    assert run.deadline >= now - 1e-6
            # Tasks alive in the runtime are exactly those created and not past their TTL.
            for s in seen:
                if now < s.created + TTL - 1e-6:
                    assert s.task_id in runtime.tasks.runs, s
        # Then every task is read once more after their work had time to end, before the TTL
        # of the last one created.
        await trio.sleep(6.0)
        for s in seen:
            check(s, await get(s))
        event(f"tasks followed: {min(len(seen), 5)}+" if len(seen) >= 5 else
              f"tasks followed: {len(seen)}")
        event("statuses seen: " + ",".join(sorted({st for s in seen for st in s.statuses})))
        # Past every TTL, nothing is left, and no result bytes are held.
        await trio.sleep(TTL + 1)
        assert {} == runtime.tasks.runs
        assert 0 == runtime.statistics()["tasks_result_bytes"]
        for s in seen:
            message = await get(s)
            assert -32602 == message["error"]["code"]
        nursery.cancel_scope.cancel()


@pytest.mark.spec("TK-STATES", "TK-TTL", "TK-LIFE", "TK-UPDATE", "TK-CANCEL", "TM-TASK-EXPIRE")
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEP, min_size=3, max_size=40))
def test_any_schedule_of_tasks_keeps_the_state_machine_and_the_ttl(
    steps: list[tuple[str, Any, Any]],
) -> None:
    """Whatever is created, polled, answered, cancelled, abandoned or left to expire, in any
    order: each task moves only as the machine allows, a result once read never changes, a
    task lives exactly its TTL and then nothing of it is left."""
    trio.run(run_schedule, steps, clock=trio.testing.MockClock(autojump_threshold=0))
