"""Fixtures shared by every test directory (registered by tests/conftest.py)."""
from __future__ import annotations
