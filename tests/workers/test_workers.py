# `trio-mcp serve --workers N`, as a deployment runs it: the command line in a process of its
# own, N worker processes on one listening socket, requests over fresh connections on
# loopback. What one worker seals (a requestState) verifies in every other; a worker that dies
# is started again; SIGTERM stops them all; a legacy session, which would live in one worker
# alone, is refused up front.
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import (
    initialize_params,
    open_session,
    open_stream,
    post_headers,
    request,
    rpc_request,
)
from support.fixtures import free_port, wait_until
from support.modern import call_tool, modern_request, post
from support.process import start_until

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30
ELICIT = {"elicitation": {}}

pytestmark = pytest.mark.slow


class Pool:
    """A running ``trio-mcp serve --workers N``: its URL, the stats URL of each worker, and
    what it printed (read on by a thread, so that its pipe never fills)."""

    def __init__(self, count: int, *extra: str) -> None:
        cmd = [sys.executable, "-m", "trio_mcp", "serve", "--port", "0", "--workers",
               str(count), "--stats-port", "0", *extra]
        self.proc, match, self.lines = start_until(
            cmd, r"serving at (http://\S+) with", cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.url = match.group(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def stats_urls(self) -> dict[int, str]:
        """Each live worker's stats URL, by index (each prints it when it starts; the
        latest line of a restarted worker wins)."""
        found: dict[int, str] = {}
        for line in list(self.lines):
            m = re.search(r"worker (\d+)'s counters at (\S+)", line)
            if m:
                found[int(m.group(1))] = m.group(2)
        return found

    def worker_pids(self) -> list[int]:
        # Each thread lists the children it started (trio starts them from worker threads).
        pids: list[int] = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                pids += [int(p) for p in (task / "children").read_text().split()]
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        return pids

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture
def pool() -> Any:
    started: list[Pool] = []

    def start(count: int = 2, *extra: str) -> Pool:
        p = Pool(count, *extra)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


async def _wait_for_workers(p: Pool, count: int) -> dict[int, str]:
    with trio.fail_after(TIMEOUT):
        await wait_until(lambda: len(p.stats_urls()) >= count, poll=0.05)
    return p.stats_urls()


async def _modern_requests_served(stats_url: str) -> int:
    response = await request(stats_url, "GET")
    assert 200 == response.status
    served: int = json.loads(response.body)["modern_requests"]
    return served


@pytest.mark.spec("TM-WORK-PROCESSES")
async def test_every_request_over_fresh_connections_is_answered_and_both_workers_serve(
    pool: Any,
) -> None:
    """Forty 2026-07-28 requests over fresh connections to two workers are answered 40 of
    40, and the kernel's one accept queue hands work to both workers."""
    p = pool(2)
    stats = await _wait_for_workers(p, 2)
    with trio.fail_after(TIMEOUT):
        statuses = []
        for i in range(40):
            response = await post(p.url, modern_request("tools/list", id=i))
            statuses.append(response.status)
            assert "tools" in response.json()["result"], response.body
        served = [await _modern_requests_served(stats[i]) for i in (0, 1)]
    assert [200] * 40 == statuses
    assert 40 == sum(served)
    assert all(n > 0 for n in served), served


@pytest.mark.spec("TM-WORK-SECRET", "ML-STATE-2")
async def test_a_multi_round_request_may_continue_on_any_worker(pool: Any) -> None:
    """Every worker verifies the requestStates the others sealed: twenty two-round calls,
    each round over a fresh connection to whichever worker accepts it, all complete."""
    p = pool(2)
    await _wait_for_workers(p, 2)
    tool = "test_input_required_result_multi_round"
    with trio.fail_after(TIMEOUT):
        for i in range(20):
            first = (await post(p.url, call_tool(tool, id=f"a{i}", capabilities=ELICIT))).json()
            state = first["result"]["requestState"]
            retry = call_tool(
                tool, id=f"b{i}", capabilities=ELICIT, requestState=state,
                inputResponses={"step1": {"action": "accept", "content": {"name": "Ada"}}},
            )
            second = (await post(p.url, retry)).json()
            assert "result" in second, second
            assert ["step2"] == list(second["result"]["inputRequests"]), second


@pytest.mark.spec("TM-WORK-LEGACY", "ML-COMPAT-2")
async def test_a_legacy_initialize_is_refused_naming_the_revision_the_workers_serve(
    pool: Any,
) -> None:
    """Without a session store the workers share, a 2025-11-25 initialize gets -32022
    naming 2026-07-28, in-band under 200 (a 4xx would send the client to the old
    transport, T-COMPAT-2), not a session that half of its requests would not find."""
    p = pool(2)
    await _wait_for_workers(p, 2)
    with trio.fail_after(TIMEOUT):
        response = await request(
            p.url, "POST", post_headers(),
            json.dumps(rpc_request("initialize", initialize_params(), id=1)).encode(),
        )
    assert 200 == response.status, response.body
    body = response.json()
    assert 1 == body["id"]
    assert -32022 == body["error"]["code"]
    assert ["2026-07-28"] == body["error"]["data"]["supported"]
    assert "mcp-session-id" not in response.headers


@pytest.mark.spec("TM-WORK-PROCESSES")
async def test_a_worker_that_dies_is_started_again_and_the_others_serve_meanwhile(
    pool: Any,
) -> None:
    """A worker killed with SIGKILL is replaced by a new process, and the other serves
    meanwhile: of requests sent as it dies, only those the kernel had already handed to it
    fail (their connection is reset), and each is answered when sent again."""
    p = pool(2)
    await _wait_for_workers(p, 2)
    before = p.worker_pids()
    assert 2 == len(before)
    os.kill(before[0], signal.SIGKILL)
    resets = 0
    with trio.fail_after(TIMEOUT):
        for i in range(20):
            for _ in range(3):
                try:
                    response = await post(p.url, modern_request("tools/list", id=i))
                    break
                except (trio.BrokenResourceError, OSError, EOFError):
                    resets += 1
            assert 200 == response.status, i
        await wait_until(
            lambda: len(p.worker_pids()) == 2 and before[0] not in p.worker_pids(), poll=0.05
        )
    assert before[1] in p.worker_pids()
    assert any("worker 0 (pid" in line or "worker 1 (pid" in line for line in p.lines)
    assert resets <= 3, resets


@pytest.mark.spec("TM-WORK-PROCESSES")
async def test_sigterm_stops_every_worker_and_the_parent(pool: Any) -> None:
    """SIGTERM to the parent is each worker's graceful shutdown; then the parent exits 0 and
    no worker is left."""
    p = pool(2)
    await _wait_for_workers(p, 2)
    _stop_and_check(p)


def _stop_and_check(p: Pool) -> None:
    workers = p.worker_pids()
    started = time.monotonic()
    assert 0 == p.stop()
    assert time.monotonic() - started < TIMEOUT
    for pid in workers:
        # Reaped by the parent: no such process any more.
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True


def test_a_secret_shorter_than_32_bytes_is_refused_at_start() -> None:
    """$TRIO_MCP_SECRET must hold at least 32 bytes: a weak key is a start-up error."""
    result = subprocess.run(
        [sys.executable, "-m", "trio_mcp", "serve", "--port", "0"],
        cwd=ROOT, env={**os.environ, "TRIO_MCP_SECRET": "00" * 8},
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert 0 != result.returncode
    assert "at least 32 bytes" in result.stderr


@pytest.mark.spec("TM-STORE-RECORD", "TM-WORK-PROCESSES")
@pytest.mark.parametrize("http_server", ["trio-mcp", "hypercorn"])
async def test_with_a_redis_store_every_request_of_a_legacy_session_is_answered(
    pool: Any, redis_url: str, http_server: str
) -> None:
    """Issue 21's check: with two workers and a Redis store, one initialize and forty
    requests of that session over fresh connections are answered 40 of 40, by both
    workers."""
    p = pool(2, "--store", redis_url, "--server", http_server)
    stats = await _wait_for_workers(p, 2)
    with trio.fail_after(TIMEOUT):
        session = await open_session(p.url)
        statuses = []
        for i in range(40):
            response = await session.post(rpc_request("tools/list", id=i))
            statuses.append(response.status)
        adopted = [
            json.loads((await request(stats[i], "GET")).body)["sessions_adopted"]
            for i in (0, 1)
        ]
    assert [200] * 40 == statuses
    assert 1 == sum(adopted)


def _hypercorn_workers(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc, _, _ = start_until(
        [sys.executable, "-m", "hypercorn", "--worker-class", "trio", "-w", "2",
         "--bind", f"127.0.0.1:{port}", "trio_mcp.demo:server.asgi_app()"],
        r"Running on http://127\.0\.0\.1", cwd=ROOT, env={**os.environ, **env},
    )
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.spec("TM-STORE-RECORD", "TM-WORK-SECRET")
async def test_under_hypercorn_w_2_the_environment_shares_sessions_and_keys(
    redis_url: str,
) -> None:
    """`hypercorn -w 2 'trio_mcp.demo:server.asgi_app()'` with $TRIO_MCP_STORE and
    $TRIO_MCP_SECRET set: a legacy session's forty requests are answered 40 of 40."""
    env = {"TRIO_MCP_STORE": redis_url, "TRIO_MCP_SECRET": "ab" * 32}
    proc, url = await trio.to_thread.run_sync(_hypercorn_workers, env)
    try:
        with trio.fail_after(TIMEOUT):
            session = await open_session(url)
            statuses = [
                (await session.post(rpc_request("tools/list", id=i))).status for i in range(40)
            ]
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    assert [200] * 40 == statuses


@pytest.mark.spec("TM-WORK-LEGACY", "ML-COMPAT-2")
async def test_under_hypercorn_w_2_without_a_store_legacy_sessions_are_refused() -> None:
    """With $TRIO_MCP_WORKERS=2 and no store, hypercorn's workers refuse a legacy
    initialize as `--workers` does, rather than lose half of the session's requests."""
    proc, url = await trio.to_thread.run_sync(_hypercorn_workers, {"TRIO_MCP_WORKERS": "2"})
    try:
        with trio.fail_after(TIMEOUT):
            response = await request(
                url, "POST", post_headers(),
                json.dumps(rpc_request("initialize", initialize_params(), id=1)).encode(),
            )
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    assert 200 == response.status
    assert -32022 == response.json()["error"]["code"]


def _worker_pid(p: Pool, index: int) -> int:
    for pid in p.worker_pids():
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if args[args.index(b"--worker-index") + 1] == str(index).encode():
            return pid
    raise AssertionError(f"no worker {index}")


def _exited(pid: int) -> bool:
    """The process has exited (a zombie, or reaped): its sockets are closed, so the kernel
    hands it no more connections (those it held when it died were reset: TM-WORK-PROCESSES)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _progress(events: list[Any]) -> list[int]:
    """The progress values of the notifications among ``events``."""
    return [
        int(m["params"]["progress"])
        for m in (json.loads(e.data) for e in events if e.data)
        if m.get("method") == "notifications/progress"
    ]


@pytest.mark.spec("TM-STORE-STREAMS", "TM-STORE-RECORD", "TM-WORK-PROCESSES")
async def test_a_worker_killed_mid_call_fails_its_request_on_its_stream_and_the_session_lives_on(
    pool: Any, redis_url: str
) -> None:
    """SIGKILL the worker running a call: the client's resume, at the worker left, reads
    the stream's copy in Redis strictly after its cursor, each notification once, and then
    an error response for the request (-32603, holder-gone): the call ends explicitly,
    never hangs; a second resume reads the same; the session itself is served on."""
    p = pool(2, "--store", redis_url)
    stats = await _wait_for_workers(p, 2)
    with trio.fail_after(TIMEOUT):
        session = await open_session(p.url)
        call = rpc_request("tools/call", {"name": "countdown", "arguments": {
            "n": 300, "interval": 0.05}, "_meta": {"progressToken": "t"}}, id=1)
        received = []
        async with open_stream(p.url, "POST", session.headers(),
                               json.dumps(call).encode()) as stream:
            while len(_progress(received)) < 6:
                event = await stream.next_event(comments=False)
                assert event is not None
                received.append(event)
            running = [
                json.loads((await request(stats[i], "GET")).body)["requests_inflight"]
                for i in (0, 1)
            ]
            killed = _worker_pid(p, running.index(1))
            os.kill(killed, signal.SIGKILL)
            async for event in stream.events(comments=False):
                received.append(event)
        assert stream.truncated or stream.ended
        await wait_until(lambda: _exited(killed), poll=0.01)
        # Resumed from the third notification: what follows it, from the copy.
        cursor = next(e.id for e in received if _progress([e]) == [3])
        resumed = await request(p.url, "GET", session.headers([("last-event-id", cursor)]))
        again = await request(p.url, "GET", session.headers([("last-event-id", cursor)]))
        tools = await session.post(rpc_request("tools/list", id=2))
    assert 200 == resumed.status, resumed.body
    events = [e for e in resumed.events() if e.data]
    seen = _progress(events)
    assert list(range(4, 4 + len(seen))) == seen
    assert len(seen) >= len(_progress(received)) - 4  # all but, at most, the newest one
    final = json.loads(events[-1].data)
    assert 1 == final["id"] and -32603 == final["error"]["code"]
    assert "holder-gone" == final["error"]["data"]["reason"]
    assert 1 == sum(1 for e in events if "id" in json.loads(e.data))
    assert [e.data for e in events] == [e.data for e in again.events() if e.data]
    assert [e.id for e in events[:-1]] == [e.id for e in again.events() if e.data][:-1]
    assert 200 == tools.status
