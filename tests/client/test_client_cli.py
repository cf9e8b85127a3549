# The command line's client commands (trio_mcp/cli/_calls.py): `trio-mcp tools`, `call` and
# `read` against a live demo server, as a smoke test after a deploy would run them.
from __future__ import annotations

import sys
from pathlib import Path

import trio
from support.fixtures import StartServer

TRIO_MCP = str(Path(sys.executable).with_name("trio-mcp"))


async def _run(*args: str) -> tuple[int, str, str]:
    with trio.fail_after(60):
        done = await trio.run_process([TRIO_MCP, *args], capture_stdout=True,
                                      capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_call_prints_the_result_and_the_progress(live_server: StartServer) -> None:
    """`trio-mcp call URL TOOL JSON` prints the result's text, and each progress on stderr."""
    url = (await live_server()).url

    code, out, err = await _run("call", url, "countdown", '{"n": 3, "interval": 0.01}')

    assert (0, "liftoff\n") == (code, out)
    assert ["progress 1/3 2 to go", "progress 2/3 1 to go", "progress 3/3 0 to go"] == \
        err.splitlines()


async def test_tools_and_read_print_what_the_server_has(live_server: StartServer) -> None:
    """`trio-mcp tools URL` lists tool names with their first line; `trio-mcp read URL URI`
    prints a resource's text; a legacy session answers the same."""
    url = (await live_server()).url

    tools = await _run("tools", url, "--mode", "legacy")
    read = await _run("read", url, "test://static-text")

    assert 0 == tools[0]
    assert any(line.startswith("echo") for line in tools[1].splitlines())
    assert (0, "This is the content of the static text resource.\n") == read[:2]


async def test_errors_are_one_line_and_a_failing_status(live_server: StartServer) -> None:
    """An error answer, a tool's own error and an unreachable server each give status 1
    and one line on stderr, with no traceback."""
    url = (await live_server()).url

    unknown = await _run("call", url, "no_such_tool")
    tool_error = await _run("call", url, "test_error_handling")
    unreachable = await _run("tools", "http://127.0.0.1:1/mcp")

    assert 1 == unknown[0] and "-32602" in unknown[2]
    assert 1 == tool_error[0] and "intentionally" in tool_error[1]
    assert 1 == unreachable[0] and "cannot reach" in unreachable[2]
    assert all("Traceback" not in run[2] for run in (unknown, tool_error, unreachable))
