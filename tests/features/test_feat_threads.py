# Plain `def` tools (issue 40, spec/handlers.md TM-HAND-THREAD), end to end in both eras
# (through trio_mcp.Client(server) where only the handler is in question, over loopback where
# the wire is): each runs in a worker thread, at most max_threads at once; the context is
# reachable from the thread (ctx.sync); a cancelled call stops waiting for its thread, which
# can see the cancellation, and keeps its slot until it really returns.

# No `from __future__ import annotations`: a dependency here is a local function.

import threading
import time
from typing import Annotated, Any

import pytest
import trio
from feat_support import Connect, InProcess
from support.client import open_session, rpc_messages
from support.eras import ERAS, LEGACY
from support.fixtures import StartServer, wait_until
from support.modern import call_tool, messages_of, open_raw, post

from trio_mcp import Context, Depends, Server

TIMEOUT = 20

pytestmark = pytest.mark.spec("TM-HAND-THREAD")


def thread_server(max_threads: int = 40) -> tuple[Server, dict[str, Any]]:
    server = Server("threads", max_threads=max_threads)
    state: dict[str, Any] = {
        "running": 0, "most": 0, "lock": threading.Lock(), "release": threading.Event(),
        "saw_cancel": threading.Event(), "started": threading.Event(), "ended": threading.Event(),
    }

    @server.tool()
    def where(ctx: Context, n: int) -> dict[str, Any]:
        """Say which thread runs the tool, logging from it."""
        ctx.sync.log("info", f"from the thread {n}")
        ctx.sync.report_progress(1, 2)
        return {"thread": threading.current_thread().name,
                "main": threading.current_thread() is threading.main_thread(),
                "era": ctx.era.value, "n": n * 2}

    @server.tool()
    def hold() -> str:
        """Wait for the test's release, counting how many run at once."""
        with state["lock"]:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
        try:
            state["release"].wait(TIMEOUT)
        finally:
            with state["lock"]:
                state["running"] -= 1
        return "released"

    @server.tool()
    def polite() -> str:
        """Work in small steps until cancelled (it polls)."""
        state["started"].set()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.01)
            try:
                trio.from_thread.check_cancelled()
            except trio.Cancelled:
                state["saw_cancel"].set()
                return "stopped"
        return "never cancelled"

    @server.tool()
    def stubborn() -> str:
        """Ignore cancellation until released."""
        state["started"].set()
        state["release"].wait(TIMEOUT)
        state["ended"].set()
        return "done"

    return server, state


@pytest.mark.parametrize("era", ERAS)
async def test_a_def_tool_runs_in_a_worker_thread_and_reaches_its_context(
    live_server: StartServer, era: str
) -> None:
    """A plain def tool runs off trio's thread; ctx.sync.log and report_progress from it
    reach the client on the request's stream, before the result."""
    server, _ = thread_server()
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        if era == LEGACY:
            session = await open_session(live.url)
            message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
                "name": "where", "arguments": {"n": 21}, "_meta": {"progressToken": "p"}}}
            messages = rpc_messages(await session.post(message))
        else:
            messages = messages_of(await post(live.url, call_tool(
                "where", {"n": 21}, log_level="info", progress_token="p"
            )))
    methods = [m.get("method") for m in messages]
    assert ["notifications/message", "notifications/progress", None] == methods, messages
    assert "from the thread 21" == messages[0]["params"]["data"]
    result = messages[-1]["result"]["structuredContent"]
    assert result["main"] is False and 42 == result["n"]
    assert ("modern" if era != LEGACY else "legacy") == result["era"]


@pytest.mark.parametrize("era", ERAS)
async def test_no_more_def_tools_run_at_once_than_max_threads(
    connect: Connect, era: str
) -> None:
    """With max_threads=2, five calls of a blocking def tool run two at a time; the others
    wait for a thread, and all five finish once released."""
    server, state = thread_server(max_threads=2)
    served = InProcess(connect, server)
    results: list[dict[str, Any]] = []

    async def one() -> None:
        results.append(await served.tool_call(era, "hold"))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(one)
            await wait_until(lambda: state["running"] == 2)
            await trio.sleep(0.2)
            assert 2 == state["most"]
            state["release"].set()
    assert ["released"] * 5 == [r["content"][0]["text"] for r in results]
    assert 2 == state["most"]


async def test_a_cancelled_def_tool_can_see_it_from_its_thread(live_server: StartServer) -> None:
    """A 2026-07-28 client that drops its connection cancels the call: the thread, polling
    trio.from_thread.check_cancelled(), sees the cancellation and stops."""
    server, state = thread_server()
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        async with open_raw(live.url, call_tool("polite")):
            await wait_until(state["started"].is_set)
        await wait_until(state["saw_cancel"].is_set)


async def test_a_cancelled_stubborn_thread_keeps_its_slot_until_it_returns(
    live_server: StartServer,
) -> None:
    """A thread that ignores cancellation runs on after its legacy call is cancelled, and
    keeps its slot: with max_threads=1 the next call waits until that thread returns."""
    server, state = thread_server(max_threads=1)
    live = await live_server(server)
    session = await open_session(live.url)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            call = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                    "params": {"name": "stubborn", "arguments": {}}}
            nursery.start_soon(session.post, call)
            await wait_until(state["started"].is_set)
            await session.notify("notifications/cancelled", {"requestId": 77})
            second: list[dict[str, Any]] = []

            async def call_where() -> None:
                second.append(await session.result(
                    "tools/call", {"name": "where", "arguments": {"n": 1}}
                ))

            nursery.start_soon(call_where)
            await trio.sleep(0.3)
            # The cancelled call's thread still holds the only slot.
            assert [] == second and not state["ended"].is_set()
            state["release"].set()
            await wait_until(lambda: bool(second))
            nursery.cancel_scope.cancel()
    assert state["ended"].is_set() and 2 == second[0]["structuredContent"]["n"]


@pytest.mark.spec("TM-HAND-THREAD", "TM-HAND-DEPENDS")
@pytest.mark.parametrize("era", ERAS)
async def test_prompts_and_resources_may_be_def_functions_with_dependencies(
    connect: Connect, era: str
) -> None:
    """A plain def prompt and a def resource template run in worker threads, and take
    dependencies as tools do."""
    server = Server("plain")

    def tone() -> str:
        return "kind"

    @server.prompt()
    def greet(name: str, how: Annotated[str, Depends(tone)]) -> str:
        """Greet someone."""
        return f"{how} hello {name} from {threading.current_thread() is threading.main_thread()}"

    @server.resource("notes://{name}")
    def note(name: str, how: Annotated[str, Depends(tone)]) -> str:
        """A note."""
        return f"{how} note {name} main={threading.current_thread() is threading.main_thread()}"

    served = InProcess(connect, server)
    with trio.fail_after(TIMEOUT):
        prompt = await served.rpc(era, "prompts/get",
                           {"name": "greet", "arguments": {"name": "Ada"}})
        read = await served.rpc(era, "resources/read", {"uri": "notes://n1"})
    assert "kind hello Ada from False" == prompt["result"]["messages"][0]["content"]["text"]
    assert "kind note n1 main=False" == read["result"]["contents"][0]["text"]
    assert ["name"] == [a["name"] for a in server.prompts["greet"].arguments()]


async def test_a_def_tool_asks_a_modern_client_from_its_thread(
    live_server: StartServer,
) -> None:
    """ctx.sync.elicit from a def tool: a 2026-07-28 call answers input_required, and its
    retry with the answer completes (the thread runs again from its first line)."""
    server = Server("asks")
    form = {"type": "object", "properties": {"name": {"type": "string"}},
            "required": ["name"]}

    @server.tool()
    def greet(ctx: Context) -> str:
        """Ask for a name, from a worker thread."""
        answer = ctx.sync.elicit("Your name?", form, key="who")
        return f"hello {answer.content['name']}" if answer.accepted else "no"

    live = await live_server(server)
    caps = {"elicitation": {}}
    with trio.fail_after(TIMEOUT):
        first = (await post(live.url, call_tool("greet", capabilities=caps))).json()["result"]
        retry = call_tool("greet", capabilities=caps, requestState=first["requestState"],
                          inputResponses={"who": {"action": "accept",
                                                  "content": {"name": "Ada"}}})
        second = (await post(live.url, retry)).json()["result"]
    assert "input_required" == first["resultType"] and ["who"] == list(first["inputRequests"])
    assert "hello Ada" == second["content"][0]["text"]
