# Log levels as MCP logging uses them (spec/utilities.md U-LOG-3, spec/modern.md MU-LOG-3):
# RFC 5424 severities, and which messages a threshold lets through. No I/O.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._errors import ErrorCode, RemoteProtocolError

__all__ = ["DEFAULT_LOG_LEVEL", "LOG_LEVELS", "log_allows", "requested_level"]

#: RFC 5424 severities in ascending order.
LOG_LEVELS: Final = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
)

#: TM-LOG-DEFAULT: until a legacy client sets a level, messages below this one are not sent.
DEFAULT_LOG_LEVEL: Final = "info"

_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def log_allows(level: str, threshold: str | None) -> bool:
    """Whether a message at ``level`` goes out under ``threshold``; None lets nothing out.

    Raises:
        ValueError: for a level that is not one of LOG_LEVELS (the application's mistake).
    """
    rank = _RANK.get(level)
    if rank is None:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    return threshold is not None and rank >= _RANK[threshold]


def requested_level(params: Mapping[str, Any]) -> str:
    """The level a logging/setLevel request asks for.

    Raises:
        RemoteProtocolError: U-LOG-4 (SHOULD): -32602 for a level that is not one of
            LOG_LEVELS.
    """
    level = params.get("level")
    # Any JSON may come: a list or an object is no level (and cannot be looked up).
    if not isinstance(level, str) or level not in _RANK:
        raise RemoteProtocolError(
            f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}.",
            code=ErrorCode.INVALID_PARAMS,
        )
    return str(level)
