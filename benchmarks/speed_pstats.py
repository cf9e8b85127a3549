"""Function calls per request, from ``speed_callgrind.py --profile`` (cProfile dumps): the
total, by area (the package's folders, trio, the standard library's json, the rest), and
the functions whose own time is largest, each with its calls per request.

    python benchmarks/speed_pstats.py DIR/trio-mcp-modern-json.prof [...] [--calls 2000]
"""

from __future__ import annotations

import argparse
import collections
import pstats
from pathlib import Path


def area(filename: str) -> str:
    if "/trio_mcp/" in filename:
        rest = filename.split("/trio_mcp/", 1)[1]
        return "trio_mcp/" + (rest.rsplit("/", 1)[0] if "/" in rest else rest)
    for name in ("trio", "jsonschema", "httptools", "h11", "hypercorn", "attr", "json"):
        if f"/{name}/" in filename:
            return name
    return "other" if filename != "~" else "builtins"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    for path in args.files:
        stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
        n = args.calls
        total_calls = sum(v[1] for v in stats.values())
        total_time = sum(v[2] for v in stats.values())
        by_area: collections.Counter[str] = collections.Counter()
        time_area: collections.Counter[str] = collections.Counter()
        for (filename, _, _), (_, nc, tt, _, _) in stats.items():
            by_area[area(filename)] += nc
            time_area[area(filename)] += tt
        print(f"== {path.name}: {total_calls / n:.0f} function calls per request, "
              f"{total_time / n * 1e6:.0f} us profiled")
        for a, c in by_area.most_common():
            print(f"   {a:28} {c / n:7.1f} calls  {time_area[a] / total_time:5.1%} of own time")
        rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[: args.top]
        for (filename, line, name), (_, nc, tt, ct, _) in rows:
            short = filename.split("site-packages/")[-1].split("/speed")[-1]
            print(f"   {tt / total_time:5.1%} self {ct / n * 1e6:7.1f} us cum "
                  f"{nc / n:5.2f}/req  {name} ({short}:{line})")


if __name__ == "__main__":
    main()
