# Whether a runtime reports to OpenTelemetry (TM-OTEL-OFF): decided once per runtime, and
# OpenTelemetry imported only when it is on (_otelspans is the one module that imports it).
from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..base._config import ServerConfig
    from ._telemetry import Telemetry

__all__ = ["telemetry_for"]


def _disabled_by_environment() -> bool:
    # The SDK's own switch: a deployment that turns OpenTelemetry off turns ours off too.
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def telemetry_for(config: ServerConfig) -> Telemetry | None:
    """The runtime's telemetry: None when it is off, and then nothing of OpenTelemetry has
    been imported (find_spec looks for the package without running it)."""
    if not config.telemetry or _disabled_by_environment():
        return None
    try:
        if importlib.util.find_spec("opentelemetry") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        from ._otelspans import OtelTelemetry
    except ImportError:
        # Part of OpenTelemetry is missing (a namespace package without its API).
        return None
    return OtelTelemetry(config.tracer_provider, config.meter_provider)
