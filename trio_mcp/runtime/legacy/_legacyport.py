# A legacy session as its handlers and hooks see it (trio_mcp.base._ports.SessionPort and
# RequestPort): what they send goes on the session's streams, what they ask of the client goes
# as requests on the stream of the request that asks (or the standalone stream, outside any).
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...base._ports import ClientCapabilityError
from ...protocol import JSON, LocalProtocolError, Notification, Phase, RequestId
from ...protocol._auth import Principal
from ...protocol._logging import DEFAULT_LOG_LEVEL
from ...protocol._methods import REQUEST_CLASS, MessageClass
from ...protocol._mrtr import InputRequest, check_legacy_answer

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ._handlers import InFlight

__all__ = ["LegacySession", "RequestPort", "SessionPort"]


class LegacySession(Protocol):
    """What a port needs of its session (trio_mcp.runtime.legacy._session.Session)."""

    @property
    def id(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def phase(self) -> Phase: ...

    @property
    def client_info(self) -> Mapping[str, Any]: ...

    @property
    def client_capabilities(self) -> Mapping[str, Any]: ...

    @property
    def log_level(self) -> str | None: ...

    def send(self, message: Notification, related: RequestId | None = None) -> bool: ...

    async def send_paced(
        self, message: Notification, *, related: RequestId | None = None
    ) -> bool: ...

    async def request(
        self, method: str, params: Mapping[str, Any] | None, *, related: RequestId | None,
        timeout: float,
    ) -> Mapping[str, Any]: ...

    def holds(self, flight: InFlight) -> bool:
        """Whether ``flight`` is still in flight in this session."""

    def close_stream_connection(self, stream: int) -> bool: ...


class SessionPort:
    """A legacy session as a handler or hook outside any request sees it: messages go on
    the session's standalone stream (T-GET-4, T-GET-5). Implements
    trio_mcp.base._ports.SessionPort."""

    def __init__(self, session: LegacySession) -> None:
        self._session = session

    @property
    def session_id(self) -> str | None:
        return self._session.id

    @property
    def protocol_version(self) -> str:
        return self._session.version

    @property
    def client_info(self) -> Mapping[str, JSON]:
        return self._session.client_info

    @property
    def client_capabilities(self) -> Mapping[str, JSON]:
        return self._session.client_capabilities

    @property
    def log_threshold(self) -> str | None:
        # TM-LOG-DEFAULT: "info" until the client sets a level.
        return self._session.log_level or DEFAULT_LOG_LEVEL

    @property
    def client_request_timeout(self) -> float:
        return self._session.config.client_request_timeout

    @property
    def _related(self) -> RequestId | None:
        return None

    async def notify(self, notification: Notification) -> bool:
        # Paced: waits (bounded) while this stream's reader lags far behind (TM-BP-PRODUCER).
        return await self._session.send_paced(notification, related=self._related)

    def notify_now(self, notification: Notification) -> bool:
        return self._session.send(notification, self._related)

    async def request(
        self, method: str, params: Mapping[str, JSON] | None, *, timeout: float
    ) -> Mapping[str, JSON]:
        if (
            REQUEST_CLASS.get(method) is not MessageClass.PING
            and self._session.phase is Phase.AWAITING_INITIALIZED
        ):
            # L-INIT-6 (SHOULD NOT): only pings before the client's initialized notification.
            raise LocalProtocolError(
                f"Cannot send {method} before the client sent notifications/initialized."
            )
        return await self._session.request(
            method, params, related=self._related, timeout=timeout
        )

    async def ask(
        self, requests: Mapping[str, InputRequest], *, timeout: float
    ) -> dict[str, Mapping[str, JSON]]:
        """TM-MRTR-LEGACY: each question is a request on the stream, all sent at once."""
        answers: dict[str, Mapping[str, JSON]] = {}

        async def one(key: str, question: InputRequest) -> None:
            result = await self.request(question.method, question.params, timeout=timeout)
            check_legacy_answer(key, question, result)
            answers[key] = result

        if len(requests) == 1:
            [(key, question)] = requests.items()
            await one(key, question)
            return answers
        async with trio.open_nursery() as nursery:
            for key, question in requests.items():
                nursery.start_soon(one, key, question)
        return {key: answers[key] for key in requests}

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError:
        # L-CAP-1: a server bug in a session (the capabilities were negotiated): -32603.
        what = ", ".join(
            f"{name}.{feature}" if isinstance(features, Mapping) and features else name
            for name, features in required.items()
            for feature in (features if isinstance(features, Mapping) and features else [""])
        )
        return ClientCapabilityError(
            f"The client did not declare the {what} capability.",
            data={"missingCapability": what},
        )


class RequestPort(SessionPort):
    """One request of a legacy session: messages go on its own stream (T-PSSE-8).
    Implements trio_mcp.base._ports.RequestPort."""

    def __init__(self, session: LegacySession, flight: InFlight) -> None:
        super().__init__(session)
        self._flight = flight

    @property
    def _related(self) -> RequestId | None:
        return self._flight.request.id

    @property
    def finished(self) -> bool:
        return self._flight.done.is_set() or not self._session.holds(self._flight)

    @property
    def page_size(self) -> int:
        return self._session.config.page_size

    @property
    def principal(self) -> Principal | None:
        return self._flight.principal

    def engine(self, identifier: str) -> Any:
        """None: the runtime's engines (the tasks') serve 2026-07-28 requests alone."""
        return None

    @property
    def peer(self) -> str | None:
        return self._flight.peer

    def close_stream(self) -> bool:
        stream = self._flight.stream
        if stream is None or self.finished:
            return False
        return self._session.close_stream_connection(stream)
