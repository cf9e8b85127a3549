# 2026-07-28 requests over stdio (spec/stdio.md TM-STDIO-PARAMS, TM-STDIO-LISTEN), against
# `trio-mcp serve module:server --stdio` run as a real subprocess: a tool whose inputSchema
# mirrors parameters into Mcp-Param headers, and a subscriptions/listen ended by the host.
from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TIMEOUT = 60

MODULE = '''
from trio_mcp import Server

server = Server("stdio-modern")


@server.tool(headers={"region": "Region", "count": "Count", "fast": "Fast"})
async def where(region: str, count: int = 0, fast: bool = False) -> str:
    """Says where, how many and how fast: each a parameter mirrored into a header."""
    return f"{region} {count} {fast}"


async def extra() -> str:
    """Comes and goes."""
    return "extra"


@server.tool()
async def toggle() -> str:
    """Adds or removes the tool extra: listeners of tools/list_changed hear of it."""
    if "extra" in server.tools:
        server.remove_tool("extra")
        return "removed"
    server.add_tool(extra, name="extra")
    return "added"
'''

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "stdio-modern-test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Host:
    """A host of the server subprocess: lines to its stdin, lines read from its stdout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        assert process.stdout is not None
        self._selector = selectors.DefaultSelector()
        self._selector.register(process.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method,
                   "params": {**params, "_meta": META}})

    def read(self, timeout: float = TIMEOUT) -> dict[str, Any] | None:
        """The next line, or None when none comes within ``timeout``."""
        end = time.monotonic() + timeout
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                return None
            chunk = self.process.stdout.read1(65536)  # type: ignore[attr-defined]
            assert chunk, "stdout ended"
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(raw)
        return message

    def read_until_id(self, rid: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer to ``rid`` and the messages read before it."""
        before = []
        while True:
            message = self.read()
            assert message is not None, f"no answer to {rid}"
            if message.get("id") == rid and "method" not in message:
                return message, before
            before.append(message)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    (tmp_path / "stdio_modern_server.py").write_text(MODULE)
    process = subprocess.Popen(
        [sys.executable, "-m", "trio_mcp", "serve", "stdio_modern_server:server", "--stdio"],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        yield Host(process)
        assert process.stdin is not None
        process.stdin.close()
        # T-STDIO-6: end of stdin ends it promptly, and cleanly.
        assert 0 == process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.spec("TM-STDIO-PARAMS")
def test_a_tool_with_mirrored_parameters_is_called_over_stdio(host: Host) -> None:
    """A 2026-07-28 tools/call over stdio of a tool whose parameters are mirrored into
    Mcp-Param headers is served (no -32020 for headers a host cannot send), a string that a
    header would carry Base64-encoded included; a bad argument is still refused."""
    host.request(1, "tools/call", {"name": "where", "arguments": {"region": "eu", "count": 3,
                                                                  "fast": True}})
    host.request(2, "tools/call", {"name": "where", "arguments": {"region": "Zürich \u2603"}})
    host.request(3, "tools/call", {"name": "where", "arguments": {"region": "eu", "count": "x"}})
    answers = {}
    for _ in range(3):
        message = host.read()
        assert message is not None
        answers[message["id"]] = message

    assert [{"type": "text", "text": "eu 3 True"}] == answers[1]["result"]["content"]
    assert [{"type": "text", "text": "Zürich \u2603 0 False"}] == answers[2]["result"]["content"]
    refused = answers[3]
    assert refused.get("error", {}).get("code") != -32020
    assert "error" in refused or refused["result"].get("isError")


@pytest.mark.spec("TM-STDIO-LISTEN", "MU-SUB-1")
def test_a_listen_over_stdio_hears_changes_until_the_host_cancels_it(host: Host) -> None:
    """subscriptions/listen over stdio is acknowledged and hears tools/list_changed, each
    line carrying its subscriptionId, beside other requests' answers; after the host's
    notifications/cancelled nothing more of it is written, and requests go on."""
    host.request("L", "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    ack = host.read()
    assert ack is not None
    assert "notifications/subscriptions/acknowledged" == ack["method"]
    assert "L" == ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]

    host.request(1, "tools/call", {"name": "toggle", "arguments": {}})
    answer, before = host.read_until_id(1)
    heard = before + list(iter(lambda: host.read(timeout=2), None))
    changes = [m for m in heard if m.get("method") == "notifications/tools/list_changed"]
    assert [{"type": "text", "text": "added"}] == answer["result"]["content"]
    assert 1 == len(changes)
    assert "L" == changes[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]

    host.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": "L", "_meta": META}})
    host.request(2, "tools/call", {"name": "toggle", "arguments": {}})
    answer, before = host.read_until_id(2)
    after = before + list(iter(lambda: host.read(timeout=2), None))
    assert [{"type": "text", "text": "removed"}] == answer["result"]["content"]
    assert [] == [m for m in after if m.get("method") == "notifications/tools/list_changed"]
    assert [] == [m for m in after if m.get("id") == "L"]
