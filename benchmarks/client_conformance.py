"""The official conformance suite's client scenarios, scored for trio_mcp.Client and for the
official SDKs' own conformance client fixtures, on the two runs issue 39 names (the same
runs tests/conformance/test_conformance_client.py takes): `--requirements 2026-07-28` and
`--suite all --spec-version 2025-11-25`, with the suite pinned in tests/support/node.py.

    python benchmarks/client_conformance.py \
        --python-sdk PATH/TO/python-sdk --typescript-sdk PATH/TO/typescript-sdk \
        [--json OUT.json]

The SDKs' fixtures are not part of this repository: the script reads them from git
repositories of the SDKs (a clone, or a bare mirror), at the commits below, into a temporary
directory, and runs them with the SDK packages installed here:

- the Python SDK's `.github/actions/conformance/client.py` with the venv's `mcp`;
- the TypeScript SDK v2's `test/conformance/src/everythingClient.ts` (and its helpers) with
  `@modelcontextprotocol/client` TS_CLIENT_VERSION (tests/support/node.py);
- the TypeScript SDK v1's fixture of the same path on its `v1.x` branch with
  `@modelcontextprotocol/sdk` as the 0.2 conformance pin installs it.

The TypeScript fixtures are run by node's own type stripping (`--experimental-transform-types`)
rather than `tsx`, which is not installed here; for that their relative imports get a `.ts`
suffix, and v1's imports of the SDK's `src/` tree become imports of the installed package.
Nothing else in them is changed. A contender whose repository is not given is left out.

It prints a table scenario x client (checks passed/failed, as the suite counts them) and the
totals; it need not run in CI (each run starts ~40 client processes at once).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.node import (  # noqa: E402
    CONFORMANCE_NEXT_VERSION,
    TS_CLIENT_VERSION,
    conformance_cli,
    install_conformance_next,
    install_ts_client,
    node,
    node_env,
)

#: The fixtures' sources: the newest snapshots reachable here (the SDK releases installed
#: here, mcp 2.3.0 and @modelcontextprotocol/client 2.4.0, are later than these commits).
PYTHON_SDK_COMMIT = "57394b0548d1e2dc2dce8d67d84985769df3b8bb"  # main, 2026-08-20
PYTHON_FIXTURE = ".github/actions/conformance/client.py"
TS_V2_COMMIT = "3924de99df834302d89f5997a1b64ca268282284"  # main (2.0.0), 2026-08-18
TS_V1_COMMIT = "2d889f2b329e46680ec9bdd565de4616c497825a"  # v1.x, tag 1.30.0, 2026-07-27
TS_FIXTURE_DIR = "test/conformance/src"
TS_FIXTURE_FILES = ("everythingClient.ts", "helpers/conformanceOAuthProvider.ts",
                    "helpers/logger.ts", "helpers/withOAuthRetry.ts")

SELECTIONS: dict[str, tuple[str, ...]] = {
    "2026-07-28": ("--requirements", "2026-07-28"),
    "2025-11-25": ("--suite", "all", "--spec-version", "2025-11-25"),
}
SUMMARY_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
TOTAL_LINE = re.compile(r"^Total: (\d+) passed, (\d+) failed, (\d+) warnings", re.MULTILINE)
NOT_SCORED = re.compile(r"^  [✓✗] (\S+) \(([^)]+)\)$", re.MULTILINE)
STAMP = re.compile(r"-\d{4}-\d\d-\d\dT[\d-]+Z$")


@dataclass
class Scenario:
    passed: int
    failed: int
    warnings: int = 0
    failing_checks: list[str] = field(default_factory=list)
    scored: bool = True
    note: str = ""


@dataclass
class Run:
    client: str
    selection: str
    seconds: float
    total: tuple[int, int, int] | None
    scenarios: dict[str, Scenario]


def _git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "show", f"{commit}:{path}"],
                          check=True, stdout=subprocess.PIPE, text=True).stdout


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def _python_fixture(repo: Path, into: Path) -> list[str]:
    script = into / "python-sdk" / "client.py"
    script.parent.mkdir(parents=True)
    script.write_text(_git_show(repo, PYTHON_SDK_COMMIT, PYTHON_FIXTURE))
    return [sys.executable, str(script)]


def _ts_fixture(repo: Path, commit: str, into: Path, node_modules: Path, v1: bool) -> list[str]:
    for name in TS_FIXTURE_FILES:
        text = _git_show(repo, commit, f"{TS_FIXTURE_DIR}/{name}")
        # Node's type stripping resolves no extensionless or `.js`-for-`.ts` import.
        text = re.sub(r"from '(\./(?:helpers/)?[A-Za-z]+?)(?:\.js)?'", r"from '\1.ts'", text)
        if v1:  # v1 imports the SDK from its own source tree
            text = re.sub(r"from '(?:\.\./)+src/([^']+)'",
                          r"from '@modelcontextprotocol/sdk/\1'", text)
        target = into / f"ts-{'v1' if v1 else 'v2'}" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    base = into / f"ts-{'v1' if v1 else 'v2'}"
    (base / "package.json").write_text('{"type": "module"}\n')
    (base / "node_modules").symlink_to(node_modules)
    return [str(node()), "--experimental-transform-types", "--no-warnings",
            str(base / "everythingClient.ts")]


def _parse(output: str, results: Path) -> tuple[tuple[int, int, int] | None, dict[str, Scenario]]:
    scenarios = {m.group(2): Scenario(int(m.group(3)), int(m.group(4)))
                 for m in SUMMARY_LINE.finditer(output)}
    for m in NOT_SCORED.finditer(output.split("Not scored for", 1)[-1]
                                 if "Not scored for" in output else ""):
        if m.group(1) in scenarios:
            scenarios[m.group(1)].scored = False
            scenarios[m.group(1)].note = m.group(2)
    for checks in results.rglob("checks.json"):
        name = STAMP.sub("", str(checks.parent.relative_to(results)))
        if name not in scenarios:
            continue
        for check in json.loads(checks.read_text()):
            if check.get("status") == "FAILURE":
                scenarios[name].failing_checks.append(check.get("id", "?"))
            elif check.get("status") == "WARNING":
                scenarios[name].warnings += 1
    total = TOTAL_LINE.search(output)
    return (tuple(int(g) for g in total.groups()) if total else None), scenarios  # type: ignore[return-value]


def run(client: str, command: list[str], selection: str, modules: Path, out: Path) -> Run:
    results = out / f"{client}-{selection}"
    cmd = [str(node()), str(conformance_cli(modules)), "client", "--command",
           " ".join(command), *SELECTIONS[selection], "-o", str(results)]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=node_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600, cwd=ROOT)
    seconds = time.monotonic() - start
    (out / f"{client}-{selection}.log").write_text(proc.stdout)
    total, scenarios = _parse(proc.stdout, results)
    return Run(client, selection, round(seconds, 1), total, scenarios)


def _cell(s: Scenario | None) -> str:
    if s is None:
        return "—"
    mark = "✓" if s.failed == 0 else "✗"
    text = f"{mark} {s.passed}/{s.passed + s.failed}"
    if s.warnings:
        text += f", {s.warnings} warn"
    return text


def table(runs: list[Run], selection: str) -> str:
    mine = [r for r in runs if r.selection == selection]
    names: list[str] = []
    for r in mine:
        names += [n for n in r.scenarios if n not in names]
    rows = [f"| Scenario | {' | '.join(r.client for r in mine)} |",
            f"| --- |{' ---: |' * len(mine)}"]
    for name in names:
        notes = {r.scenarios[name].note for r in mine if name in r.scenarios} - {""}
        label = f"{name} (not scored: {', '.join(sorted(notes))})" if notes else name
        rows.append(f"| {label} | {' | '.join(_cell(r.scenarios.get(name)) for r in mine)} |")

    def _count(r: Run, scored: bool | None) -> str:
        chosen = [s for s in r.scenarios.values() if scored is None or s.scored == scored]
        return f"{sum(s.failed == 0 for s in chosen)} of {len(chosen)}"

    rows.append(f"| **scenarios passed (scored)** | "
                f"{' | '.join(_count(r, True) for r in mine)} |")
    rows.append(f"| **scenarios passed (all run)** | "
                f"{' | '.join(_count(r, None) for r in mine)} |")
    rows.append("| **checks: passed, failed, warnings** | " + " | ".join(
        (f"{r.total[0]}, {r.total[1]}, {r.total[2]}" if r.total else "no summary")
        for r in mine) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-sdk", type=Path, help="a git clone or mirror of python-sdk")
    parser.add_argument("--typescript-sdk", type=Path,
                        help="a git clone or mirror of typescript-sdk")
    parser.add_argument("--only", nargs="*", help="clients to run (default: all given)")
    parser.add_argument("--json", type=Path, help="write every run's scenarios here")
    parser.add_argument("--keep", type=Path, help="keep logs and results in this directory")
    args = parser.parse_args()

    modules = install_conformance_next()
    with tempfile.TemporaryDirectory(prefix="client-conformance-") as tmp:
        work = Path(tmp)
        out = args.keep or work / "out"
        out.mkdir(parents=True, exist_ok=True)
        clients: dict[str, list[str]] = {
            "trio-mcp": [sys.executable, str(ROOT / "tests" / "conformance" / "client_driver.py")],
        }
        if args.python_sdk:
            clients["Python SDK"] = _python_fixture(args.python_sdk, work)
        if args.typescript_sdk:
            clients["TS SDK v2"] = _ts_fixture(args.typescript_sdk, TS_V2_COMMIT, work,
                                               install_ts_client(), v1=False)
            clients["TS SDK v1"] = _ts_fixture(args.typescript_sdk, TS_V1_COMMIT, work,
                                               modules, v1=True)
        runs = []
        for selection in SELECTIONS:
            for client, command in clients.items():
                if args.only and client not in args.only:
                    continue
                runs.append(run(client, command, selection, modules, out))
                print(f"{client} {selection}: {runs[-1].total} in {runs[-1].seconds} s",
                      file=sys.stderr)
    print(f"conformance {CONFORMANCE_NEXT_VERSION}, @modelcontextprotocol/client "
          f"{TS_CLIENT_VERSION}, python {sys.version.split()[0]}\n")
    for selection in SELECTIONS:
        print(f"### {' '.join(SELECTIONS[selection])}\n\n{table(runs, selection)}\n")
        for r in runs:
            if r.selection != selection:
                continue
            for name, s in r.scenarios.items():
                if s.failing_checks:
                    print(f"- {r.client}, {name}: {', '.join(sorted(set(s.failing_checks)))}")
        print()
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")


if __name__ == "__main__":
    main()
