# How often CPython's cycle collector runs in a server's process (TM-SESS-GC).
#
# The young generation is collected each time 700 more objects have been made than freed.
# A server with requests in flight always has that many young objects alive, so each
# collection walks them and moves them to the older generations, and the full collections
# that follow walk the whole heap: a fifth of the CPU under load. Let the young generation
# grow further and requests end, freeing their objects, before it is collected.
# Standard library only: the command line calls it before it imports trio.

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "use_collector_threshold"]

#: Objects made and not yet freed before the young generation is collected (CPython: 700).
YOUNG_THRESHOLD = 10_000


def use_collector_threshold(young: int = YOUNG_THRESHOLD) -> int:
    """Have the young generation collected once ``young`` more objects were made than freed,
    unless it already waits longer or the collector is off (a choice of the program's own,
    kept); the older generations' thresholds stay. Returns the threshold now in force
    (0: the collector is off)."""
    current, middle, old = gc.get_threshold()
    if gc.isenabled() and 0 < current < young:
        gc.set_threshold(young, middle, old)
    return gc.get_threshold()[0] if gc.isenabled() else 0
