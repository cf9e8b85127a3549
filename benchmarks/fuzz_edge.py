"""The socket fuzzer of the HTTP edge, run long (issue 34): the harness and generators of
tests/e2e/test_e2e_socket_fuzz.py (tests/support/edgefuzz.py, tests/support/wirefuzz.py),
unseeded, for at least ``--connections`` generated connections, eight at a time at most,
against trio-mcp's own server with httptools and with h11 and against hypercorn, each with its
stats port and inspector, each with a neighbour client pinging throughout. Problems are
counted, not raised, so that the run goes on; the figures go to a JSON file and a line each
to stdout.

    nice -n 19 python benchmarks/fuzz_edge.py --connections 100000 \\
        --out benchmarks/results/issue-34-edge/fuzz.json

Invariants counted: a connection that does not end within 8 s, an answer that is not HTTP/1.x,
a 5xx other than 501, 503 and 505, a server process that is gone, a neighbour's failed ping,
a log record other than what hypercorn's isolation caught.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from support import wirefuzz  # noqa: E402
from support.edgefuzz import FuzzServer, fuzz_servers, send, summary  # noqa: E402
from support.wire import responses  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class _Done(Exception):
    """Enough connections, or time is up (raised through Hypothesis to stop it)."""


def run(connections: int, batch: int, seconds: float) -> dict[str, Any]:
    counts: collections.Counter[str] = collections.Counter()
    statuses: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    began = time.perf_counter()
    with fuzz_servers() as servers:
        start = {f.name: (_cpu_seconds(f.proc.pid), _rss_kib(f.proc.pid)) for f in servers}
        pool = ThreadPoolExecutor(batch)

        def go(case: tuple[int, tuple[str, list[bytes]]]) -> tuple[FuzzServer, str, Any]:
            fuzz = servers[case[0]]
            port, pieces = case[1]
            return fuzz, port, (send(fuzz.ports[port], pieces), b"".join(pieces))

        @settings(
            max_examples=connections,
            phases=[Phase.generate],
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(
            st.tuples(st.integers(0, len(servers) - 1), wirefuzz.fuzz_connection()),
            min_size=1, max_size=batch,
        ))
        def one(cases: list[tuple[int, tuple[str, list[bytes]]]]) -> None:
            if counts["connections"] >= connections or time.perf_counter() - began > seconds:
                raise _Done
            for fuzz, port, (outcome, sent) in pool.map(go, cases):
                counts["connections"] += 1
                counts[f"{fuzz.name} {port}"] += 1
                counts["reset"] += outcome.reset
                counts[f"reset: {fuzz.name} {port}"] += outcome.reset
                for answer in responses(outcome.data):
                    statuses[str(answer.status)] += 1
                if not outcome.data:
                    counts["closed without an answer"] += 1
                for problem in outcome.problems(sent):
                    problems.append(f"{fuzz.name} {port}: {problem}: {sent[:200]!r}")
                if not fuzz.alive():
                    problems.append(f"{fuzz.name} is gone after {sent[:200]!r}")
                    raise SystemExit(f"{fuzz.name} is gone")
            if counts["connections"] % 5000 < len(cases):
                print(f"{counts['connections']} connections, {len(problems)} problems, "
                      f"{time.perf_counter() - began:.0f} s", flush=True)

        with contextlib.suppress(_Done):
            one()
        pool.shutdown()
        elapsed = time.perf_counter() - began
        figures = summary(servers)
        for fuzz in servers:
            cpu0, rss0 = start[fuzz.name]
            figures[fuzz.name] |= {
                "alive": fuzz.alive(),
                "cpu_seconds": round(_cpu_seconds(fuzz.proc.pid) - cpu0, 1),
                "rss_kib_before": rss0,
                "rss_kib_after": _rss_kib(fuzz.proc.pid),
                "unexpected_log_lines": len(fuzz.unexpected_log()),
            }
            problems += [f"{fuzz.name} log: {line}" for line in fuzz.unexpected_log()[:20]]
            problems += [f"{fuzz.name} neighbour: {f}" for f in fuzz.neighbour.failures[:20]]
    return {
        "connections": counts["connections"],
        "seconds": round(elapsed, 1),
        "by_target": {k: v for k, v in sorted(counts.items())
                      if " " in k and not k.startswith(("closed", "reset"))},
        "closed_without_an_answer": counts["closed without an answer"],
        "resets": counts["reset"],
        "resets_by_target": {k[7:]: v for k, v in sorted(counts.items())
                             if k.startswith("reset: ") and v},
        "statuses": dict(sorted(statuses.items())),
        "servers": figures,
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=8, help="connections at once, at most")
    parser.add_argument("--seconds", type=float, default=3 * 3600, help="stop after this long")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.connections, args.batch, args.seconds)
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    sys.exit(1 if result["problems"] else 0)


if __name__ == "__main__":
    main()
