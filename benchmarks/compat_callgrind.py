"""Instructions per `tools/call` with trio_mcp.compat's names (issue 40), counted by
valgrind's callgrind on one tree: benchmarks/servers/trio_mcp_bench.py as it is, then
trio_mcp_compat_bench.py with ``echo`` taking the SDK's ``Context`` (the view), then with a
pass-through FastMCP ``Middleware``, each measured as edge_callgrind.py measures (a session
warmed by 300 calls, then ``--calls`` echo calls on one connection, JSON responses).

    python benchmarks/compat_callgrind.py [--calls 2000]
        [--out benchmarks/results/issue-40-compat/compat.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from edge_callgrind import SCRIPT, measure, write_json  # noqa: E402

COMPAT = HERE / "servers" / "trio_mcp_compat_bench.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [
        measure("none", {}, args.calls, json_response=True, script=SCRIPT),
        measure("compat Context", {"COMPAT_BENCH": "context"}, args.calls,
                json_response=True, script=COMPAT),
        measure("compat Middleware", {"COMPAT_BENCH": "middleware"}, args.calls,
                json_response=True, script=COMPAT),
    ]
    base = rows[0]["per_call"]
    for row in rows:
        row["over_none"] = row["per_call"] - base
        print(f"{row['contender']}: {row['per_call']:,.0f} instructions per call "
              f"(+{row['over_none']:,.0f}, {row['per_call'] / base:.4f}x)")
    if args.out:
        write_json(args.out, rows)


if __name__ == "__main__":
    main()
