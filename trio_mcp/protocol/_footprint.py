# What a request costs the server's memory while it is served (TM-SEC-MEMORY): its body's bytes,
# and what decoding them made. Pure: the runtime charges the figures to its budgets.
from __future__ import annotations

from sys import getsizeof
from typing import Final

from ._jsonrpc import JSON

__all__ = [
    "REQUEST_FOOTPRINT",
    "SMALL_BODY",
    "SMALL_BODY_FACTOR",
    "body_cost",
    "json_footprint",
    "post_cost",
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
    total = 0
    stack: list[object] = [value]
    pop = stack.pop
    extend = stack.extend
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
    return total


def body_cost(body: bytes, decoded: JSON, *, requests: int = 1, limit: float = float("inf")) -> int:
    """What a POST's body costs while it is served: its bytes, what they decoded to, and
    ``REQUEST_FOOTPRINT`` for each of the ``requests`` it starts."""
    size = len(body)
    if size <= SMALL_BODY:
        parsed = SMALL_BODY_FACTOR * size + 256
    else:
        parsed = json_footprint(decoded, limit)
    return size + parsed + REQUEST_FOOTPRINT * requests


def post_cost(body: bytes, decoded: JSON, *, limit: float = float("inf")) -> int:
    """``body_cost`` of a POST, with one ``REQUEST_FOOTPRINT`` for each request in it
    (notifications and responses start no handler)."""
    if isinstance(decoded, dict):
        requests = 1 if "id" in decoded and "method" in decoded else 0
    elif isinstance(decoded, list):
        requests = sum(isinstance(m, dict) and "id" in m and "method" in m for m in decoded)
    else:
        requests = 0
    return body_cost(body, decoded, requests=requests, limit=limit)
