# What a request costs the server's memory while it is served (TM-SEC-MEMORY): its body's bytes,
# and what decoding them made. Pure: the runtime charges the figures to its budgets.
from __future__ import annotations

from collections.abc import Generator
from sys import getsizeof
from typing import Final

from ._jsonrpc import JSON

__all__ = [
    "REQUEST_FOOTPRINT",
    "SMALL_BODY",
    "SMALL_BODY_FACTOR",
    "body_cost",
    "body_cost_steps",
    "footprint_steps",
    "json_footprint",
    "post_cost",
    "requests_in",
]

#: Bodies up to this size are charged ``SMALL_BODY_FACTOR`` times their length (plus 256
#: bytes) without a look at what they decoded to: walking a small request's values would cost
#: as much as decoding it, and no JSON text takes more than that bound once decoded (a chain of
#: ``{"":`` takes 233 bytes for each 5 of text; tests/protocol/test_proto_footprint.py).
SMALL_BODY: Final = 2048
SMALL_BODY_FACTOR: Final = 64
#: What one request takes besides its message while its handler runs: the handler's task and
#: frames, its cancel scope, its in-flight record and port (benchmarks/bench_memory.py
#: "requests" measures it).
REQUEST_FOOTPRINT: Final = 6 * 1024


def json_footprint(value: JSON, limit: float = float("inf")) -> int:
    """The bytes a decoded JSON value takes: every container and item, by ``sys.getsizeof``.
    An object referenced twice counts twice, and the shared ones (small integers, ``True``)
    count too, so this is never below what the value holds. The walk stops once the count
    passes ``limit``: a caller that refuses past it needs no more."""
    return _finish(footprint_steps(value, limit))


def footprint_steps(
    value: JSON, limit: float = float("inf"), step: int = 0, first: int = 0
) -> Generator[None, None, int]:
    """``json_footprint`` as a generator that pauses after its ``first`` items (0: ``step``)
    and then after every ``step`` items (0: never), and returns the total: a caller on an
    event loop lets others run between steps (TM-SEC-DECODE)."""
    total = 0
    stack: list[object] = [value]
    pop = stack.pop
    extend = stack.extend
    countdown = first or step
    while stack:
        item = pop()
        total += getsizeof(item)
        kind = type(item)
        if kind is dict:
            extend(item.keys())  # type: ignore[attr-defined]
            extend(item.values())  # type: ignore[attr-defined]
        elif kind is list:
            extend(item)  # type: ignore[arg-type]
        if total > limit:
            break
        countdown -= 1
        if countdown == 0:
            countdown = step
            yield
    return total


def _finish(steps: Generator[None, None, int]) -> int:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: int = done.value
            return result


def body_cost(body: bytes, decoded: JSON, *, requests: int = 1, limit: float = float("inf")) -> int:
    """What a POST's body costs while it is served: its bytes, what they decoded to, and
    ``REQUEST_FOOTPRINT`` for each of the ``requests`` it starts."""
    return _finish(body_cost_steps(body, decoded, requests=requests, limit=limit))


def body_cost_steps(
    body: bytes,
    decoded: JSON,
    *,
    requests: int = 1,
    limit: float = float("inf"),
    step: int = 0,
    first: int = 0,
) -> Generator[None, None, int]:
    """``body_cost``, pausing in its walk as ``footprint_steps`` does."""
    size = len(body)
    if size <= SMALL_BODY:
        parsed = SMALL_BODY_FACTOR * size + 256
    else:
        parsed = yield from footprint_steps(decoded, limit, step, first)
    return size + parsed + REQUEST_FOOTPRINT * requests


def requests_in(decoded: JSON) -> int:
    """How many requests a POST's messages hold: each starts a handler; notifications and
    responses start none."""
    if isinstance(decoded, dict):
        return 1 if "id" in decoded and "method" in decoded else 0
    if isinstance(decoded, list):
        return sum(isinstance(m, dict) and "id" in m and "method" in m for m in decoded)
    return 0


def post_cost(body: bytes, decoded: JSON, *, limit: float = float("inf")) -> int:
    """``body_cost`` of a POST, with one ``REQUEST_FOOTPRINT`` for each request in it."""
    return body_cost(body, decoded, requests=requests_in(decoded), limit=limit)
