"""Which live objects keep CPython's small-object arenas from going back to the system.

A diagnostic for benchmark servers: ``trio_mcp_bench.py`` appends ``census()`` as a JSON line to
the file ``TRIO_MCP_ARENA_CENSUS`` names, and ``scopes()`` to that name plus ``.scopes``, on
SIGUSR2.
pymalloc returns a 1 MiB arena only once every block in it is free, so after a load a few
survivors can hold many arenas. This walks every object the collector knows and what they
refer to, reads the header of the 16 KiB pool each lies in (CPython 3.11's ``pool_header``:
allocated-block count, arena index, size class), and writes, per arena, how many blocks are
allocated and which of the found objects lie there. Arenas with few blocks and many pools are
the pinned ones; their objects' types and referrers say who made them.

Only for diagnosis: it reads process memory through ctypes, guarded by /proc/self/maps.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import struct
import sys
import tracemalloc
from typing import Any

POOL = 16 * 1024
ARENA = 1024 * 1024
#: ref.count (as 8 bytes), freeblock, nextpool, prevpool, arenaindex, szidx, nextoffset,
#: maxnextoffset.
HEADER = struct.Struct("=QQQQIIII")


def _readable() -> list[tuple[int, int]]:
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            addresses, perms = line.split()[:2]
            if perms.startswith("r"):
                lo, hi = (int(a, 16) for a in addresses.split("-"))
                spans.append((lo, hi))
    return spans


def _header(pool: int, spans: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    if not any(lo <= pool and pool + HEADER.size <= hi for lo, hi in spans):
        return None
    count, _f, _n, _p, arena, szidx, offset, most = HEADER.unpack(
        ctypes.string_at(pool, HEADER.size)
    )
    # A pool carved by pymalloc says so: its last block's offset follows from its size class.
    if szidx >= 32 or most != POOL - (szidx + 1) * 16 or offset % 16 or count > POOL // 16:
        return None
    return count, arena, szidx


def census(limit: int = 40) -> dict[str, Any]:
    gc.collect()
    spans = _readable()
    seen: dict[int, Any] = {}
    for obj in gc.get_objects():
        seen[id(obj)] = obj
        for ref in gc.get_referents(obj):
            seen.setdefault(id(ref), ref)
    by_arena: dict[int, dict[str, Any]] = {}
    headers: dict[int, tuple[int, int, int] | None] = {}
    for address, obj in seen.items():
        try:
            size = sys.getsizeof(obj)
        except Exception:
            continue
        if size > 512:
            continue
        pool = address & ~(POOL - 1)
        if pool not in headers:
            headers[pool] = _header(pool, spans)
        header = headers[pool]
        if header is None:
            continue
        _count, arena, _szidx = header
        entry = by_arena.setdefault(arena, {"pools": set(), "objects": []})
        entry["pools"].add(pool)
        entry["objects"].append(obj)
    arenas = []
    for index, entry in by_arena.items():
        # Walk the arena's pools from those seen: same arena index, within 1 MiB.
        pools: dict[int, int] = {}
        for start in sorted(entry["pools"]):
            for step in (POOL, -POOL):
                pool = start
                for _ in range(ARENA // POOL):
                    if pool not in headers:
                        headers[pool] = _header(pool, spans)
                    header = headers[pool]
                    if header is None or header[1] != index:
                        break
                    pools[pool] = header[0]
                    pool += step
        blocks = sum(pools.values())
        types = collections.Counter(type(o).__qualname__ for o in entry["objects"])
        samples = []
        for obj in entry["objects"][:6]:
            holders = [
                type(h).__qualname__
                for h in gc.get_referrers(obj)
                if h is not seen and h is not entry["objects"]
            ][:4]
            sample = {"type": type(obj).__qualname__, "repr": repr(obj)[:120], "held_by": holders}
            if tracemalloc.is_tracing():
                made = tracemalloc.get_object_traceback(obj)
                if made is not None:
                    sample["made_at"] = [f"{f.filename}:{f.lineno}" for f in made][-6:]
            samples.append(sample)
        arenas.append({
            "arena": index,
            "pools_in_use": sum(1 for c in pools.values() if c),
            "blocks": blocks,
            "objects_found": len(entry["objects"]),
            "types": types.most_common(8),
            "samples": samples,
        })
    arenas.sort(key=lambda a: a["blocks"])
    return {"arenas": len(arenas), "sparsest": arenas[:limit]}


def scopes() -> dict[str, Any]:
    """The cancel scopes alive, grouped by where they were made (the innermost frames, when
    PYTHONTRACEMALLOC is set), with how far ahead their deadlines lie: trio's deadline heap
    keeps an exited scope until its deadline passes or the heap is pruned."""
    import trio

    now = trio.current_time()
    groups: collections.Counter[str] = collections.Counter()
    ahead: dict[str, list[float]] = collections.defaultdict(list)
    for obj in gc.get_objects():
        if type(obj) is trio.CancelScope:
            where = "?"
            made = tracemalloc.get_object_traceback(obj) if tracemalloc.is_tracing() else None
            if made is not None:
                frames = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in made]
                where = " < ".join(frames[-4:])
            groups[where] += 1
            ahead[where].append(round(obj.deadline - now, 1))
    return {"now": now, "groups": [(w, n, sorted(ahead[w])[:3], sorted(ahead[w])[-3:])
                                   for w, n in groups.most_common(15)]}


def write(_signum: int = 0, _frame: object = None) -> None:
    """Append ``census()`` to $TRIO_MCP_ARENA_CENSUS and ``scopes()`` to that name plus
    ``.scopes`` (a signal handler; nothing without the variable)."""
    path = os.environ.get("TRIO_MCP_ARENA_CENSUS")
    if not path:
        return
    for target, result in ((path, census()), (path + ".scopes", scopes())):
        with open(target, "a") as out:
            out.write(json.dumps(result, default=str) + "\n")
