"""The command line (trio-mcp serve, check, tour, diagram) and the worker processes it
starts."""
