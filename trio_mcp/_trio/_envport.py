# What a 2026-07-28 handler's port answers from its request's envelope alone, the same for a
# request on its exchange (ModernExchange) and for one that became a task (TaskRun).
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from ..protocol import JSON
from ..protocol._era import ModernCall

if TYPE_CHECKING:
    from .._config import ServerConfig

__all__ = ["EnvelopePort"]


class EnvelopePort:
    """The port's parts that come from the request's ``_meta`` and the server's settings.
    There is no session in this era, and no stream to close for polling (MT-SSE-6)."""

    def __init__(self, call: ModernCall, config: ServerConfig) -> None:
        self._call = call
        self._request = call.request
        self._envelope = call.envelope
        self._config = config

    def _forget_arguments(self) -> None:
        """The handler is done: keep the request's method and id, not its params, which may
        be megabytes held for a task's whole TTL otherwise (TM-SEC-MEMORY)."""
        if self._request.params is not None:
            self._request = attrs.evolve(self._request, params=None)
            self._call = attrs.evolve(self._call, request=self._request)

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def protocol_version(self) -> str:
        return self._envelope.version

    @property
    def client_info(self) -> Mapping[str, JSON]:
        return self._envelope.client_info or {}

    @property
    def client_capabilities(self) -> Mapping[str, JSON]:
        # TK-INPUT: a task's questions are bounded by its creating request's capabilities.
        return self._envelope.client_capabilities

    @property
    def client_request_timeout(self) -> float:
        return self._config.client_request_timeout

    @property
    def page_size(self) -> int:
        return self._config.page_size

    def close_stream(self) -> bool:
        # MT-SSE-6: a modern stream cannot be resumed, so it is never closed for polling.
        return False
