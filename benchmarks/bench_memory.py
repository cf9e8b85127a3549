"""What trio-mcp's memory does when clients misbehave (spec/backpressure.md).

    python benchmarks/bench_memory.py [--quick] [--only abandoned,slow,held] [--json PATH]

Each run starts a fresh server in a subprocess (benchmarks/servers/trio_mcp_bench.py) and
drives it over loopback with raw sockets (benchmarks/loadgen.py):

(a) abandoned sessions: 200, then 1 000 clients (50 and 200 with --quick), 50 at a time,
    each initialize, start ``stream(n=500, size=2000)`` with a progress token, read 10 events
    and close the TCP connection for good (no DELETE, no resume). The server's RSS before
    (after a warm-up round of 50 such clients whose sessions are deleted),
    once every call has run to its end, and once the sessions have expired. The session TTL
    is set short for the run (``--session-ttl``, 20 s; 10 s with --quick) so that the last
    figure comes within the run; everything else is ServerConfig's default.
(b) a slow reader: one client starts ``stream(n=5000, size=2000)`` (log messages) on a
    socket with a 4 KiB receive buffer and reads it at 1 KiB/s for 20 s,
    then reads on at full speed until the connection ends (at most signal_timeout + 10 s
    more). The server's RSS and counters over time, when the server cut the stream (default
    stall budget, 10 s), and whether the client got the resumption-required signal.

(c) held calls (issue 35): 200, then 1,000 sessions (50 and 200 with --quick), from 20
    client addresses (127.0.3.1-20, each a client of its own, TM-SEC-UNIT), each session
    making up to 64 ``hold`` calls with a 1 MB argument (a tool that never returns) and
    dropping each connection once its head has come: 64 running calls a session, as far as
    the budgets of TM-SEC-MEMORY let them. A session stops at its first refusal (what it would
    send after is refused alike; not sending it keeps the upload to what the server holds).
    The server's RSS before, at its peak (sampled every 0.25 s), and once every session has
    been deleted and the server's release has run; beside the computed bound: the request
    budget (``request_memory``), the bodies being read (``max_body_memory``), and each
    session's window and footprint, over the RSS before.

Each figure is printed beside the configured bound: sessions x the retention window's
max_bytes, from the ServerConfig the server reports. RSS is what the kernel charges the
process, allocator caches included, so it need not fall back all the way when memory is
freed; the server's own counters (bytes_retained) say what it still holds, and a last RSS
figure, taken after the server ran gc.collect() and malloc_trim(0) (on SIGUSR1), shows how
much of the rest was freed memory the allocator had kept. The server does the same on its own
once ended sessions have freed 16 MiB (TM-SESS-RELEASE); the "after TTL" figure is taken
after it has.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import (
    CpuMeter,
    McpClient,
    ServerProcess,
    abandon,
    python,
    run_many,
    slow_read,
    start_server,
)

SERVER = Path(__file__).resolve().parent / "servers" / "trio_mcp_bench.py"
MiB = 1024 * 1024


def mib(n: float) -> str:
    return f"{n / MiB:8.1f} MiB"


async def start(*options: str) -> ServerProcess:
    cmd = [python(), str(SERVER), "--port", "0", "--stats-port", "0", *options]
    return await trio.to_thread.run_sync(start_server, cmd)


async def stop(server: ServerProcess) -> None:
    await trio.to_thread.run_sync(server.stop)


# -- (a) abandoned sessions -------------------------------------------------------------------


#: Clients at a time, in the abandoned-sessions run and its warm-up.
CONCURRENCY = 50


async def warm_up(url: str, *, n: int, size: int) -> int:
    """The abandoned client's steps, then a DELETE of its session."""
    client = McpClient(url)
    await client.initialize()
    async with client.open_call("stream", {"n": n, "size": size}, progress=True) as call:
        await call.read_head()
        got = await call.read_events(10)
        call.close()
    await client.delete()
    return got


async def abandoned(count: int, *, ttl: float, n: int = 500, size: int = 2000) -> dict[str, Any]:
    server = await start("--session-ttl", str(ttl))
    try:
        window = server.info["config"]["retention"]["max_bytes"]
        # A warm-up round first, at the same concurrency, whose sessions are then deleted:
        # imports, caches and what 50 connections at once take are in "before", so the
        # growth is what the abandoned sessions hold.
        await run_many(CONCURRENCY, CONCURRENCY, lambda k: warm_up(server.url, n=n, size=size))
        await server.wait_stats(
            lambda s: s["requests_inflight"] == 0 and s["sessions_open"] == 0, timeout=60
        )
        await server.wait_stats(lambda s: s.get("memory_releases", 0) > 0, timeout=ttl)
        await trio.sleep(0.5)
        rss_before = server.rss()
        releases_before = (await server.stats()).get("memory_releases", 0)
        cpu_before = server.cpu_seconds()
        started = time.monotonic()
        with CpuMeter() as meter:
            results, errors = await run_many(
                count, CONCURRENCY, lambda k: abandon(server.url, n=n, size=size, read_events=10)
            )
        settled = await server.wait_stats(
            lambda s: s["requests_inflight"] == 0 and s["streams_open"] == 0, timeout=300
        )
        ran_for = time.monotonic() - started
        await trio.sleep(0.5)
        rss_after = server.rss()
        stats_after = await server.stats()
        # What of the growth is live: cyclic garbage of closed connections waits for
        # CPython's collector, and freed memory for the allocator to give it back.
        server.trim()
        await trio.sleep(1.0)
        rss_after_trim = server.rss()
        ttl_started = time.monotonic()
        expired = await server.wait_stats(
            lambda s: s["sessions_open"] == 0, timeout=3 * ttl + 30, poll=0.5
        )
        expired_after = time.monotonic() - ttl_started
        # TM-SESS-RELEASE: the server hands the ended sessions' memory back one or two
        # expiry-loop periods (a tenth of the TTL each) after the last of them ended.
        seen = expired.get("memory_releases", 0)
        released = await server.wait_stats(
            lambda s: s.get("memory_releases", 0) > seen, timeout=0.4 * ttl, poll=0.25
        )
        await trio.sleep(0.5)
        rss_expired = server.rss()
        cpu_server = server.cpu_seconds() - cpu_before
        server.trim()
        await trio.sleep(1.0)
        rss_trimmed = server.rss()
    finally:
        await stop(server)
    assert settled is not None and stats_after is not None and expired is not None
    return {
        "sessions": count,
        "tool": {"n": n, "size": size, "read_events": 10},
        "errors": [repr(e) for e in errors[:5]],
        "failed_clients": len(errors),
        "events_read": sum(r or 0 for r in results),
        "session_idle_ttl_s": ttl,
        "window_max_bytes": window,
        "bound_bytes": count * window,
        "rss_before": rss_before,
        "rss_after_calls": rss_after,
        "rss_after_calls_trimmed": rss_after_trim,
        "rss_after_ttl": rss_expired,
        "rss_after_ttl_trimmed": rss_trimmed,
        "growth": rss_after - rss_before,
        "growth_after_calls_trimmed": rss_after_trim - rss_before,
        "growth_after_ttl": rss_expired - rss_before,
        "growth_after_trim": rss_trimmed - rss_before,
        "bytes_retained_after_calls": stats_after["bytes_retained"],
        "events_retained_after_calls": stats_after["events_retained"],
        "sessions_open_after_calls": stats_after["sessions_open"],
        "bytes_retained_after_ttl": expired["bytes_retained"],
        "sessions_expired": expired["sessions_expired"],
        "expired_within_s": round(expired_after, 1),
        "memory_released": bool(
            released and released.get("memory_releases", 0) > releases_before
        ),
        "calls_ran_for_s": round(ran_for, 2),
        "server_cpu_s": round(cpu_server, 2),
        "loadgen_cpu_s": round(meter.cpu, 2),
        "loadgen_cpu_share": round(meter.share, 2),
    }


def print_abandoned(r: dict[str, Any]) -> None:
    print(f"(a) {r['sessions']} abandoned sessions, stream(n={r['tool']['n']}, "
          f"size={r['tool']['size']}), 10 events read, TTL {r['session_idle_ttl_s']:g} s")
    print(f"    bound: {r['sessions']} sessions x window {r['window_max_bytes'] // 1024} KiB"
          f" = {mib(r['bound_bytes']).strip()}")
    print(f"    RSS before         {mib(r['rss_before'])}")
    print(f"    RSS after calls    {mib(r['rss_after_calls'])}  (+{mib(r['growth']).strip()};"
          f" bytes_retained {mib(r['bytes_retained_after_calls']).strip()},"
          f" {r['events_retained_after_calls']} events, {r['sessions_open_after_calls']} sessions)")
    print(f"    ... then trimmed   {mib(r['rss_after_calls_trimmed'])}"
          f"  (+{mib(r['growth_after_calls_trimmed']).strip()}; gc.collect() and"
          " malloc_trim(0) on SIGUSR1: what the live sessions hold)")
    print(f"    RSS after TTL      {mib(r['rss_after_ttl'])}"
          f"  (+{mib(r['growth_after_ttl']).strip()};"
          f" bytes_retained {r['bytes_retained_after_ttl']},"
          f" {r['sessions_expired']} expired within {r['expired_within_s']} s,"
          f" server's own memory release {'done' if r['memory_released'] else 'NOT SEEN'})")
    print(f"    RSS after trim     {mib(r['rss_after_ttl_trimmed'])}"
          f"  (+{mib(r['growth_after_trim']).strip()}; after one more gc.collect() and"
          " malloc_trim(0) on SIGUSR1)")
    print(f"    calls {r['calls_ran_for_s']} s; server CPU {r['server_cpu_s']} s; load generator"
          f" CPU {r['loadgen_cpu_s']} s ({r['loadgen_cpu_share']:.0%} of a core);"
          f" failed clients {r['failed_clients']}")


# -- (b) a slow reader -------------------------------------------------------------------------


async def slow_reader(
    *, duration: float, n: int = 5000, size: int = 2000, rate: float = 1024
) -> dict[str, Any]:
    server = await start()
    try:
        config = server.info["config"]
        client = McpClient(server.url)
        await client.initialize()
        await trio.sleep(0.5)
        samples: list[dict[str, Any]] = []
        cut_at: float | None = None
        done = trio.Event()
        t0 = trio.current_time()

        async def sample() -> None:
            nonlocal cut_at
            while not done.is_set():
                stats = await server.stats() or {}
                now = trio.current_time() - t0
                if cut_at is None and stats.get("streams_cut", 0) >= 1:
                    cut_at = now
                samples.append({
                    "t": round(now, 2),
                    "rss": server.rss(),
                    "bytes_retained": stats.get("bytes_retained"),
                    "streams_open": stats.get("streams_open"),
                    "streams_cut": stats.get("streams_cut"),
                })
                with trio.move_on_after(0.25):
                    await done.wait()

        cpu_before = server.cpu_seconds()
        with CpuMeter() as meter:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                read = await slow_read(
                    client, n=n, size=size, rate=rate, duration=duration, rcvbuf=4096,
                    drain_for=config["signal_timeout"] + 10,
                )
                done.set()
        cpu_server = server.cpu_seconds() - cpu_before
        final = await server.stats() or {}
    finally:
        await stop(server)
    signals = read.named("resumption-required")
    window = config["retention"]["max_bytes"]
    return {
        "tool": {"n": n, "size": size},
        "rate_bytes_per_s": rate,
        "rcvbuf": 4096,
        "read_for_s": duration,
        "stall_budget_s": config["stall_budget"],
        "min_read_rate": config["min_read_rate"],
        "window_max_bytes": window,
        "bound_bytes": window,
        "server_cut_at_s": cut_at,
        "client_read_bytes": read.received,
        "client_events": len(read.events),
        "client_saw_end_at_s": read.ended_at,
        "client_saw_signal": bool(signals),
        "signal_details": json.loads(signals[0].data or "null") if signals else None,
        "client_saw_signal_at_s": next(
            (round(t, 2) for t, e in read.events if e.event == "resumption-required"), None
        ),
        "rss_first": samples[0]["rss"] if samples else None,
        "rss_max": max(s["rss"] for s in samples) if samples else None,
        "rss_last": samples[-1]["rss"] if samples else None,
        "bytes_retained_final": final.get("bytes_retained"),
        "samples": samples,
        "server_cpu_s": round(cpu_server, 2),
        "loadgen_cpu_s": round(meter.cpu, 2),
        "loadgen_cpu_share": round(meter.share, 2),
    }


def print_slow(r: dict[str, Any]) -> None:
    print(f"(b) one reader at {r['rate_bytes_per_s']:g} B/s, SO_RCVBUF {r['rcvbuf']}, of "
          f"stream(n={r['tool']['n']}, size={r['tool']['size']}), for {r['read_for_s']:g} s")
    print(f"    stall budget {r['stall_budget_s']:g} s below {r['min_read_rate']:g} B/s;"
          f" bound: 1 session x window {r['window_max_bytes'] // 1024} KiB")
    cut = r["server_cut_at_s"]
    print(f"    server cut the stream at {cut if cut is None else round(cut, 2)} s;"
          f" client read {r['client_read_bytes']} bytes in all, {r['client_events']} events;"
          f" saw the end at {r['client_saw_end_at_s']} s; saw the signal at"
          f" {r['client_saw_signal_at_s']} s: {r['signal_details']}")
    print("    t (s)     RSS          bytes_retained  streams_open  streams_cut")
    shown = -2.0
    for s in r["samples"]:
        if s["t"] - shown >= 2.0 or s is r["samples"][-1]:
            shown = s["t"]
            print(f"    {s['t']:5.1f}  {mib(s['rss'])}  {s['bytes_retained']!s:>14}"
                  f"  {s['streams_open']!s:>12}  {s['streams_cut']!s:>11}")
    print(f"    RSS first {mib(r['rss_first']).strip()}, max {mib(r['rss_max']).strip()},"
          f" last {mib(r['rss_last']).strip()}; server CPU {r['server_cpu_s']} s;"
          f" load generator CPU {r['loadgen_cpu_s']} s ({r['loadgen_cpu_share']:.0%} of a core)")


# -- (c) held calls -----------------------------------------------------------------------------


#: What a session is counted at in the bound besides its window: SESSION_FOOTPRINT.
SESSION_FOOTPRINT = 28 * 1024
ADDRESSES = 20


async def held_calls(
    sessions: int, *, calls: int = 64, size: int = 1_000_000, at_once: int = 20
) -> dict[str, Any]:
    server = await start()
    try:
        config = server.info["config"]
        argument = "x" * size
        clients: list[McpClient] = []
        outcomes: dict[str, int] = {}

        async def one(k: int) -> None:
            client = McpClient(server.url, local=f"127.0.3.{k % ADDRESSES + 1}")
            await client.initialize()
            clients.append(client)
            for _ in range(calls):
                async with client.open_call("hold", {"data": argument}) as call:
                    await call.read_head()
                    if call.status == 200:
                        outcomes["held"] = outcomes.get("held", 0) + 1
                        continue
                    await call.read_all()
                    data = (call.messages() or [{}])[0].get("error", {}).get("data", {})
                    why = str(data.get("budget") or data.get("pool") or call.status)
                    outcomes[why] = outcomes.get(why, 0) + 1
                    return

        # A warm-up round at the same concurrency, from every address, its sessions then
        # deleted: what a first round costs once (the connections' and addresses' state,
        # caches) is in "before", so that the growth is what the held calls hold.
        async def warm(k: int) -> None:
            client = McpClient(server.url, local=f"127.0.3.{k % ADDRESSES + 1}")
            await client.initialize()
            for _ in range(4):
                async with client.open_call("hold", {"data": argument}) as call:
                    await call.read_head()
            await client.delete()

        await run_many(at_once, at_once, warm)
        await server.wait_stats(lambda s: s["request_memory_held"] == 0, timeout=30)
        seen = (await server.stats() or {}).get("memory_releases", 0)
        await server.wait_stats(lambda s: s.get("memory_releases", 0) > seen, timeout=15)
        await trio.sleep(0.5)
        rss_before = server.rss()
        peak = rss_before
        done = trio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, server.rss())
                with trio.move_on_after(0.25):
                    await done.wait()

        started = time.monotonic()
        with CpuMeter() as meter:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                results, errors = await run_many(sessions, at_once, one)
                ran_for = time.monotonic() - started
                held_stats = await server.stats() or {}
                peak = max(peak, server.rss())
                done.set()
        for client in clients:
            await client.delete()
        await server.wait_stats(lambda s: s["request_memory_held"] == 0, timeout=60)
        seen = (await server.stats() or {}).get("memory_releases", 0)
        await server.wait_stats(lambda s: s.get("memory_releases", 0) > seen, timeout=15)
        await trio.sleep(0.5)
        rss_after = server.rss()
        # What of the rest an extra collection and trim would give back (SIGUSR1).
        server.trim()
        await trio.sleep(1.0)
        rss_trimmed = server.rss()
    finally:
        await stop(server)
    del results
    window = config["retention"]["max_bytes"]
    bound = (
        config["request_memory"] + config["max_body_memory"]
        + sessions * (window + SESSION_FOOTPRINT)
    )
    return {
        "sessions": sessions,
        "addresses": ADDRESSES,
        "calls_per_session": calls,
        "argument_bytes": size,
        "outcomes": outcomes,
        "failed_clients": len(errors),
        "errors": [repr(e) for e in errors[:5]],
        "request_memory": config["request_memory"],
        "request_memory_per_client": config["request_memory_per_client"],
        "request_memory_per_session": config["request_memory_per_session"],
        "request_memory_held": held_stats.get("request_memory_held"),
        "bound_bytes": bound,
        "rss_before": rss_before,
        "rss_peak": peak,
        "rss_after_delete": rss_after,
        "rss_after_delete_trimmed": rss_trimmed,
        "growth_peak": peak - rss_before,
        "growth_after": rss_after - rss_before,
        "ran_for_s": round(ran_for, 1),
        "loadgen_cpu_s": round(meter.cpu, 2),
    }


def print_held(r: dict[str, Any]) -> None:
    print(f"(c) {r['sessions']} sessions from {r['addresses']} addresses, up to"
          f" {r['calls_per_session']} held calls each with a {r['argument_bytes']:,} byte"
          f" argument, connections dropped")
    print(f"    budgets: {mib(r['request_memory']).strip()} in all,"
          f" {mib(r['request_memory_per_client']).strip()} a client,"
          f" {mib(r['request_memory_per_session']).strip()} a session; outcomes"
          f" {r['outcomes']}; failed clients {r['failed_clients']}")
    print(f"    bound over the start: {mib(r['bound_bytes']).strip()} (requests + bodies"
          " arriving + sessions x (window + 28 KiB))")
    print(f"    RSS before         {mib(r['rss_before'])}")
    print(f"    RSS peak           {mib(r['rss_peak'])}  (+{mib(r['growth_peak']).strip()};"
          f" request_memory_held {mib(r['request_memory_held'] or 0).strip()};"
          f" {'within' if r['growth_peak'] <= r['bound_bytes'] else 'OVER'} the bound)")
    print(f"    RSS after DELETE   {mib(r['rss_after_delete'])}"
          f"  (+{mib(r['growth_after']).strip()}, {r['growth_after'] / r['rss_before']:+.1%}"
          f" of the start)")
    print(f"    ... then trimmed   {mib(r['rss_after_delete_trimmed'])}  (one more gc.collect()"
          " and malloc_trim(0) on SIGUSR1)")
    print(f"    ran {r['ran_for_s']} s; load generator CPU {r['loadgen_cpu_s']} s")


# -- the run -----------------------------------------------------------------------------------

PARTS = ("abandoned", "slow", "held")


async def run(quick: bool, only: tuple[str, ...] = PARTS) -> dict[str, Any]:
    counts = (50, 200) if quick else (200, 1000)
    ttl = 10.0 if quick else 20.0
    out: dict[str, Any] = {
        "benchmark": "bench_memory",
        "quick": quick,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.system()} {platform.release()}",
        "abandoned": [],
        "held": [],
    }
    if "abandoned" in only:
        for count in counts:
            result = await abandoned(count, ttl=ttl)
            print_abandoned(result)
            out["abandoned"].append(result)
    if "slow" in only:
        out["slow_reader"] = await slow_reader(duration=20.0)
        print_slow(out["slow_reader"])
    if "held" in only:
        for count in counts:
            result = await held_calls(count)
            print_held(result)
            out["held"].append(result)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller counts, shorter runs")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"which parts, comma-separated (of {', '.join(PARTS)})")
    args = parser.parse_args(argv)
    only = tuple(p for p in args.only.split(",") if p)
    if unknown := set(only) - set(PARTS):
        parser.error(f"unknown parts: {sorted(unknown)}")
    result = trio.run(run, args.quick, only)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
