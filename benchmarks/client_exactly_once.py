"""Exactly once, measured (issue 39): trio_mcp.Client beside the official Python SDK's client
(mcp 2.3.0, mode="legacy") against a server that replays a dropped stream from its start
(tests/support/replaying.py), and against trio-mcp and the SDK's server (with its event
store), each with a tool that closes its stream at random points (tests/support/dropping.py,
tests/support/sdk_dropping.py).

    python benchmarks/client_exactly_once.py [--streams 50]

Prints, per client and server, the drops (re-attaches the server's closes caused), the calls
that returned, the progress notifications applied twice, and those lost in calls that
returned (a call gets 4 s). Results: CLIENT-NOTES.md.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mcp import Client as SdkClient
from support import sdk_dropping
from support.dropping import dropping
from support.replaying import Replaying, serve_replaying

from trio_mcp import Client, ServerConfig, serve

EVENTS = 200
DROPS = 20


class Tally:
    def __init__(self) -> None:
        self.returned = self.twice = self.lost = 0
        #: None where the client does not count them (the SDK's).
        self.drops: int | None = 0

    def add(self, seen: list[float], returned: bool, events: int) -> None:
        self.twice += len(seen) - len(set(seen))
        if returned:
            self.returned += 1
            self.lost += len(set(range(1, events + 1)) - {int(p) for p in seen})

    def __str__(self) -> str:
        drops = "    -" if self.drops is None else f"{self.drops:5d}"
        return (f"drops {drops}  returned {self.returned:3d}  applied twice "
                f"{self.twice:6d}  lost {self.lost:5d}")


def _appender(seen: list[float]) -> Any:
    return lambda progress, total, message: seen.append(progress)


def _sdk_appender(seen: list[float]) -> Any:
    async def progress(p: float, t: float | None, m: str | None) -> None:
        seen.append(p)
    return progress


async def _ours(url: str, seen: list[float]) -> bool:
    async with Client(url, mode="legacy") as client:
        await client.call_tool("count", on_progress=lambda p, t, m: seen.append(p))
    return True


async def _sdk(url: str, seen: list[float]) -> bool:
    async def progress(p: float, t: float | None, m: str | None) -> None:
        seen.append(p)

    async with SdkClient(url, mode="legacy") as client:
        await client.call_tool("count", {}, progress_callback=progress)
    return True


async def replaying(streams: int) -> None:
    """Both clients against the replaying server: 40 events dropped after 17, then
    ``streams`` streams of 200 events with 20 random drops each."""
    rng = random.Random(39)
    plans = [(40, (17,))] + [(EVENTS, tuple(sorted(rng.sample(range(1, EVENTS + 1), DROPS))))
                             for _ in range(streams)]
    for name, call in (("trio_mcp.Client", _ours), ("mcp 2.3.0 Client", _sdk)):
        tally = Tally()
        for index, (events, drops) in enumerate(plans):
            async with trio.open_nursery() as nursery:
                state: Replaying = await nursery.start(  # type: ignore[arg-type]
                    serve_replaying, Replaying(events=events, drops=drops, resume="replay"))
                seen: list[float] = []
                returned = False
                with trio.move_on_after(4):
                    try:
                        returned = await call(state.url, seen)
                    except Exception:  # the call failed, with an exception: not returned
                        returned = False
                nursery.cancel_scope.cancel()
            if index == 0:
                print(f"{name:18s} replaying server, 40 events dropped after 17: "
                      f"callback fired {len(seen)} times for {len(set(seen))} notifications")
                continue
            tally.drops = (tally.drops or 0) + len(state.resumes)
            tally.add(seen, returned, events)
        print(f"{name:18s} replaying server, {streams} streams x {DROPS} drops: {tally}")


async def _ours_dropping(url: str, plans: list[list[int]], tally: Tally) -> None:
    async with Client(url, mode="legacy", idle_reattach=0.5) as client:
        for closes in plans:
            seen: list[float] = []
            result: dict[str, Any] = {}
            with trio.move_on_after(4):
                try:
                    result = await client.call_tool(
                        "chatty", {"n": EVENTS, "closes": closes}, on_progress=_appender(seen))
                except Exception:  # the call failed, with an exception: not returned
                    result = {}
            tally.add(seen, bool(result), EVENTS)
        tally.drops = client.tally().resumes


async def _sdk_dropping(url: str, plans: list[list[int]], tally: Tally) -> None:
    for closes in plans:  # a session a call: a call that gave up leaves its session behind
        seen: list[float] = []
        returned = False
        progress = _sdk_appender(seen)
        with trio.move_on_after(4):
            try:
                async with SdkClient(url, mode="legacy") as client:
                    await client.call_tool("chatty", {"n": EVENTS, "closes": closes},
                                           progress_callback=progress)
                    returned = True
            except Exception:  # the call failed, with an exception: not returned
                returned = False
        tally.add(seen, returned, EVENTS)


async def dropping_servers(sdk_url: str, streams: int) -> None:
    """Both clients against trio-mcp and the SDK's server, ``streams`` calls of 200 events
    with 20 closes each, the same closes for every pair."""
    rng = random.Random(39)
    plans = [sorted(rng.sample(range(1, EVENTS), DROPS)) for _ in range(streams)]
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(partial(serve, dropping, port=0, announce=False,
                                           config=ServerConfig(retry_ms=5)))
        for server, url in (("trio-mcp", urls[0]), ("SDK server (event store)", sdk_url)):
            for name, run in (("trio_mcp.Client", _ours_dropping),
                              ("mcp 2.3.0 Client", _sdk_dropping)):
                tally = Tally()
                tally.drops = None
                await run(url, plans, tally)
                print(f"{name:18s} {server}, {streams} x {DROPS} closes: {tally}")
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=50)
    args = parser.parse_args()
    trio.run(replaying, args.streams)
    gen = sdk_dropping.running(Path(sdk_dropping.__file__))
    url = next(gen)
    try:
        trio.run(dropping_servers, url, args.streams)
    finally:
        gen.close()


if __name__ == "__main__":
    main()
