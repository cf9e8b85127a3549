# Handing the memory of ended sessions back to the operating system (TM-SESS-RELEASE).
#
# Why it is needed: a session's log is freed when the session ends, but CPython gives most
# of it to the C allocator, not to the kernel, and some of it is reached only through
# reference cycles (tasks, their frames, their exceptions) that wait for the cycle
# collector. A server whose abandoned sessions expired kept its peak resident size:
# 158 MiB after 200 sessions had ended, against 33 MiB before them (glibc, measured).
from __future__ import annotations

import ctypes
import gc
import logging
import sys
from collections.abc import Callable

__all__ = ["LARGE_BLOCK", "MemoryReleaser"]

logger = logging.getLogger("trio_mcp.memory")

#: Blocks of this size or more are mapped on their own, and unmapped when freed.
LARGE_BLOCK = 1024 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def _fix_mmap_threshold() -> bool:
    """Have glibc map every block of ``LARGE_BLOCK`` or more on its own, for good.

    glibc raises its mapping threshold to the size of each mapped block freed (up to 32
    MiB), so after the first 4 MB body was freed the next ones came from the heap, and the
    holes they left between live objects stayed resident: a client's refused and finished
    4 MB bodies kept the process 14 MiB above what its requests held. A fixed threshold
    turns that adjustment off. False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK))


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where there is none (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class MemoryReleaser:
    """Counts what ended sessions held, and once that passes ``threshold`` bytes (or a
    sixteenth of it, when sessions have stopped ending), runs the cycle collector and trims
    the C heap.

    It runs from the session table's expiry loop, so at most once a loop period: a server whose
    sessions end all the time pays one collection per period, not one per session.
    """

    def __init__(self, threshold: int | None) -> None:
        self.threshold = threshold
        self.pending = 0
        self.releases = 0
        self._recent = False
        self._trim: Callable[[int], int] | None = None
        self._looked = False
        #: Whether large blocks are mapped on their own (glibc only; not when releasing is off).
        self.large_blocks_mapped = threshold is not None and _fix_mmap_threshold()

    def freed(self, nbytes: int) -> None:
        """A session that held ``nbytes`` has ended."""
        self.pending += nbytes
        self._recent = True

    def due(self) -> bool:
        """At the threshold; or at a sixteenth of it once sessions stopped ending (no
        ``freed`` since the last ``maybe_release``), so that the end of a wave of expiries
        is released too, not left below the threshold until the next wave."""
        if self.threshold is None:
            return False
        return self.pending >= self.threshold or (
            not self._recent and self.pending >= max(1, self.threshold // 16)
        )

    def release(self) -> None:
        """Collect cycles and give the C allocator's free pages back, now."""
        self.pending = 0
        self.releases += 1
        found = gc.collect()
        if not self._looked:
            self._looked = True
            self._trim = _find_malloc_trim()
        if self._trim is not None:
            self._trim(0)
        logger.debug("memory released: %d objects in cycles collected", found)

    def maybe_release(self) -> bool:
        """Release if due; either way, the sessions freed so far are no longer recent."""
        due = self.due()
        self._recent = False
        if due:
            self.release()
        return due
