# `trio-mcp serve --workers N`: N worker processes on one port (TM-WORK-PROCESSES). The parent
# binds the port first (with SO_REUSEPORT, never listening on it: it only keeps the port
# while workers come and go), then starts each worker by fork and exec (never a fork of a
# running trio process); each worker listens on a socket of its own on that port, and the
# kernel spreads new connections evenly over the listening ones. The parent only supervises:
# it restarts a worker that died and forwards SIGINT/SIGTERM for a graceful shutdown. It
# shares one secret with the workers (TM-WORK-SECRET).
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

import attrs
import trio

from ..base._config import SECRET_ENV

__all__ = [
    "CANNOT_LOAD", "SECRET_ENV", "ServerNotLoaded", "WorkerExit", "WorkerPool", "child_command",
    "restart_delay", "secret_from_env",
]

logger = logging.getLogger("trio_mcp.workers")

#: A worker that died is started again after this long, doubled for each death in a row
#: up to MAX_BACKOFF, so that a worker that cannot start does not spin.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: A worker that ran this long before dying is not counted as failing in a row.
STEADY_AFTER = 60.0
#: The exit status of a worker that could not load the server (sysexits' EX_CONFIG): every
#: worker would fail the same way, so the pool stops rather than start it again.
CANNOT_LOAD = 78


class ServerNotLoaded(Exception):
    """A worker could not load the server (it said why on stderr): the pool stopped."""


def restart_delay(last: float | None, ran: float) -> float:
    """TM-WORK-PROCESSES: how long to wait before starting again a worker that died after
    running ``ran`` seconds, ``last`` being the wait before it was started (None when it was
    not a restart): FIRST_BACKOFF for the first death in a row, or after a worker that ran
    STEADY_AFTER or more; doubled for each further death in a row, up to MAX_BACKOFF."""
    if last is None or ran >= STEADY_AFTER:
        return FIRST_BACKOFF
    return min(last * 2, MAX_BACKOFF)


def secret_from_env() -> bytes | None:
    """The shared secret ``$TRIO_MCP_SECRET`` names (hex, at least 32 bytes), or None."""
    value = os.environ.get(SECRET_ENV)
    if not value:
        return None
    try:
        secret = bytes.fromhex(value)
    except ValueError:
        raise SystemExit(f"trio-mcp: ${SECRET_ENV} must be hex") from None
    if len(secret) < 32:
        raise SystemExit(f"trio-mcp: ${SECRET_ENV} must hold at least 32 bytes (64 hex digits)")
    return secret


@attrs.frozen
class WorkerExit:
    """How one worker process ended."""

    index: int
    pid: int
    returncode: int
    ran_for: float


@attrs.define
class WorkerPool:
    """Runs ``count`` workers, each ``command`` plus ``--worker-port PORT --worker-index I``;
    restarts those that die until ``run`` is cancelled, then
    stops them all with SIGTERM (their graceful shutdown) and, after ``grace``, SIGKILL."""

    command: Sequence[str]
    port: int
    count: int
    secret: bytes
    grace: float
    exits: list[WorkerExit] = attrs.field(factory=list)
    """Every worker death seen, oldest first (a record for tests and logs)."""
    _pids: dict[int, int] = attrs.field(factory=dict)

    @property
    def pids(self) -> dict[int, int]:
        """The pid of each running worker, by index."""
        return dict(self._pids)

    def _argv(self, index: int) -> list[str]:
        return [*self.command, "--worker-port", str(self.port), "--worker-index", str(index)]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for index in range(self.count):
                nursery.start_soon(self._keep, index)
            task_status.started()

    async def _keep(self, index: int) -> None:
        delay: float | None = None
        env = {**os.environ, SECRET_ENV: self.secret.hex()}
        while True:
            started = trio.current_time()
            process = await trio.lowlevel.open_process(
                self._argv(index), env=env,
                stdin=subprocess.DEVNULL,
            )
            self._pids[index] = process.pid
            try:
                await process.wait()
            except BaseException:
                # Cancelled: the pool is stopping. Ask for a graceful shutdown first.
                with trio.CancelScope(shield=True):
                    await self._stop(process)
                raise
            finally:
                self._pids.pop(index, None)
            ran = trio.current_time() - started
            assert process.returncode is not None
            self.exits.append(WorkerExit(index, process.pid, process.returncode, ran))
            if process.returncode == CANNOT_LOAD:
                raise ServerNotLoaded(f"worker {index} could not load the server")
            logger.warning(
                "worker %d (pid %d) exited with %d after %.1f s; starting it again",
                index, process.pid, process.returncode, ran,
            )
            delay = restart_delay(delay, ran)
            await trio.sleep(delay)

    async def _stop(self, process: trio.Process) -> None:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.grace):
            await process.wait()
        if process.returncode is None:
            logger.warning("worker pid %d ignored SIGTERM for %.0f s: killed", process.pid,
                           self.grace)
            process.kill()
            await process.wait()


def child_command(argv: Sequence[str]) -> list[str]:
    """The command line a worker runs: this one, which it tells from the parent's by the
    ``--worker-port`` the pool adds."""
    return [sys.executable, "-m", "trio_mcp", *argv]
