# subscriptions/listen (2026-07-28, spec/modern.md MU-SUB-*): a modern client's stream of
# the change notifications it asked for. A listener is a filter and an EventStream: nothing
# is kept for it beyond a few events its writer has no room for yet, and a reader that falls
# behind is cut and reconnects (MU-SUB-5), as a stalled legacy reader is told to resume.
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ...base._ports import App
from ...protocol import JSON, Notification, Response, dumps
from ...protocol._era import ModernCall
from ...protocol._fair import Unit
from ...protocol._footprint import json_footprint
from ...protocol._modern import (
    META_SUBSCRIPTION_ID,
    ListenFilter,
    complete_result,
    stamp_subscription,
)
from ...protocol._sse import encode_message_event
from ...protocol._versions import Era
from .._memory import MemoryReleaser
from .._pools import Charge, Pool, pool_busy
from ..backpressure._responder import Responder, watching_disconnect
from ._stream import EventStream

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ._exchange import ModernStats

__all__ = ["LISTEN_FOOTPRINT", "Listener", "Listeners"]

#: What an open listen stream holds besides its filter: the Listener, its EventStream and
#: writer, their tasks and scopes, and what the HTTP server keeps of its connection. Told to
#: the memory release when the stream ends (TM-SESS-RELEASE), as a session's footprint is.
LISTEN_FOOTPRINT = 16 * 1024


class Listener:
    """One open subscriptions/listen stream."""

    def __init__(
        self, call: ModernCall, filter: ListenFilter, stream: EventStream, scope: trio.CancelScope
    ) -> None:
        self.subscription_id = call.request.id
        self.filter = filter
        self.stream = stream
        #: Set to end the subscription with a result (server shutdown, MU-SUB-4).
        self.ending = trio.Event()
        self._scope = scope
        self.evicted = False

    def evict(self) -> None:
        """TM-SEC-FAIR: a full streams pool takes this stream for another client's: it is
        closed without a result, which tells its client to reconnect (MU-SUB-5)."""
        self.evicted = True
        self._scope.cancel()

    def offer(self, method: str, params: Mapping[str, JSON] | None) -> bool:
        """Send the notification if the filter takes it (MU-SUB-1); whether it went out."""
        if not self.filter.wants(method, params):
            return False
        # MU-SUB-3 (MUST): every notification on the stream names its subscription.
        stamped = Notification(
            method=method, params=stamp_subscription(params, self.subscription_id)
        )
        return self.stream.offer(encode_message_event(data=dumps(stamped)))


class Listeners:
    """The listen streams of one runtime."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        spawn: Callable[..., bool],
        stats: ModernStats,
        streams: Pool[Any] | None = None,
        releaser: MemoryReleaser | None = None,
    ) -> None:
        self.app = app
        #: TM-SESS-RELEASE: told of each listen stream that ended.
        self._releaser = releaser
        self.config = config
        self._spawn = spawn
        self._stats = stats
        self.live: set[Listener] = set()
        #: TM-SEC-FAIR: the runtime's long-lived streams, which listen streams take a slot of.
        self.streams: Pool[Any] = streams if streams is not None else Pool(
            "streams", config.max_streams, evict=lambda stream: stream.evict()
        )

    def broadcast(self, method: str, params: Mapping[str, JSON] | None) -> int:
        return sum(listener.offer(method, params) for listener in list(self.live))

    def end_all(self) -> None:
        """Shutdown: every subscription ends with its result (MU-SUB-4)."""
        for listener in list(self.live):
            listener.ending.set()

    def offer_task(self, params: Mapping[str, JSON]) -> int:
        """TK-NOTIFY: a task's new state, to the listeners that follow it."""
        return self.broadcast("notifications/tasks", params)

    async def serve(
        self,
        call: ModernCall,
        responder: Responder,
        *,
        accept_task: Callable[[str], bool] | None = None,
        unit: Unit | None = None,
        charge: Charge | None = None,
    ) -> None:
        """Serve one listen request until its client leaves, its reader is cut, or the server
        shuts down (raises RemoteProtocolError for a malformed filter); ``accept_task`` says
        which task ids its client may follow (None: it did not declare the extension). The
        stream takes a slot of the streams for ``unit``; its filter is charged to
        ``charge`` for as long as it is open (TM-SEC-MEMORY)."""
        request = call.request
        filter = ListenFilter.parse(
            request,
            self.app.capabilities(Era.MODERN),
            max_resources=self.config.max_listen_resources,
            max_uri_bytes=self.config.max_uri_bytes,
            accept_task=accept_task,
        )
        if charge is not None:
            # The filter's sets, and its acknowledgement (kept, then written), beside what
            # the request's body decoded to.
            charge.grow(
                sys.getsizeof(filter.resources) + sys.getsizeof(filter.task_ids)
                + 2 * json_footprint(filter.acknowledged),
                request.id,
            )
        key = (unit or Unit("ip:unknown")).key
        if not self.streams.admit(key):
            # TM-SEC-FAIR: every long-lived stream is in use, and this client holds its share.
            raise pool_busy("streams", request_id=request.id)
        scope = trio.CancelScope()

        def cut() -> None:
            self._stats.streams_cut += 1
            scope.cancel()

        stream = EventStream(
            responder, self.config, spawn=self._spawn, on_cut=cut, charge=charge
        )
        listener = Listener(call, filter, stream, scope)
        # In the pool before anything waits: a slot admitted is a slot taken.
        self.streams.add(key, listener)
        try:
            # MU-SUB-6: a listen request is always answered with a stream.
            if not await stream.open():
                return
            # MU-SUB-2 (MUST): first, which of the asked-for notifications will come.
            ack = Notification(
                method="notifications/subscriptions/acknowledged",
                params=stamp_subscription({"notifications": dict(filter.acknowledged)},
                                          request.id),
            )
            stream.offer(encode_message_event(data=dumps(ack)))
            self.live.add(listener)
            try:
                with scope:
                    async with watching_disconnect(responder, scope.cancel):
                        await listener.ending.wait()
            finally:
                self.live.discard(listener)
        finally:
            self.streams.discard(listener)
            if self._releaser is not None:
                self._releaser.freed(LISTEN_FOOTPRINT)
        if scope.cancelled_caught or stream.closed:
            # The client left, or was cut: MU-SUB-5, a close without a result means
            # reconnect.
            stream.close()
            return
        # MU-SUB-4 (SHOULD): a graceful end is the listen request's result.
        result = complete_result(
            request.method,
            {"_meta": {META_SUBSCRIPTION_ID: request.id}},
            server_info=self.app.server_info(),
            cache=None,
        )
        await stream.finish(
            encode_message_event(data=dumps(Response(id=request.id, result=result)))
        )
