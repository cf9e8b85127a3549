"""`opentelemetry-instrument --traces_exporter console trio-mcp serve ...` (the distro's
standard way, TM-OTEL-SPAN): the span of a tools/call whose _meta carries a traceparent is
printed, named `tools/call <tool>`, of the caller's trace, with the MCP attributes."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from support.fixtures import free_port
from support.modern import call_tool, post

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
BIN = Path(sys.executable).parent


def printed_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed one after the other."""
    decoder = json.JSONDecoder()
    spans, at = [], 0
    while (start := text.find("{", at)) >= 0:
        try:
            obj, at = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            at = start + 1
            continue
        if isinstance(obj, dict) and "context" in obj:
            spans.append(obj)
    return spans


async def _listening(port: int) -> None:
    with trio.fail_after(60):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            return


@pytest.mark.slow
@pytest.mark.spec("TM-OTEL-SPAN", "TM-OTEL-PARENT")
async def test_opentelemetry_instrument_prints_the_span_of_a_tools_call(tmp_path: Path) -> None:
    """Under opentelemetry-instrument with the console exporter, `trio-mcp serve` of the demo
    prints a SERVER span `tools/call echo` whose trace id is the one the call's _meta names."""
    port = free_port()
    out = tmp_path / "stdout.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_SERVICE_NAME"] = "trio-mcp-demo"
    cmd = [
        str(BIN / "opentelemetry-instrument"), "--traces_exporter", "console",
        "--metrics_exporter", "none", "--logs_exporter", "none",
        str(BIN / "trio-mcp"), "serve", "trio_mcp.demo:server", "--port", str(port),
    ]
    errors = tmp_path / "stderr.txt"
    with out.open("w") as sink, errors.open("w") as err:
        proc = await trio.lowlevel.open_process(cmd, env=env, stdout=sink, stderr=err)
        try:
            await _listening(port)
            message = call_tool("echo", {"text": "hi"})
            message["params"]["_meta"]["traceparent"] = TRACEPARENT
            response = await post(f"http://127.0.0.1:{port}/mcp", message)
            assert response.status == 200, response.body
        finally:
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                await proc.wait()
    assert proc.returncode == 0, errors.read_text()[-2000:]

    [span] = [s for s in printed_spans(out.read_text()) if s["name"] == "tools/call echo"]
    assert span["kind"] == "SpanKind.SERVER"
    assert span["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert span["parent_id"] == "0x00f067aa0ba902b7"
    assert {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": "2026-07-28",
        "jsonrpc.request.id": str(message["id"]),
        "network.transport": "tcp",
    }.items() <= span["attributes"].items()
