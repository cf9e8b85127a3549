"""Regenerate the sequence diagrams of spec/ and docs/ from recorded traces.

    .venv/bin/python docs/diagrams.py           # record, write docs/traces/ and docs/diagrams/
    .venv/bin/python docs/diagrams.py --check   # write nothing; exit 1 if any file is stale

Each scenario of tests/support/timelines.py drives a real server over loopback (or, for
the stalled reader, the runtime in memory under trio's MockClock) with a trace recorder
installed (trio_mcp.base._trace); the trace goes to docs/traces/NAME.jsonl and its drawing
(trio_mcp.cli._diagram) to docs/diagrams/NAME.svg.
tests/diagrams/test_diagrams_fresh.py fails when the committed files are stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The scenarios use the test suite's client and fixtures (tests/support).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.timelines import regenerate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if stale")
    args = parser.parse_args()
    changed = regenerate(check=args.check)
    for path in changed:
        print(("stale: " if args.check else "wrote: ") + path)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
