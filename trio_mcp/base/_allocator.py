# Which allocator CPython takes its small objects from (TM-SESS-ALLOCATOR).
#
# CPython's own (pymalloc) returns a 1 MiB arena to the system only when every object in it is
# gone, and after a wave of sessions ends, a few of the running server's objects are enough to
# keep most of the wave's arenas resident. Under PYTHONMALLOC=malloc small objects come from
# the C allocator, whose free pages malloc_trim gives back wherever they lie (TM-SESS-RELEASE).
# The choice is fixed when the interpreter starts, so a program makes it by starting its
# interpreter again, with the same command line, before it does anything else.
# Standard library only: this runs before trio or hypercorn is imported.

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

__all__ = ["ALLOCATORS", "DEFAULT_ALLOCATOR", "Allocator", "running_allocator", "use_allocator"]

Allocator = Literal["malloc", "pymalloc"]
ALLOCATORS: tuple[Allocator, ...] = ("malloc", "pymalloc")
#: What trio-mcp's own command line chooses when neither it nor the environment says.
DEFAULT_ALLOCATOR: Allocator = "malloc"

_log = logging.getLogger("trio_mcp")


def _allocator_of(value: str) -> Allocator | None:
    """The allocator a PYTHONMALLOC value selects ("debug" and "default" are pymalloc in a
    standard build), or None for an unset or unknown value."""
    if value in ("malloc", "malloc_debug"):
        return "malloc"
    if value in ("pymalloc", "pymalloc_debug", "default", "debug"):
        return "pymalloc"
    return None


def _named_allocator() -> Allocator | None:
    """The allocator PYTHONMALLOC names, as CPython read it at start (not under ``-E`` or
    ``-I``), or None."""
    if sys.flags.ignore_environment:
        return None
    return _allocator_of(os.environ.get("PYTHONMALLOC", ""))


def running_allocator() -> Allocator:
    """The allocator this interpreter was started with; CPython's default is pymalloc."""
    return _named_allocator() or "pymalloc"


def _restart_command() -> list[str] | None:
    """This process's command line, interpreter options included, if it can be run again
    as it was; None when it cannot (a frozen program, no interpreter path, or an
    interpreter that would not read the environment variable)."""
    orig = list(getattr(sys, "orig_argv", ()))
    if (
        os.name != "posix"  # os.exec* starts a new process elsewhere: the pid would change
        or getattr(sys, "frozen", False)
        or not sys.executable
        or len(orig) < 2
        or sys.flags.ignore_environment
    ):
        return None
    return orig


def use_allocator(choice: Allocator | None = None) -> Allocator:
    """Make this process run under ``choice`` of CPython's allocators, starting the
    interpreter again (same pid, same command line, PYTHONMALLOC set) if it runs under the
    other one. Call it first thing in a program that serves trio-mcp, before it opens a
    socket or starts a thread: whatever the process did before is done again.

    ``None`` keeps an allocator the environment names (PYTHONMALLOC: the deployment's
    choice) and otherwise chooses :data:`DEFAULT_ALLOCATOR`. Returns the allocator the
    process runs under; when it cannot start again (see ``_restart_command``), that is the
    current one, and a warning says so."""
    current = running_allocator()
    choice = choice or _named_allocator() or DEFAULT_ALLOCATOR
    if choice == current:
        return current
    command = _restart_command()
    if command is None:
        _log.warning(
            "cannot restart the interpreter under PYTHONMALLOC=%s; running under %s "
            "(TM-SESS-ALLOCATOR)", choice, current,
        )
        return current
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execve(sys.executable, command, {**os.environ, "PYTHONMALLOC": choice})
    raise AssertionError("unreachable: os.execve returned")  # pragma: no cover
