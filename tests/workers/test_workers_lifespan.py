# The lifespan under `trio-mcp serve --workers N` (issue 40, TM-HAND-LIFESPAN): each worker
# process enters the application's lifespan once before serving and leaves it when SIGTERM
# stops it, and its handlers see their own worker's value.
from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
import trio
from support.fixtures import wait_until
from support.modern import call_tool, post
from support.process import start_until

TIMEOUT = 30

pytestmark = pytest.mark.slow

APP = '''
import contextlib, os
from trio_mcp import Context, Server

LOG = os.environ["LIFESPAN_LOG"]


@contextlib.asynccontextmanager
async def lifespan(server):
    with open(LOG, "a") as f:
        f.write(f"enter {os.getpid()}\\n")
    try:
        yield {"pid": os.getpid()}
    finally:
        with open(LOG, "a") as f:
            f.write(f"exit {os.getpid()}\\n")


server = Server("lives", lifespan=lifespan)


@server.tool()
async def whose(ctx: Context) -> int:
    """The pid of the worker whose lifespan this request sees."""
    assert ctx.lifespan["pid"] == os.getpid()
    return ctx.lifespan["pid"]
'''


@pytest.mark.spec("TM-HAND-LIFESPAN")
async def test_each_worker_runs_the_lifespan_once_around_its_serving(tmp_path: Path) -> None:
    """Two workers: two entries, one per worker pid, before they serve; requests see their
    worker's own value; SIGTERM makes each leave its lifespan."""
    (tmp_path / "lives.py").write_text(textwrap.dedent(APP))
    log = tmp_path / "lifespan.log"
    cmd = [sys.executable, "-m", "trio_mcp", "serve", "--port", "0", "--workers", "2",
           "--app-dir", str(tmp_path), "lives:server"]
    proc, match, _ = start_until(
        cmd, r"serving at (http://\S+) with", cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "LIFESPAN_LOG": str(log)},
    )
    try:
        url = match.group(1)

        def entered() -> list[str]:
            return [line for line in log.read_text().split("\n") if line.startswith("enter")] \
                if log.exists() else []

        with trio.fail_after(TIMEOUT):
            await wait_until(lambda: len(entered()) >= 2, poll=0.05)
            pids = set()
            for _ in range(20):
                answer = (await post(url, call_tool("whose"))).json()
                pids.add(answer["result"]["structuredContent"]["result"])
        workers = {int(line.split()[1]) for line in entered()}
        assert 2 == len(entered()) and pids <= workers
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT)
    exits = {int(line.split()[1]) for line in log.read_text().split("\n")
             if line.startswith("exit")}
    assert workers == exits
