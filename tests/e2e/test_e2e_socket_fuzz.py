# Fuzzing the HTTP edge over sockets (issue 34): Hypothesis-generated and mutated byte streams
# (MCP requests with parts changed, the parser tests' streams, random bytes, cut heads, odd
# framing, pipelines, HTTP/2 prefaces) sent to the MCP endpoint, the stats port and the
# inspector of three server processes at once (trio-mcp's own server with httptools and with
# h11, and hypercorn), each with a neighbour client pinging its own session throughout. The
# invariants: every process stays up, every neighbour is answered, every fuzzed connection
# ends (the client shuts its side; the server answers and closes; only an event stream the
# client asked for runs on) with no 5xx but 501, 503 and 505, and nothing reaches a server's
# log but what hypercorn's isolation caught. A
# bounded run here; benchmarks/fuzz_edge.py runs the same for 100,000 connections and more.
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import wirefuzz
from support.edgefuzz import FuzzServer, fuzz_servers, send, summary
from support.examples import examples

#: Examples in the CI run, each of one to four connections sent at once: about 1,250
#: connections, 20 to 40 s on this shared machine.
EXAMPLES = examples(500)
#: The neighbours' p99 latency allowed while fuzzing: the fuzzer's own process shares the
#: machine's two cores with three servers and the test runner.
NEIGHBOUR_P99 = 1.0


@pytest.fixture(scope="module")
def servers() -> Iterator[list[FuzzServer]]:
    with fuzz_servers() as started:
        yield started


@pytest.mark.slow
@pytest.mark.spec("TM-SEC-ISOLATE", "TM-HTTP-PARSER", "TM-HTTP-EDGE", "TM-HTTP-LINGER")
def test_no_stream_of_bytes_ends_a_server_or_goes_unanswered(servers: list[FuzzServer]) -> None:
    """About 1,250 generated connections, four at a time at most, spread over three
    servers and their three ports each:
    every one ends with its answers and a close, none of them a 5xx but 501, 503 or 505;
    every server process is up afterwards, every neighbour was answered throughout with a
    p99 under a second, and no server logged anything but what hypercorn's isolation
    caught."""

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=st.lists(
        st.tuples(st.integers(0, len(servers) - 1), wirefuzz.fuzz_connection()),
        min_size=1, max_size=4,
    ))
    def one(batch: list[tuple[int, tuple[str, list[bytes]]]]) -> None:
        with ThreadPoolExecutor(len(batch)) as pool:
            outcomes = list(pool.map(
                lambda case: send(servers[case[0]].ports[case[1][0]], case[1][1]), batch
            ))
        for (which, (port, pieces)), outcome in zip(batch, outcomes, strict=True):
            fuzz = servers[which]
            event(f"{fuzz.name} {port}")
            event("answered" if outcome.data else "closed without an answer")
            assert [] == outcome.problems(b"".join(pieces)), (fuzz.name, port, pieces)
            assert fuzz.alive(), (fuzz.name, fuzz.log[-20:])

    one()
    figures = summary(servers)
    for fuzz in servers:
        assert fuzz.alive(), fuzz.name
        assert [] == fuzz.neighbour.failures, (fuzz.name, fuzz.neighbour.failures[:5])
        assert fuzz.neighbour.latencies, fuzz.name
        assert fuzz.neighbour.p99() < NEIGHBOUR_P99, figures
        assert [] == fuzz.unexpected_log(), (fuzz.name, fuzz.unexpected_log()[:40])
