"""Logging: logging/setLevel, handler logs (Context.log) and server logs (Server.log)."""

from __future__ import annotations

import pytest
import trio
from feat_support import error_of

from trio_mcp import Context, Server


def logging_server() -> Server:
    server = Server("logging-tests")

    @server.tool()
    async def log_all(ctx: Context) -> list[bool]:
        """Logs one message at every level, lowest first."""
        levels = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
        return [await ctx.log(level, {"level": level}, logger="t") for level in levels]

    return server


@pytest.mark.spec("U-LOG-2")
async def test_set_level_returns_an_empty_result(autojump_clock, connect):
    """logging/setLevel answers with exactly {} (the conformance suite fails any key)."""
    s = await connect(logging_server())
    with trio.fail_after(10):
        assert await s.request("logging/setLevel", {"level": "info"}) == {}


@pytest.mark.spec("U-LOG-1")
async def test_the_logging_capability_is_declared(autojump_clock, connect):
    """A server that can send log messages declares the logging capability."""
    s = await connect(logging_server())
    assert "logging" in s.server_capabilities


@pytest.mark.spec("U-LOG-4")
@pytest.mark.parametrize(
    "params",
    [{"level": "verbose"}, {"level": 3}, {}, {"level": "INFO"}, {"level": ["info"]},
     {"level": {"info": 1}}],
)
async def test_an_invalid_level_is_invalid_params(autojump_clock, connect, params):
    """An unknown or missing log level is -32602 (Invalid params)."""
    s = await connect(logging_server())
    with trio.fail_after(10):
        error = await error_of(s, "logging/setLevel", params)
        assert error["code"] == -32602


@pytest.mark.spec("U-LOG-3", "U-LOG-5", "T-PSSE-8")
@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", 8),
        ("warning", 5),
        ("emergency", 1),
        (None, 7),  # no setLevel: this server's default is info (TM-LOG-DEFAULT)
    ],
)
async def test_handler_logs_at_or_above_the_level_go_on_the_request_stream(
    autojump_clock, mem, level, expected
):
    """A handler's log messages at the session's level and above are sent, as
    notifications/message on the request's own stream before its response; lower ones
    are not sent (and ctx.log says so)."""
    ms = await mem(logging_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        if level is not None:
            await s.result("logging/setLevel", {"level": level})
        answer, before = await s.call("tools/call", {"name": "log_all"})
        sent = answer["result"]["structuredContent"]["result"]
        assert sent == [False] * (8 - expected) + [True] * expected
        assert [m["method"] for m in before] == ["notifications/message"] * expected
        all_levels = ["debug", "info", "notice", "warning", "error", "critical", "alert"]
        levels = [*all_levels, "emergency"][8 - expected :]
        assert [m["params"] for m in before] == [
            {"level": lv, "data": {"level": lv}, "logger": "t"} for lv in levels
        ]


@pytest.mark.spec("U-LOG-3", "T-GET-5")
async def test_server_logs_reach_each_session_at_its_own_level(autojump_clock, mem):
    """Server.log sends notifications/message on the standalone stream of every session
    whose level lets it through: a session at debug gets a warning, one at error does not."""
    server = logging_server()
    ms = await mem(server)
    chatty = await ms.open_session()
    quiet = await ms.open_session()
    with trio.fail_after(10):
        await chatty.result("logging/setLevel", {"level": "debug"})
        await quiet.result("logging/setLevel", {"level": "error"})
        chatty_get = await chatty.get()
        quiet_get = await quiet.get()
        assert server.log("warning", {"disk": "low"}, logger="server") == 1
        assert server.log("critical", "overheating") == 2
        assert await chatty_get.next_message() == {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "warning", "data": {"disk": "low"}, "logger": "server"},
        }
        second = await chatty_get.next_message()
        assert second is not None and second["params"]["data"] == "overheating"
        only = await quiet_get.next_message()
        assert only is not None and only["params"] == {"level": "critical", "data": "overheating"}
        with pytest.raises(ValueError, match="unknown log level"):
            server.log("verbose", "x")


@pytest.mark.spec("U-LOG-6", "TM-RPC-INTERNAL")
async def test_a_failing_handler_logs_nothing_to_the_client(autojump_clock, mem):
    """When a handler fails, its traceback and message go to the server's own log, never
    into a notifications/message (nor into the error response)."""
    server = Server("failing")

    @server.prompt()
    async def broken() -> str:
        """Fails with an internal detail."""
        raise RuntimeError("password=hunter2")

    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        get = await s.get()
        await s.result("logging/setLevel", {"level": "debug"})
        answer, before = await s.call("prompts/get", {"name": "broken"})
        assert before == []
        assert answer["error"] == {"code": -32603, "message": "Internal error"}
        with trio.move_on_after(1):
            await get.next_message()
            raise AssertionError("a message went to the GET stream")


@pytest.mark.spec("L-INIT-6")
async def test_logging_is_allowed_before_initialized(autojump_clock, mem):
    """Logging may be sent before the client's initialized notification: Server.log reaches
    a session that has not sent it yet (its GET stream delivers it)."""
    server = logging_server()
    ms = await mem(server)
    s = await ms.open_session(initialized=False)
    with trio.fail_after(10):
        get = await s.get()
        assert server.log("error", "early") == 1
        message = await get.next_message()
        assert message is not None and message["params"]["data"] == "early"


@pytest.mark.spec("U-LOG-7")
async def test_a_handler_log_reaches_only_its_own_client_and_levels_are_checked(
    autojump_clock, mem
):
    """A handler's log goes to its own request's client only; an unknown level sends nothing."""
    server = Server("log-access")

    @server.tool()
    async def secretive(ctx: Context) -> str:
        """Logs once, then tries a level that does not exist."""
        await ctx.log("error", "for my client only")
        try:
            await ctx.log("verbose", "never sent")
        except ValueError:
            return "refused"
        return "sent"

    ms = await mem(server)
    mine = await ms.open_session()
    other = await ms.open_session()
    with trio.fail_after(10):
        for s in (mine, other):
            await s.result("logging/setLevel", {"level": "debug"})
        mine_get = await mine.get()
        other_get = await other.get()
        answer, before = await mine.call("tools/call", {"name": "secretive"})
        assert answer["result"]["content"] == [{"type": "text", "text": "refused"}]
        assert [m["params"] for m in before] == [{"level": "error", "data": "for my client only"}]
    for get in (mine_get, other_get):
        with trio.move_on_after(1) as idle:
            await get.next_message()
        assert idle.cancelled_caught, "a log message went to a GET stream"
