# Root test configuration. Shared fixtures live in tests/support/ (importable as `support`,
# because this directory is on sys.path); the spec-marker plumbing lives here.
from __future__ import annotations

pytest_plugins = ["support.fixtures"]
