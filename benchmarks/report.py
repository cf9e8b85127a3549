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
from pathlib import Path
from typing import Any

TRIO_MCP, SDK, BARE = "trio-mcp", "python-sdk", "hypercorn-bare"
TRIO_PYMALLOC = "trio-mcp/pymalloc"
TRIO_CONTENDERS = (TRIO_MCP, TRIO_PYMALLOC)
CONTENDERS = (TRIO_MCP, SDK, BARE)
COLORS = {TRIO_MCP: "#1f77b4", SDK: "#ff7f0e", BARE: "#7f7f7f", TRIO_PYMALLOC: "#2ca02c"}
HERE = Path(__file__).resolve().parent

#: trio-mcp's defaults the targets refer to (ServerConfig, Retention).
WINDOW_KIB = 512
SLACK_KIB = 16
STALL_BUDGET = 10.0
#: Sampling and checking granularity allowed on top of the stall budget (the server looks at
#: its writers every 0.25 s, this benchmark at the server's socket every 0.5 s).
CUT_GRACE = 1.0


def load(raw: Path) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in ("machine", "rps", "modern", "stream", "abandoned", "slow", "stopped",
                 "resume", "profile"):
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


def targets(data: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    if "rps" in data:
        summary = data["rps"]["summary"]
        for mode in ("sse", "json"):
            for conc in sorted({r["concurrency"] for r in summary}):
                t = find(summary, mode=mode, concurrency=conc, contender=TRIO_MCP)
                s = find(summary, mode=mode, concurrency=conc, contender=SDK)
                b = find(summary, mode=mode, concurrency=conc, contender=BARE)
                r1 = ratio(t and t["rps"], s and s["rps"])
                r2 = ratio(t and t["rps"], b and b["rps"])
                rows.append([f"rps {mode.upper()} c={conc}: trio-mcp >= 1.5x python-sdk",
                             ratio_s(r1), verdict(None if r1 is None else r1 >= 1.5),
                             margin(r1, 1.5)])
                rows.append([f"rps {mode.upper()} c={conc}: trio-mcp >= 60% of hypercorn-bare",
                             pct(r2), verdict(None if r2 is None else r2 >= 0.6),
                             margin(r2, 0.6)])
    if "stream" in data:
        summary = data["stream"]["summary"]
        t, s = find(summary, contender=TRIO_MCP), find(summary, contender=SDK)
        r = ratio(t and t["events_per_s"], s and s["events_per_s"])
        rows.append(["stream: trio-mcp events/s >= 2x python-sdk", ratio_s(r),
                     verdict(None if r is None else r >= 2), margin(r, 2)])
    if "abandoned" in data:
        for row in data["abandoned"]["summary"]:
            if row["contender"] != TRIO_MCP:  # the pymalloc run is a comparison, not a target
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
            limit = STALL_BUDGET + CUT_GRACE
            for field, what in (("decided_at", "server cut the stream"),
                                ("cut_at", "(informational) the TCP connection closed")):
                cut = t.get(field)
                rows.append([f"{who}: {what} within the stall budget "
                             f"({STALL_BUDGET:g} s, +{CUT_GRACE:g} s sampling)",
                             "not within the run" if cut is None else f"{cut:.1f} s",
                             verdict(cut is not None and cut <= limit),
                             "" if cut is None else margin(cut, limit, lower_is_better=True)])
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
    rows = targets(data)
    if rows:
        out.append("## Targets\n")
        out.append("Ratios are between medians taken in the same invocation.\n")
        out.append(table(["target", "measured", "verdict", "margin"], rows) + "\n")
    analysis = HERE / "ANALYSIS.md"
    if analysis.exists() and not quick:
        out.append(analysis.read_text().rstrip() + "\n")
    if "rps" in data:
        out.append(section_rps(data["rps"], plots))
    if "modern" in data:
        out.append(section_modern(data["modern"]))
    if "stream" in data:
        out.append(section_stream(data["stream"]))
    if "abandoned" in data:
        out.append(section_abandoned(data["abandoned"], plots))
    if "slow" in data:
        out.append(section_slow(data["slow"], plots))
    if "stopped" in data:
        out.append(section_slow(data["stopped"], plots, stopped=True))
    if "resume" in data:
        out.append(section_resume(data["resume"]))
    if "profile" in data:
        out.append(section_profile(data["profile"]))
    if "note" in plots:
        out.append(f"_{plots['note']}_\n")
    return "\n".join(out)


def section_machine(m: dict[str, Any], settings: dict[str, Any]) -> str:
    if not m:
        return ""
    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items())
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

- **trio-mcp** (`trio_mcp_bench.py`): `trio_mcp.serve` (hypercorn, trio worker), `ServerConfig`
  defaults except the response mode and, for the abandoned-session figures, `session_idle_ttl`.
  Like `trio-mcp serve`, it runs under `PYTHONMALLOC=malloc`, which it chooses itself by
  starting its interpreter again (TM-SESS-ALLOCATOR); allocators the servers ran under, read
  from their processes' environments: {allocators}.
- **trio-mcp/pymalloc** (where it appears): trio-mcp again, the same script and settings,
  under CPython's own small-object allocator (`PYTHONMALLOC=pymalloc`): faster, but it keeps
  each 1 MiB arena a surviving object lies in (TM-SESS-RELEASE). The targets are trio-mcp's,
  as `trio-mcp serve` runs it; rows naming pymalloc are for comparison.
- **python-sdk** (`sdk_bench.py`): `mcp` {m.get('versions', {}).get('mcp')}'s `MCPServer`,
  `streamable_http_app()` under uvicorn (asyncio and h11: uvloop and httptools are not
  installed), stateful sessions, resumability through `BoundedEventStore`, a minimal store on
  the SDK's `EventStore` ABC (the SDK ships none) keeping 256 events per stream, as trio-mcp's
  window does. For the abandoned-session figures, `session_idle_timeout`.
- **hypercorn-bare** (`bare_hypercorn.py`): hypercorn's trio worker serving a fixed JSON-RPC
  result (no parsing, no session): the floor of trio-mcp's stack.

Both MCP servers have the same tools: `echo(text)`; `echo_progress(text)`, which reports one
progress notification when the call has a progress token, then returns the text (the modern
path's SSE figures); and `stream(n, size)`, which sends n notifications of `size` bytes of
padding on the request's stream (progress notifications when the call has a progress token,
as all calls here do) and returns.
"""  # noqa: E501


def section_rps(rps: dict[str, Any], plots: dict[str, str]) -> str:
    summary = rps["summary"]
    rows = []
    for mode in ("sse", "json"):
        for conc in sorted({r["concurrency"] for r in summary}):
            t = find(summary, mode=mode, concurrency=conc, contender=TRIO_MCP)
            s = find(summary, mode=mode, concurrency=conc, contender=SDK)
            b = find(summary, mode=mode, concurrency=conc, contender=BARE)
            m = find(summary, mode=mode, concurrency=conc, contender=TRIO_PYMALLOC)
            for row in (t, m, s, b):
                if row is None:
                    continue
                rows.append([mode.upper(), str(conc), row["contender"], num(row["rps"]),
                             num(row["p50_ms"], 2), num(row["p99_ms"], 2),
                             pct(row["server_cpu"]), pct(row["loadgen_cpu"]),
                             str(row["errors"])])
            rows.append([mode.upper(), str(conc), "**trio-mcp / python-sdk**",
                         ratio_s(ratio(t and t["rps"], s and s["rps"])),
                         ratio_s(ratio(t and t["p50_ms"], s and s["p50_ms"])),
                         ratio_s(ratio(t and t["p99_ms"], s and s["p99_ms"])), "", "", ""])
            rows.append([mode.upper(), str(conc), "**trio-mcp / hypercorn-bare**",
                         pct(ratio(t and t["rps"], b and b["rps"])), "", "", "", "", ""])
            if m is not None:
                rows.append([mode.upper(), str(conc), "**trio-mcp / trio-mcp/pymalloc**",
                             pct(ratio(t and t["rps"], m["rps"])), "", "", "", "", ""])
    text = f"""## Requests per second: `tools/call echo`

Each client is one session on one keep-alive connection, opened before the clock starts,
sending its next request when the last response has ended. Warm-up,
then a fixed window; requests/s counts responses completed in the window, latency is from
the request's write to its response's end. SSE: every request answered with a
text/event-stream; JSON: `application/json` (trio-mcp `--json-response`, the SDK
`json_response=True`; hypercorn-bare answers alike in each mode).

{table(["mode", "clients", "contender", "req/s", "p50 ms", "p99 ms", "server CPU", "load gen CPU", "errors"], rows)}
"""  # noqa: E501
    if "rps" in plots:
        text += f"\n![requests per second and latency]({plots['rps']})\n"
    return text


def section_modern(modern: dict[str, Any]) -> str:
    summary = modern["summary"]
    shapes = [sh for sh in ("json", "sse") if any(r["shape"] == sh for r in summary)]
    rows = []
    for shape in shapes:
        for conc in sorted({r["concurrency"] for r in summary}):
            t = find(summary, shape=shape, concurrency=conc, contender=TRIO_MCP)
            s = find(summary, shape=shape, concurrency=conc, contender=SDK)
            for row in (t, s):
                if row is None:
                    continue
                rows.append([shape.upper(), str(conc), row["contender"], num(row["rps"]),
                             num(row["p50_ms"], 2), num(row["p99_ms"], 2),
                             pct(row["server_cpu"]), pct(row["loadgen_cpu"]),
                             str(row["errors"]), str(row["reconnects"])])
            rows.append([shape.upper(), str(conc), "**trio-mcp / python-sdk**",
                         *(ratio_s(ratio(t[k] if t else None, s[k] if s else None))
                           for k in ("rps", "p50_ms", "p99_ms")), "", "", "", ""])
    kinds = [f"{r['contender']} {r['shape'].upper()} c={r['concurrency']}: "
             + ", ".join(f"{n} {k}" for k, n in r["error_kinds"].items())
             for r in summary if r.get("error_kinds")]
    errors = ("Errors by kind: " + "; ".join(kinds) + ".\n") if kinds else ""
    return f"""## Requests per second, 2026-07-28: `tools/call` without a session

`tools/call` on the 2026-07-28 ("modern") revision: each request is one POST complete in
itself (`MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name` and the `params._meta`
envelope; no initialize, no session). Each client sends its next request when the last
response has ended, on one keep-alive connection, opened again when the server closes it
(hypercorn does after 1,000 requests: "reconnects"; the reopening is in that request's
latency). Warm-up (20 calls of each shape, then a warm-up window), then a fixed window, each
figure on a fresh server; latency is from the request's write to its response's end. JSON: `echo`, answered at once in an `application/json` body. SSE:
`echo_progress` with a progress token; it reports one progress notification before it
returns, so the answer is a `text/event-stream` (that notification, then the response). Both
servers run as in the other figures: trio-mcp as `trio-mcp serve` does, the SDK in its default
(SSE) mode, whose modern path answers JSON until a handler's first notification, as
trio-mcp's does. Every answer is checked: a status other than 200, another content type than
the shape's, a JSON-RPC error, an `isError` result, a result that is not this request's echo,
or (SSE) not exactly one progress notification for its token is an error, and is counted
neither in req/s nor in the latencies.

{table(["shape", "clients", "contender", "req/s", "p50 ms", "p99 ms", "server CPU", "load gen CPU", "errors", "reconnects"], rows)}
{errors}"""  # noqa: E501


def section_stream(stream: dict[str, Any]) -> str:
    summary = stream["summary"]
    rows = []
    for row in summary:
        complete = row.get("complete")
        rows.append([row["contender"], num(row["events_per_s"]),
                     num(row["bytes_per_s"] / 1e6, 2), num(row["seconds"], 2),
                     str(row["duplicates"]), str(row["gaps"]),
                     "n/a" if complete is None else f"{complete}/{row['runs']}",
                     pct(row["server_cpu"]), pct(row["loadgen_cpu"])])
    t, s, b = (find(summary, contender=c) for c in CONTENDERS)
    rows.append(["**trio-mcp / python-sdk**",
                 ratio_s(ratio(t and t["events_per_s"], s and s["events_per_s"])),
                 ratio_s(ratio(t and t["bytes_per_s"], s and s["bytes_per_s"])), "", "", "",
                 "", "", ""])
    rows.append(["**trio-mcp / hypercorn-bare**",
                 pct(ratio(t and t["events_per_s"], b and b["events_per_s"])), "", "", "", "",
                 "", "", ""])
    m = find(summary, contender=TRIO_PYMALLOC)
    if m is not None:
        rows.append(["**trio-mcp / trio-mcp/pymalloc**",
                     pct(ratio(t and t["events_per_s"], m["events_per_s"])), "", "", "", "",
                     "", "", ""])
    return f"""## One stream to one client: `stream(n={stream['n']}, size={stream['size']})`

One call with a progress token, read as fast as the client can: {stream['n']:,} progress
notifications, then the result, on the POST's SSE response. Events/s counts the progress
notifications, bytes/s the SSE body. hypercorn-bare streams {stream['n']:,} pre-formatted events
of the same size, one ASGI send each. "complete" counts the runs whose client got every
event and the response.

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
trio-mcp's own counters once quiet (bytes its logs retain, `SessionManager.statistics()`):
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
0.5 s), whatever the client had yet to read; for trio-mcp, "decided" is when its counters
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
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    width = 0.26
    for col, mode in enumerate(("sse", "json")):
        ax, lat = axes[0][col], axes[1][col]
        for i, c in enumerate(CONTENDERS):
            xs = [k + (i - 1) * width for k in range(len(concs))]
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
    fig.suptitle("tools/call echo: trio-mcp, python-sdk, bare hypercorn-trio (medians)")
    fig.tight_layout()
    path = out / "rps.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_abandoned(plt: Any, out: Path, ab: dict[str, Any]) -> str:
    fig, ax = plt.subplots(figsize=(8, 5))
    sizes = sorted({r["sessions"] for r in ab["summary"]})
    for c in (TRIO_MCP, TRIO_PYMALLOC, SDK):
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
