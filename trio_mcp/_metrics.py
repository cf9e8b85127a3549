# The runtime's counters in the Prometheus text format (TM-BP-COUNTERS), for the stats port's
# /metrics. prometheus-client writes the format (and its parser reads it back in the tests):
# a collector reads Runtime.statistics() at each scrape, so serving requests costs nothing.
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ._trio._reqstats import LATENCY_BUCKETS, RequestMetrics

__all__ = ["CONTENT_TYPE", "GAUGES", "MetricsExporter"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PREFIX: Final = "trio_mcp_"

#: The statistics that are levels now (they go down as well as up); every other one counts
#: events since the server started, and is exported as a counter (``..._total``).
GAUGES: Final = frozenset(
    {
        "sessions_open",
        "streams_open",
        "requests_inflight",
        "events_retained",
        "bytes_retained",
        "bytes_of_bodies_arriving",
        "modern_requests_running",
        "listeners_open",
        "tasks_alive",
        "tasks_running",
        "tasks_result_bytes",
        "long_streams_open",
        "request_memory_held",
        "request_memory_clients",
    }
)


class _StatisticsCollector(Collector):
    def __init__(
        self,
        statistics: Callable[[], Mapping[str, object]],
        requests: RequestMetrics | None,
    ) -> None:
        self._statistics = statistics
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        yield from self._flat()
        if self._requests is not None:
            yield from _requests(self._requests)

    def _flat(self) -> Iterator[Metric]:
        for name, value in self._statistics().items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if name in GAUGES:
                yield GaugeMetricFamily(PREFIX + name, f"trio-mcp: {name} now", value=value)
            else:
                yield CounterMetricFamily(
                    PREFIX + name, f"trio-mcp: {name} since the server started", value=value
                )


def _requests(metrics: RequestMetrics) -> Iterator[Metric]:
    counts = CounterMetricFamily(
        PREFIX + "requests", "trio-mcp: requests by method and outcome",
        labels=["method", "outcome"],
    )
    for (method, outcome), count in sorted(metrics.counts.items(), key=lambda kv: (
            kv[0][0], kv[0][1].value)):
        counts.add_metric([method, outcome.value], count)
    yield counts
    seconds = HistogramMetricFamily(
        PREFIX + "handler_seconds", "trio-mcp: how long request handlers ran, by method",
        labels=["method"],
    )
    for method in sorted(metrics.buckets):
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(
            [*map(str, LATENCY_BUCKETS), "+Inf"], metrics.buckets[method], strict=True
        ):
            running += count
            buckets.append((bound, running))
        seconds.add_metric([method], buckets, sum_value=metrics.seconds[method])
    yield seconds


class MetricsExporter:
    """``statistics()`` (and the requests of ``requests``) in the Prometheus text format,
    read afresh at every ``render()``."""

    def __init__(
        self,
        statistics: Callable[[], Mapping[str, object]],
        requests: RequestMetrics | None = None,
    ) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_StatisticsCollector(statistics, requests))

    def render(self) -> bytes:
        return generate_latest(self._registry)
