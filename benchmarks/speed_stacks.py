"""Where the time of py-spy's raw (collapsed) stacks goes: each function's share of the
samples, inclusive (on the stack) and self (at its top), for a server profiled by
``speed_callgrind.py --rps S --pyspy DIR``.

    python benchmarks/speed_stacks.py DIR/trio-mcp-modern-json-0.txt [--top 40] [--match trio_mcp]
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="", help="only functions whose frame has this")
    args = parser.parse_args()
    for path in args.files:
        inclusive: collections.Counter[str] = collections.Counter()
        own: collections.Counter[str] = collections.Counter()
        total = 0
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            n = int(count)
            # py-spy's raw frames: "function (path/to/file.py:line)"; the line is dropped.
            frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
            if frames and frames[0].startswith("process "):
                frames = frames[1:]
            total += n
            for f in set(frames):
                inclusive[f] += n
            if frames:
                own[frames[-1]] += n
        print(f"== {path} ({total} samples)")
        rows = [(f, c) for f, c in inclusive.most_common() if args.match in f][: args.top]
        for f, c in rows:
            print(f"{100 * c / total:5.1f}% incl {100 * own[f] / total:5.1f}% self  {f}")


if __name__ == "__main__":
    main()
