# What a legacy session does with its client's notifications. notifications/cancelled cancels
# the request it names (U-CANCEL-4), or, when that request runs at another worker, goes there
# (TM-STORE-CONTROL). Any other runs the App's hook for it (notifications/roots/list_changed,
# say), and hooks are bounded (TM-SEC-NOTIFY): a client's notifications cost the session one
# task and a bounded queue, however many it sends. The hooks run one at a time, in order; one
# identical to a notification still waiting is merged into it (a list changed twice is fetched
# once), and past ``max_pending_notifications`` waiting, or their bytes past a sixteenth of
# the session's window, the newest is dropped and counted.
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...base._ports import App, NotificationHandler, SessionPort
from ...protocol import Notification, RequestId
from ...protocol._logtext import LogLimiter, printable

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from .._telemetry import Telemetry

__all__ = ["ClientNotifications"]

logger = logging.getLogger("trio_mcp.session")


class ClientNotifications:
    """What session ``session_id`` does with its client's notifications: ``cancel`` a
    request if it runs here (else ``elsewhere``, for the worker that runs it), or queue the
    App's hook; the notifications waiting for their hooks are kept by key (method and params
    as JSON), in arrival order."""

    def __init__(
        self,
        session_id: str,
        config: ServerConfig,
        app: App,
        *,
        cancel: Callable[[RequestId], bool | None],
        elsewhere: Callable[[RequestId], None],
        spawn: Callable[..., bool],
        port: Callable[[], SessionPort],
        dropped_log: LogLimiter,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._session_id = session_id
        self._config = config
        self._app = app
        #: Cancels a request in flight here: True; False for an initialize; None when no
        #: such request runs here.
        self._cancel = cancel
        self._elsewhere = elsewhere
        self._spawn = spawn
        self._port = port
        #: TM-SEC-LOG: one line per interval for notifications dropped, whichever session
        #: dropped them.
        self._dropped_log = dropped_log
        #: OpenTelemetry, when it is on: each notification is a span (TM-OTEL-NOTIFY).
        self._telemetry = telemetry
        self._waiting: dict[str, tuple[NotificationHandler, dict[str, Any]]] = {}
        self._bytes = 0
        self._running = False
        #: Notifications identical to one already waiting, merged into it.
        self.merged = 0
        #: Notifications whose hooks were not run: too many were waiting.
        self.dropped = 0

    def receive(self, note: Notification) -> None:
        if self._telemetry is not None:
            self._telemetry.notification(note)
        if note.method == "notifications/cancelled":
            params = note.params or {}
            rid = params.get("requestId")
            if not isinstance(rid, str | int):
                return  # U-CANCEL-5 / U-CANCEL-9: malformed: ignored
            cancelled = self._cancel(rid)
            if cancelled is None:
                # TM-STORE-CONTROL: it may be running in another worker.
                self._elsewhere(rid)
            elif cancelled:
                # TM-SEC-LOG: the reason is the client's text, escaped and cut.
                logger.info("request %s cancelled by the client: %s",
                            printable(rid), printable(params.get("reason", "")))
            return
        handler = self._app.notification_handler(note.method)
        if handler is not None:
            self.queue(note.method, handler, dict(note.params or {}))

    def queue(self, method: str, handler: NotificationHandler, params: dict[str, Any]) -> None:
        """Run ``handler`` for this notification, after those waiting (TM-SEC-NOTIFY)."""
        key = method + "\n" + json.dumps(params, sort_keys=True, separators=(",", ":"))
        waiting = self._waiting
        if key in waiting:
            self.merged += 1
            return
        cfg = self._config
        budget = cfg.retention.max_bytes // 16
        if len(waiting) >= cfg.max_pending_notifications or self._bytes + len(key) > budget:
            self.dropped += 1
            tail = self._dropped_log.tail("dropped,")
            if tail is not None:
                logger.warning(
                    "session %s: notification %s dropped: %d already wait for their hooks%s",
                    self._session_id[:8], printable(method), len(waiting), tail,
                )
            return
        waiting[key] = (handler, params)
        self._bytes += len(key)
        if not self._running and self._spawn(self._run, name="mcp:notification-hooks"):
            self._running = True

    async def _run(self) -> None:
        try:
            while self._waiting:
                key = next(iter(self._waiting))
                handler, params = self._waiting.pop(key)
                self._bytes -= len(key)
                await handler(self._port(), params)
        finally:
            self._running = False
