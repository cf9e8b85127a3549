"""benchmarks/servers/trio_mcp_bench.py with OpenTelemetry's SDK configured as an application
would configure it, before the server starts: a TracerProvider and a MeterProvider, as
``OTEL_BENCH`` says:

- ``sdk`` (the default): both providers, with no span processor and no metric reader: every
  request makes a recording span and records its duration, and nothing is exported;
- ``sdk-memory``: as ``sdk``, and a SimpleSpanProcessor into an in-memory exporter cleared
  every 1,000 spans (the cost of handing each span on, without any I/O).

Every other argument is trio_mcp_bench.py's (see benchmarks/otel_callgrind.py).
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _Clearing(SimpleSpanProcessor):
    """Hands each span to an in-memory exporter, emptied now and then (bounded memory)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        super().__init__(self.exporter)
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        super().on_end(span)
        self.count += 1
        if self.count % 1000 == 0:
            self.exporter.clear()


def main() -> None:
    provider = TracerProvider()
    if os.environ.get("OTEL_BENCH", "sdk") == "sdk-memory":
        provider.add_span_processor(_Clearing())
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider())
    runpy.run_path(str(Path(__file__).with_name("trio_mcp_bench.py")), run_name="__main__")


if __name__ == "__main__":
    main()
