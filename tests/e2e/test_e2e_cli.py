# What a new user meets first on the command line (issue 37): the installed `trio-mcp`, run
# as a process of its own in a temporary directory that holds the user's module, as a user
# runs it next to their hello.py. Its mistakes are one line each (a module it cannot import,
# a port in use), and Ctrl-C says what the shutdown waits for; a second one stops at once.
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from support.client import open_session
from support.fixtures import wait_until
from support.modern import call_tool, open_modern, post
from support.process import start_until

#: The console script pip installed next to this interpreter.
TRIO_MCP = str(Path(sys.executable).with_name("trio-mcp"))
TIMEOUT = 30

HELLO = '''
from trio_mcp import Server

server = Server("hello")


@server.tool
async def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}."
'''

#: A tool that runs until it is cancelled, and says (in a file) that it has started.
SLOW = '''
from pathlib import Path

import trio

from trio_mcp import Server

server = Server("slow")


@server.tool
async def wait() -> str:
    """Wait for an hour."""
    Path("started").write_text("yes")
    await trio.sleep(3600)
    return "done"
'''


def _environment() -> dict[str, str]:
    """This environment without PYTHONPATH: the user's directory must be found by trio-mcp
    itself, not by the test's import path."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRIO_MCP, *args], cwd=cwd, env=_environment(), capture_output=True, text=True,
        timeout=TIMEOUT,
    )


def _start(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start `trio-mcp serve ...` and read until it says where it serves: the process, the
    endpoint's URL and the lines so far."""
    proc, match, lines = start_until(
        [TRIO_MCP, "serve", "--port", "0", *args], r"serving \S+ at (http://\S+)",
        cwd=cwd, env=_environment(),
    )
    return proc, match.group(1), lines


def _stop(proc: subprocess.Popen[str]) -> str:
    """End the process if it still runs; the rest of what it wrote."""
    if proc.poll() is None:
        proc.kill()
    rest, _ = proc.communicate(timeout=TIMEOUT)
    return rest or ""


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def hello_dir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "hello.py").write_text(HELLO)
    yield tmp_path


async def test_serve_imports_the_users_module_from_the_working_directory(
    hello_dir: Path,
) -> None:
    """`trio-mcp serve hello:server`, run next to hello.py with no PYTHONPATH, serves it:
    its tool, registered with the bare `@server.tool`, is listed and answers; the URL it
    prints is the endpoint's, /mcp included."""
    proc, url, _ = await trio.to_thread.run_sync(lambda: _start(["hello:server"], hello_dir))
    try:
        with trio.fail_after(TIMEOUT):
            session = await open_session(url)
            listed = await session.result("tools/list")
            called = await post(url, call_tool("greet", {"name": "Ada"}))
    finally:
        _stop(proc)

    assert url.endswith("/mcp")
    assert ["greet"] == [tool["name"] for tool in listed["tools"]]
    assert [{"type": "text", "text": "Hello, Ada."}] == called.json()["result"]["content"]


async def test_app_dir_names_the_directory_of_the_module(hello_dir: Path, tmp_path: Path) -> None:
    """`--app-dir DIR` imports the module from DIR, wherever trio-mcp runs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc, url, _ = await trio.to_thread.run_sync(
        lambda: _start(["hello:server", "--app-dir", str(hello_dir)], elsewhere)
    )
    try:
        with trio.fail_after(TIMEOUT):
            called = await post(url, call_tool("greet", {"name": "Bo"}))
    finally:
        _stop(proc)

    assert "Hello, Bo." == called.json()["result"]["content"][0]["text"]


def test_a_module_that_is_not_there_is_one_line_naming_it_and_where_it_was_looked_for(
    tmp_path: Path,
) -> None:
    """A module that cannot be found: exit status 1 and one line naming the module and the
    directory searched, with no traceback."""
    done = _run(["serve", "helo:server", "--port", "0"], tmp_path)

    assert 1 == done.returncode
    [line] = _lines(done.stderr)
    assert "no module named 'helo'" in line
    assert str(tmp_path) in line and "--app-dir" in line
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import no_such_dependency_here\n", "ModuleNotFoundError: No module named "
         "'no_such_dependency_here' at {path}:1"),
        ("x = 1\ny = undefined_name\n", "NameError: name 'undefined_name' is not defined "
         "at {path}:2"),
        ("def broken(:\n", "SyntaxError: "),
    ],
)
def test_a_module_that_fails_while_importing_is_one_line_naming_the_error_and_its_place(
    tmp_path: Path, source: str, expected: str
) -> None:
    """A module found but failing as it is imported: exit status 1 and one line with the
    exception and the file and line it came from; --log-level debug has the traceback."""
    (tmp_path / "mine.py").write_text(source)
    done = _run(["serve", "mine:server", "--port", "0"], tmp_path)

    assert 1 == done.returncode
    [line] = _lines(done.stderr)
    assert line.startswith("trio-mcp: importing 'mine' raised ")
    assert expected.format(path=tmp_path / "mine.py") in line
    assert "Traceback" not in done.stdout + done.stderr


def test_a_module_without_the_named_server_lists_the_servers_it_holds(hello_dir: Path) -> None:
    """`module:name` naming nothing: one line saying so, and which trio_mcp.Server the
    module does hold."""
    done = _run(["serve", "hello:app", "--port", "0"], hello_dir)

    assert 1 == done.returncode
    [line] = _lines(done.stderr)
    assert "has no attribute 'app'" in line and "its trio_mcp.Server: server" in line


def test_workers_stop_at_once_on_a_module_that_is_not_there(tmp_path: Path) -> None:
    """With --workers, a module that cannot be found stops the parent before any worker
    starts (each would fail and be restarted forever), with the same one line."""
    started = time.monotonic()
    done = _run(["serve", "helo:server", "--port", "0", "--workers", "2"], tmp_path)

    assert 1 == done.returncode
    [line] = _lines(done.stderr)
    assert "no module named 'helo'" in line
    assert time.monotonic() - started < TIMEOUT / 2


@pytest.mark.spec("TM-WORK-PROCESSES")
def test_workers_stop_when_the_module_is_there_but_fails_to_import(tmp_path: Path) -> None:
    """With --workers, a module that is found but raises on import makes each worker say
    why and exit with CANNOT_LOAD; the parent stops them all and exits 1 at once, saying
    a worker could not load the server, instead of starting them again forever."""
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    started = time.monotonic()
    done = _run(["serve", "broken:server", "--port", "0", "--workers", "2"], tmp_path)

    assert 1 == done.returncode
    lines = _lines(done.stderr)
    assert any("importing 'broken' raised ModuleNotFoundError" in line for line in lines), lines
    assert "could not load the server; stopped" in lines[-1], lines
    assert "starting it again" not in done.stderr
    assert time.monotonic() - started < TIMEOUT / 2


@pytest.mark.parametrize("workers", [1, 2])
def test_a_port_in_use_is_one_line_naming_it_and_the_option(
    hello_dir: Path, workers: int
) -> None:
    """A port another socket listens on: exit status 1 and one line naming the port and
    suggesting --port, with no traceback (one process or a pool of workers)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _run(
            ["serve", "hello:server", "--port", str(port), "--workers", str(workers)], hello_dir
        )

    assert 1 == done.returncode
    [line] = _lines(done.stderr)
    assert f"port {port} is already in use" in line
    assert "--port" in line
    assert "Traceback" not in done.stdout + done.stderr


async def _start_slow_call(url: str, cwd: Path, nursery: trio.Nursery) -> None:
    """Start a call of the slow tool, and return once its handler runs."""

    async def call() -> None:
        # The server goes away under it, before it answers.
        with contextlib.suppress(Exception):
            async with open_modern(url, call_tool("wait")) as stream:
                await stream.read_body()

    nursery.start_soon(call)
    with trio.fail_after(TIMEOUT):
        await wait_until((cwd / "started").exists, poll=0.05)


async def _wait_exit(proc: subprocess.Popen[str], seconds: float) -> int | None:
    """The process's exit status once it ends, or None if it still runs after ``seconds``."""
    with trio.move_on_after(seconds):
        await wait_until(lambda: proc.poll() is not None, poll=0.02)
    return proc.poll()


@pytest.mark.slow
@pytest.mark.spec("TM-SESS-SHUTDOWN")
async def test_ctrl_c_says_what_shutdown_waits_for_and_a_second_stops_at_once(
    tmp_path: Path,
) -> None:
    """The first SIGINT, with a handler running, says that running handlers get
    shutdown_grace (here 30 s) and that Ctrl-C again stops at once, and the server waits;
    a second SIGINT ends the process within a second, exit status 130."""
    (tmp_path / "slow.py").write_text(SLOW)
    proc, url, _ = await trio.to_thread.run_sync(
        lambda: _start(["slow:server", "--shutdown-grace", "30"], tmp_path)
    )
    try:
        async with trio.open_nursery() as nursery:
            await _start_slow_call(url, tmp_path, nursery)
            proc.send_signal(signal.SIGINT)
            still_running = await _wait_exit(proc, 1.5)
            proc.send_signal(signal.SIGINT)
            stopped = time.monotonic()
            status = await _wait_exit(proc, 5)
            took = time.monotonic() - stopped
            nursery.cancel_scope.cancel()
    finally:
        out = _stop(proc)

    assert still_running is None
    assert 128 + signal.SIGINT == status
    assert took < 2
    assert "SIGINT: shutting down" in out
    assert "running handlers get up to 30 s to finish (--shutdown-grace)" in out
    assert "Ctrl-C again stops at once" in out
    assert "waiting up to 30 s (shutdown_grace) for 1 running request handler(s)" in out
    assert "SIGINT again: stopping at once" in out


@pytest.mark.slow
@pytest.mark.spec("TM-SESS-SHUTDOWN")
async def test_one_ctrl_c_waits_out_the_grace_then_cancels_and_exits(tmp_path: Path) -> None:
    """A single SIGINT with a handler running: the server waits shutdown_grace (1 s here),
    cancels the handler, says so, and exits with status 0."""
    (tmp_path / "slow.py").write_text(SLOW)
    proc, url, _ = await trio.to_thread.run_sync(
        lambda: _start(["slow:server", "--shutdown-grace", "1"], tmp_path)
    )
    try:
        async with trio.open_nursery() as nursery:
            await _start_slow_call(url, tmp_path, nursery)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            status = await _wait_exit(proc, TIMEOUT)
            took = time.monotonic() - sent
            nursery.cancel_scope.cancel()
    finally:
        out = _stop(proc)

    assert 0 == status
    assert 0.9 < took < TIMEOUT
    assert "1 request handler(s) still running after 1 s: cancelled" in out
