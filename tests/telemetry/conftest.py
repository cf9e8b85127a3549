"""The telemetry tests give their servers providers of their own (TM-OTEL-PROVIDERS): after
each, the process's global OpenTelemetry providers are still the API's own, which record
nothing, so that no later test in this process, nor any server it starts, pays for spans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider


def no_global_provider() -> bool:
    """Whether neither global provider is the SDK's (the API's proxies until one is set)."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and not isinstance(
        metrics.get_meter_provider(), MeterProvider
    ) and not isinstance(trace.get_tracer_provider(), TracerProvider)


@pytest.fixture(autouse=True)
def _no_global_provider_left() -> Iterator[None]:
    """Fails a telemetry test that leaves a global provider set in the test process."""
    yield
    assert no_global_provider(), "a telemetry test set a global OpenTelemetry provider"
