"""A trio-mcp server in a process of its own, started as `trio-mcp serve` starts one (the C
allocator, the collector's threshold), for the tests that watch its resident size while
clients attack it over real sockets (tests/limits/test_limit_fair.py). Its tools: ``hold``
takes an argument and keeps it until cancelled; ``job`` is a task that works a while; its
resources can be subscribed to, so a listen's filter is kept."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from trio_mcp import ServerConfig

LAUNCHER = """
import json, sys
from trio_mcp import use_allocator, use_collector_threshold
use_allocator()
use_collector_threshold()
import trio
from trio_mcp import Context, Server, ServerConfig, serve
from trio_mcp.base._allocator import running_allocator
from trio_mcp.protocol import Retention

settings = json.loads(sys.argv[1])
http_server = settings.pop("http_server")
log_file = settings.pop("log_file", None)
if log_file is not None:
    import logging

    class OneLine(logging.Formatter):
        # One JSON line per record, traceback included, so the test can count both.
        def format(self, record):
            return json.dumps([record.name, super().format(record)])

    handler = logging.FileHandler(log_file)
    handler.setFormatter(OneLine())
    logger = logging.getLogger("trio_mcp")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
if "retention" in settings:
    settings["retention"] = Retention(**settings["retention"])
if "trusted_proxies" in settings:
    settings["trusted_proxies"] = frozenset(settings["trusted_proxies"])
server = Server("fair-rows")

@server.tool()
async def hold(data: str) -> str:
    '''Keep the argument until cancelled.

    Args:
        data: anything.
    '''
    await trio.sleep_forever()
    return data

@server.tool(task="required")
async def job(seconds: float, size: int = 0) -> str:
    '''Work for a while as a task, then answer with size bytes.

    Args:
        seconds: how long.
        size: bytes of the answer.
    '''
    await trio.sleep(seconds)
    return "x" * size if size else "done"

@server.tool()
async def chatter(ctx: Context, n: int, size: int) -> str:
    '''Log n messages of size bytes on the request's stream, then answer.

    Args:
        n: how many.
        size: bytes each.
    '''
    for i in range(n):
        await ctx.log("info", {"i": i, "pad": "x" * size})
    return "said"

@server.resource("test://r/{n}")
async def item(n: str) -> str:
    return n

async def main():
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                server, port=0, config=ServerConfig(**settings), stats_port=0,
                http_server=http_server, task_status=task_status,
            )
        )
        print("READY", json.dumps([running_allocator(), *urls]), flush=True)

trio.run(main)
"""


@attrs.frozen
class Served:
    """A server process: its MCP endpoint, its port, its stats URL and its pid."""

    proc: subprocess.Popen[str]
    url: str
    port: int
    stats_url: str
    allocator: str
    release_within: float
    """The longest a memory release may come after what it releases has ended: two periods
    of the server's expiry loop, which releases once a period has passed with nothing
    freed (TM-SESS-RELEASE), plus slack for a process waiting for a CPU."""

    log_file: Path | None = None
    """Where the server writes trio_mcp's log records, one JSON line each (``served(...,
    log=True)``)."""

    def log_size(self) -> tuple[int, int]:
        """How many records the server logged, and their characters with tracebacks."""
        assert self.log_file is not None, "served without log=True"
        lines = self.log_file.read_text().splitlines() if self.log_file.exists() else []
        return len(lines), sum(len(json.loads(line)[1]) for line in lines)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async def stats(self) -> dict[str, Any]:
        def get() -> dict[str, Any]:
            with urllib.request.urlopen(self.stats_url, timeout=10) as resp:
                return dict(json.load(resp))

        return await trio.to_thread.run_sync(get)

    async def until(self, check: Callable[[dict[str, Any]], bool], poll: float = 0.1) -> None:
        """Poll the server's counters until ``check`` holds (another process: no event to
        wait on)."""
        while not check(await self.stats()):  # noqa: ASYNC110
            await trio.sleep(poll)

    async def releases(self) -> int:
        """How many memory releases the server has made (TM-SESS-RELEASE)."""
        count: int = (await self.stats())["memory_releases"]
        return count

    async def released(self, since: int | None = None, timeout: float | None = None) -> None:
        """Wait for a memory release (TM-SESS-RELEASE) after the ``since``-th (None: the
        next one from now), at most ``timeout`` seconds (``release_within``): none comes
        when under a sixteenth of the threshold was freed.

        Take ``since`` before what is to be released ends: a release that came before this
        call is then not waited for again, and one still to come is not missed. (With the
        default TTLs the release comes 6 to 12 s after the end; a wait of 10 s from the
        end measured a server that had not released yet, above its peak.)"""
        seen = await self.releases() if since is None else since
        with trio.move_on_after(self.release_within if timeout is None else timeout):
            await self.until(lambda stats: stats["memory_releases"] > seen)


def _expire_period(settings: Mapping[str, Any]) -> float:
    """How often the server's expiry loop runs, as SessionTable._expire_period says."""
    defaults = ServerConfig()
    ttls = [settings.get("session_idle_ttl", defaults.session_idle_ttl),
            settings.get("uninitialized_ttl", defaults.uninitialized_ttl)]
    abandoned = settings.get("abandoned_ttl", defaults.abandoned_ttl)
    if abandoned is not None:
        ttls.append(abandoned)
    return max(0.05, min(ttls) / 10)


def _start(
    tmp_path: Path, settings: Mapping[str, Any], http_server: str, log: bool
) -> Served:
    script = tmp_path / "fair_server.py"
    script.write_text(LAUNCHER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    log_file = tmp_path / "server-log.jsonl" if log else None
    extra = {"log_file": str(log_file)} if log_file is not None else {}
    arg = json.dumps({**settings, **extra, "http_server": http_server})
    proc = subprocess.Popen(
        [sys.executable, str(script), arg], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise AssertionError(f"the server did not start: {line!r}")
        allocator, url, stats_url = json.loads(line[len("READY "):])
        parts = urlsplit(url)
        assert parts.port is not None, url
    except BaseException:
        # Never left running behind a test that could not use it.
        proc.kill()
        proc.wait()
        raise
    # serve() reports the endpoint with its path.
    endpoint = url if parts.path.rstrip("/") else url.rstrip("/") + "/mcp"
    return Served(proc=proc, url=endpoint, port=parts.port, stats_url=stats_url,
                  allocator=allocator, release_within=2 * _expire_period(settings) + 5.0,
                  log_file=log_file)


@contextlib.asynccontextmanager
async def served(
    tmp_path: Path,
    settings: Mapping[str, Any] | None = None,
    *,
    http_server: str = "trio-mcp",
    log: bool = False,
) -> AsyncIterator[Served]:
    """Run the server with ServerConfig ``settings`` for the block, then stop it; with
    ``log``, its trio_mcp records at INFO go to ``Served.log_file``."""
    proc = await trio.to_thread.run_sync(
        _start, tmp_path, dict(settings or {}), http_server, log
    )
    try:
        yield proc
    finally:
        proc.proc.terminate()
        await trio.to_thread.run_sync(proc.proc.wait)
