# Resumption with the official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2, as a
# dependency of the conformance suite's npm package): the stale-cursor failure reaches it as
# an error response for its call, so the call rejects at once with our code and message.
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from support.fixtures import StartServer
from support.node import install_conformance, node, node_env, sdk_version
from support.resume import close_when_attached

from trio_mcp import Context, Retention, Server, ServerConfig
from trio_mcp.protocol import ErrorCode

SCRIPT = Path(__file__).with_name("ts_stale_cursor.mjs")

server = Server("resume-ts")
EVENTS: dict[str, float] = {}


@server.tool()
async def outrun(before: int, after: int, ctx: Context) -> str:
    """Send `before` messages, close the connection, send `after` more while the client
    waits its retry interval, then wait until cancelled.

    Args:
        before: messages sent while the client is attached.
        after: messages sent while it is away.
    """
    for i in range(before):
        await ctx.log("info", {"i": i})
    await close_when_attached(ctx)
    EVENTS["closed_at"] = time.monotonic()
    for i in range(before, before + after):
        await ctx.log("info", {"i": i})
    try:
        await trio.sleep_forever()
    finally:
        EVENTS["cancelled_at"] = time.monotonic()
    return "unreachable"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The conformance suite's node_modules (installed on first use), with the TS SDK."""
    return install_conformance()


@pytest.mark.slow
@pytest.mark.spec("TM-RES-STALE", "TM-RES-WINDOW", "T-GET-6")
async def test_ts_sdk_client_with_a_stale_cursor_rejects_the_call_promptly(
    live_server: StartServer, node_modules: Path
) -> None:
    """The TypeScript SDK client resumes the closed call after the server's retry interval
    (GET + Last-Event-ID); its cursor has left the 8-event window, so the resumed stream
    carries a JSON-RPC error response for the call. The call's promise rejects with code
    -31001 and our message after about one retry interval, well before the client's own
    reconnection attempts would run out, and the client never hangs."""
    retry_ms = 300
    config = ServerConfig(retention=Retention(max_events=8), retry_ms=retry_ms)
    live = await live_server(server, config)
    EVENTS.clear()

    with trio.fail_after(30):
        proc = await trio.run_process(
            [str(node()), str(SCRIPT), live.url, str(node_modules),
             json.dumps({"before": 3, "after": 40})],
            capture_stdout=True, capture_stderr=True, check=False,
            env={**node_env(), "LINGER_MS": str(3 * retry_ms), "WATCHDOG_MS": "15000"},
        )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    resumes = [r for r in report["requests"] if r["method"] == "GET" and r["lastEventId"]]
    print(
        f"TS SDK {sdk_version()}: {report['outcome']} after {report['elapsedMs']} ms "
        f"(code {report['code']}); GETs with Last-Event-ID: "
        f"{[r['at'] - report.get('rejectedAt', 0) for r in resumes]} ms relative to the rejection"
    )

    assert ("rejected", ErrorCode.RESUMPTION_FAILED) == (report["outcome"], report["code"]), report
    assert "Resumption failed" in report["message"]
    assert retry_ms <= report["elapsedMs"] < 2 * retry_ms, report
    assert report["logs"] == list(range(len(report["logs"]))) and len(report["logs"]) <= 3
    assert EVENTS["cancelled_at"] - EVENTS["closed_at"] < 2 * retry_ms / 1000
