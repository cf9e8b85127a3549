# Change notifications across workers (spec/workers.md, TM-STORE-NOTIFY). Each worker runs its
# own copy of the application, so a list change or a resource update happens in one worker;
# its clients (legacy sessions' standalone streams, subscriptions/listen streams) may be at
# any worker. The worker where it happened delivers it to its own clients and publishes it
# on the store's control channel; every other worker delivers what it receives to its own,
# and publishes nothing (the store never hands a worker its own messages back).
from __future__ import annotations

import collections
import logging

import trio

from ...protocol import JSON, Notification, dumps
from ...protocol._logtext import LogLimiter
from ...protocol._methods import BROADCASTS
from ._store import Control, ControlBus, ControlKind, StoreUnavailable

__all__ = ["Announcer", "announced"]

logger = logging.getLogger("trio_mcp.store")

#: The most distinct notifications waiting to be published: beyond, new ones are dropped
#: (and logged), as a store that does not keep up would lose them anyway (at most once).
MAX_WAITING = 1024


def announced(control: Control) -> Notification | None:
    """The change notification another worker published; None for anything else, or for
    a payload this code did not write: a method the table does not broadcast is not
    delivered to this worker's clients, whoever wrote it to the store."""
    payload = control.payload
    if control.kind is not ControlKind.NOTIFY or not isinstance(payload, dict):
        return None
    method, params = payload.get("method"), payload.get("params")
    if not isinstance(method, str) or method not in BROADCASTS:
        return None
    if params is not None and not isinstance(params, dict):
        return None
    return Notification(method=method, params=params)


class Announcer:
    """Publishes this worker's change notifications for the other workers: one task, in the
    order they happened, each at most once (TM-STORE-CONTROL)."""

    def __init__(self, store: ControlBus) -> None:
        self._store = store
        #: Waiting to be published, each by its encoding: an identical one already waiting
        #: says the same (a list changed; a resource changed), so it is not queued twice.
        self._waiting: collections.OrderedDict[bytes, Notification] = collections.OrderedDict()
        self._wake = trio.Event()
        self._log = LogLimiter(interval=10.0)
        #: Notifications that never reached the store (queue full, store down, not JSON).
        self.lost = 0

    def add(self, notification: Notification) -> None:
        """Publish ``notification`` soon, without waiting for the store."""
        try:
            key = dumps(notification)
        except (TypeError, ValueError):
            self._lose("a notification that is not JSON")
            return
        if key in self._waiting:
            return
        if len(self._waiting) >= MAX_WAITING:
            self._lose("notifications (too many waiting)")
            return
        self._waiting[key] = notification
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._waiting:
                _, notification = self._waiting.popitem(last=False)
                payload: dict[str, JSON] = {"method": notification.method, "params": None}
                if notification.params is not None:
                    payload["params"] = dict(notification.params)
                try:
                    # Not a session's: every worker delivers it to all of its clients.
                    await self._store.publish(Control(ControlKind.NOTIFY, "", payload))
                except StoreUnavailable:
                    self._lose("notifications (the store is not answering)")
                except (TypeError, ValueError):
                    self._lose("a notification that is not JSON")

    def _lose(self, what: str) -> None:
        self.lost += 1
        tail = self._log.tail("notifications lost")
        if tail is not None:
            logger.warning("%s could not reach the other workers%s", what, tail)
