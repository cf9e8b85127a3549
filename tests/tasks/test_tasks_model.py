# Hypothesis over schedules of tasks (io.modelcontextprotocol/tasks, spec/tasks.md), in memory
# under trio's MockClock, against the real runtime behind its ASGI app (no sockets): creates of
# every kind of tool (work then answer, ask inside the task, fail with a JSON-RPC error, an
# optional one quicker or slower than task_after, answered as JSON or, once it has logged, as
# SSE), tasks/get, tasks/update (right keys, a subset, unknown keys, declines, wrong answers,
# a wrong shape), tasks/cancel (alone, or at the same instant as an update), clock jumps
# across the TTL, a client at its bound of tasks, and clients that leave before, at and after
# the moment their call becomes a task. A model written from the rules says what each task is
# at every moment; after every step the runtime (its snapshots, every transition it made, its
# counters, its handler tasks) and every tasks/get answer must agree with it.
#
# Timing is exact: every duration is a multiple of a quarter second (exact in binary), so the
# model can put an event that falls on the same instant as a step (a handler's end, a TTL)
# before the step's check, as trio does: everything due at an instant runs before the test
# looks (trio.testing.wait_all_tasks_blocked).
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs
import pytest
import trio
import trio.testing
from features.feat_support import Exchange, MemoryServer
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from support.modern import META_CAPS, META_INFO, META_LEVEL, META_VERSION, MODERN

from trio_mcp import Context, Server, ServerConfig, elicitation_request
from trio_mcp.protocol import ErrorCode, RemoteProtocolError, SSEDecoder, dumps
from trio_mcp.runtime._stats import as_dict
from trio_mcp.runtime.tasks._tasks import TASK_FOOTPRINT

TTL: Final = 30.0
TASK_AFTER: Final = 0.5
#: TM-TASK-BOUND: tasks running at once (max_tasks; every client here is one peer, so it
#: holds them all, and nothing is ever taken from another client's).
PER_OWNER: Final = 5
#: The extension and form elicitation, declared in every request's own _meta (TK-OPTIN).
CAPS: Final[dict[str, Any]] = {
    "extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}},
}
FORM: Final = {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
}
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: TK-STATES, with a repeat of input_required (its open questions changed).
MOVES: Final = {
    "working": {"input_required", *TERMINAL},
    "input_required": {"working", "input_required", *TERMINAL},
}
#: What a tool works for (all but ask): around task_after, and across the TTL.
DURATIONS: Final = (0.25, 0.5, 1.0, 5.0, 29.75, 45.0)
SLEEPS: Final = (0.25, 0.5, 1.0, 3.75, 10.0, 29.75, 30.0, 31.0)
UPDATES: Final = (
    "right", "subset", "unknown", "decline", "wrong-answer", "mixed", "stale", "not-object",
    "missing",
)
#: When a client leaves its tools/call: before the server ran it, mid-decision, exactly at
#: task_after, or once its CreateTaskResult has arrived.
LEAVES: Final = ("instant", "deciding", "at-task-after", "after-create")
HANDLER: Final = "task tools/call"
OPTIONAL: Final = frozenset({"maybe", "chatty"})


# -- the server ------------------------------------------------------------------------------


def _named(answer: Mapping[str, Any]) -> str:
    content = answer.get("content")
    if answer.get("action") == "accept" and isinstance(content, Mapping):
        return str(content.get("name"))
    return str(answer.get("action"))


def model_server() -> Server:
    server = Server("tasks-model")

    @server.tool(task="required")
    async def work(seconds: float) -> str:
        """Works, then answers."""
        await trio.sleep(seconds)
        return f"worked {seconds:g}"

    @server.tool(task="required")
    async def ask(ctx: Context) -> str:
        """Asks one name, then two at once, then answers with the three."""
        first = await ctx.elicit("Name a?", FORM, key="a")
        rest = await ctx.ask(
            {"b": elicitation_request("Name b?", FORM), "c": elicitation_request("Name c?", FORM)}
        )
        a = {"action": first.action, "content": first.content}
        return " ".join(f"{k}={_named(v)}" for k, v in (("a", a), *sorted(rest.items())))

    @server.tool(task="required")
    async def fail(seconds: float) -> str:
        """Works, then ends with a JSON-RPC error."""
        await trio.sleep(seconds)
        raise RemoteProtocolError("Internal error: failed", code=ErrorCode.INTERNAL_ERROR)

    @server.tool(task="optional")
    async def maybe(seconds: float) -> str:
        """A task only if it outlasts task_after."""
        await trio.sleep(seconds)
        return f"maybe {seconds:g}"

    @server.tool(task="optional")
    async def chatty(ctx: Context, seconds: float) -> str:
        """As maybe, but it logs first: its exchange answers as SSE from its first moment."""
        await ctx.log("info", "starting")
        await trio.sleep(seconds)
        # A published task has no stream: this goes nowhere (TM-TASK-STREAMLESS).
        await ctx.log("info", "done")
        return f"chatty {seconds:g}"

    return server


# -- the model -------------------------------------------------------------------------------


@attrs.define
class Task:
    """One task as the rules say it is."""

    task_id: str
    kind: str
    seconds: float
    started: float
    """When its tools/call reached the server."""
    created: float
    """When it became a task (TK-TTL counts from here)."""
    known: bool
    """Its client read the CreateTaskResult (else it is an orphan the test found)."""
    open: set[str] = attrs.Factory(set)
    """The ask task's questions open now."""
    answers: dict[str, Any] = attrs.Factory(dict)
    cancelled_at: float | None = None
    result: Any = None
    """The result of the first tasks/get that read it completed."""
    seen: list[tuple[str, str]] = attrs.Factory(list)
    """(status, lastUpdatedAt) of every tasks/get answer."""
    created_at: str = ""

    @property
    def expires(self) -> float:
        return self.created + TTL

    def gone(self, now: float) -> bool:
        return now >= self.expires

    def status(self, now: float) -> str:
        if self.cancelled_at is not None:
            return "cancelled"
        if self.kind == "ask":
            return "input_required" if self.open else "completed"
        if now >= self.started + self.seconds:
            return "failed" if self.kind == "fail" else "completed"
        return "working"

    def text(self) -> str:
        if self.kind == "ask":
            return " ".join(f"{k}={_named(self.answers[k])}" for k in "abc")
        return f"{'worked' if self.kind == 'work' else self.kind} {self.seconds:g}"


@attrs.define
class World:
    tasks: list[Task] = attrs.Factory(list)
    #: Every transition the runtime made, by task id: (when, new status).
    history: dict[str, list[tuple[float, str]]] = attrs.Factory(dict)
    refused: int = 0
    withdrawn: int = 0
    """Tasks published as their client left, so that no one was told of them: withdrawn at
    once (TM-TASK-WITHDRAW)."""
    busy: int = 0
    """Calls refused, or run on their exchange, because the client had PER_OWNER tasks
    running."""
    leaves: set[str] = attrs.Factory(set)
    notes: set[str] = attrs.Factory(set)
    at_once: frozenset[int] = frozenset({0})
    """What the current step may add to tasks_answered_at_once: runs that ended before they
    became tasks (answered plain, or abandoned by their client)."""

    def find(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    def full(self, now: float) -> bool:
        # A task that has ended gives its running slot back at once (TM-TASK-BOUND).
        return sum(
            not t.gone(now) and t.status(now) not in TERMINAL for t in self.tasks
        ) >= PER_OWNER


# -- requests --------------------------------------------------------------------------------

_ids = iter(range(1, 10**9))


def modern(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    meta = {
        META_VERSION: MODERN, META_INFO: {"name": "model", "version": "0"}, META_CAPS: CAPS,
        META_LEVEL: "info",
    }
    return {
        "jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta},
    }


def begin(ms: MemoryServer, nursery: trio.Nursery, message: Mapping[str, Any]) -> Exchange:
    """POST a modern request without waiting for anything (MemoryServer.request waits for
    the response head)."""
    params = message["params"]
    name = params.get("name", params.get("taskId"))
    headers = [
        ("host", "127.0.0.1:8000"), ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"), ("mcp-protocol-version", MODERN),
        ("mcp-method", message["method"]), ("mcp-name", str(name)),
    ]
    ex = Exchange(json.dumps(message).encode())
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": ms.config.path, "raw_path": ms.config.path.encode(),
        "query_string": b"", "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    nursery.start_soon(ms.app, scope, ex._receive, ex._send)
    return ex


async def final(ex: Exchange) -> dict[str, Any]:
    """The JSON-RPC answer of an exchange whose head has come (waiting for it)."""
    while (message := await ex.next_message()) is not None:
        if "method" not in message:
            return message
    raise AssertionError(f"no answer; events: {ex.events}")


def received(ex: Exchange) -> dict[str, Any] | None:
    """The answer among what the exchange has received so far, if any: without waiting, for
    a client that has left."""
    chunks: list[bytes] = []
    while True:
        try:
            chunks.append(ex._chunks.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    data = b"".join(chunks)
    if ex.content_type == "application/json":
        messages = [json.loads(data)] if data else []
    else:
        messages = [json.loads(e.data) for e in SSEDecoder().feed(data) if e.data]
    return next((m for m in messages if "method" not in m), None)


async def rpc(ms: MemoryServer, nursery: trio.Nursery, message: Mapping[str, Any]) -> Any:
    ex = begin(ms, nursery, message)
    await ex._started.wait()
    return await final(ex)


def tasks_named(prefix: str) -> list[trio.lowlevel.Task]:
    """Every task of this trio run whose name starts with ``prefix``."""
    found: list[trio.lowlevel.Task] = []
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        if task.name.startswith(prefix):
            found.append(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


async def settle() -> None:
    # Everything due now has run: nothing is runnable, and no time has passed.
    await trio.testing.wait_all_tasks_blocked()


# -- the checks ------------------------------------------------------------------------------


def check_created(task: Task, result: Mapping[str, Any]) -> None:
    """TK-CREATE: a flat CreateTaskResult of a working task."""
    assert "task" == result["resultType"], result
    assert "working" == result["status"], result
    assert int(TTL * 1000) == result["ttlMs"]
    assert not {"result", "error", "inputRequests", "requestState"} & set(result), result
    task.created_at = result["createdAt"]
    task.seen.append(("working", result["lastUpdatedAt"]))


def check_get(task: Task, answer: Mapping[str, Any], now: float) -> None:
    """One tasks/get answer against the model."""
    if task.gone(now):
        # TK-TTL: past createdAt + ttlMs the task is unknown.
        assert "error" in answer, (task, now, answer)
        assert -32602 == answer["error"]["code"]
        return
    assert "result" in answer, (task, now, answer)
    got = answer["result"]
    status = got["status"]
    assert (task.task_id, "complete") == (got["taskId"], got["resultType"])
    assert status == task.status(now), (task, now, got)
    # TK-STATES: a legal move from the last status read, or the same one; lastUpdatedAt never
    # goes back (ISO strings of one format sort as the times they name).
    last, updated = task.seen[-1]
    assert status == last or status in MOVES.get(last, set()), (task.seen, status)
    assert got["lastUpdatedAt"] >= updated, (task.seen, got)
    assert (task.created_at, int(TTL * 1000)) == (got["createdAt"], got["ttlMs"])
    task.seen.append((status, got["lastUpdatedAt"]))
    if status == "completed":
        # No lost or changed result: the one first read, every time, until the TTL.
        if task.result is None:
            task.result = got["result"]
        assert task.result == got["result"], (task, got)
        assert [{"type": "text", "text": task.text()}] == got["result"]["content"]
    else:
        assert "result" not in got, got
    if status == "input_required":
        assert task.open == set(got["inputRequests"]), (task, got)
        assert all(q["method"] == "elicitation/create" for q in got["inputRequests"].values())
    else:
        assert "inputRequests" not in got, got
    if status == "failed":
        assert -32603 == got["error"]["code"] and "failed" in got["error"]["message"], got


def check_runtime(ms: MemoryServer, world: World) -> None:
    """After every step: the runtime's own state against the model."""
    now = trio.current_time()
    runtime = ms.app.runtime
    runs = runtime.tasks.runs
    alive = {t.task_id for t in world.tasks if not t.gone(now)}
    # TK-TTL / TM-TASK-EXPIRE: the runtime holds exactly the tasks within their TTL, and no
    # run still deciding (every step has ended).
    assert alive == set(runs), (now, {t.task_id: t.expires for t in world.tasks}, set(runs))
    held = 0
    for task in world.tasks:
        run = runs.get(task.task_id)
        if run is None:
            continue
        snapshot = run.snapshot
        assert snapshot is not None
        assert task.status(now) == snapshot.status.value, (task, now, snapshot)
        if task.status(now) == "input_required":
            assert task.open == set(snapshot.input_requests), (task, snapshot)
        if snapshot.result is not None:
            held += len(dumps(snapshot.result))
        if snapshot.status.value in TERMINAL:
            held += TASK_FOOTPRINT  # an ended task is kept with its record
    for task_id, moves in world.history.items():
        moved = world.find(task_id)
        assert moved is not None, ("a transition of a task the model does not know", task_id)
        last = "working"
        for at, status in moves:
            # TK-STATES: every move the runtime made is one of the machine's; a terminal state
            # never changes. Nothing moves past the TTL.
            assert status in MOVES.get(last, set()), (moved, moves)
            assert at <= moved.expires, (moved, moves)
            last = status
        if "cancelled" in (s for _, s in moves):
            # TK-LIFE: only tasks/cancel cancels a task; a client leaving never does.
            assert moved.cancelled_at is not None, (moved, moves)
    # How each task ended, or that it did not before its TTL, is what the model says: every
    # event falls on a quarter second, so an eighth before the TTL is after all of them.
    ended = {t.task_id: t.status(min(now, t.expires - 0.125)) for t in world.tasks}
    for task in world.tasks:
        statuses = [s for _, s in world.history.get(task.task_id, [])]
        last = statuses[-1] if statuses else "working"
        if ended[task.task_id] in TERMINAL or last in TERMINAL:
            assert ended[task.task_id] == last, (task, statuses, now)
    # No handler outlives its task: those running are the tasks working or waiting.
    running = [t for t in world.tasks if not t.gone(now) and t.status(now) not in TERMINAL]
    assert len(running) == len(tasks_named(HANDLER)), (running, now)
    stats = as_dict(runtime.statistics())
    assert 0 == stats["modern_requests_running"]
    assert len(alive) == stats["tasks_alive"]
    assert len(world.tasks) + world.withdrawn == stats["tasks_created"]
    assert world.withdrawn == stats["tasks_withdrawn"]
    assert sum(t.gone(now) for t in world.tasks) == stats["tasks_expired"]
    for status in ("completed", "failed", "cancelled"):
        made = sum(s == status for s in ended.values())
        assert made == stats[f"tasks_{status}"], (status, stats)
    # The bytes kept are exactly the results of the completed tasks within their TTL, and
    # each ended task's record.
    assert held == stats["tasks_result_bytes"], (held, stats)


# -- one schedule ----------------------------------------------------------------------------


def answer_for(key: str, how: str) -> Any:
    if how == "decline":
        return {"action": "decline"}
    if how == "wrong":
        return {"action": "accept", "content": {"name": 5}}
    return {"action": "accept", "content": {"name": key.upper()}}


def update_params(task: Task, variant: str) -> dict[str, Any]:
    keys = sorted(task.open) or ["a"]
    responses: Any
    if variant == "right":
        responses = {k: answer_for(k, "right") for k in keys}
    elif variant == "subset":
        responses = {keys[-1]: answer_for(keys[-1], "right")}
    elif variant == "unknown":
        responses = {"zz": answer_for("zz", "right")}
    elif variant == "decline":
        responses = {k: answer_for(k, "decline") for k in keys}
    elif variant == "wrong-answer":
        responses = {keys[0]: answer_for(keys[0], "wrong")}
    elif variant == "mixed":
        # One right answer and one wrong: refused whole when the wrong one is to an open key.
        responses = {keys[0]: answer_for(keys[0], "right"), "c": answer_for("c", "wrong")}
    elif variant == "stale":
        responses = {k: answer_for(k, "right") for k in ("a", "b") if k not in task.open}
    elif variant == "not-object":
        responses = [answer_for("a", "right")]
    else:
        return {"taskId": task.task_id}
    return {"taskId": task.task_id, "inputResponses": responses}


def apply_update(task: Task, params: Mapping[str, Any], now: float) -> str | None:
    """What an update does to the model: None for the ack, else why it is refused."""
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping):
        return "malformed"
    if task.gone(now):
        return "unknown"
    if task.status(now) in TERMINAL:
        return None
    # TK-UPDATE: only open keys count; one wrong answer among them refuses the whole update.
    fresh = {k: v for k, v in responses.items() if k in task.open}
    if any(v.get("content") == {"name": 5} for v in fresh.values()):
        return "wrong answer"
    task.answers.update(fresh)
    task.open -= set(fresh)
    if task.kind == "ask" and not task.open and "b" not in task.answers:
        task.open = {"b", "c"}  # the handler asks its next two at once
    return None


async def create(
    ms: MemoryServer, nursery: trio.Nursery, world: World, kind: str, seconds: float
) -> None:
    started = trio.current_time()
    full = world.full(started)
    arguments = {} if kind == "ask" else {"seconds": seconds}
    answer = await rpc(ms, nursery, modern("tools/call", {"name": kind, "arguments": arguments}))
    now = trio.current_time()
    if full and kind not in OPTIONAL:
        # TM-TASK-BOUND: no room for a task that must be one: 503, retry later.
        assert ErrorCode.SERVER_BUSY == answer["error"]["code"], answer
        world.busy += 1
        return
    assert "result" in answer, answer
    result = answer["result"]
    if result["resultType"] != "task":
        # TM-TASK-DECIDE: only an optional call that ended within task_after is plain, or
        # one that found no room for a task (it runs on its exchange, TM-TASK-BOUND).
        assert kind in OPTIONAL and (seconds <= TASK_AFTER or full), (kind, seconds, result)
        assert [{"type": "text", "text": f"{kind} {seconds:g}"}] == result["content"]
        assert now == started + seconds
        world.busy += full
        world.at_once = frozenset({0 if full else 1})
        if seconds == TASK_AFTER:
            world.notes.add("an optional call ending at task_after answered plain")
        return
    assert not full, ("a task past the bound", kind, result)
    if kind in OPTIONAL and seconds == TASK_AFTER:
        world.notes.add("an optional call ending at task_after became a task")
    # Required: a task at once; optional: once it outlasted task_after (exactly then).
    assert now == started + (TASK_AFTER if kind in OPTIONAL else 0.0), (kind, now, started)
    task = Task(result["taskId"], kind, seconds, started, now, True,
                open={"a"} if kind == "ask" else set())
    check_created(task, result)
    world.tasks.append(task)


async def leave(
    ms: MemoryServer, nursery: trio.Nursery, world: World, kind: str, when: str
) -> None:
    """A client that leaves its tools/call (kind, 5 s of work) at ``when``."""
    started = trio.current_time()
    full = world.full(started)
    runs = ms.app.runtime.tasks.runs
    before = set(runs)
    withdrawn_before = as_dict(ms.app.runtime.statistics())["tasks_withdrawn"]
    ex = begin(ms, nursery, modern("tools/call", {"name": kind, "arguments": {"seconds": 5.0}}))
    answer: dict[str, Any] | None = None
    if when == "deciding":
        await trio.sleep(TASK_AFTER / 2)
    elif when == "at-task-after":
        await trio.sleep(TASK_AFTER)
    elif when == "after-create":
        # Once the answer has come (a task's CreateTaskResult, at once or at task_after).
        await ex._started.wait()
        answer = await final(ex)
    ex.disconnect()
    await settle()
    if answer is None:
        answer = received(ex)
    new = set(runs) - before
    withdrawn = as_dict(ms.app.runtime.statistics())["tasks_withdrawn"] - withdrawn_before
    delivered: dict[str, Any] | None = None
    if answer is not None and "error" in answer:
        # TM-TASK-BOUND: a required call with no room is refused at once.
        assert full and kind not in OPTIONAL, answer
        assert ErrorCode.SERVER_BUSY == answer["error"]["code"], answer
    elif answer is not None and answer["result"]["resultType"] != "task":
        # An optional call with no room ran on its exchange, to its end.
        assert full and kind in OPTIONAL and when == "after-create", answer
        assert [{"type": "text", "text": f"{kind} 5"}] == answer["result"]["content"]
    elif answer is not None:
        delivered = answer["result"]
        assert not full and {delivered["taskId"]} == new, (full, new, delivered)
    if full or (kind in OPTIONAL and when in ("instant", "deciding")):
        # MU-CANCEL-1: before it is a task, a call ends with its client: no task.
        assert not new and delivered is None, (new, delivered)
    if when == "after-create" and not full:
        assert delivered is not None
    world.busy += full
    if withdrawn:
        # TM-TASK-WITHDRAW: it became a task as its client left, and its CreateTaskResult
        # never went out: nobody knows its id, so it is gone at once, its slot freed.
        assert 1 == withdrawn and not new and delivered is None, (withdrawn, new, delivered)
        assert kind in OPTIONAL and when == "at-task-after", (kind, when)
        world.withdrawn += 1
    if kind in OPTIONAL and not full and not new and not withdrawn:
        # Abandoned before it became a task (when the client left before the server even
        # looked at the call, it may never have started).
        world.at_once = frozenset({0, 1} if when == "instant" else {1})
    world.leaves.add(f"{kind} left {when}: " + (
        "no room" if full else "told of its task" if delivered
        else "a task nobody was told of" if new else "no task"))
    assert len(new) <= 1, new
    for task_id in new:
        run = runs[task_id]
        created = run.deadline - TTL
        assert created == started + (TASK_AFTER if kind in OPTIONAL else 0.0), (created, started)
        task = Task(task_id, kind, 5.0, started, created, delivered is not None)
        # A task that stays is one its client was told of: no orphan (TM-TASK-WITHDRAW).
        assert delivered is not None, (task_id, kind, when)
        check_created(task, delivered)
        world.tasks.append(task)


async def step(
    ms: MemoryServer, nursery: trio.Nursery, world: World, what: str, which: Any, param: Any
) -> None:
    if what == "create":
        await create(ms, nursery, world, which, param)
    elif what == "leave":
        await leave(ms, nursery, world, which, param)
    elif what == "sleep":
        await trio.sleep(which)
    elif what == "get" and (which < 0 or not world.tasks):
        # TK-UNKNOWN: an id never issued.
        answer = await rpc(ms, nursery, modern("tasks/get", {"taskId": "no-such-task"}))
        assert -32602 == answer["error"]["code"], answer
    elif world.tasks:
        task = world.tasks[which % len(world.tasks)]
        now = trio.current_time()
        if what == "get":
            check_get(task, await rpc(ms, nursery, modern(
                "tasks/get", {"taskId": task.task_id})), now)
        elif what == "burst":
            # An update with the right answers and a cancel at the same instant, in either
            # order: the task ends cancelled (unless it had ended), both acknowledged.
            exchanges = [
                begin(ms, nursery, modern("tasks/update", update_params(task, "right"))),
                begin(ms, nursery, modern("tasks/cancel", {"taskId": task.task_id})),
            ]
            for ex in exchanges:
                await ex._started.wait()
            answers = [await final(ex) for ex in exchanges]
            if task.gone(now):
                assert [-32602, -32602] == [a["error"]["code"] for a in answers], answers
                return
            assert all("result" in a for a in answers), answers
            if task.status(now) not in TERMINAL:
                task.cancelled_at = now
            check_get(task, await rpc(ms, nursery, modern(
                "tasks/get", {"taskId": task.task_id})), now)
        elif what == "cancel":
            answer = await rpc(ms, nursery, modern("tasks/cancel", {"taskId": task.task_id}))
            if task.gone(now):
                assert -32602 == answer["error"]["code"], answer
                return
            assert "complete" == answer["result"]["resultType"], answer
            assert not set(answer["result"]) - {"resultType", "_meta"}, answer  # TK-ACK
            if task.status(now) not in TERMINAL:
                task.cancelled_at = now
            # TM-TASK-CANCEL: cancelled before the ack; a terminal task is left as it was.
            check_get(task, await rpc(ms, nursery, modern(
                "tasks/get", {"taskId": task.task_id})), now)
        else:
            params = update_params(task, param)
            answer = await rpc(ms, nursery, modern("tasks/update", params))
            refused = apply_update(task, params, now)
            if refused is not None:
                assert -32602 == answer["error"]["code"], (refused, task, params, answer)
                world.refused += 1
                return
            assert "result" in answer, (task, params, answer)
            assert not set(answer["result"]) - {"resultType", "_meta"}, answer  # TK-ACK
            if task.status(now) == "input_required":
                # TM-TASK-CONSISTENT: the very next get shows the open questions left.
                check_get(task, await rpc(ms, nursery, modern(
                    "tasks/get", {"taskId": task.task_id})), now)


async def run_schedule(steps: list[tuple[str, Any, Any]]) -> World:
    config = ServerConfig(
        task_ttl=TTL, task_after=TASK_AFTER, task_poll_interval=0.25,
        max_tasks=PER_OWNER,
    )
    world = World()
    async with trio.open_nursery() as nursery:
        ms = MemoryServer(model_server(), config, nursery)
        await nursery.start(ms.run)
        manager = ms.app.runtime.tasks
        changed = manager.changed

        def spy(run: Any) -> None:
            assert run.snapshot is not None
            world.history.setdefault(run.task_id, []).append(
                (trio.current_time(), run.snapshot.status.value))
            changed(run)

        manager.changed = spy  # type: ignore[method-assign]
        for what, which, param in steps:
            at_once = as_dict(ms.app.runtime.statistics())["tasks_answered_at_once"]
            world.at_once = frozenset({0})
            await step(ms, nursery, world, what, which, param)
            await settle()
            check_runtime(ms, world)
            added = as_dict(ms.app.runtime.statistics())["tasks_answered_at_once"] - at_once
            assert added in world.at_once, (what, which, param, added)
        # Every task read once more, then, past every TTL, nothing is left.
        now = trio.current_time()
        for task in world.tasks:
            check_get(task, await rpc(ms, nursery, modern(
                "tasks/get", {"taskId": task.task_id})), now)
        await trio.sleep(TTL + 1)
        await settle()
        check_runtime(ms, world)
        assert {} == manager.runs
        stats = as_dict(ms.app.runtime.statistics())
        assert (0, 0) == (stats["tasks_alive"], stats["tasks_result_bytes"]), stats
        assert [] == tasks_named(HANDLER)
        for task in world.tasks:
            answer = await rpc(ms, nursery, modern("tasks/get", {"taskId": task.task_id}))
            assert -32602 == answer["error"]["code"], answer
        nursery.cancel_scope.cancel()
    return world


# -- the test --------------------------------------------------------------------------------

_index = st.integers(-1, 12)
_create = st.tuples(
    st.just("create"), st.sampled_from(("work", "ask", "fail", "maybe", "chatty")),
    st.sampled_from(DURATIONS),
)
STEP = st.one_of(
    _create,
    _create,
    _create,
    st.tuples(st.just("get"), _index, st.just("")),
    st.tuples(st.just("get"), _index, st.just("")),
    st.tuples(st.just("update"), _index, st.sampled_from(UPDATES)),
    st.tuples(st.just("update"), _index, st.sampled_from(UPDATES)),
    st.tuples(st.just("cancel"), _index, st.just("")),
    st.tuples(st.just("burst"), _index, st.just("")),
    st.tuples(st.just("sleep"), st.sampled_from(SLEEPS), st.just("")),
    st.tuples(st.just("leave"), st.sampled_from(("work", "maybe", "chatty")),
              st.sampled_from(LEAVES)),
)


@pytest.mark.spec("TK-STATES", "TK-TTL", "TK-LIFE", "TK-UPDATE", "TK-CANCEL", "TM-TASK-EXPIRE")
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(steps=st.lists(STEP, min_size=8, max_size=50))
# The ask task through both rounds, with a refused mixed update, an ignored stale key, then a
# cancel of the completed task that changes nothing, read until its TTL and past it.
@example(steps=[
    ("create", "ask", 0.0), ("get", 0, ""), ("update", 0, "unknown"), ("update", 0, "right"),
    ("get", 0, ""), ("update", 0, "mixed"), ("update", 0, "subset"), ("get", 0, ""),
    ("update", 0, "stale"), ("update", 0, "decline"), ("get", 0, ""), ("cancel", 0, ""),
    ("sleep", 29.75, ""), ("get", 0, ""), ("sleep", 0.25, ""), ("get", 0, ""),
])
# Clients that leave at every moment; the tasks that exist live on and complete.
@example(steps=[
    ("leave", "maybe", "deciding"), ("leave", "maybe", "at-task-after"),
    ("leave", "maybe", "after-create"), ("leave", "work", "instant"),
    ("leave", "work", "after-create"), ("sleep", 10.0, ""), ("get", 0, ""), ("get", 1, ""),
])
# Cancels of a working and a waiting task: cancelled before the ack, for good; an update
# and a cancel at once.
@example(steps=[
    ("create", "work", 5.0), ("create", "ask", 0.0), ("create", "ask", 0.0), ("cancel", 0, ""),
    ("cancel", 1, ""), ("burst", 2, ""), ("get", 1, ""), ("sleep", 5.0, ""), ("get", 0, ""),
    ("update", 1, "right"), ("get", 2, ""),
])
# At the bound, a required call gets 503 and an optional one runs on its exchange; once the
# tasks have expired there is room again.
@example(steps=[
    ("create", "work", 1.0), ("create", "ask", 0.0), ("create", "fail", 1.0),
    ("create", "maybe", 5.0), ("create", "chatty", 5.0), ("create", "work", 1.0),
    ("create", "maybe", 1.0), ("leave", "chatty", "after-create"), ("leave", "work", "instant"),
    ("sleep", 31.0, ""), ("create", "work", 1.0), ("create", "ask", 0.0),
    ("create", "fail", 1.0), ("create", "maybe", 5.0), ("create", "chatty", 5.0),
    ("create", "work", 1.0),
])
# Work that outlasts its TTL is cancelled by it, and a cancel then gets -32602.
@example(steps=[
    ("create", "work", 45.0), ("create", "fail", 1.0), ("create", "maybe", 29.75),
    ("sleep", 29.75, ""), ("get", 0, ""), ("sleep", 0.25, ""), ("cancel", 0, ""),
    ("get", 1, ""), ("get", 2, ""), ("sleep", 0.5, ""), ("get", 2, ""),
])
def test_any_schedule_of_tasks_keeps_the_state_machine_and_the_ttl(
    steps: list[tuple[str, Any, Any]],
) -> None:
    """Legal moves only, results kept until the TTL and nothing after, only tasks/cancel cancels."""
    world = trio.run(run_schedule, steps, clock=trio.testing.MockClock(autojump_threshold=0))
    event(f"tasks: {min(len(world.tasks), 8)}{'+' if len(world.tasks) >= 8 else ''}")
    for status in sorted({s for moves in world.history.values() for _, s in moves}):
        event(f"a task {status}")
    for note in world.leaves | world.notes:
        event(note)
    if world.busy:
        event("a call found no room for a task")
    if world.refused:
        event("an update refused")
