# How many examples a property test tries. The test run (CI's included) tries the count a
# test names; `pytest --hypothesis-profile=thorough` tries ten times as many, as does every
# property test that names no count (Hypothesis's 100 become 1,000; tests/conftest.py).
from __future__ import annotations

from hypothesis import settings

__all__ = ["THOROUGH", "examples"]

#: The longer profile's name, and how many times the run's examples it tries.
THOROUGH = "thorough"
FACTOR = 10


def examples(n: int) -> int:
    """``n`` in the run's own profile; ``FACTOR`` times ``n`` under the thorough one. Read
    when the test module is imported, which is after the command line chose the profile."""
    return n * FACTOR if settings.default.max_examples >= 100 * FACTOR else n
