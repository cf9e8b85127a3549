# The official clients against trio-mcp over stdio (spec/stdio.md), each launching
# `trio-mcp serve ... --stdio` as its subprocess: the Python SDK client (the mcp package in
# the test dependencies), the TypeScript SDK client v1 (@modelcontextprotocol/sdk, the
# conformance suite's dependency) and v2 (@modelcontextprotocol/client), and the MCP
# Inspector's command line. Tools, resources, prompts, progress and an elicitation.
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.node import install_conformance, install_inspector, install_ts_client, node, node_env

SCRIPT = Path(__file__).with_name("ts_stdio_client.mjs")
TROUBLE = '''
import sys
from trio_mcp import Server

print("printed at import")
server = Server("noisy")


@server.tool()
def noisy(text: str) -> str:
    """Prints, as a careless handler would, then answers."""
    print("printed by a handler")
    sys.stdout.write("written to sys.stdout\\n")
    return text
'''


def trio_mcp_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "trio_mcp", "serve", *args, "--stdio"]


def python_sdk_session(argv: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run the Python SDK client over stdio against ``argv``; what it saw."""
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    report: dict[str, Any] = {"questions": [], "progress": []}

    async def elicit(context: Any, params: Any) -> Any:
        report["questions"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def progress(value: float, total: float | None, message: str | None) -> None:
        report["progress"].append(value)

    async def main() -> None:
        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=cwd)
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(
                read, write, elicitation_callback=elicit
            ) as session:
                init = await session.initialize()
                report["version"] = init.protocol_version
                report["tools"] = [t.name for t in (await session.list_tools()).tools]
                if "noisy" not in report["tools"]:
                    resources = (await session.list_resources()).resources
                    report["resources"] = [str(r.uri) for r in resources]
                    read_result = await session.read_resource("test://static-text")
                    report["read"] = read_result.contents[0].text  # type: ignore[union-attr]
                    prompts = (await session.list_prompts()).prompts
                    report["prompts"] = [p.name for p in prompts]
                    prompt = await session.get_prompt("test_simple_prompt")
                    report["prompt"] = prompt.messages[0].content.text  # type: ignore[union-attr]
                    elicited = await session.call_tool(
                        "test_input_required_result_elicitation", {}
                    )
                    report["elicited"] = elicited.content[0].text  # type: ignore[union-attr]
                    countdown = await session.call_tool(
                        "countdown", {"n": 3, "interval": 0.25}, progress_callback=progress
                    )
                    report["countdown"] = countdown.content[0].text  # type: ignore[union-attr]
                else:
                    noisy = await session.call_tool("noisy", {"text": "clean"})
                    report["noisy"] = noisy.content[0].text  # type: ignore[union-attr]

    anyio.run(main)
    return report


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-SESSION", "T-STDIO-1")
def test_python_sdk_client_over_stdio_does_everything() -> None:
    """The Python SDK client launches `trio-mcp serve --stdio` and initializes, lists and
    reads a resource, gets a prompt, answers an elicitation and receives progress."""
    report = python_sdk_session(trio_mcp_command())

    assert "2025-11-25" == report["version"]
    assert "echo" in report["tools"] and "countdown" in report["tools"]
    assert "This is the content of the static text resource." == report["read"]
    assert "test_simple_prompt" in report["prompts"]
    assert "This is a simple prompt for testing." == report["prompt"]
    assert (["What is your name?"], "Hello, Ada!") == (report["questions"], report["elicited"])
    assert ("liftoff", [1, 2, 3]) == (report["countdown"], report["progress"])


@pytest.mark.slow
@pytest.mark.spec("T-STDIO-2", "T-STDIO-3", "TM-STDIO-STDOUT")
def test_a_handler_that_prints_does_not_corrupt_stdout(tmp_path: Path) -> None:
    """A print() at the module's import, and a handler's print() and sys.stdout.write, go
    to stderr: the client, which refuses a line of stdout that is no message, gets its
    answer."""
    (tmp_path / "noisy.py").write_text(TROUBLE)
    argv = [*trio_mcp_command("noisy:server"), "--app-dir", str(tmp_path)]
    report = python_sdk_session(argv, cwd=tmp_path)
    assert "clean" == report["noisy"]

    # The same, by hand, to see stderr: the prints are there, and stdout holds messages only.
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "noisy", "arguments": {"text": "x"}}},
    ]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for message in lines:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    out, err = proc.communicate(timeout=30)  # closes stdin: the end of the session
    assert 0 == proc.returncode, err
    assert [0, 1] == [a["id"] for a in answers] and b"" == out
    assert b"printed by a handler" in err and b"written to sys.stdout" in err
    assert b"printed at import" in err
    assert b"serving noisy on stdio" in err


def run_ts(flavour: str, node_modules: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(node()), str(SCRIPT), str(node_modules), flavour, *trio_mcp_command()],
        capture_output=True, timeout=90, env=node_env(), check=False,
    )
    assert 0 == done.returncode, done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return report


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-SESSION")
@pytest.mark.parametrize(
    ("flavour", "version"), [("v1", "2025-11-25"), ("v2", "2025-11-25"), ("v2-auto", "2026-07-28")]
)
def test_typescript_sdk_client_over_stdio_does_everything(flavour: str, version: str) -> None:
    """The TypeScript SDK client, v1 and v2 (and v2 negotiating the era itself, which
    speaks 2026-07-28), launches `trio-mcp serve --stdio`: tools, resources, prompts, an
    elicitation and progress."""
    modules = install_conformance() if flavour == "v1" else install_ts_client()
    report = run_ts(flavour, modules)

    if report["version"] is not None:  # v1 does not say
        assert version == report["version"]

    assert "trio-mcp-demo" == report["server"]
    assert "echo" in report["tools"] and "hi" == report["echo"]
    assert "test://static-text" in report["resources"]
    assert "This is the content of the static text resource." == report["read"]
    assert "This is a simple prompt for testing." == report["prompt"]
    assert (["What is your name?"], "Hello, Ada!") == (report["questions"], report["elicited"])
    assert ("liftoff", [1, 2, 3]) == (report["countdown"], report["progress"])
    assert "serving trio-mcp-demo on stdio" in report["stderr"]


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-SESSION")
def test_inspector_cli_lists_the_demo_tools_over_stdio(tmp_path: Path) -> None:
    """The MCP Inspector's command line launches the demo over stdio and lists its tools."""
    launcher = install_inspector()
    done = subprocess.run(
        [str(node()), str(launcher), "--cli", *trio_mcp_command(), "--method", "tools/list"],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
        env={**node_env(), "HOME": str(tmp_path)},
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    names = [tool["name"] for tool in json.loads(done.stdout)["tools"]]
    assert "echo" in names and "countdown" in names


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-SESSION", "TM-STDIO-STDOUT")
def test_server_run_stdio_at_the_bottom_of_a_module(tmp_path: Path) -> None:
    """`server.run_stdio()` at the bottom of the module the host launches serves it, its
    handler's print() kept off stdout."""
    script = tmp_path / "noisy.py"
    script.write_text(TROUBLE + "\n\nif __name__ == '__main__':\n    server.run_stdio()\n")
    report = python_sdk_session([sys.executable, str(script)], cwd=tmp_path)
    assert "clean" == report["noisy"]


def test_stdio_takes_no_workers() -> None:
    """`--stdio` serves one host: with --workers it stops with one line saying so."""
    done = subprocess.run(
        [*trio_mcp_command(), "--workers", "2"], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, check=False,
    )
    assert 0 != done.returncode and "--stdio serves one host" in done.stderr
