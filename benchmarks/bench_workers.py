"""Issue 21: what several workers buy, and what abandoned sessions keep in Redis.

    python benchmarks/bench_workers.py                      # 3 runs, 5 s each
    python benchmarks/bench_workers.py --runs 1 --duration 2
    python benchmarks/run.py --only workers                 # the same, from the harness

Throughput: ``tools/call`` (the demo's echo) by 32 clients, each on its keep-alive
connection, against ``trio-mcp serve`` as users run it:

- 2025-11-25 sessions (SSE answers): one process; one process with the Redis store (what
  the store costs a request); two workers with the Redis store (``--workers 2 --store``);
- 2026-07-28 requests (no session, JSON answers): one process; two workers.

The machine has two cores, and two workers need both: nothing is pinned here, neither the
servers nor the load generator nor redis-server, for any contender, so that each runs under
the same conditions; contenders alternate run by run, medians are compared, and the load
generator's own CPU use is reported beside each figure (it shares the cores with the
workers, so the two-worker figure is a floor of what two free cores would give).

Memory: 1,000 sessions created and abandoned through two workers, with a short session time
to live; Redis's ``used_memory`` before, with them, and after their time to live. Then 200
sessions each abandoning a call in the middle of its stream (the demo's countdown, 400
progress notifications, the connection dropped after the first): their streams' copies in
Redis (TM-STORE-STREAMS) against the window a session keeps (TM-RES-WINDOW), and after the
time to live.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (the benchmarks directory is not a package)
from client import Connection, encode_request, messages_of, open_session, rpc  # noqa: E402

from trio_mcp.protocol._eventlog import Retention  # noqa: E402

_CLK_TCK = os.sysconf("SC_CLK_TCK")

LEGACY = ("1 process", "1 process + Redis", "2 workers + Redis")
MODERN = ("1 process", "2 workers")
ARGS = {
    "1 process": [],
    "1 process + Redis": ["--store", "{redis}"],
    "2 workers + Redis": ["--workers", "2", "--store", "{redis}"],
    "2 workers": ["--workers", "2"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Redis:
    """A redis-server of the benchmark's own, with no persistence."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is missing: apt-get install -y redis-server")
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def command(self, *words: str) -> bytes:
        payload = f"*{len(words)}\r\n".encode() + b"".join(
            f"${len(w)}\r\n{w}\r\n".encode() for w in words
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(payload)
            return s.recv(1 << 20)

    def wait(self) -> None:
        for _ in range(500):
            try:
                if self.command("PING").startswith(b"+PONG"):
                    return
            except OSError:
                time.sleep(0.01)
        raise SystemExit("redis-server did not start")

    def used_memory(self) -> int:
        info = self.command("INFO", "memory").decode()
        return int(next(line.split(":")[1] for line in info.splitlines()
                        if line.startswith("used_memory:")))

    def keys(self) -> int:
        reply = self.command("DBSIZE").decode()
        return int(reply.strip().lstrip(":"))

    def cli(self, *words: str, stdin: str | None = None) -> list[str]:
        """redis-cli's lines (for replies this module does not parse itself)."""
        exe = shutil.which("redis-cli")
        if exe is None:
            raise SystemExit("redis-cli is missing: apt-get install -y redis-tools")
        done = subprocess.run([exe, "-p", str(self.port), *words], input=stdin,
                              capture_output=True, text=True, check=True, timeout=60)
        return done.stdout.split()

    def copies(self) -> dict[str, int]:
        """The streams' copies (TM-STORE-STREAMS): how many, their longest, their bytes."""
        keys = self.cli("--scan", "--pattern", "trio-mcp:ev:*")
        if not keys:
            return {"copies": 0, "longest": 0, "bytes": 0}
        lengths = self.cli(stdin="".join(f"XLEN {k}\n" for k in keys))
        sizes = self.cli(stdin="".join(f"MEMORY USAGE {k} SAMPLES 0\n" for k in keys))
        meta = self.cli("--scan", "--pattern", "trio-mcp:evm:*")
        meta_sizes = self.cli(stdin="".join(f"MEMORY USAGE {k} SAMPLES 0\n" for k in meta))
        return {"copies": len(keys), "longest": max(int(n) for n in lengths),
                "bytes": sum(int(n) for n in [*sizes, *meta_sizes])}

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Pool:
    """``trio-mcp serve`` in a process group of its own; its CPU time is the group's."""

    def __init__(self, label: str, redis: Redis, logs: Path, *extra: str) -> None:
        self.port = free_port()
        args = [a.format(redis=redis.url) for a in ARGS[label]]
        cmd = [sys.executable, "-m", "trio_mcp", "serve", "--port", str(self.port), *args,
               *extra]
        self.proc = run.spawn(cmd, logs / f"{label.replace(' ', '-')}.log")
        self.label = label

    def cpu_seconds(self) -> float:
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:  # pgrp: the pool's own group
                total += int(fields[11]) + int(fields[12])
        return total / _CLK_TCK

    async def __aenter__(self) -> Pool:
        await run.listening(self.proc, self.port, timeout=30)
        await asyncio.sleep(0.5)  # every worker up, not only the first
        return self

    async def __aexit__(self, *exc: object) -> None:
        await run.stop_server(self.proc)


async def throughput(runs: int, warmup: float, duration: float, logs: Path) -> dict[str, Any]:
    redis = Redis()
    redis.wait()
    results: list[dict[str, Any]] = []
    try:
        for r in range(runs):
            for label in run.rotate(list(LEGACY), r):
                async with Pool(label, redis, logs) as pool:
                    await run.warm_up(pool.port)
                    m = await run.measure_rps(pool, 32, warmup, duration, bare=False)  # type: ignore[arg-type]
                m.update(era="2025-11-25", contender=label, run=r)
                results.append(m)
                run.log(f"workers run {r} legacy {label}: {m['rps']:.0f} req/s "
                        f"errors {m['errors']} server cpu {m['server_cpu']:.0%} "
                        f"loadgen cpu {m['loadgen_cpu']:.0%}")
            for label in run.rotate(list(MODERN), r):
                async with Pool(label, redis, logs, "--json-response") as pool:
                    await run.warm_up_modern(pool.port)
                    m = await run.measure_modern(pool, "json", 32, warmup, duration)  # type: ignore[arg-type]
                m.update(era="2026-07-28", contender=label, run=r)
                results.append(m)
                run.log(f"workers run {r} modern {label}: {m['rps']:.0f} req/s "
                        f"errors {m['errors']} server cpu {m['server_cpu']:.0%} "
                        f"loadgen cpu {m['loadgen_cpu']:.0%}")
    finally:
        redis.close()
    summary = []
    for era, labels in (("2025-11-25", LEGACY), ("2026-07-28", MODERN)):
        for label in labels:
            rs = [x for x in results if (x["era"], x["contender"]) == (era, label)]
            summary.append({
                "era": era, "contender": label,
                **{k: run.median([x[k] for x in rs]) for k in
                   ("rps", "p50_ms", "p99_ms", "server_cpu", "loadgen_cpu")},
                "errors": sum(x["errors"] for x in rs), "runs": len(rs),
            })
    return {"runs": results, "summary": summary}


@contextlib.asynccontextmanager
async def two_workers(ttl: float, logs: Path) -> AsyncIterator[tuple[Redis, Pool]]:
    """Two workers with a Redis store of their own (fresh), sessions living ``ttl`` s."""
    redis = Redis()
    redis.wait()
    try:
        async with Pool("2 workers + Redis", redis, logs, "--session-ttl", str(ttl)) as pool:
            yield redis, pool
    finally:
        redis.close()


async def abandoned(sessions: int, ttl: float, logs: Path) -> dict[str, Any]:
    async with two_workers(ttl, logs) as (redis, pool):
        before = redis.used_memory()
        for start in range(0, sessions, 50):
            batch = [open_session("127.0.0.1", pool.port)
                     for _ in range(min(50, sessions - start))]
            for s in await asyncio.gather(*batch):
                s.conn.abort()
        held = redis.used_memory()
        keys_held = redis.keys()
        await asyncio.sleep(ttl + 2.0)
        after = redis.used_memory()
        keys_after = redis.keys()
    return {
        "sessions": sessions, "ttl": ttl, "used_memory_before": before,
        "used_memory_held": held, "used_memory_after_ttl": after,
        "keys_held": keys_held, "keys_after_ttl": keys_after,
        "bytes_per_session": (held - before) / sessions,
    }


#: Progress notifications of each abandoned call: more than a session's window keeps.
CALL_EVENTS = 400


async def abandon_call(port: int) -> None:
    """A session whose call streams on after its client went: the connection is dropped
    once the first progress notification has come."""
    session = await open_session("127.0.0.1", port)
    body = rpc(session.take_id(), "tools/call", {
        "name": "countdown", "arguments": {"n": CALL_EVENTS, "interval": 0.001},
        "_meta": {"progressToken": 1},
    })
    session.conn.write(encode_request(session.head(), body))
    await session.conn.read_response(lambda chunk: b"notifications/progress" in chunk)
    session.conn.abort()


#: The abandoned calls' session time to live, at least: the copies must outlive the time the
#: calls take to end on a loaded machine, or they expire before they can be measured whole.
CALL_TTL_FLOOR = 20.0


async def abandoned_calls(
    sessions: int, ttl: float, logs: Path, floor: float = CALL_TTL_FLOOR
) -> dict[str, Any]:
    ttl = max(ttl, floor)
    async with two_workers(ttl, logs) as (redis, pool):
        before = redis.used_memory()
        for start in range(0, sessions, 50):
            await asyncio.gather(*[abandon_call(pool.port)
                                   for _ in range(min(50, sessions - start))])
        # Until the calls have ended and their copies are written: the copies stop
        # changing (within the time to live, which each change renews). Bounded: copies
        # that expire first (or never come) end the wait, and the figures say so.
        last: dict[str, int] = {}
        deadline = time.monotonic() + ttl
        while True:
            await asyncio.sleep(0.5)
            copies = redis.copies()
            settled = copies == last and copies["copies"] > 0
            if settled or time.monotonic() > deadline:
                break
            last = copies
        held, keys_held = redis.used_memory(), redis.keys()
        await asyncio.sleep(ttl + 2.0)
        after, keys_after, copies_after = redis.used_memory(), redis.keys(), redis.copies()
    window = Retention()
    return {
        "sessions": sessions, "ttl": ttl, "events_per_call": CALL_EVENTS,
        "window_events": window.max_events, "window_bytes": window.max_bytes,
        "used_memory_before": before, "used_memory_held": held,
        "used_memory_after_ttl": after, "keys_held": keys_held, "keys_after_ttl": keys_after,
        "copies_held": copies, "copies_after_ttl": copies_after, "settled": settled,
        "bytes_per_session": (held - before) / sessions,
        "copy_bytes_per_session": copies["bytes"] / sessions,
    }


async def try_session(port: int) -> Any:
    """A session, or None when initialize was refused (503)."""
    try:
        return await open_session("127.0.0.1", port)
    except RuntimeError as exc:
        if "503" not in str(exc):
            raise
        return None


async def flood(sessions: int, logs: Path, *, idle_wait: float = 20.0,
                late: int = 100) -> dict[str, Any]:
    """Issue 35's row: ``sessions`` initializes from one address through two workers with the
    default caps (2,500 sessions an address, 10,000 in all): what Redis holds after them,
    and, ``idle_wait`` seconds later (the store's idle time is 18 s by default), whether
    ``late`` more evict the oldest, whose ids must then be 404 at both workers."""
    redis = Redis()
    redis.wait()
    try:
        async with Pool("2 workers + Redis", redis, logs) as pool:
            before, keys_before = redis.used_memory(), redis.keys()
            made: list[Any] = []
            refused = 0
            t0 = time.perf_counter()
            for start in range(0, sessions, 50):
                batch = await asyncio.gather(*[
                    try_session(pool.port) for _ in range(min(50, sessions - start))])
                for s in batch:
                    if s is None:
                        refused += 1
                    else:
                        s.conn.abort()
                        made.append(s)
            took = time.perf_counter() - t0
            held, keys_held = redis.used_memory(), redis.keys()
            await asyncio.sleep(idle_wait)
            later = [s for s in await asyncio.gather(*[
                try_session(pool.port) for _ in range(late)]) if s is not None]
            for s in later:
                s.conn.abort()
            first = made[0]
            statuses = []
            for _ in range(4):  # new connections spread over both workers
                first.conn = await client_connection(pool.port)
                resp = await first.call(rpc(first.take_id(), "ping"))
                statuses.append(resp.status)
                first.conn.abort()
            after, keys_after = redis.used_memory(), redis.keys()
    finally:
        redis.close()
    return {
        "sessions": sessions, "created": len(made), "refused": refused, "seconds": took,
        "used_memory_before": before, "used_memory_held": held, "keys_before": keys_before,
        "keys_held": keys_held, "late_created": len(later), "first_session_statuses": statuses,
        "used_memory_after_late": after, "keys_after_late": keys_after,
    }


async def client_connection(port: int) -> Connection:
    return await Connection.open("127.0.0.1", port)


async def subscriptions(count: int, uri_bytes: int, logs: Path) -> dict[str, Any]:
    """Issue 35's row: ``count`` resources/subscribe of ``uri_bytes``-byte URIs in one session
    through two workers: how long they take, what Redis receives and keeps for them."""
    redis = Redis()
    redis.wait()
    try:
        async with Pool("2 workers + Redis", redis, logs) as pool:
            session = await open_session("127.0.0.1", pool.port)
            stats = redis.command("INFO", "stats").decode()
            received = int(next(line.split(":")[1] for line in stats.splitlines()
                                if line.startswith("total_net_input_bytes:")))
            before = redis.used_memory()
            times = []
            t0 = time.perf_counter()
            for i in range(count):
                pad = "x" * (uri_bytes - len(f"test://template/{i:04d}/data"))
                uri = f"test://template/{i:04d}{pad}/data"
                t = time.perf_counter()
                resp = await session.call(rpc(session.take_id(), "resources/subscribe",
                                              {"uri": uri}))
                times.append(time.perf_counter() - t)
                if resp.status != 200 or not any("result" in m for m in messages_of(resp)):
                    raise RuntimeError(f"subscribe failed: {resp.status} {resp.body[:200]!r}")
            took = time.perf_counter() - t0
            stats = redis.command("INFO", "stats").decode()
            received = int(next(line.split(":")[1] for line in stats.splitlines()
                                if line.startswith("total_net_input_bytes:"))) - received
            grown = redis.used_memory() - before
            session.conn.abort()
    finally:
        redis.close()
    return {
        "count": count, "uri_bytes": uri_bytes, "seconds": took,
        "first_ms": 1000 * sum(times[:16]) / 16, "last_ms": 1000 * sum(times[-16:]) / 16,
        "redis_received": received, "used_memory_grown": grown,
    }


def section(result: dict[str, Any]) -> str:
    """The figures as a RESULTS.md section (also the report's, from benchmarks/run.py)."""
    t = result["throughput"]
    lines = [
        "## Workers and the Redis store (issue 21)",
        "",
        f"32 clients, `tools/call` echo, {t['runs_per_contender']} run(s) of {t['duration']} s "
        "per contender (medians). Nothing is pinned: the servers, redis-server and the load "
        "generator share the two cores. \"per CPU\" is requests per second of the server's "
        "own CPU time (all its processes): what a core gives when nothing else takes it.",
        "",
        "| era | contender | req/s | per CPU | p50 ms | p99 ms | server CPU | load generator CPU "
        "| errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in t["summary"]:
        per_cpu = s["rps"] / s["server_cpu"] if s["server_cpu"] else None
        lines.append(
            f"| {s['era']} | {s['contender']} | {s['rps']:.0f} | "
            f"{'n/a' if per_cpu is None else f'{per_cpu:.0f}'} | {s['p50_ms']:.2f} | "
            f"{s['p99_ms']:.2f} | {s['server_cpu']:.0%} | {s['loadgen_cpu']:.0%} | "
            f"{s['errors']} |"
        )
    by = {(s["era"], s["contender"]): s for s in t["summary"]}

    def rate(era: str, contender: str) -> float:
        value: float = by[(era, contender)]["rps"]
        return value

    legacy = rate("2025-11-25", "2 workers + Redis") / rate("2025-11-25", "1 process")
    legacy_store = (rate("2025-11-25", "2 workers + Redis")
                    / rate("2025-11-25", "1 process + Redis"))
    modern = rate("2026-07-28", "2 workers") / rate("2026-07-28", "1 process")
    two = by[("2026-07-28", "2 workers")]
    one = by[("2026-07-28", "1 process")]
    per_core = (two["rps"] / two["server_cpu"]) / (one["rps"] / one["server_cpu"])
    a = result["abandoned"]
    lines += [
        "",
        f"- 2025-11-25: two workers with Redis give **{legacy:.2f}x** one process without it, "
        f"and {legacy_store:.2f}x one process with it (target: 1.7x).",
        f"- 2026-07-28: two workers give **{modern:.2f}x** one process (target: 1.7x); each of "
        f"their CPU seconds serves {per_core:.2f}x what the one process's does, so with two "
        f"cores of their own (the load generator here takes {two['loadgen_cpu']:.0%} of one) "
        f"they would give about {2 * per_core:.2f}x.",
        "",
        f"Abandoned sessions: {a['sessions']} sessions made through two workers, session time "
        f"to live {a['ttl']:.0f} s. Redis `used_memory` {a['used_memory_before'] / 1024:.0f} KiB "
        f"before, {a['used_memory_held'] / 1024:.0f} KiB with them ({a['keys_held']} keys, "
        f"{a['bytes_per_session']:.0f} B per session: the record; none of them called a tool, so "
        f"no stream was copied), {a['used_memory_after_ttl'] / 1024:.0f} KiB and "
        f"{a['keys_after_ttl']} keys after their time to live (the keys left are the workers' "
        "relay addresses).",
        "",
    ]
    c = result.get("abandoned_calls")
    if c is not None:
        held, gone = c["copies_held"], c["copies_after_ttl"]
        lines += [
            f"Abandoned calls: {c['sessions']} sessions through two workers, each dropping the "
            f"connection of a call after its first of {c['events_per_call']} progress "
            "notifications; the call runs on, its stream copied into Redis "
            "(TM-STORE-STREAMS). "
            + ("Once the calls had ended: " if c.get("settled", True) else
               "The copies were still changing when the wait ended (not settled): ")
            + f"{held['copies']} copies, the "
            f"longest {held['longest']} entries (a session's window keeps "
            f"{c['window_events']} events and {c['window_bytes'] // 1024} KiB), "
            f"{c['copy_bytes_per_session'] / 1024:.1f} KiB of copies per session "
            f"(`MEMORY USAGE`), `used_memory` {c['used_memory_before'] / 1024:.0f} KiB before "
            f"and {c['used_memory_held'] / 1024:.0f} KiB with them "
            f"({c['bytes_per_session'] / 1024:.1f} KiB per session, its record included). "
            f"After their time to live ({c['ttl']:.0f} s): {gone['copies']} copies, "
            f"{c['keys_after_ttl']} keys, {c['used_memory_after_ttl'] / 1024:.0f} KiB.",
            "",
        ]
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    return "\n".join([
        "# Issue 21: workers and the Redis store",
        "",
        f"Written by `{result['command']}` on {result['date']}.",
        "",
        section(result),
    ])


async def bench(runs: int, warmup: float, duration: float, sessions: int, ttl: float,
                logs: Path, call_sessions: int = 200,
                call_ttl: float = CALL_TTL_FLOOR) -> dict[str, Any]:
    # Nothing pinned, this process (the load generator) included: benchmarks/run.py pins
    # it to its own CPUs for the other benchmarks. Its own CPUs are given back at the end.
    pinned = os.sched_getaffinity(0)
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        throughput_ = await throughput(runs, warmup, duration, logs)
        throughput_.update(runs_per_contender=runs, duration=duration)
        return {"throughput": throughput_, "abandoned": await abandoned(sessions, ttl, logs),
                "abandoned_calls": await abandoned_calls(call_sessions, ttl, logs, call_ttl)}
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, pinned)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--call-sessions", type=int, default=200)
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--out", default=str(HERE / "results" / "issue-21"))
    parser.add_argument("--bounds", action="store_true",
                        help="only issue 35's store rows: a flood of sessions from one "
                        "address, and 256 subscriptions (bounds.json in --out)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.bounds:
        logs = out / "raw" / "server-logs"
        logs.mkdir(parents=True, exist_ok=True)

        async def bounds() -> dict[str, Any]:
            return {"flood": await flood(6000, logs),
                    "subscriptions": await subscriptions(256, 8000, logs)}

        figures = asyncio.run(bounds())
        (out / "bounds.json").write_text(json.dumps(figures, indent=1))
        print(json.dumps(figures, indent=1))
        return
    result = asyncio.run(bench(args.runs, 1.0, args.duration, args.sessions, args.ttl,
                               out / "raw" / "server-logs", args.call_sessions))
    result.update(
        command=" ".join(["python", "benchmarks/bench_workers.py", *sys.argv[1:]]),
        date=time.strftime("%Y-%m-%d %H:%M %Z"), runs=args.runs, duration=args.duration,
    )
    (out / "workers.json").write_text(json.dumps(result, indent=1))
    (out / "RESULTS.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
