"""Before and after issue 34, side by side on one machine in one run: the rate of `tools/call`
(JSON and SSE answers, 32 clients) and the latency at one client, of trio-mcp as it was
before (a checkout given with ``--before``, e.g. ``git archive 158b216 | tar -x -C DIR``)
and as it is, with the official Python SDK under uvicorn[standard] beside them for the
latency at one client. The machine is shared: contenders are interleaved run by run (a fresh
server each time, the order rotated), medians of the runs are reported, and a second measure
runs the two trio-mcp servers at once on the same server CPU, 16 clients each, so that what
disturbs one disturbs the other and their ratio is left (as run.py's ``budgets`` does).

    python benchmarks/edge_ab.py --before /tmp/before [--runs 5] [--pairs 6]
        [--server trio-mcp|hypercorn] [--out benchmarks/results/issue-34-edge/ab.json]

Built on benchmarks/run.py (its servers, warm-up and load generator).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (the benchmarks directory is not a package)

BEFORE = "trio-mcp/before"
AFTER = "trio-mcp/after"
AFTER_H11 = "trio-mcp/after-h11"


def setup(before: Path, http_server: str) -> None:
    """Teach run.py the contenders: this tree, with each parser, and the checkout before."""
    script = run.SERVER_SCRIPTS[run.TRIO_MCP]
    extra = ("--server", "hypercorn") if http_server == "hypercorn" else ()
    run.SERVER_SCRIPTS |= {BEFORE: script, AFTER: script, AFTER_H11: script}
    run.SERVER_ARGS |= {BEFORE: extra, AFTER: extra, AFTER_H11: (*extra, "--http", "h11")}
    run.SERVER_ENV |= {BEFORE: {"PYTHONPATH": str(before)}}
    run.TRIO_CONTENDERS = (*run.TRIO_CONTENDERS, BEFORE, AFTER, AFTER_H11)


async def interleaved(
    runs: int, duration: float, contenders: list[str], logs: Path
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(runs):
        for mode in ("json", "sse"):
            for contender in run.rotate(contenders, i):
                concurrencies = (32, 1) if contender != run.SDK else (1,)
                for conc in concurrencies:
                    async with run.server(contender, logs, json_response=mode == "json") as srv:
                        await run.warm_up(srv.port)
                        got = await run.measure_rps(srv, conc, 1.0, duration, bare=False)
                    got |= {"run": i, "mode": mode, "concurrency": conc, "contender": contender}
                    rows.append(got)
                    run.log(f"run {i} {mode} c={conc} {contender}: {got['rps']:.0f} req/s, "
                            f"p50 {got['p50_ms']:.2f} ms, errors {got['errors']}, "
                            f"loadgen cpu {got['loadgen_cpu']:.0%}")
    return rows


async def pairs(count: int, duration: float, logs: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for mode in ("json", "sse"):
        for pair in range(count):
            order = (BEFORE, AFTER) if pair % 2 == 0 else (AFTER, BEFORE)
            async with run.server(order[0], logs, json_response=mode == "json") as first, \
                    run.server(order[1], logs, json_response=mode == "json") as second:
                for srv in (first, second):
                    await run.warm_up(srv.port)
                got = await asyncio.gather(*(
                    run.measure_rps(srv, 16, 1.0, duration, bare=False) for srv in (first, second)
                ))
            by = dict(zip(order, got, strict=True))
            ratio = by[AFTER]["rps"] / by[BEFORE]["rps"]
            rows.append({"mode": mode, "pair": pair, "first": order[0], "ratio": ratio,
                         "before_rps": by[BEFORE]["rps"], "after_rps": by[AFTER]["rps"],
                         "errors": sum(r["errors"] for r in got)})
            run.log(f"pair {mode} {pair} ({order[0]} first): after/before {ratio:.3f}")
    return rows


def summarize(rows: list[dict[str, Any]], pair_rows: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for mode in ("json", "sse"):
        for conc in (32, 1):
            for contender in sorted({r["contender"] for r in rows}):
                rs = [r for r in rows if (r["mode"], r["concurrency"], r["contender"])
                      == (mode, conc, contender)]
                if not rs:
                    continue
                table[f"{mode} c={conc} {contender}"] = {
                    "rps": statistics.median(r["rps"] for r in rs),
                    "p50_ms": statistics.median(r["p50_ms"] for r in rs),
                    "p99_ms": statistics.median(r["p99_ms"] for r in rs),
                    "runs": len(rs),
                    "rps_each": [round(r["rps"]) for r in rs],
                    "errors": sum(r["errors"] for r in rs),
                }
    ratios = {}
    for mode in ("json", "sse"):
        rs = [r["ratio"] for r in pair_rows if r["mode"] == mode]
        if rs:
            ratios[mode] = {"median": statistics.median(rs), "min": min(rs), "max": max(rs),
                            "pairs": len(rs)}
    return {"interleaved": table, "at_once_after_over_before": ratios}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    setup(args.before.resolve(), args.server)
    logs = run.HERE / "results" / "raw" / "edge-ab"
    contenders = [BEFORE, AFTER, AFTER_H11]
    if not args.no_sdk:
        contenders += run.lineup(run.FULL, [run.SDK])
    rows = await interleaved(args.runs, args.duration, contenders, logs)
    pair_rows = await pairs(args.pairs, args.duration, logs)
    return {"summary": summarize(rows, pair_rows), "runs": rows, "pairs": pair_rows,
            "machine": run.machine(), "server": args.server}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--server", choices=("trio-mcp", "hypercorn"), default="trio-mcp")
    parser.add_argument("--no-sdk", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2, default=str)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
