# Which allocator the interpreter serving trio-mcp runs under (TM-SESS-ALLOCATOR). Each case
# runs in a child interpreter: choosing an allocator may start the process again. What the
# child runs under is read from the interpreter itself: sys._debugmallocstats() reports on
# CPython's small-object arenas only when pymalloc is in use.
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from support.client import open_session
from support.process import start_until

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30
PYMALLOC_REPORT = "Small block threshold"

#: Prints a line before choosing (once per start of the interpreter) and one after.
CHOOSER = """
import logging, os, sys
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from trio_mcp import use_allocator
print("start", os.getpid(), flush=True)
chosen = use_allocator({choice})
print("run", os.getpid(), chosen, flush=True)
sys._debugmallocstats()
"""


def _environment(pythonmalloc: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    if pythonmalloc is not None:
        env["PYTHONMALLOC"] = pythonmalloc
    return env


def _python(
    code: str, *, pythonmalloc: str | None = None, flags: tuple[str, ...] = (),
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child interpreter whose environment names ``pythonmalloc``."""
    return subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=ROOT, env=_environment(pythonmalloc),
        capture_output=True, text=True, timeout=TIMEOUT, check=check,
    )


def _choose(
    choice: str | None, *, pythonmalloc: str | None = None, flags: tuple[str, ...] = ()
) -> tuple[list[str], str]:
    """Run CHOOSER in a child interpreter; its stdout lines and its stderr."""
    done = _python(CHOOSER.format(choice=repr(choice)), pythonmalloc=pythonmalloc, flags=flags)
    return done.stdout.splitlines(), done.stderr


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_choosing_malloc_starts_the_interpreter_again_under_it_in_the_same_process() -> None:
    """Under CPython's default allocator, use_allocator() starts the interpreter again, with
    the same pid and command line and PYTHONMALLOC=malloc, and the program then runs with
    no pymalloc arenas at all."""
    lines, stderr = _choose(None)
    starts = [line for line in lines if line.startswith("start")]
    assert 2 == len(starts), lines
    pid = starts[0].split()[1]
    assert [f"start {pid}", f"start {pid}", f"run {pid} malloc"] == lines
    assert PYMALLOC_REPORT not in stderr


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_an_allocator_named_in_the_environment_is_kept_without_a_restart() -> None:
    """A PYTHONMALLOC the deployment set is its choice: use_allocator() keeps it and does not
    start the interpreter again."""
    lines, stderr = _choose(None, pythonmalloc="pymalloc")
    assert 2 == len(lines), lines
    assert lines[1].endswith(" pymalloc")
    assert PYMALLOC_REPORT in stderr

    lines, stderr = _choose(None, pythonmalloc="malloc")
    assert 2 == len(lines), lines
    assert lines[1].endswith(" malloc")
    assert PYMALLOC_REPORT not in stderr


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_an_explicit_choice_overrides_the_environment() -> None:
    """use_allocator("pymalloc") under PYTHONMALLOC=malloc starts the interpreter again under
    pymalloc."""
    lines, stderr = _choose("pymalloc", pythonmalloc="malloc")
    assert 3 == len(lines), lines
    assert lines[2].endswith(" pymalloc")
    assert PYMALLOC_REPORT in stderr


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_an_interpreter_that_ignores_the_environment_runs_on_with_a_warning() -> None:
    """Under -E the variable would be ignored after a restart too, so there is none (no
    loop of restarts): a warning says so and the program runs on under pymalloc."""
    lines, stderr = _choose("malloc", flags=("-E",))
    assert 2 == len(lines), lines
    assert lines[1].endswith(" pymalloc")
    assert "cannot restart the interpreter under PYTHONMALLOC=malloc" in stderr
    assert PYMALLOC_REPORT in stderr


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_cli_main_given_its_own_argv_never_restarts_the_caller() -> None:
    """trio_mcp.cli._cli.main(argv) run from someone else's program leaves that program's process
    alone: only the process's own command line chooses the allocator."""
    code = (
        "import os\n"
        "print('start', os.getpid(), flush=True)\n"
        "from trio_mcp.base._allocator import running_allocator\n"
        "from trio_mcp.cli._cli import main\n"
        "try:\n"
        "    main(['serve', 'no_such_module_here:server', '--log-level', 'info'])\n"
        "finally:\n"
        "    print('allocator', running_allocator(), flush=True)\n"
    )
    done = _python(code, check=False)
    assert 0 != done.returncode  # the module does not exist: it got past the allocator step
    assert "no module named 'no_such_module_here'" in done.stderr
    assert 1 == done.stdout.count("start"), done.stdout
    assert "allocator pymalloc" in done.stdout


def _serve(*extra: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start `python -m trio_mcp serve` on a free port; the process, the demo's URL and the
    lines it wrote before serving."""
    proc, match, lines = start_until(
        [sys.executable, "-m", "trio_mcp", "serve", "--port", "0", *extra],
        r"serving \S+ at (http://\S+)", cwd=ROOT, env=_environment(None),
    )
    return proc, match.group(1), lines


def _environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode().partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("extra", "expected"), [((), "malloc"), (("--allocator", "pymalloc"), "pymalloc")]
)
@pytest.mark.spec("TM-SESS-ALLOCATOR")
async def test_trio_mcp_serve_serves_under_the_allocator_it_chose(
    extra: tuple[str, ...], expected: str
) -> None:
    """`trio-mcp serve` runs under malloc unless told otherwise: the process it was started
    as (same pid) serves, with PYTHONMALLOC=malloc in the environment its interpreter was
    started with, and says which allocator it runs under; `--allocator pymalloc` keeps
    CPython's own, without a restart."""
    proc, url, lines = await trio.to_thread.run_sync(lambda: _serve(*extra))
    try:
        with trio.fail_after(TIMEOUT):
            session = await open_session(url)
            assert await session.result("ping") == {}
        environ = _environ_of(proc.pid)
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    assert environ.get("PYTHONMALLOC") == (expected if expected == "malloc" else None)
    assert any(f"small objects from {expected} (TM-SESS-ALLOCATOR)" in line for line in lines)


@pytest.mark.spec("TM-SESS-ALLOCATOR")
def test_the_command_line_chooses_before_it_imports_trio_or_hypercorn() -> None:
    """What `trio-mcp` loads before it chooses the allocator is loaded twice when it starts
    again: importing the command line loads neither trio nor hypercorn."""
    code = (
        "import sys\n"
        "import trio_mcp.cli._cli\n"
        "print(sorted(m for m in ('trio', 'hypercorn', 'h11') if m in sys.modules))\n"
    )
    assert "[]" == _python(code).stdout.strip()


@pytest.mark.spec("TM-SESS-GC")
def test_the_young_generation_is_collected_less_often_unless_the_program_chose() -> None:
    """use_collector_threshold raises CPython's young threshold (700) to YOUNG_THRESHOLD and
    keeps the older generations' thresholds; a higher threshold of the program's own, or a
    collector it turned off, is kept."""
    code = (
        "import gc\n"
        "from trio_mcp import use_collector_threshold\n"
        "from trio_mcp.base._collector import YOUNG_THRESHOLD\n"
        "assert gc.get_threshold() == (700, 10, 10), gc.get_threshold()\n"
        "assert use_collector_threshold() == YOUNG_THRESHOLD\n"
        "assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)\n"
        "gc.set_threshold(50_000, 10, 10)\n"
        "assert use_collector_threshold() == 50_000 == gc.get_threshold()[0]\n"
        "gc.disable()\n"
        "assert use_collector_threshold() == 0 and not gc.isenabled()\n"
        "print('ok')\n"
    )
    assert "ok" == _python(code).stdout.strip()


@pytest.mark.parametrize(("extra", "expected"), [((), "10000"), (("--gc-threshold", "0"), "700")])
@pytest.mark.spec("TM-SESS-GC")
async def test_trio_mcp_serve_collects_young_objects_at_the_threshold_it_chose(
    extra: tuple[str, ...], expected: str
) -> None:
    """`trio-mcp serve` serves with the young generation collected every 10 000 objects
    and says so; `--gc-threshold 0` keeps the interpreter's (700)."""
    proc, url, lines = await trio.to_thread.run_sync(lambda: _serve(*extra))
    try:
        with trio.fail_after(TIMEOUT):
            session = await open_session(url)
            assert await session.result("ping") == {}
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    assert any(
        f"young objects collected every {expected} (TM-SESS-GC)" in line for line in lines
    )
