"""What OpenTelemetry costs a `tools/call` (issue 41), in instructions counted by valgrind's
callgrind (a figure the machine's other load does not move), each server measured as
edge_callgrind.py measures (a session warmed by 300 calls, then ``--calls`` echo calls on one
kept connection, JSON responses), in one run:

- ``before``: the tree before telemetry (``--before DIR``, first on PYTHONPATH), if given;
- ``off``: this tree with ``OTEL_SDK_DISABLED=true`` (TM-OTEL-OFF: nothing imported);
- ``api, no provider``: this tree as it runs where ``opentelemetry-api`` is installed (the
  official SDK depends on it) and nothing configures a provider;
- ``sdk, no exporter``: the SDK's tracer and meter providers set, no processor, no reader
  (benchmarks/servers/trio_mcp_otel_bench.py): spans recorded and dropped;
- ``sdk, in-memory exporter``: as above, each span handed to an in-memory exporter.

Ratios are against ``off``.

    python benchmarks/otel_callgrind.py [--before DIR] [--calls 2000]
        [--out benchmarks/results/issue-41-otel/callgrind.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from edge_callgrind import SCRIPT, measure, write_json  # noqa: E402

WITH_SDK = HERE / "servers" / "trio_mcp_otel_bench.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="labels to measure, separated by semicolons (default: all)")
    args = parser.parse_args()
    runs: list[tuple[str, dict[str, str], Path]] = []
    if args.before is not None:
        own = args.before / "benchmarks" / "servers" / SCRIPT.name
        runs.append(("before", {"PYTHONPATH": str(args.before.resolve()),
                                "OTEL_SDK_DISABLED": "true"}, own if own.exists() else SCRIPT))
    runs += [
        ("off", {"OTEL_SDK_DISABLED": "true"}, SCRIPT),
        ("api, no provider", {}, SCRIPT),
        ("sdk, no exporter", {"OTEL_BENCH": "sdk"}, WITH_SDK),
        ("sdk, in-memory exporter", {"OTEL_BENCH": "sdk-memory"}, WITH_SDK),
    ]
    if args.only:
        wanted = set(args.only.split(";"))
        runs = [run for run in runs if run[0] in wanted]
    rows = []
    for label, env, script in runs:
        row = measure(label, env, args.calls, json_response=True, script=script)
        rows.append(row)
        print(f"{label}: {row['per_call']:,.0f} instructions per call", flush=True)
    off = next((r["per_call"] for r in rows if r["contender"] == "off"), rows[0]["per_call"])
    summary = {r["contender"]: {"per_call": r["per_call"], "ratio_to_off": r["per_call"] / off}
               for r in rows}
    write_json(args.out, {"summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
