# Interoperability with the TypeScript SDK v2 client (@modelcontextprotocol/client 2.4.0,
# installed from npm into .cache/ts-client/ on first use), which negotiates the era itself:
# with versionNegotiation {mode: "auto"} it probes server/discover and, against this dual-era
# server, speaks 2026-07-28; by default it does the legacy initialize handshake.
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from support.fixtures import StartServer
from support.node import TS_CLIENT_VERSION, install_ts_client, node, node_env

SCRIPT = Path(__file__).with_name("ts_client.mjs")


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The TypeScript SDK v2 client's node_modules (installed on first use)."""
    return install_ts_client()


async def run_client(url: str, node_modules: Path, mode: str) -> dict[str, Any]:
    with trio.fail_after(60):
        proc = await trio.run_process(
            [str(node()), str(SCRIPT), url, str(node_modules), mode],
            capture_stdout=True, capture_stderr=True, check=False, env=node_env(),
        )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return report


@pytest.mark.slow
@pytest.mark.spec("ML-VER-2", "ML-COMPAT-1", "TM-ERA-BODY", "MU-MRTR-13", "MU-PROG-1")
async def test_ts_client_in_auto_mode_ends_up_in_the_2026_era(
    live_server: StartServer, node_modules: Path
) -> None:
    """The TypeScript v2 client in auto mode probes server/discover, adopts 2026-07-28, and
    then calls tools, answers an input_required round and gets progress, all without a
    session."""
    live = await live_server()

    report = await run_client(live.url, node_modules, "auto")
    print(f"@modelcontextprotocol/client {TS_CLIENT_VERSION}: {report['version']}")

    assert "2026-07-28" == report["version"]
    assert "server/discover" == report["requests"][0]["method"]
    assert [] == [r for r in report["requests"] if r["session"] or r["http"] != "POST"]
    assert {"2026-07-28"} == {r["version"] for r in report["requests"]}
    assert "echo" in report["tools"] and "hi" == report["echo"]
    assert (["What is your name?"], "Hello, Ada!") == (report["questions"], report["elicited"])
    assert ("liftoff", [1, 2, 3]) == (report["countdown"], report["progress"])
    assert {} == dict(live.table.sessions)


@pytest.mark.slow
@pytest.mark.spec("ML-COMPAT-1", "TM-ERA-BODY", "TM-MRTR-LEGACY")
async def test_ts_client_in_its_default_mode_keeps_the_legacy_era(
    live_server: StartServer, node_modules: Path
) -> None:
    """By default the TypeScript v2 client initializes a 2025-11-25 session here, and the
    same tools answer it the same way, the question coming as a request on the stream."""
    live = await live_server()

    report = await run_client(live.url, node_modules, "legacy")

    assert "2025-11-25" == report["version"]
    assert "initialize" == report["requests"][0]["method"]
    assert "hi" == report["echo"]
    assert (["What is your name?"], "Hello, Ada!") == (report["questions"], report["elicited"])
    assert ("liftoff", [1, 2, 3]) == (report["countdown"], report["progress"])
