"""The conformance suite's three skills-extension scenarios (SEP-2640) against `trio-mcp
serve`: sep-2640-skills-directory, -enumeration and -manifest, each run alone with `--force`
(they are extension scenarios, off the spec timeline, run at 2026-07-28), on each HTTP server
and with workers; every check must be SUCCESS, none SKIPPED."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.node import (
    CONFORMANCE_NEXT_VERSION,
    conformance_cli,
    install_conformance_next,
    node,
    node_env,
)
from support.process import DEMO_KINDS, serving_demo

ROOT = Path(__file__).resolve().parents[2]

SCENARIOS = ("sep-2640-skills-directory", "sep-2640-skills-enumeration",
             "sep-2640-skills-manifest")


@pytest.fixture(scope="module")
def node_modules() -> Path:
    modules = install_conformance_next()
    assert conformance_cli(modules).exists(), f"conformance CLI missing under {modules}"
    return modules


@pytest.fixture(scope="module", params=DEMO_KINDS)
def demo_server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The demo server as a subprocess; its later output drained by a thread."""
    with serving_demo(request, cwd=ROOT) as url:
        yield url


def _run(node_modules: Path, url: str, scenario: str, out: Path) -> tuple[str, list[Any]]:
    proc = subprocess.run(
        [str(node()), str(conformance_cli(node_modules)), "server", "--url", url,
         "--scenario", scenario, "--force", "-o", str(out)],
        env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
    )
    [path] = sorted(out.glob("*/checks.json"))
    checks: list[Any] = json.loads(path.read_text())
    return proc.stdout, checks


@pytest.mark.slow
@pytest.mark.spec(
    "SK-CAPABILITY", "SK-RESOURCES", "SK-METADATA", "SK-NAME", "SK-FORMAT", "SK-FRONTMATTER",
    "TM-SKILL-YAML", "SK-RESERVED", "SK-LIST", "SK-ENTRY", "SK-DIGEST", "SK-GET", "SK-DIRECTORY",
    "EX-DECLARE",
)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_skills_scenarios_pass_every_check(
    node_modules: Path, demo_server_url: str, scenario: str, tmp_path: Path
) -> None:
    """Each sep-2640-skills-* scenario has checks, and every one of them is SUCCESS (none
    SKIPPED, FAILURE or WARNING)."""
    output, checks = _run(node_modules, demo_server_url, scenario, tmp_path)
    statuses = {c.get("id"): c.get("status") for c in checks}
    print(f"conformance {CONFORMANCE_NEXT_VERSION} {scenario} --force: "
          f"{sum(s == 'SUCCESS' for s in statuses.values())}/{len(statuses)} SUCCESS")

    assert checks, output[-3000:]
    assert {} == {i: s for i, s in statuses.items() if s != "SUCCESS"}, output[-3000:]
    assert re.search(r"Passed: (\d+)/\1, 0 failed, 0 warnings", output), output[-3000:]
