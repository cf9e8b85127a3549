"""Instructions per request, before and after issue 34, counted by valgrind's callgrind: a
figure the machine's other load does not move. The benchmark server
(benchmarks/servers/trio_mcp_bench.py) runs under callgrind, once with this tree and once
with a checkout of the code before (``--before DIR``, first on PYTHONPATH); one client warms
it up (a session, 300 calls), the counters are zeroed (``callgrind_control --zero``), it makes
``--calls`` `tools/call` echo requests one after the other on one kept connection, and the
counters are dumped: their total, divided by the calls, is the cost of one request, all of
it (the HTTP edge, the runtime, the JSON, the scheduler), in instructions.

    python benchmarks/edge_callgrind.py --before /tmp/before [--calls 2000]
        [--out benchmarks/results/issue-34-edge/callgrind.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
from client import open_session, rpc, wait_port  # noqa: E402

SCRIPT = HERE / "servers" / "trio_mcp_bench.py"


async def control(what: str, pid: int) -> None:
    """``callgrind_control --zero`` or ``--dump`` for the server."""
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", f"--{what}", str(pid),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    assert await proc.wait() == 0, what


async def load(port: int, calls: int, pid: int) -> None:
    session = await open_session("127.0.0.1", port)
    echo = {"name": "echo", "arguments": {"text": "hello"}}
    for _ in range(300):
        await session.call(rpc(session.take_id(), "tools/call", echo))
    await control("zero", pid)
    for _ in range(calls):
        response = await session.call(rpc(session.take_id(), "tools/call", echo))
        assert response.status == 200, response.status
    await control("dump", pid)
    session.conn.abort()


def total_ir(directory: Path, prefix: str) -> int:
    """The instructions counted in the dump asked for after the zeroing (not the one
    written at exit)."""
    dumps = sorted(directory.glob(prefix + "*"), key=lambda p: p.stat().st_mtime)
    for path in dumps:
        text = path.read_text(errors="replace")
        if re.search(r"^desc: Trigger: dump", text, re.M):
            match = re.search(r"^summary:\s+(\d+)", text, re.M)
            if match:
                return int(match.group(1))
    raise RuntimeError(f"no dump of callgrind in {directory}: {[p.name for p in dumps]}")


def write_json(out: Path | None, result: object) -> None:
    """Print ``result`` as JSON and, given ``out``, write it there: the callgrind scripts'
    one way of keeping a measurement."""
    text = json.dumps(result, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


def measure(
    label: str, env: dict[str, str], calls: int, json_response: bool, server: str = "trio-mcp",
    script: Path = SCRIPT,
) -> dict[str, Any]:
    """``script``: the tree's own benchmark server (a tree before the package's folders
    moved cannot run this tree's, which imports the new places)."""
    port = run.free_ports(1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(os.environ.get("EDGE_CALLGRIND_DIR") or tmp)
        prefix = f"cg-{label.replace('/', '-')}"
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/{prefix}.%p",
            sys.executable, str(script), "--port", str(port),
            *(["--json-response"] if json_response else []),
            *(["--server", server] if server != "trio-mcp" else []),
        ]
        proc = subprocess.Popen(
            cmd, env={**os.environ, **env, "PYTHONMALLOC": "malloc"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    asyncio.run(wait_port("127.0.0.1", port, timeout=1.0))
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
            asyncio.run(load(port, calls, proc.pid))
            ir = total_ir(out, prefix)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    return {"contender": label, "mode": "json" if json_response else "sse", "calls": calls,
            "instructions": ir, "per_call": ir / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--modes", default="json,sse")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--server", choices=("trio-mcp", "hypercorn"), default="trio-mcp",
                        help="the HTTP server the benchmark server runs on")
    args = parser.parse_args()
    rows = []
    for json_response in [m == "json" for m in args.modes.split(",")]:
        for label, env in (("before", {"PYTHONPATH": str(args.before.resolve())}),
                           ("after", {})):
            own = args.before / "benchmarks" / "servers" / SCRIPT.name
            script = own if label == "before" and own.exists() else SCRIPT
            row = measure(label, env, args.calls, json_response, args.server, script)
            rows.append(row)
            print(f"{row['mode']} {label}: {row['per_call']:,.0f} instructions per call",
                  flush=True)
    summary = {}
    for mode in args.modes.split(","):
        by = {r["contender"]: r["per_call"] for r in rows if r["mode"] == mode}
        summary[mode] = {**by, "after_over_before": by["after"] / by["before"]}
    result = {"server": args.server, "summary": summary, "rows": rows}
    write_json(args.out, result)


if __name__ == "__main__":
    main()
