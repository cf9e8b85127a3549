"""SIGUSR1 in a benchmark server: collect garbage and hand free heap back to the OS.

A diagnostic, not a tuning: run.py sends it once the abandoned sessions have expired, and
reports the RSS after it beside the RSS before it. What falls then was free memory the
allocator kept (glibc keeps freed heap pages unless asked, pymalloc keeps arenas that still
hold a live object); what stays is memory the server still holds, or arena fragmentation.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import signal
from types import FrameType


def release_memory(_signum: int = 0, _frame: FrameType | None = None) -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def install() -> None:
    signal.signal(signal.SIGUSR1, release_memory)
