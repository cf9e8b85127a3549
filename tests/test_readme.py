"""The README stays true: its quick start works as written (the installed `trio-mcp` serves
the user's hello.py, and the SDK client and the Inspector's command line call it), its other
examples run and answer as it says, it stays under 300 lines, and its test command is the one
CI runs."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import request
from support.docs import SHOWN_URL, code_blocks, curl_request
from support.modern import call_tool, post
from support.process import start_until

from trio_mcp import Server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The console script pip installed next to this interpreter, as the quick start runs it.
TRIO_MCP = str(Path(sys.executable).with_name("trio-mcp"))
TIMEOUT = 60


def _blocks(language: str, text: str = README) -> list[str]:
    return code_blocks(text, language)


def _block(language: str, marker: str) -> str:
    """The one ``language`` block holding ``marker``."""
    [block] = [b for b in _blocks(language) if marker in b]
    return block


def _quick_start() -> str:
    """The README's quick start: from its heading to the next one."""
    return README.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def test_readme_is_under_300_lines_with_the_quick_start_first() -> None:
    """The README stays short, and its first section is the quick start, which shows the
    install, a server of the reader's own, serving it, a Python client and the Inspector."""
    sections = re.findall(r"^## (.*)$", README, flags=re.M)

    assert len(README.splitlines()) < 300
    assert sections[0].startswith("Quick start")
    quick = _quick_start()
    for step in ("pip install -e .", "hello.py", "trio-mcp serve hello:server",
                 "from trio_mcp import Client", "@modelcontextprotocol/inspector"):
        assert step in quick, step


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's test command installs the test extra and runs pytest, and .ci/run runs
    that same pytest invocation in the same venv."""
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")

    assert [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
    ] == commands
    assert "pip install -q -e '.[test]'" in ci
    assert "\n.venv/bin/python -m pytest\n" in ci


def test_readme_serve_defaults_are_the_url_it_shows() -> None:
    """`trio-mcp serve` with no module serves the demo, and its defaults are the URL the
    quick start shows: 127.0.0.1, port 8000, /mcp."""
    from trio_mcp.cli._cli import build_parser

    args = build_parser().parse_args(["serve"])

    assert "`trio-mcp serve` with no module serves the built-in demo" in README
    assert ("trio_mcp.demo:server", "127.0.0.1", 8000, "/mcp") == (
        args.server, args.host, args.port, args.path,
    )
    assert f"trio-mcp: serving hello at {SHOWN_URL}" in _quick_start()


@pytest.fixture
def served_hello(tmp_path: Path) -> Iterator[str]:
    """The quick start's hello.py, written to a fresh directory and served there by the
    installed trio-mcp with the README's command (on a free port): the URL it printed."""
    (tmp_path / "hello.py").write_text(_block("python", 'Server("hello")'))
    [command] = [b.strip() for b in _blocks("bash", _quick_start()) if "trio-mcp serve" in b]
    assert ".venv/bin/trio-mcp serve hello:server" == command
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc, match, _ = start_until(
        [TRIO_MCP, "serve", "hello:server", "--port", "0"],
        r"trio-mcp: serving hello at (http://127\.0\.0\.1:\d+/mcp)", cwd=tmp_path, env=env,
    )
    try:
        yield match.group(1)
    finally:
        proc.terminate()
        proc.communicate(timeout=TIMEOUT)


def test_readme_quick_start_client_prints_what_the_readme_shows(
    served_hello: str, tmp_path: Path
) -> None:
    """The quick start's client.py, run against the served hello.py, prints exactly the
    output the README shows."""
    client = tmp_path / "client.py"
    client.write_text(
        _block("python", "from trio_mcp import Client").replace(SHOWN_URL, served_hello))

    done = subprocess.run(
        [sys.executable, str(client)], capture_output=True, text=True, timeout=TIMEOUT,
        cwd=tmp_path,
    )

    assert 0 == done.returncode, done.stderr
    assert _block("text", "Hello, Ada!") == done.stdout


def test_readme_client_runs_the_server_in_process(tmp_path: Path) -> None:
    """The quick start's client with `Client(server)` and `from hello import server`, as the
    README says, runs hello.py in process (nothing served, no socket) and prints the same."""
    (tmp_path / "hello.py").write_text(_block("python", 'Server("hello")'))
    client = _block("python", "from trio_mcp import Client")
    assert f'Client("{SHOWN_URL}")' in client
    test = tmp_path / "test_hello.py"
    test.write_text("from hello import server\n"
                    + client.replace(f'Client("{SHOWN_URL}")', "Client(server)"))

    done = subprocess.run(
        [sys.executable, str(test)], capture_output=True, text=True, timeout=TIMEOUT,
        cwd=tmp_path,
    )

    assert 0 == done.returncode, done.stderr
    assert _block("text", "Hello, Ada!") == done.stdout
    assert "`Client(server)`, with `from hello import server`, runs it in process" in README


@pytest.mark.slow
def test_readme_inspector_command_calls_the_tool(served_hello: str, tmp_path: Path) -> None:
    """The quick start's Inspector command (its CLI mode), run with the Inspector that npx
    would fetch, calls greet on the served hello.py and prints its result."""
    from support.node import install_inspector, node, node_env

    [line] = [
        b.strip() for b in _blocks("bash") if b.startswith("npx @modelcontextprotocol/inspector")
    ]
    words = shlex.split(line.replace(SHOWN_URL, served_hello))
    launcher = install_inspector()
    env = {**node_env(), "HOME": str(tmp_path)}

    done = subprocess.run(
        [str(node()), str(launcher), *words[2:]], capture_output=True, text=True,
        timeout=TIMEOUT, cwd=tmp_path, env=env,
    )

    assert 0 == done.returncode, done.stdout + done.stderr
    assert [{"type": "text", "text": "Hello, Ada."}] == json.loads(done.stdout)["content"]


def _writing_a_server() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(_block("python", 'Server("notes")'), "README.md", "exec"), namespace)
    return namespace


def test_readme_example_server_derives_its_tools_from_the_signatures() -> None:
    """The "Writing a server" block runs, and registers a tool, a resource template and a
    prompt whose names, descriptions and schemas come from the functions."""
    server = _writing_a_server()["server"]
    assert isinstance(server, Server)

    tool = server.tools["add_note"].to_dict()

    assert "Keep a note; returns how many there are." == tool["description"]
    assert {"title", "text"} == set(tool["inputSchema"]["properties"])
    assert ["notes://{title}"] == list(server.resource_templates)
    assert ["summarize"] == list(server.prompts)


async def test_readme_example_tool_answers_as_the_readme_says() -> None:
    """Served, add_note answers the text `1` with `{"result": 1}` as structured content, as
    the README says, and the resource then reads the note."""
    server = _writing_a_server()["server"]
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            [url] = await nursery.start(partial(server.serve, port=0, announce=False))
            added = await post(url, call_tool("add_note", {"title": "t", "text": "x"}))
            nursery.cancel_scope.cancel()

    result = added.json()["result"]
    assert "the text `1`, and `{\"result\": 1}` as structured content" in README
    assert [{"type": "text", "text": "1"}] == result["content"]
    assert {"result": 1} == result["structuredContent"]


async def test_readme_curl_examples_answer_as_the_readme_says(nursery: trio.Nursery) -> None:
    """The two curl commands, sent to the demo server: the first opens a 2025-11-25 session
    (a session id, an SSE stream of a priming event then the InitializeResult), the second is
    answered in the 2026-07-28 era with one JSON body, resultType complete."""
    from trio_mcp.demo import server as demo
    from trio_mcp.protocol import SSEDecoder

    [url] = await nursery.start(partial(demo.serve, port=0, announce=False))
    legacy_cmd, modern_cmd = [b for b in _blocks("bash") if b.startswith("curl -si")]
    with trio.fail_after(TIMEOUT):
        legacy = await request(url, "POST", *curl_request(legacy_cmd))
        modern = await request(url, "POST", *curl_request(modern_cmd))

    events = SSEDecoder().feed(legacy.body)
    assert legacy.header("mcp-session-id")
    assert "text/event-stream" == legacy.content_type
    assert "" == events[0].data and events[0].id
    assert "serverInfo" in json.loads(events[1].data)["result"]
    assert "application/json" == modern.content_type
    assert "complete" == modern.json()["result"]["resultType"]
    assert "trio-mcp-demo" == modern.json()["result"]["_meta"][
        "io.modelcontextprotocol/serverInfo"]["name"]


def test_readme_links_into_spec_name_existing_rules() -> None:
    """Every `spec/<file>.md#<anchor>` link in the README points at a rule of that file, so
    a renamed rule cannot leave a dead link behind."""
    import spec_rules

    anchors = {f"{r.file}#{r.anchor}" for r in spec_rules.load_rules().rules}
    links = re.findall(r"\(spec/([a-z]+\.md#[^)\s]+)\)", README)

    assert links, "the README links no rule"
    assert [] == [link for link in links if link not in anchors]


_SHOP_PRELUDE = '''
import contextlib, dataclasses, logging, time
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any
import pydantic
from trio_mcp import CallNext, Context, Depends, Server

class Order(pydantic.BaseModel):
    sku: str = pydantic.Field(pattern=r"^[A-Z]{3}-[0-9]+$")
    quantity: int = pydantic.Field(ge=1)

@dataclasses.dataclass
class Receipt:
    sku: str
    total: float
'''


@pytest.mark.spec("TM-HAND-LIFESPAN", "TM-HAND-DEPENDS", "TM-HAND-MIDDLEWARE",
                  "TM-HAND-THREAD", "TM-HAND-PYDANTIC")
async def test_readme_shop_runs_as_written_in_both_eras(caplog: pytest.LogCaptureFixture) -> None:
    """The "Writing a server" shop block (with the Order model and Receipt dataclass it
    names) serves: its def tool, fed by the lifespan through a dependency, prices an order
    in both eras, and the middleware times each call."""
    from support.eras import ERAS, tool_call

    namespace: dict[str, Any] = {}
    source = _SHOP_PRELUDE + _block("python", 'Server("shop"')
    exec(compile(source, "README.md", "exec"), namespace)
    shop = namespace["shop"]
    with caplog.at_level(logging.INFO), trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            [url] = await nursery.start(partial(shop.serve, port=0, announce=False))
            results = [await tool_call(url, era, "price",
                                       {"order": {"sku": "ABC-1", "quantity": 4}})
                       for era in ERAS]
            nursery.cancel_scope.cancel()
    for result in results:
        assert {"sku": "ABC-1", "total": 10.0} == result["structuredContent"]
    assert 2 == sum("tools/call took" in r.getMessage() for r in caplog.records)
