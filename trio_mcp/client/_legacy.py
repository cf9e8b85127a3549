# A 2025-11-25 session, as a client keeps one (spec/client.md): initialize, a POST per
# request whose SSE stream is read in the calling task, re-attached with GET and
# Last-Event-ID when it drops before its answer (TM-CLIENT-RESUME), every message applied
# once (TM-CLIENT-ONCE), a cursor the server can no longer serve failing the call
# (TM-CLIENT-GAP), a cancelled call told to the server (TM-CLIENT-CANCEL), and the
# server's requests answered by the application's callbacks.
from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

import attrs
import httpx2
import trio

from ..protocol._versions import LATEST_LEGACY_VERSION, LEGACY_VERSIONS
from ._errors import ConnectionLost, ErrorAnswer, HttpStatusError, ResumptionFailed
from ._events import Incoming, is_sse, read_incoming
from ._inbound import Answerer
from ._ledger import Call, Ledger, ProgressCallback

__all__ = ["DEFAULT_IDLE_REATTACH", "DEFAULT_RETRY_MS", "RESUME_ATTEMPTS", "LegacySession"]

#: The wait before a re-attach when the server named none (`retry:`), in milliseconds.
DEFAULT_RETRY_MS: Final = 1000
#: Re-attach attempts in a row that may fail to reach the server before the call fails.
RESUME_ATTEMPTS: Final = 5
#: How long a cancelled call's notifications/cancelled may take to go out.
CANCEL_SEND_TIMEOUT: Final = 2.0
#: The longest wait a server's `retry:` can ask for.
MAX_RETRY_MS: Final = 60_000
#: Seconds a resumed stream may bring no event before it is re-attached (TM-CLIENT-RESUME):
#: a server may register a resumed stream after the events it replays and lose what came
#: in between (the Python SDK's server, mcp 2.3.0: "the replay→live-tail ordering window");
#: a re-attach reads them from its store, and exactly-once makes it harmless.
DEFAULT_IDLE_REATTACH: Final = 5.0
#: The longest a resumed stream waits, unread, while its catch-up read runs (seconds); the
#: catch-up itself ends after ``idle_reattach`` without an event.
_CATCH_UP_LIMIT: Final = 60.0
#: Catch-up reads one re-attach may nest (TM-CLIENT-CATCHUP): a read becomes the live tail
#: when the stream it reads beside ends meanwhile (the server closed it), and has a seam of
#: its own; a server that primes every read cannot make the client nest them without end.
#: Each nested read leaves the one before, so a call holds two connections at most; under
#: load, the Python SDK's server made 9 in a row of 20 closes.
CATCH_UP_DEPTH: Final = 64
#: Server requests answered at once; past them, the stream that brought the next one waits
#: for its answer before it is read further, so a server cannot make the client start tasks
#: without bound.
ANSWERING_AT_ONCE: Final = 16

_POST_ACCEPT: Final = "application/json, text/event-stream"
_STANDALONE: Final = "standalone"


@attrs.define
class Cursor:
    """Where a stream was left: its last event id, the server's `retry:`, and whether the
    server said the events after it are lost."""

    last_id: str | None = None
    retry_ms: int = DEFAULT_RETRY_MS
    lost: str | None = None
    """The server's `resumption-failed` signal, as it gave it."""
    read: int = 0
    """Events read on the current connection."""
    idle: bool = False
    """The current connection brought no event for the idle time, and was left."""

    def note(self, item: Incoming) -> None:
        self.read += 1
        if item.retry_ms is not None:
            self.retry_ms = max(0, min(item.retry_ms, MAX_RETRY_MS))
        if item.event_id is not None and (item.data or self.last_id is None):
            # A priming event (no data) is a resume point only for a stream that has none
            # yet: on a resumed stream it can name a position past events the server stored
            # but has not sent (the Python SDK's server mints it after its replay, before
            # the live tail attaches), which a cursor moved to it would skip for good.
            self.last_id = item.event_id


class LegacySession:
    """One session with a server; the Client's era object for 2025-11-25."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        url: str,
        ledger: Ledger,
        answerer: Answerer,
        nursery: trio.Nursery,
        deliver: Callable[[str, Mapping[str, Any]], Any],
        *,
        version: str = LATEST_LEGACY_VERSION,
        client_info: Mapping[str, Any],
        idle_reattach: float | None = DEFAULT_IDLE_REATTACH,
    ) -> None:
        self._http = http
        self._url = url
        self._ledger = ledger
        self._answerer = answerer
        self._nursery = nursery
        self._deliver = deliver
        #: Server requests being answered in tasks of their own.
        self._answering = 0
        self._idle_reattach = idle_reattach
        self._asked_version = version
        self._client_info = dict(client_info)
        self.version = version
        self.session_id: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        #: The session's GET stream is open (run_standalone).
        self.standalone_open = False
        #: The GET stream was asked for (``standalone``): a new session opens it again.
        self._standalone_wanted = False
        #: Sessions started again after the server ended one (TM-CLIENT-SESSION).
        self.restarts = 0
        self._gone = False
        self._restarting = trio.Lock()
        self._subscriptions: set[str] = set()
        self._log_level: str | None = None

    # -- the session's life -------------------------------------------------------------

    async def start(self) -> None:
        result = await self.request("initialize", {
            "protocolVersion": self._asked_version,
            "capabilities": self._answerer.capabilities(),
            "clientInfo": self._client_info,
        })
        version = result.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise ErrorAnswer(-32602, f"the server chose a protocol version this client does "
                                   f"not speak: {version!r}")
        self.version = str(version)
        self.server_info = dict(result.get("serverInfo") or {})
        self.capabilities = dict(result.get("capabilities") or {})
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        await self.notify("notifications/initialized")

    async def close(self) -> None:
        """End the session (DELETE); a server that does not allow it is left to expire it."""
        if self.session_id is None:
            return
        with trio.move_on_after(CANCEL_SEND_TIMEOUT) as scope:
            scope.shield = True
            with contextlib.suppress(httpx2.TransportError):
                await self._http.delete(self._url, headers=self._headers())

    def _headers(self, accept: str = _POST_ACCEPT) -> dict[str, str]:
        headers = {"accept": accept}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = self.version
        return headers

    # -- requests -----------------------------------------------------------------------

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = dict(params)
        await self._post_message(body)

    async def _post_message(self, body: Mapping[str, Any]) -> None:
        """POST a notification or a response: the server answers 202."""
        response = await self._http.post(self._url, content=_dumps(body),
                                          headers={**self._headers(),
                                                   "content-type": "application/json"})
        if response.status_code not in (200, 202):
            raise HttpStatusError(response.status_code, response.text)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        try:
            result = await self._request(method, params, on_progress)
        except _SessionGone:
            # TM-CLIENT-SESSION (T-SESS-8): the server no longer knows the session; the
            # request was not taken, so it is sent once more, in a new session.
            await self._restart()
            result = await self._request(method, params, on_progress)
        self._remember(method, params)
        if method == "resources/subscribe":
            # The updates of a subscription come on the GET stream (TM-CLIENT-STANDALONE).
            await self.standalone()
        return result

    def _remember(self, method: str, params: Mapping[str, Any] | None) -> None:
        """What a new session must be told again: the subscriptions and the log level."""
        uri = (params or {}).get("uri")
        if method == "resources/subscribe" and isinstance(uri, str):
            self._subscriptions.add(uri)
        elif method == "resources/unsubscribe" and isinstance(uri, str):
            self._subscriptions.discard(uri)
        elif method == "logging/setLevel":
            level = (params or {}).get("level")
            self._log_level = level if isinstance(level, str) else None

    async def _restart(self) -> None:
        """A new session in place of the one the server ended: initialize again, the GET
        stream again, the subscriptions and log level again."""
        async with self._restarting:
            if not self._gone:
                return  # another call's restart got here first
            self.session_id = None
            await self.start()
            self._gone = False
            self.restarts += 1
            if self._standalone_wanted:
                self._nursery.start_soon(self.run_standalone)
            if self._log_level is not None:
                await self._request("logging/setLevel", {"level": self._log_level}, None)
            for uri in sorted(self._subscriptions):
                await self._request("resources/subscribe", {"uri": uri}, None)

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        on_progress: ProgressCallback | None,
    ) -> dict[str, Any]:
        call = self._ledger.open(method, on_progress)
        body_params = dict(params or {})
        if on_progress is not None:
            body_params["_meta"] = {**body_params.get("_meta", {}), "progressToken": call.token}
        body = {"jsonrpc": "2.0", "id": call.id, "method": method, "params": body_params}
        try:
            await self._exchange(call, body)
            return call.outcome()
        except trio.Cancelled:
            if method != "initialize" and self.session_id is not None:
                await self._cancel(call)
            raise
        finally:
            self._ledger.close(call)

    async def _cancel(self, call: Call) -> None:
        """TM-CLIENT-CANCEL: the caller's scope was cancelled; the server hears of it."""
        with trio.move_on_after(CANCEL_SEND_TIMEOUT) as scope:
            scope.shield = True
            with contextlib.suppress(httpx2.TransportError, HttpStatusError):
                await self.notify("notifications/cancelled", {
                    "requestId": call.id, "reason": "cancelled by the client"})

    async def _exchange(self, call: Call, body: Mapping[str, Any]) -> None:
        cursor = Cursor()
        async with self._http.stream(
            "POST", self._url, content=_dumps(body),
            headers={**self._headers(), "content-type": "application/json"},
        ) as response:
            if call.method == "initialize" and response.status_code == 200:
                self.session_id = response.headers.get("mcp-session-id")
            if response.status_code == 404 and self.session_id is not None:
                self._gone = True
                raise _SessionGone
            if response.status_code not in (200, 202) and not await _in_band(response):
                raise HttpStatusError(response.status_code, (await response.aread()).decode(
                    "utf-8", errors="replace"))
            await self._read(call, call.id, response, cursor)
            if call.done.is_set():
                return
            if not is_sse(response):
                # A JSON body cut short (or without this call's answer) cannot be resumed.
                call.fail(ConnectionLost(f"{call.method}: the response ended without an "
                                         "answer"))
                return
        await self._resume(call, cursor)

    async def _read(
        self,
        call: Call | None,
        stream: Hashable,
        response: httpx2.Response,
        cursor: Cursor,
        idle_after: float | None = None,
        *,
        catch_ups: int = 0,
        beside: _Reading | None = None,
    ) -> None:
        """Apply what ``response`` brings until ``call`` has its answer or the stream ends
        (or says to resume); ``idle_after``: or until no event came for that long
        (``cursor.idle``); ``catch_ups``: ``response`` re-attaches ``call``'s stream, and a
        priming event on it is caught up on with that many reads nested at most
        (TM-CLIENT-CATCHUP); ``beside``: the connection this read is a catch-up beside."""
        cursor.read = 0
        cursor.idle = False
        with trio.CancelScope() as idle:
            await self._read_events(call, stream, _Reading(response), cursor, idle,
                                    idle_after, catch_ups, beside)
        cursor.idle = idle.cancelled_caught

    async def _read_events(
        self,
        call: Call | None,
        stream: Hashable,
        reading: _Reading,
        cursor: Cursor,
        idle: trio.CancelScope,
        idle_after: float | None,
        catch_ups: int,
        beside: _Reading | None,
    ) -> None:
        if idle_after is not None:
            idle.deadline = trio.current_time() + idle_after
        async for item in read_incoming(reading.response):
            if (catch_ups and _is_priming(item) and cursor.last_id is not None
                    and cursor.lost is None):
                # TM-CLIENT-CATCHUP: once a connection, not read further till caught up.
                if beside is not None:
                    # This catch-up read became the live tail: the stream it was read beside
                    # ended, and what that one still holds is in the store, read from here.
                    await beside.leave()
                idle.deadline = trio.current_time() + _CATCH_UP_LIMIT
                await self._catch_up(call, stream, cursor, catch_ups - 1, reading)
                catch_ups = 0
                if (call is not None and call.done.is_set()) or reading.left:
                    return
                idle.deadline = math.inf
            if idle_after is not None:
                idle.deadline = trio.current_time() + idle_after
            cursor.note(item)
            if not self._ledger.first_time(stream, item.event_id):
                continue
            if item.event == "resumption-failed":
                # TM-CLIENT-GAP: what follows (a -31001 per lost request) ends the calls;
                # without them, the end of the stream does.
                cursor.lost = item.data or "resumption failed"
                continue
            if item.event == "resumption-required":
                # TM-CLIENT-RESUME: a stall cut; re-attach now from the last id.
                return
            if item.message is not None:
                await self._apply(item.message)
            if call is not None and call.done.is_set():
                return

    async def _apply(self, message: Mapping[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message and ("result" in message or "error" in message):
                self._ledger.answer(message)
            return
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        if "id" in message:
            if self._answering >= ANSWERING_AT_ONCE:
                await self._answer_request(message)
            else:
                self._answering += 1
                self._nursery.start_soon(self._answer_request, message, True)
        elif method == "notifications/progress":
            await self._ledger.progress(params)
        else:
            await self._deliver(method, params)

    async def _answer_request(self, request: Mapping[str, Any], held: bool = False) -> None:
        """Answer a server request (elicitation, sampling, roots, ping) with a POST;
        ``held``: this task is counted in ``_answering``."""
        try:
            response = await self._answerer.answer_message(request)
            # Unreachable: the server's request times out on its side; ours goes on.
            with contextlib.suppress(httpx2.TransportError, HttpStatusError):
                await self._post_message(response)
        finally:
            if held:
                self._answering -= 1

    async def _resume(self, call: Call, cursor: Cursor) -> None:
        """TM-CLIENT-RESUME: re-attach ``call``'s stream until its answer comes or the
        server says it cannot come (TM-CLIENT-GAP)."""
        failures = empties = 0
        while not call.done.is_set():
            if cursor.lost is not None:
                call.fail(ResumptionFailed(f"{call.method}: the server lost this request's "
                                           f"messages: {cursor.lost}", code=-31001))
                return
            if cursor.last_id is None:
                call.fail(ConnectionLost(f"{call.method}: the stream dropped before any "
                                         "event id, so it cannot be resumed"))
                return
            await trio.sleep(cursor.retry_ms / 1000)
            self._ledger.note_resume()
            try:
                async with self._http.stream(
                    "GET", self._url,
                    headers={**self._headers("text/event-stream"),
                             "last-event-id": cursor.last_id},
                ) as response:
                    failures = 0
                    if response.status_code != 200 or not is_sse(response):
                        text = (await response.aread()).decode("utf-8", errors="replace")
                        call.fail(ResumptionFailed(
                            f"{call.method}: the server refused to resume the stream "
                            f"(HTTP {response.status_code}): {text[:200]}",
                            code=_code_of(text)))
                        return
                    await self._read(call, call.id, response, cursor, self._idle_reattach,
                                     catch_ups=CATCH_UP_DEPTH)
                    if cursor.read or cursor.idle:
                        empties = 0
                    elif not call.done.is_set():
                        empties += 1
                        if empties >= RESUME_ATTEMPTS:
                            call.fail(ResumptionFailed(
                                f"{call.method}: the server answered the resume with "
                                f"nothing, {empties} times in a row"))
                            return
            except httpx2.TransportError as error:
                failures += 1
                if failures >= RESUME_ATTEMPTS:
                    call.fail(ConnectionLost(f"{call.method}: the server could not be "
                                             f"reached to resume: {error!r}"))
                    return

    async def _catch_up(
        self, call: Call | None, stream: Hashable, cursor: Cursor, nested: int,
        beside: _Reading,
    ) -> None:
        """TM-CLIENT-CATCHUP: read ``stream`` (``call``'s; the session's GET stream when
        ``call`` is None) once more from ``cursor``, on a connection of its own, while the
        resumed one waits: what a server stored between its replay and its live tail comes
        from its store, in its order, and what the live tail brings again is dropped by its
        event id. A server that will not serve it (409, say) leaves the stream as it was;
        ``nested``: reads this one may nest; ``beside``: the connection it is read beside,
        left if this one becomes the live tail."""
        behind = Cursor(last_id=cursor.last_id, retry_ms=cursor.retry_ms)
        self._ledger.note_catch_up()
        with contextlib.suppress(httpx2.TransportError):
            async with self._http.stream(
                "GET", self._url,
                headers={**self._headers("text/event-stream"),
                         "last-event-id": behind.last_id or ""},
            ) as response:
                if response.status_code != 200 or not is_sse(response):
                    return
                # It may become the live tail itself, if the resumed stream ended meanwhile:
                # then it has a seam of its own, caught up on the same way.
                await self._read(call, stream, response, behind,
                                 self._idle_reattach or DEFAULT_IDLE_REATTACH, catch_ups=nested,
                                 beside=beside)
        cursor.last_id = behind.last_id
        cursor.lost = cursor.lost or behind.lost

    # -- the standalone stream ------------------------------------------------------------

    async def standalone(self) -> None:
        """Open the session's GET stream if it was not asked for yet (TM-CLIENT-STANDALONE):
        once open, or refused, it returns; the stream is read until the session ends."""
        if not self._standalone_wanted:
            self._standalone_wanted = True
            await self._nursery.start(self.run_standalone)

    async def run_standalone(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Read the session's GET stream until cancelled, re-attached as a call's is: the
        server's requests and notifications that belong to no request come on it (a
        server may send an elicitation there). Started once it is open, or refused (a
        server that offers none answers 405: then ``standalone_open`` stays False)."""
        cursor = Cursor()
        failures = 0
        started = False
        try:
            while True:
                headers = self._headers("text/event-stream")
                resumed = cursor.last_id is not None
                if cursor.last_id is not None:
                    headers["last-event-id"] = cursor.last_id
                try:
                    async with self._http.stream("GET", self._url, headers=headers) as response:
                        if response.status_code != 200 or not is_sse(response):
                            return
                        failures = 0
                        self.standalone_open = True
                        if not started:
                            started = True
                            task_status.started()
                        await self._read(None, _STANDALONE, response, cursor,
                                         catch_ups=CATCH_UP_DEPTH if resumed else 0)
                except httpx2.TransportError:
                    failures += 1
                    if failures >= RESUME_ATTEMPTS:
                        return
                cursor.lost = None
                await trio.sleep(cursor.retry_ms / 1000)
        finally:
            self.standalone_open = False
            if not started:
                task_status.started()


@attrs.define(eq=False)
class _Reading:
    """A connection being read for a stream (a call's, or the session's GET stream), and
    whether the client left it."""

    response: httpx2.Response
    left: bool = False

    async def leave(self) -> None:
        self.left = True
        await self.response.aclose()


def _is_priming(item: Incoming) -> bool:
    """An event with an id and nothing else: a priming event (T-PSSE-1)."""
    return item.event_id is not None and not item.data and item.event == "message"


class _SessionGone(Exception):
    """The server answered 404 to a request of the session: it has ended the session."""


async def _in_band(response: httpx2.Response) -> bool:
    """Whether a non-2xx response carries a JSON-RPC answer (then it is applied)."""
    kind = response.headers.get("content-type", "")
    return kind.startswith("application/json") and response.status_code in (400, 404)


def _code_of(text: str) -> int | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) else None


def _dumps(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
