"""Issue 42: what one ``tools/call`` costs, 2026-07-28 beside 2025-11-25, JSON and SSE, on the
own server and under hypercorn, counted in instructions by valgrind's callgrind (a figure the
machine's other load does not move) and, with ``--syscalls``, in system calls by strace (the
kernel's share, which callgrind does not see).

The benchmark server (benchmarks/servers/trio_mcp_bench.py, or bare_hypercorn.py for the
floor) runs under the counter with one tree first on PYTHONPATH (``--tree DIR``, default this
one); ``--clients`` connections warm it up (``--warmup`` calls each), the counters are zeroed
(``callgrind_control --zero``; strace attaches), they make ``--calls`` calls between them, each
sending its next request when its last answer has ended, and the counters are dumped: their
total over the calls is the cost of one request, all of it (edge, runtime, JSON, scheduler).

Shapes (a server process each):

- ``legacy-json``: a 2025-11-25 session, ``echo``, the server in JSON response mode;
- ``legacy-sse``: the same in SSE mode (the default), the answer a one-event stream;
- ``legacy-sse-progress``: SSE mode, ``echo_progress`` with a progress token: the
  notification and the response on the request's stream;
- ``modern-json``: 2026-07-28, ``echo``, answered at once in one JSON body;
- ``modern-sse``: 2026-07-28, ``echo_progress`` with a progress token: the notification,
  then the response, as an SSE stream;
- ``bare-json``, ``bare-sse``: bare_hypercorn.py's fixed answer (``--server hypercorn`` only).

    python benchmarks/speed_callgrind.py [--tree DIR] [--server trio-mcp|hypercorn]
        [--shapes modern-json,legacy-json] [--calls 1000] [--clients 1] [--syscalls]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client import (  # noqa: E402
    Stateless,
    encode_request,
    messages_of,
    modern_head,
    modern_meta,
    open_session,
    rpc,
    wait_port,
)

HOST = "127.0.0.1"
SHAPES = ("legacy-json", "legacy-sse", "legacy-sse-progress", "modern-json", "modern-sse",
          "bare-json", "bare-sse")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


async def _run(proc: asyncio.subprocess.Process | None, *args: str) -> None:
    p = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    assert await p.wait() == 0, args


def _check(shape: str, status: int, messages: list[Any], rid: int | None) -> None:
    assert status == 200, status
    final = messages[-1]
    assert "result" in final and not final["result"].get("isError"), final
    if rid is not None:
        assert final.get("id") == rid, final
    if shape.endswith("progress") or shape == "modern-sse":
        kinds = [m.get("method") for m in messages[:-1]]
        assert kinds == ["notifications/progress"], kinds


class Caller:
    """One client connection making calls of one shape."""

    def __init__(self, shape: str, port: int) -> None:
        self.shape = shape
        self.port = port
        self.rid = 1000
        self.session: Any = None
        self.stateless: Stateless | None = None

    async def open(self) -> None:
        if self.shape.startswith("legacy"):
            self.session = await open_session(HOST, self.port)
        else:
            self.stateless = Stateless(HOST, self.port)
            await self.stateless.ready()

    def close(self) -> None:
        if self.session is not None:
            self.session.conn.abort()
        if self.stateless is not None:
            self.stateless.abort()

    async def call(self) -> None:
        self.rid += 1
        rid = self.rid
        shape = self.shape
        if shape.startswith("legacy"):
            progress = shape.endswith("progress")
            params: dict[str, Any] = {
                "name": "echo_progress" if progress else "echo",
                "arguments": {"text": f"hello {rid}"},
            }
            if progress:
                params["_meta"] = {"progressToken": rid}
            resp = await self.session.call(rpc(rid, "tools/call", params))
            _check(shape, resp.status, messages_of(resp), rid)
            return
        assert self.stateless is not None
        if shape.startswith("bare"):
            body = rpc(rid, "tools/call", {"name": "echo", "arguments": {"text": "hello"}})
            head = modern_head(HOST, self.port, "/mcp", "tools/call", "echo")
            resp = await self.stateless.call(encode_request(head, body))
            _check(shape, resp.status, messages_of(resp), None)
            return
        progress = shape == "modern-sse"
        tool = "echo_progress" if progress else "echo"
        head = modern_head(HOST, self.port, "/mcp", "tools/call", tool)
        params = {"name": tool, "arguments": {"text": f"hello {rid}"},
                  "_meta": modern_meta(rid if progress else None)}
        resp = await self.stateless.call(encode_request(head, rpc(rid, "tools/call", params)))
        _check(shape, resp.status, messages_of(resp), rid)


async def drive(shape: str, port: int, pid: int, clients: int, warmup: int, calls: int,
                counter: str) -> dict[str, Any]:
    callers = [Caller(shape, port) for _ in range(clients)]
    for c in callers:
        await c.open()

    async def work(c: Caller, n: int) -> None:
        for _ in range(n):
            await c.call()

    await asyncio.gather(*(work(c, warmup) for c in callers))
    strace: asyncio.subprocess.Process | None = None
    tmp = tempfile.mkdtemp()
    if counter == "callgrind":
        await _run(None, "callgrind_control", "--zero", str(pid))
    elif counter == "profile":
        os.kill(pid, signal.SIGRTMIN)
    else:
        strace = await asyncio.create_subprocess_exec(
            "strace", "-f", "-c", "-o", f"{tmp}/strace.txt", "-p", str(pid),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.sleep(1.0)  # attached to every thread
    per = calls // clients
    await asyncio.gather(*(work(c, per) for c in callers))
    result: dict[str, Any] = {"calls": per * clients}
    if counter == "callgrind":
        await _run(None, "callgrind_control", "--dump", str(pid))
    elif counter == "profile":
        os.kill(pid, signal.SIGRTMIN + 1)
        await asyncio.sleep(2.0)
    else:
        assert strace is not None
        strace.send_signal(signal.SIGINT)
        await strace.wait()
        result["strace"] = f"{tmp}/strace.txt"
    for c in callers:
        c.close()
    return result


def total_ir(directory: Path, prefix: str) -> int:
    """The instructions of the dump asked for after the zeroing (not the one at exit)."""
    for path in sorted(directory.glob(prefix + "*"), key=lambda p: p.stat().st_mtime):
        text = path.read_text(errors="replace")
        if re.search(r"^desc: Trigger: dump", text, re.M):
            match = re.search(r"^summary:\s+(\d+)", text, re.M)
            if match:
                return int(match.group(1))
    raise RuntimeError(f"no dump in {directory}")


def syscalls(text: str) -> dict[str, int]:
    """strace -c's table: calls by system call."""
    counts = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1] != "total":
            try:
                counts[parts[-1]] = int(parts[3])
            except ValueError:
                continue
    return counts


def measure(tree: Path, server: str, shape: str, calls: int, clients: int, warmup: int,
            counter: str, keep: Path | None) -> dict[str, Any]:
    port = _free_port()
    bare = shape.startswith("bare")
    script = HERE / "servers" / ("bare_hypercorn.py" if bare else "trio_mcp_bench.py")
    own = tree / "benchmarks" / "servers" / script.name
    if own.exists():
        script = own
    args = [str(script), "--port", str(port)]
    if shape.endswith("json") and not shape.startswith("modern"):
        args.append("--json-response")
    if server == "hypercorn" and not bare:
        args += ["--server", "hypercorn"]
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "PYTHONMALLOC": "malloc"}
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or Path(tmp)
        prefix = f"cg-{server}-{shape}"
        cmd = [sys.executable, *args]
        if counter == "profile":
            assert not bare
            cmd = [sys.executable, str(HERE / "speed_profiled.py"), *args[1:]]
            env["SPEED_PROFILE_OUT"] = str(keep / f"{server}-{shape}.prof")
        if counter == "callgrind":
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/{prefix}.%p", *cmd]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    asyncio.run(wait_port(HOST, port, timeout=1.0))
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
            r = asyncio.run(drive(shape, port, proc.pid, clients, warmup, calls, counter))
            if counter == "callgrind":
                ir = total_ir(out, prefix)
                r["instructions"] = ir
                r["per_call"] = ir / r["calls"]
            elif counter == "profile":
                r["per_call"] = 0.0
            else:
                counts = syscalls(Path(r.pop("strace")).read_text())
                r["syscalls"] = counts
                r["per_call"] = sum(counts.values()) / r["calls"]
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    return {"tree": str(tree), "server": server, "shape": shape, "clients": clients,
            "counter": counter, **r}


def _cpu(pid: int) -> float:
    """The user and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed(shape: str, port: int, pid: int, clients: int, seconds: float) -> dict[str, Any]:
    """Calls of ``shape`` from ``clients`` connections for ``seconds`` (after a second of
    warm-up): the rate, and the server's CPU time (user and system) per call."""
    callers = [Caller(shape, port) for _ in range(clients)]
    for c in callers:
        await c.open()
    done = 0
    counting = False
    end = 0.0

    async def work(c: Caller) -> None:
        nonlocal done
        while time.monotonic() < end:
            await c.call()
            if counting:
                done += 1

    end = time.monotonic() + 1.0
    await asyncio.gather(*(work(c) for c in callers))
    counting = True
    cpu0, t0 = _cpu(pid), time.monotonic()
    end = t0 + seconds
    await asyncio.gather(*(work(c) for c in callers))
    wall = time.monotonic() - t0
    cpu = _cpu(pid) - cpu0
    for c in callers:
        c.close()
    # Below ~90% the server waited on this one-process load generator, which then set the
    # rate (and a server that waits wakes once for fewer requests: more CPU per call).
    return {"calls": done, "rps": done / wall, "cpu_us_per_call": cpu / done * 1e6,
            "server_cpu_share": cpu / wall}


def rate(tree: Path, server: str, shape: str, clients: int, seconds: float,
         pyspy: Path | None = None) -> dict[str, Any]:
    port = _free_port()
    bare = shape.startswith("bare")
    script = HERE / "servers" / ("bare_hypercorn.py" if bare else "trio_mcp_bench.py")
    args = [str(script), "--port", str(port)]
    if shape.endswith("json") and not shape.startswith("modern"):
        args.append("--json-response")
    if server == "hypercorn" and not bare:
        args += ["--server", "hypercorn"]
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "PYTHONMALLOC": "malloc"}
    cmd = [sys.executable, *args]
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        cmd = ["taskset", "-c", str(cpus[0]), *cmd]
        os.sched_setaffinity(0, cpus[1:])
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        asyncio.run(wait_port(HOST, port, timeout=60))
        spy = None
        if pyspy is not None:
            spy = subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(proc.pid),
                 "--rate", "1000", "-f", "raw", "-o", str(pyspy), "-d", str(int(seconds) + 2)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = asyncio.run(timed(shape, port, proc.pid, clients, seconds))
        if spy is not None:
            spy.wait()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {"tree": str(tree), "server": server, "shape": shape, "clients": clients, **r}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append",
                        help="a tree holding trio_mcp/ (repeatable; default this one)")
    parser.add_argument("--server", choices=("trio-mcp", "hypercorn"), default="trio-mcp")
    parser.add_argument("--shapes", default="legacy-json,modern-json,legacy-sse,"
                        "legacy-sse-progress,modern-sse")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--syscalls", action="store_true", help="count system calls (strace)")
    parser.add_argument("--rps", type=float, metavar="SECONDS",
                        help="time calls instead (rounds of every shape and tree, interleaved)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pyspy", type=Path, help="with --rps: py-spy's stacks, into this folder")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the server (speed_profiled.py) into --keep")
    parser.add_argument("--keep", type=Path, help="keep callgrind's files here")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = args.tree or [HERE.parent]
    counter = "strace" if args.syscalls else "profile" if args.profile else "callgrind"
    if args.profile:
        args.keep.mkdir(parents=True, exist_ok=True)
    rows = []
    if args.rps:
        for round_ in range(args.rounds):
            for shape in args.shapes.split(","):
                for tree in trees:
                    spy = None
                    if args.pyspy is not None:
                        args.pyspy.mkdir(parents=True, exist_ok=True)
                        spy = args.pyspy / f"{args.server}-{shape}-{round_}.txt"
                    row = rate(tree, args.server, shape, args.clients, args.rps, spy)
                    row["round"] = round_
                    rows.append(row)
                    print(f"{args.server} {shape} c={args.clients} {tree}: {row['rps']:,.0f} "
                          f"req/s, {row['cpu_us_per_call']:.0f} us CPU/call, server "
                          f"{row['server_cpu_share']:.0%} busy"
                          + (" (the load generator set the rate: use benchmarks/run.py)"
                             if row["server_cpu_share"] < 0.9 else ""), flush=True)
        if args.out is not None:
            args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return
    for shape in args.shapes.split(","):
        assert shape in SHAPES, shape
        for tree in trees:
            row = measure(tree, args.server, shape, args.calls, args.clients, args.warmup,
                          counter, args.keep)
            rows.append(row)
            unit = "syscalls" if args.syscalls else "Ir"
            print(f"{args.server} {shape} c={args.clients} {tree}: "
                  f"{row['per_call']:,.1f} {unit}/call", flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
