"""The README stays true: its example server works as described, and its test command is the
one CI runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import trio

from trio_mcp import Server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_readme_example_server_derives_its_tool_from_the_signature() -> None:
    """The "server in a few lines" block runs, and its tool's name, description and
    inputSchema come from the function, with the context parameter left out."""
    [block] = [b for b in _blocks("python") if "server = Server(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    server = namespace["server"]
    assert isinstance(server, Server)

    tool = server.tools["greet"].to_dict()

    assert "Greet someone." == tool["description"]
    assert {"name", "excited"} == set(tool["inputSchema"]["properties"])
    assert ["name"] == tool["inputSchema"]["required"]


async def test_readme_example_tool_answers() -> None:
    """Called with the arguments a client would send, the example tool answers as shown."""
    [block] = [b for b in _blocks("python") if "server = Server(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), namespace)

    class FakeContext:
        async def report_progress(self, *args: object) -> bool:
            await trio.lowlevel.checkpoint()
            return False

    text = await namespace["greet"]("Ada", FakeContext(), excited=True)

    assert "Hello, Ada!" == text


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's second set-up command installs the test extra and runs pytest, and
    .ci/run runs that same pytest invocation in the same venv."""
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")

    assert [
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
    ] == commands
    assert "pip install -q -e '.[test]'" in ci
    assert "\n.venv/bin/python -m pytest\n" in ci


def test_readme_serve_command_serves_the_demo() -> None:
    """The README's first set-up command serves the built-in demo with `trio-mcp serve`,
    whose defaults are the demo server on 127.0.0.1:8000/mcp."""
    from trio_mcp._cli import build_parser

    [command] = [b.strip() for b in _blocks("bash") if b.strip().endswith("trio-mcp serve")]
    args = build_parser().parse_args(["serve"])

    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -e . && ")
    assert ("trio_mcp.demo:server", "127.0.0.1", 8000, "/mcp") == (
        args.server, args.host, args.port, args.path,
    )


def test_readme_links_into_spec_name_existing_rules() -> None:
    """Every `spec/<file>.md#<anchor>` link in the README points at a rule of that file, so
    a renamed rule cannot leave a dead link behind."""
    import spec_rules

    anchors = {f"{r.file}#{r.anchor}" for r in spec_rules.load_rules().rules}
    links = re.findall(r"\(spec/([a-z]+\.md#[^)\s]+)\)", README)

    assert links, "the README links no rule"
    assert [] == [link for link in links if link not in anchors]
