"""What a request is charged (TM-SEC-MEMORY) is never below what decoding its body made: the
flat price of a small body bounds any JSON text of its size, and a large one is walked."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.examples import examples

from trio_mcp.protocol._footprint import (
    REQUEST_FOOTPRINT,
    SMALL_BODY,
    SMALL_BODY_FACTOR,
    body_cost,
    json_footprint,
)

_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=12),
    max_leaves=200,
)


def _decoded_size(body: bytes) -> tuple[Any, int]:
    """The value ``body`` decodes to, and the bytes tracemalloc saw decoding it keep."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = json.loads(body)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return value, kept


@pytest.mark.spec("TM-SEC-MEMORY")
@settings(max_examples=examples(300), deadline=None)
@given(value=_json)
# The densest JSON text known: a chain of {"": (233 bytes decoded for each 5 of text).
@example(value=json.loads('{"":' * 300 + "0" + "}" * 300))
@example(value=[[[[[[[[[[[]]]]]]]]]]])
@example(value=[{}] * 400)
def test_no_small_body_decodes_to_more_than_its_flat_price(value: Any) -> None:
    """Any JSON text of up to SMALL_BODY bytes decodes to no more than 64 times its length
    plus 256 bytes, by the same count the large bodies are walked with."""
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > SMALL_BODY:
        return
    assert json_footprint(json.loads(body)) <= SMALL_BODY_FACTOR * len(body) + 256


@pytest.mark.spec("TM-SEC-MEMORY")
@pytest.mark.parametrize(
    "body",
    [
        b"[" + b",".join([b"{}"] * 20_000) + b"]",
        json.dumps({"a": "x" * 1_000_000}).encode(),
        json.dumps(["\U0001f600" + "a" * 100] * 2000).encode(),
        json.dumps([[i, str(i) * 3, i * 0.5] for i in range(5000)]).encode(),
        json.dumps({f"k{i}": i for i in range(5000)}).encode(),
        b'{"":' * 400 + b"0" + b"}" * 400,
        json.dumps({"x": 1}).encode(),
    ],
    ids=["empty-objects", "megabyte-string", "astral-strings", "rows", "wide-object",
         "deep-chain", "tiny"],
)
def test_a_body_is_charged_at_least_what_decoding_it_keeps(body: bytes) -> None:
    """The charge of a body covers its bytes plus what tracemalloc sees its decoded value
    hold (with a request's footprint of slack for the decoder's own few hundred bytes)."""
    value, kept = _decoded_size(body)

    cost = body_cost(body, value, requests=1)

    assert cost >= len(body) + kept, (cost, len(body), kept)
    assert cost - REQUEST_FOOTPRINT <= 2 * len(body) + 2 * kept + 256 * 1024, "far too dear"


@pytest.mark.spec("TM-SEC-MEMORY")
def test_the_walk_stops_once_past_its_limit() -> None:
    """A walk told a limit stops soon after passing it: a body that would be refused anyway
    is not walked to its end."""
    value = [{} for _ in range(100_000)]

    stopped = json_footprint(value, limit=1_000_000)

    assert 1_000_000 < stopped < 1_001_000
    assert json_footprint(value) > 6_000_000
