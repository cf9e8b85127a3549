# The requests a legacy session sends its client (sampling, elicitation, roots, ping), each
# waiting for the client's response: the response may arrive on any POST of the session, at
# this worker or, forwarded, at another (TM-STORE-CONTROL).
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...base._ports import ClientTimeoutError
from ...protocol import (
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Request,
    RequestId,
    Response,
)

if TYPE_CHECKING:
    from .._telemetry import Telemetry

__all__ = ["ClientRequests", "Outbound"]


@attrs.define(eq=False)
class Outbound:
    """A request this server sent to the client, waiting for its response."""

    request_id: int
    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    response: Response | ErrorResponse | None = None


class ClientRequests:
    """A session's requests to its client. Ids start at ``base`` (this worker's:
    SharedStore.outbound_base), so that a client's response names one worker's request;
    ``send`` puts a message on the stream of the request it relates to (Session.send)."""

    def __init__(
        self,
        base: int,
        send: Callable[[Request | Notification, RequestId | None], bool],
        telemetry: Telemetry | None = None,
    ) -> None:
        self._ids = itertools.count(base)
        self._send = send
        #: TM-OTEL-INJECT: puts the trace context in each request's _meta, when on.
        self._telemetry = telemetry
        self.waiting: dict[int, Outbound] = {}

    def __len__(self) -> int:
        return len(self.waiting)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        related: RequestId | None,
        timeout: float,
    ) -> Mapping[str, Any]:
        """Send a request to the client and wait for its result.

        Raises:
            RemoteProtocolError: the client answered with an error, never answered within
                ``timeout``, or the request could not be sent.
        """
        rid = next(self._ids)
        if self._telemetry is not None:
            # TM-OTEL-INJECT: a CLIENT span for it, whose context its _meta carries.
            with self._telemetry.outgoing(method, rid):
                params = self._telemetry.with_context(params)
                return await self._ask(rid, method, params, related, timeout)
        return await self._ask(rid, method, params, related, timeout)

    async def _ask(
        self, rid: int, method: str, params: Mapping[str, Any] | None,
        related: RequestId | None, timeout: float,
    ) -> Mapping[str, Any]:
        out = Outbound(request_id=rid, method=method)
        self.waiting[rid] = out
        try:
            if not self._send(Request(id=rid, method=method, params=params), related):
                raise RemoteProtocolError(
                    f"Cannot send {method}: the request has no stream to carry it (JSON "
                    "response mode) or the session has ended.",
                    code=ErrorCode.INTERNAL_ERROR,
                )
            with trio.move_on_after(timeout if math.isfinite(timeout) else math.inf):
                await out.done.wait()
            if out.response is None:
                if not out.done.is_set():
                    # L-TIME-2 (SHOULD): on timeout, cancel the request and stop waiting.
                    self._send(
                        Notification(
                            method="notifications/cancelled",
                            params={"requestId": rid, "reason": "timed out"},
                        ),
                        related,
                    )
                    raise ClientTimeoutError(
                        f"The client did not answer {method} within {timeout:g} s.",
                        code=ErrorCode.INTERNAL_ERROR,
                    )
                raise RemoteProtocolError(
                    f"The session ended before the client answered {method}.",
                    code=ErrorCode.INTERNAL_ERROR,
                )
            if isinstance(out.response, ErrorResponse):
                raise RemoteProtocolError(
                    f"The client answered {method} with an error: {out.response.message}",
                    code=out.response.code,
                    data=out.response.data,
                )
            return out.response.result
        finally:
            self.waiting.pop(rid, None)

    def answer(self, message: Response | ErrorResponse) -> bool:
        """The client's response to one of these requests; False when it answers none of
        them (it may answer another worker's)."""
        rid = message.id
        out = self.waiting.pop(rid, None) if isinstance(rid, int) else None
        if out is None:
            return False
        out.response = message
        out.done.set()
        return True

    def release(self) -> None:
        """The session ends: every request waiting stops waiting, unanswered."""
        for out in self.waiting.values():
            out.done.set()
