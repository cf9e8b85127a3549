"""A benchmark server (benchmarks/servers/trio_mcp_bench.py, same arguments) that profiles
itself with cProfile between two signals: SIGRTMIN starts the profile, SIGRTMIN+1 writes it
to the file ``SPEED_PROFILE_OUT`` names. ``speed_callgrind.py --profile`` drives it: the
calls per request of each function are exact, whatever the machine's load.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent / "servers"))

import trio_mcp_bench

profile = cProfile.Profile()


def start(signum: int, frame: FrameType | None) -> None:
    profile.enable()


def stop(signum: int, frame: FrameType | None) -> None:
    profile.disable()
    profile.dump_stats(os.environ["SPEED_PROFILE_OUT"])


signal.signal(signal.SIGRTMIN, start)
signal.signal(signal.SIGRTMIN + 1, stop)

if __name__ == "__main__":
    sys.exit(trio_mcp_bench.main())
