"""trio_mcp.Client beside the official Python SDK's client (mcp 2.3.0): sequential tools/call
of `echo` against one trio-mcp server (`trio-mcp serve`, the demo, in a process of its own),
in both eras, the two clients interleaved in rounds in one run so that the machine's load
falls on both alike. Prints calls per second per client and era, and the ratio.

    python benchmarks/client_speed.py [--calls 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mcp import Client as SdkClient
from support.fixtures import free_port
from support.process import start_until

from trio_mcp import Client

ROOT = Path(__file__).resolve().parents[1]


async def ours(url: str, mode: str, calls: int) -> float:
    async with Client(url, mode=mode) as client:
        start = time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", {"text": "hi"})
        return calls / (time.perf_counter() - start)


async def sdk(url: str, mode: str, calls: int) -> float:
    async with SdkClient(url, mode="legacy" if mode == "legacy" else "auto") as client:
        start = time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", {"text": "hi"})
        return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    proc, match, _ = start_until(
        [str(Path(sys.executable).with_name("trio-mcp")), "serve", "--port", str(port)],
        r"serving .* at (http://\S+)", cwd=ROOT)
    url = match.group(1)
    runs: dict[tuple[str, str], list[float]] = {}
    contenders: dict[str, Callable[[str, str, int], Awaitable[float]]] = {
        "trio_mcp.Client": ours, "mcp 2.3.0 Client": sdk}
    try:
        for _ in range(args.rounds):
            for mode in ("auto", "legacy"):
                for name, run in contenders.items():
                    runs.setdefault((name, mode), []).append(
                        trio.run(run, url, mode, args.calls))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for mode in ("auto", "legacy"):
        ours_rate = statistics.median(runs[("trio_mcp.Client", mode)])
        sdk_rate = statistics.median(runs[("mcp 2.3.0 Client", mode)])
        print(f"{mode:6s}  trio_mcp.Client {ours_rate:7.0f} calls/s   mcp 2.3.0 Client "
              f"{sdk_rate:7.0f} calls/s   ratio {ours_rate / sdk_rate:.2f}")


if __name__ == "__main__":
    main()
