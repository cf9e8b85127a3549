# The runtime's counters in the Prometheus text format (TM-BP-COUNTERS), for the stats port's
# /metrics. prometheus-client writes the format (and its parser reads it back in the tests):
# a collector reads Runtime.statistics() at each scrape, so serving requests costs nothing.
# Whether a figure is a gauge or a counter is what its record's field declares
# (trio_mcp.runtime._stats): a new gauge cannot be exported as a counter by mistake.
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from attrs import AttrsInstance
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ...runtime._reqstats import LATENCY_BUCKETS, RequestMetrics
from ...runtime._stats import Kind, figures

__all__ = ["CONTENT_TYPE", "MetricsExporter"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PREFIX: Final = "trio_mcp_"

class _StatisticsCollector(Collector):
    def __init__(
        self,
        statistics: Callable[[], AttrsInstance],
        requests: RequestMetrics | None,
    ) -> None:
        self._statistics = statistics
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        yield from self._flat()
        if self._requests is not None:
            yield from _requests(self._requests)

    def _flat(self) -> Iterator[Metric]:
        for name, value, kind in figures(self._statistics()):
            if kind is Kind.GAUGE:
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
    """``statistics()`` (a statistics record, trio_mcp.runtime._stats) and the requests of
    ``requests`` in the Prometheus text format, read afresh at every ``render()``."""

    def __init__(
        self,
        statistics: Callable[[], AttrsInstance],
        requests: RequestMetrics | None = None,
    ) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_StatisticsCollector(statistics, requests))

    def render(self) -> bytes:
        return generate_latest(self._registry)
