"""``python -m trio_mcp`` is ``trio-mcp``; with no arguments it serves the demo server."""

import sys

from .cli._cli import main

main(sys.argv[1:] or ["serve"], own_command_line=True)
