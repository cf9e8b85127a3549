"""Instructions per `tools/call` with and without one pass-through middleware (issue 40),
counted by valgrind's callgrind on one tree (a figure the machine's other load does not move):
benchmarks/servers/trio_mcp_bench.py against trio_mcp_middleware_bench.py, which adds the
middleware, each measured as edge_callgrind.py measures (a session warmed by 300 calls, then
``--calls`` echo calls on one connection).

    python benchmarks/middleware_callgrind.py [--calls 2000]
        [--out benchmarks/results/issue-40-handlers/middleware.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from edge_callgrind import SCRIPT, measure, write_json  # noqa: E402

WITH_MIDDLEWARE = HERE / "servers" / "trio_mcp_middleware_bench.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [
        measure("none", {}, args.calls, json_response=True, script=SCRIPT),
        measure("one middleware", {}, args.calls, json_response=True, script=WITH_MIDDLEWARE),
    ]
    for row in rows:
        print(f"{row['contender']}: {row['per_call']:,.0f} instructions per call")
    summary = {"per_call_cost": rows[1]["per_call"] - rows[0]["per_call"],
               "ratio": rows[1]["per_call"] / rows[0]["per_call"]}
    print(f"one middleware: +{summary['per_call_cost']:,.0f} instructions "
          f"({summary['ratio']:.4f}x)")
    if args.out:
        write_json(args.out, {"summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
