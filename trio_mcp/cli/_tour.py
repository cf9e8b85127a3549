# The guided tour (`trio-mcp demo-tour`, docs/tour.md): four scenes played against a live
# server while its task tree is shown by the inspector (TM-SEC-INSPECT).
#
#   1. one 2025-11-25 session, three handlers running at once in its supervisor's nursery;
#   2. a DELETE that cancels them all at once and ends the session;
#   3. a dropped stream re-attached with Last-Event-ID, every number arriving exactly once;
#   4. a reader that stops reading, cut by the stall judge and told where to resume.
#
# Each scene is a client over real HTTP on loopback (h11 on trio sockets, nothing smoothing the
# wire over), narrates what it does, and checks its outcome twice: from what the client got,
# and from the inspector's /tree.json, which is what the page draws. A scene whose outcome is
# not what it shows raises SceneFailed, saying what happened instead. The tests of
# tests/tour/ run these same functions. Not trio_mcp.Client: what each scene shows is the
# wire itself (one connection per call, the DELETE, where a stream is dropped and the cursor
# it resumes from, a reader that stops reading), which the client exists to hide; and its own
# GET stream and cancellations would be on the page too.
#
# Command-line code: it uses the public API (Server, serve) and the HTTP edges; nothing in the
# runtime or the protocol layer imports it.
from __future__ import annotations

import contextlib
import itertools
import json
import signal
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Final, TextIO, TypeVar
from urllib.parse import urlsplit

import attrs
import h11
import trio

from ..app._context import Context
from ..app._server import Server
from ..base._config import ServerConfig
from ..edges._serve import serve
from ..edges.observe._inspect import SESSION_ID_SHOWN
from ..protocol import LATEST_LEGACY_VERSION, SSEDecoder, SSEEvent

__all__ = [
    "SCENES",
    "TOUR_CONFIG",
    "Crowd",
    "Deleted",
    "Narrator",
    "Resumed",
    "SceneFailed",
    "Tour",
    "TourRecord",
    "open_tour",
    "play",
    "read_tree",
    "scene_delete",
    "scene_handlers",
    "scene_resume",
    "scene_stall",
    "session_node",
    "tour_server",
    "tree_nodes",
]

#: The scenes' headings, in the order they are played.
SCENES: Final = (
    "Scene 1 of 4: one session, three handlers running at once",
    "Scene 2 of 4: a DELETE cancels them all at once",
    "Scene 3 of 4: a dropped stream re-attached, nothing lost",
    "Scene 4 of 4: a stalled reader cut and told to resume",
)

#: The tour server's settings. A stalled reader is cut after 2 s below 4 KiB/s rather than
#: the defaults' 10 s below 2 KiB/s, so that scene 4 takes seconds; handlers left running
#: when the tour ends get 1 s.
TOUR_CONFIG: Final = ServerConfig(stall_budget=2.0, min_read_rate=4096.0, shutdown_grace=1.0)

#: The Accept header of a conforming POST (T-POST-2).
_POST_ACCEPT: Final = "application/json, text/event-stream"

_T = TypeVar("_T")
_ids = itertools.count(1)


class SceneFailed(Exception):
    """A scene did not end as the tour says it does; the message says what happened."""


# -- the tour server ----------------------------------------------------------------------------


@attrs.define
class TourRecord:
    """What the tour server's handlers did, by the ``tag`` each call was given (the tour runs
    the server in its own process, so a scene can ask its handlers too)."""

    started: set[str] = attrs.Factory(set)
    finished: set[str] = attrs.Factory(set)
    cancelled: set[str] = attrs.Factory(set)


def tour_server() -> tuple[Server, TourRecord]:
    """The server the tour plays against: a tool that waits and one that counts."""
    server = Server("trio-mcp-tour")
    record = TourRecord()

    @server.tool()
    async def wait(tag: str = "", seconds: float = -1.0) -> str:
        """Wait, doing nothing, until cancelled (or for ``seconds``, when not negative).

        Args:
            tag: the name under which the tour's record keeps this call.
            seconds: how long; negative waits until cancelled.
        """
        record.started.add(tag)
        try:
            if seconds < 0:
                await trio.sleep_forever()
            await trio.sleep(seconds)
        except trio.Cancelled:
            record.cancelled.add(tag)
            raise
        record.finished.add(tag)
        return "waited"

    @server.tool()
    async def count(ctx: Context, n: int, tag: str = "", delay: float = 0.0, pad: int = 0) -> str:
        """Count from 1 to n in progress notifications (the call needs a progressToken).

        Args:
            n: the last number.
            tag: the name under which the tour's record keeps this call.
            delay: seconds between two numbers.
            pad: characters of padding in each notification's message, to make it bigger.
        """
        record.started.add(tag)
        try:
            for i in range(1, n + 1):
                await ctx.report_progress(i, n, f"{i} {'.' * pad}" if pad else str(i))
                if delay:
                    await trio.sleep(delay)
        except trio.Cancelled:
            record.cancelled.add(tag)
            raise
        record.finished.add(tag)
        return f"counted to {n}"

    return server, record


@attrs.frozen(kw_only=True)
class Tour:
    """A tour server running on loopback."""

    url: str
    """The MCP endpoint, ``http://127.0.0.1:PORT/mcp``."""
    page: str
    """The inspector's page, ``http://127.0.0.1:PORT/``; its tree is at ``page + "tree.json"``."""
    record: TourRecord


async def open_tour(
    nursery: trio.Nursery,
    *,
    port: int = 0,
    inspect_host: str = "127.0.0.1",
    inspect_port: int = 0,
    shutdown_trigger: Callable[[], Any] | None = None,
) -> Tour:
    """Start a tour server in ``nursery`` with the inspector on (port 0: a free one)."""
    server, record = tour_server()
    urls: list[str] = await nursery.start(
        lambda task_status: serve(
            server, port=port, config=TOUR_CONFIG, inspect_port=inspect_port,
            inspect_host=inspect_host, shutdown_trigger=shutdown_trigger,
            task_status=task_status,
        )
    )
    return Tour(url=urls[0], page=urls[-1], record=record)


# -- the narrator -------------------------------------------------------------------------------


@attrs.define
class Narrator:
    """Tells the person at the terminal what happens, and pauses ``pace`` seconds where there
    is something to see on the page (0: never)."""

    out: TextIO
    pace: float = 0.0

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def heading(self, text: str) -> None:
        self._print()
        self._print(text)
        self._print("-" * len(text))

    def _wrapped(self, lead: str, text: str) -> None:
        self._print(textwrap.fill(
            text, width=92, initial_indent=f"  {lead}", subsequent_indent="    ",
            break_long_words=False, break_on_hyphens=False,
        ) if text else "")

    def watch(self, text: str) -> None:
        self._wrapped("Watch: ", text)

    def say(self, text: str) -> None:
        self._wrapped("", text)

    def ok(self, text: str) -> None:
        self._wrapped("ok: ", text)

    def why(self, text: str) -> None:
        self._wrapped("Why: ", text)

    def failed(self, text: str) -> None:
        self._print()
        self._print(f"NOT AS EXPECTED: {text}")

    async def pause(self, times: float = 1.0) -> None:
        if self.pace > 0:
            await trio.sleep(self.pace * times)


# -- a small HTTP/1.1 client --------------------------------------------------------------------


class _Response:
    """One response, read as it comes; ``drop()`` closes the connection wherever it is."""

    def __init__(self, stream: trio.SocketStream, conn: h11.Connection, head: h11.Response):
        self._stream = stream
        self._conn = conn
        self.status: int = head.status_code
        self.headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers
        }
        self._decoder = SSEDecoder()
        self._pending: list[SSEEvent] = []
        self.dropped = False

    async def _chunk(self) -> bytes | None:
        """The next piece of the body, or None at its end (also a connection cut short)."""
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError:
                return None  # the server closed the connection in the middle of the body
            if event is h11.NEED_DATA:
                try:
                    data = await self._stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                self._conn.receive_data(data)
                continue
            if isinstance(event, h11.Data):
                return bytes(event.data)
            return None

    async def body(self) -> bytes:
        chunks = []
        while (chunk := await self._chunk()) is not None:
            chunks.append(chunk)
        return b"".join(chunks)

    async def next_event(self) -> SSEEvent | None:
        """The next SSE event (comments skipped), or None at the end of the stream."""
        while True:
            while self._pending:
                event = self._pending.pop(0)
                if event.comment is None:
                    return event
            chunk = await self._chunk()
            if chunk is None:
                return None
            self._pending.extend(self._decoder.feed(chunk))

    async def drop(self) -> None:
        self.dropped = True
        await self._stream.aclose()


@contextlib.asynccontextmanager
async def _exchange(
    url: str, method: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b""
) -> AsyncIterator[_Response]:
    """Send one request on a connection of its own; yield once the response head is in."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    stream = await trio.open_tcp_stream(host, port)
    try:
        conn = h11.Connection(our_role=h11.CLIENT)
        fields = [("host", parts.netloc), *headers]
        if body or method == "POST":
            fields.append(("content-length", str(len(body))))
        out = conn.send(
            h11.Request(method=method, target=parts.path or "/", headers=fields)
        ) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(out)
        head: h11.Response | None = None
        while head is None:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                head = event
            elif not isinstance(event, h11.InformationalResponse):
                raise SceneFailed(f"{method} {url}: the server answered {event!r}")
        yield _Response(stream, conn, head)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def _messages(response: _Response, body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete POST answer, JSON or SSE."""
    if response.headers.get("content-type", "").startswith("application/json"):
        decoded = json.loads(body)
        return decoded if isinstance(decoded, list) else [decoded]
    return [json.loads(e.data) for e in SSEDecoder().feed(body) if e.data]


@attrs.frozen
class _Session:
    """A 2025-11-25 session, seen from its client."""

    url: str
    id: str
    version: str

    @property
    def short(self) -> str:
        """The id as the page shows it (TM-SEC-INSPECT)."""
        return self.id[:SESSION_ID_SHOWN]

    def headers(self, *extra: tuple[str, str], accept: str = _POST_ACCEPT) -> list[tuple[str, str]]:
        fields = [
            ("accept", accept),
            ("mcp-session-id", self.id),
            ("mcp-protocol-version", self.version),
        ]
        if accept == _POST_ACCEPT:
            fields.append(("content-type", "application/json"))
        return [*fields, *extra]


async def _open_session(url: str) -> _Session:
    """initialize, then notifications/initialized: an operating 2025-11-25 session."""
    hello = {
        "jsonrpc": "2.0", "id": next(_ids), "method": "initialize",
        "params": {
            "protocolVersion": LATEST_LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "trio-mcp-tour", "version": "1"},
        },
    }
    head = [("accept", _POST_ACCEPT), ("content-type", "application/json")]
    async with _exchange(url, "POST", head, _dumps(hello)) as response:
        answers = _messages(response, await response.body())
    session_id = response.headers.get("mcp-session-id")
    results = [m["result"] for m in answers if m.get("id") == hello["id"] and "result" in m]
    if response.status != 200 or not session_id or not results:
        raise SceneFailed(f"initialize was answered {response.status}: {answers}")
    session = _Session(url, session_id, results[0]["protocolVersion"])
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with _exchange(url, "POST", session.headers(), _dumps(initialized)) as response:
        await response.body()
    if response.status != 202:
        raise SceneFailed(f"notifications/initialized was answered {response.status}")
    return session


def _call(tool: str, arguments: dict[str, Any], *, progress: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress:
        params["_meta"] = {"progressToken": tool}
    return {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}


def _stream_of(event_id: str | None) -> str:
    """The stream an event id names: ids are ``<stream>.<seq>.<mac>`` (TM-RES-EVENTID)."""
    return (event_id or "?").split(".")[0]


def _cursor(event_id: str | None) -> str:
    """An event id as the tour prints it: its stream and position, not its MAC."""
    if event_id is None:
        return "none"
    return ".".join(event_id.split(".")[:2]) + ".…"


@attrs.define
class _Reading:
    """What a client has taken from one call's stream: its numbers, its answer, its cursor."""

    call_id: int
    numbers: list[int] = attrs.Factory(list)
    answers: list[dict[str, Any]] = attrs.Factory(list)
    last_id: str | None = None
    signals: list[SSEEvent] = attrs.Factory(list)
    events: int = 0

    def take(self, event: SSEEvent) -> None:
        """Take one event as a client does: its id becomes the cursor, its data is read."""
        self.events += 1
        if event.event == "resumption-required":
            self.signals.append(event)
            return
        if event.id:
            self.last_id = event.id
        if not event.data:
            return
        message = json.loads(event.data)
        if message.get("method") == "notifications/progress":
            self.numbers.append(int(message["params"]["progress"]))
        elif message.get("id") == self.call_id:
            self.answers.append(message)


def _exactly_once(numbers: list[int], n: int) -> str | None:
    """None when ``numbers`` is 1 to n, each once and in order; else what went wrong."""
    if numbers == list(range(1, n + 1)):
        return None
    missing = sorted(set(range(1, n + 1)) - set(numbers))
    twice = sorted({x for x in numbers if numbers.count(x) > 1})
    return f"of 1 to {n}, missing {missing or 'none'}, repeated {twice or 'none'}"


def _text(answer: dict[str, Any]) -> str | None:
    """The text of a tools/call answer's first content block."""
    content = (answer.get("result") or {}).get("content") or [{}]
    text = content[0].get("text")
    return text if isinstance(text, str) else None


def _span(numbers: list[int]) -> str:
    if not numbers:
        return "no numbers"
    return f"{numbers[0]} to {numbers[-1]}" if len(numbers) > 1 else f"{numbers[0]}"


# -- the tree, as the page sees it --------------------------------------------------------------


async def read_tree(tour: Tour) -> dict[str, Any]:
    """The inspector's tree now (at most half a second old: snapshots are shared)."""
    async with _exchange(tour.page + "tree.json", "GET") as response:
        body = await response.body()
    if response.status != 200:
        raise SceneFailed(f"the inspector answered {response.status} for /tree.json")
    doc: dict[str, Any] = json.loads(body)
    return doc


def tree_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``node`` and everything below it."""
    yield node
    for child in node.get("children") or ():
        yield from tree_nodes(child)


def session_node(doc: dict[str, Any], session_id: str) -> dict[str, Any] | None:
    """The supervisor task of the session, as the tree shows it, or None."""
    short = session_id[:SESSION_ID_SHOWN]
    for node in tree_nodes(doc["root"]):
        if (
            node.get("kind") == "session" and node.get("type") == "task"
            and (node.get("details") or {}).get("session") == short
        ):
            return node
    return None


def _handlers(node: dict[str, Any] | None, ids: Sequence[int]) -> list[dict[str, Any]]:
    if node is None:
        return []
    return [
        n for n in tree_nodes(node)
        if n.get("kind") == "handler" and (n.get("details") or {}).get("id") in ids
    ]


def _views(doc: dict[str, Any], session_id: str, stream: str) -> list[dict[str, Any]]:
    short = session_id[:SESSION_ID_SHOWN]
    return [
        n for n in tree_nodes(doc["root"])
        if n.get("kind") == "view" and n.get("type") == "task"
        and (n.get("details") or {}).get("session") == short
        and str((n.get("details") or {}).get("stream")) == stream
    ]


async def _until_tree(
    tour: Tour, holds: Callable[[dict[str, Any]], _T | None], *, within: float, what: str
) -> _T:
    """Read the tree until ``holds(tree)`` is not None, and return that; SceneFailed if the
    page does not show ``what`` within ``within`` seconds."""
    with trio.move_on_after(within):
        while True:
            found = holds(await read_tree(tour))
            if found is not None:
                return found
            await trio.sleep(0.1)
    raise SceneFailed(f"the page did not show {what} within {within:.0f} s")


async def _until(holds: Callable[[], bool], *, within: float, what: str) -> None:
    with trio.move_on_after(within):
        # Polling: what the tour waits for happens in the server or on other connections.
        while not holds():  # noqa: ASYNC110
            await trio.sleep(0.02)
        return
    raise SceneFailed(f"{what} did not happen within {within:.0f} s")


# -- scene 1: three handlers in one session ------------------------------------------------------


@attrs.define
class _Held:
    """One of scene 1's calls: a connection of its own, read until the server ends it."""

    tag: str
    message: dict[str, Any]
    status: int | None = None
    reading: _Reading | None = None
    ended: trio.Event = attrs.Factory(trio.Event)


@attrs.frozen
class Crowd:
    """Scene 1's outcome: the session, its three calls, and the handlers the page showed."""

    session: _Session
    calls: list[_Held]
    seen: list[dict[str, Any]]
    """The three handler nodes, from one snapshot of the tree."""


async def _hold(session: _Session, held: _Held) -> None:
    try:
        async with _exchange(
            session.url, "POST", session.headers(), _dumps(held.message)
        ) as response:
            held.status = response.status
            held.reading = _Reading(held.message["id"])
            while (event := await response.next_event()) is not None:
                held.reading.take(event)
    except (OSError, trio.BrokenResourceError, h11.ProtocolError, SceneFailed):
        pass  # the connection went (scene 2 looks at its end), or never came (scene 1 says so)
    finally:
        held.ended.set()


async def scene_handlers(tour: Tour, narrator: Narrator, nursery: trio.Nursery) -> Crowd:
    """Scene 1: three tools/call in one session, each on a connection of its own, all running
    at once; the page shows their three handlers under the session's supervisor. The calls
    are read by tasks in ``nursery`` and run until scene 2 ends the session."""
    narrator.heading(SCENES[0])
    narrator.watch(
        "a new Session.run task (the session's supervisor) appears in the nursery of "
        "SessionTable.run; then three handler tasks appear in the supervisor's own nursery, "
        "each with its method, request id and running time."
    )
    session = await _open_session(tour.url)
    narrator.say(f"initialize: session {session.short}… (the page shows no more of its id)")
    calls = [
        _Held(tag=f"{session.short}-{k}", message=_call("wait", {"tag": f"{session.short}-{k}"}))
        for k in (1, 2, 3)
    ]
    ids = [c.message["id"] for c in calls]
    for held in calls:
        nursery.start_soon(_hold, session, held)
    await _until(
        lambda: all(c.status is not None or c.ended.is_set() for c in calls),
        within=10, what="the three calls' answers",
    )
    statuses = [c.status for c in calls]
    if statuses != [200, 200, 200]:
        raise SceneFailed(f"the three calls were answered {statuses}, not 200 three times")
    narrator.say(
        f"three tools/call of `wait` (ids {', '.join(map(str, ids))}), each on a connection of "
        "its own, each answered with an SSE stream that stays open"
    )

    def three_handlers(doc: dict[str, Any]) -> list[dict[str, Any]] | None:
        found = _handlers(session_node(doc, session.id), ids)
        return found if len(found) == 3 else None

    seen = await _until_tree(
        tour, three_handlers, within=15,
        what=f"three handlers at once in session {session.short}…",
    )
    narrator.ok(
        f"the page shows three handlers at once in the nursery of session {session.short}…'s "
        "supervisor"
    )
    narrator.why(
        "each request is a task started in the session's nursery. The supervisor does not "
        "wait for one to finish before starting the next, and it owns all three: none can "
        "outlive it."
    )
    await narrator.pause(2)
    return Crowd(session=session, calls=calls, seen=seen)


# -- scene 2: a DELETE cancels them all ---------------------------------------------------------


@attrs.frozen
class Deleted:
    """Scene 2's outcome."""

    status: int
    """What the DELETE was answered (204, TM-SESS-DELETE)."""
    gone_after: float
    """Seconds from the DELETE to the first tree without the session and its handlers."""
    afterwards: int
    """What a request with the ended session's id was answered (404)."""


async def scene_delete(tour: Tour, narrator: Narrator, crowd: Crowd) -> Deleted:
    """Scene 2: DELETE the session of scene 1; its three handlers are cancelled together,
    their connections closed, and the session is gone from the page."""
    narrator.heading(SCENES[1])
    narrator.watch(
        "the three handlers, the supervisor above them and the three connections' views "
        "disappear together, in one update of the page."
    )
    session = crowd.session
    started = time.monotonic()
    async with _exchange(session.url, "DELETE", session.headers()) as response:
        await response.body()
    status = response.status
    if status != 204:
        raise SceneFailed(f"the DELETE was answered {status}, not 204")
    narrator.say(f"DELETE with the session's id: {status}")
    await _until(
        lambda: all(c.ended.is_set() for c in crowd.calls),
        within=10, what="the end of the three calls' streams",
    )
    answered = [c.message["id"] for c in crowd.calls if c.reading and c.reading.answers]
    if answered:
        raise SceneFailed(f"calls {answered} were answered: they should have been cancelled")
    narrator.say("the server closed all three streams; no call was answered")
    ids = [c.message["id"] for c in crowd.calls]

    def all_gone(doc: dict[str, Any]) -> bool | None:
        gone = session_node(doc, session.id) is None and not _handlers(doc["root"], ids)
        return True if gone else None

    await _until_tree(
        tour, all_gone, within=15, what=f"session {session.short}… gone with its handlers"
    )
    gone_after = time.monotonic() - started
    tags = {c.tag for c in crowd.calls}
    await _until(
        lambda: tags <= tour.record.cancelled, within=5, what="the handlers' cancellation"
    )
    narrator.ok(
        f"the session and its handlers are gone from the page ({gone_after:.2f} s after the "
        "DELETE), and each of the three handlers ended with trio.Cancelled"
    )
    ping = {"jsonrpc": "2.0", "id": next(_ids), "method": "ping"}
    async with _exchange(session.url, "POST", session.headers(), _dumps(ping)) as response:
        await response.body()
    if response.status != 404:
        raise SceneFailed(f"a request in the ended session was answered {response.status}")
    narrator.say("a request with the ended session's id now gets 404")
    narrator.why(
        "ending a session cancels its supervisor's nursery. The cancel scope reaches every "
        "handler at its next await, and the nursery does not close until all of them have "
        "ended: cancellation is one act on the whole subtree, not a message to each task."
    )
    await narrator.pause(2)
    return Deleted(status=status, gone_after=gone_after, afterwards=response.status)


# -- scene 3: a dropped stream, re-attached -----------------------------------------------------


@attrs.frozen
class Resumed:
    """Scene 3's and scene 4's outcome: the numbers read before the connection went and
    after the resume, and the call's answer."""

    n: int
    before: list[int]
    after: list[int]
    cursor: str
    """The Last-Event-ID of the resume."""
    answer: dict[str, Any]
    detached_seen: bool = False
    """Scene 3: whether the page showed the handler running with no view of its stream."""
    cut_after: float | None = None
    """Scene 4: seconds from the response head to the first tree with the view cut."""
    signal: dict[str, Any] | None = None
    """Scene 4: the data of the `resumption-required` event."""


async def _resume(session: _Session, reading: _Reading, n: int) -> Resumed:
    """GET with Last-Event-ID at the reading's cursor, read to the end, and check that every
    number from 1 to n arrived exactly once, and the answer once."""
    cursor = reading.last_id
    if cursor is None:
        raise SceneFailed("the client has no event id to resume from")
    before = list(reading.numbers)
    resumed = _Reading(reading.call_id)
    async with _exchange(
        session.url, "GET",
        session.headers(("last-event-id", cursor), accept="text/event-stream"),
    ) as response:
        if response.status != 200:
            raise SceneFailed(f"the resume was answered {response.status}, not 200")
        while (event := await response.next_event()) is not None:
            resumed.take(event)
    problem = _exactly_once(before + resumed.numbers, n)
    if problem is not None:
        raise SceneFailed(f"the numbers did not arrive exactly once: {problem}")
    if len(reading.answers) + len(resumed.answers) != 1:
        raise SceneFailed(
            f"the call's answer arrived {len(reading.answers) + len(resumed.answers)} times"
        )
    return Resumed(
        n=n, before=before, after=resumed.numbers, cursor=cursor, answer=resumed.answers[0]
    )


async def scene_resume(tour: Tour, narrator: Narrator) -> Resumed:
    """Scene 3: a call that counts to 20; the client drops its connection after a few
    numbers and resumes with GET and Last-Event-ID; every number arrives exactly once."""
    narrator.heading(SCENES[2])
    narrator.watch(
        "a handler counting, and the view of its stream on a connection task. When the client "
        "drops the connection, the view goes and the handler stays, counting into the log; "
        "on the resume a new view of the same stream appears."
    )
    n, drop_at = 20, 6
    # Slow enough that the handler is still counting when the client comes back.
    delay = max(0.15, (narrator.pace + 0.5) / 9)
    session = await _open_session(tour.url)
    tag = f"{session.short}-count"
    message = _call("count", {"n": n, "delay": delay, "tag": tag}, progress=True)
    narrator.say(
        f"tools/call of `count` in session {session.short}…: 1 to {n}, one every {delay:.2f} s"
    )
    reading = _Reading(message["id"])
    async with _exchange(session.url, "POST", session.headers(), _dumps(message)) as response:
        if response.status != 200:
            raise SceneFailed(f"the call was answered {response.status}")
        while len(reading.numbers) < drop_at:
            event = await response.next_event()
            if event is None:
                raise SceneFailed(f"the stream ended after {_span(reading.numbers)}")
            reading.take(event)
        await response.drop()
    stream = _stream_of(reading.last_id)
    narrator.say(
        f"read {_span(reading.numbers)} on stream {stream}, then dropped the connection; the "
        f"last event id read is {_cursor(reading.last_id)}"
    )
    detached = False
    with trio.move_on_after(2.0):
        # Not a condition of the scene: a busy machine may show it too late to see.
        while not detached:
            doc = await read_tree(tour)
            detached = bool(_handlers(session_node(doc, session.id), [message["id"]])) and not (
                _views(doc, session.id, stream)
            )
            if not detached:
                await trio.sleep(0.1)
    if detached:
        narrator.say("the page shows the handler still counting, with no view of its stream")
    await narrator.pause()
    narrator.say(f"GET with Last-Event-ID {_cursor(reading.last_id)}")
    result = await _resume(session, reading, n)
    narrator.ok(
        f"{_span(result.before)} before the drop, {_span(result.after)} after the resume, then "
        f"the result ({_text(result.answer)!r}): every number arrived exactly once"
    )
    narrator.why(
        "a connection is a view: a reader of one stream of the session's log at a cursor. "
        "Dropping it ended the view, not the request (a disconnect is not a cancellation); "
        "the resume attached a new view at the client's cursor, and what was appended while "
        "nobody read and what came live went through the same loop. Re-attachment, not replay."
    )
    await narrator.pause()
    return attrs.evolve(result, detached_seen=detached)


# -- scene 4: a stalled reader, cut and told to resume -------------------------------------------


async def scene_stall(tour: Tour, narrator: Narrator) -> Resumed:
    """Scene 4: a client that reads a chatty stream's head and then nothing; the stall judge
    cuts it within the tour's budget, the page marks the view cut, the client finds the
    `resumption-required` signal behind what its socket held, and resumes from it."""
    config = TOUR_CONFIG
    narrator.heading(SCENES[3])
    narrator.watch(
        "the writer task of the new stream, in the session's nursery, with bytes queued that "
        "do not go out; then the view is marked cut, under its session, and its connection "
        "goes. The handler is not stopped: it runs to its end, its events waiting in the log."
    )
    n = 80
    session = await _open_session(tour.url)
    tag = f"{session.short}-chatter"
    # No delay: the handler appends all its events at once, and they wait in the log; a
    # trickle would let the reader's kernel grow its window, read or not, for a while
    # (TM-BP-PACE counts that as progress), and the cut would come later.
    message = _call("count", {"n": n, "pad": 2000, "tag": tag}, progress=True)
    reading = _Reading(message["id"])
    async with _exchange(session.url, "POST", session.headers(), _dumps(message)) as response:
        if response.status != 200:
            raise SceneFailed(f"the call was answered {response.status}")
        head_at = time.monotonic()
        narrator.say(
            f"tools/call of `count` in session {session.short}…: {n} notifications of 2 KB; "
            "the client reads the response head, then stops reading"
        )
        default = ServerConfig()
        narrator.say(
            f"this server cuts a reader below {config.min_read_rate / 1024:.0f} KiB/s for "
            f"{config.stall_budget:.0f} s (by default: below "
            f"{default.min_read_rate / 1024:.0f} KiB/s for {default.stall_budget:.0f} s)"
        )

        def cut_view(doc: dict[str, Any]) -> list[dict[str, Any]] | None:
            node = session_node(doc, session.id)
            found = [
                v for v in tree_nodes(node or {})
                if v.get("kind") == "view" and v.get("state") == "cut"
            ]
            return found or None

        await _until_tree(
            tour, cut_view, within=config.stall_budget * 8 + 10,
            what=f"a cut view in session {session.short}…",
        )
        cut_after = time.monotonic() - head_at
        narrator.ok(
            f"the stall judge cut the reader ({cut_after:.1f} s after the head); the page marks "
            "its view cut"
        )
        # Read at last: what the socket holds, then the signal, then the end.
        while (event := await response.next_event()) is not None:
            reading.take(event)
    if len(reading.signals) != 1:
        raise SceneFailed(
            f"the cut connection carried {len(reading.signals)} resumption-required signals, "
            "not one"
        )
    details = json.loads(reading.signals[0].data or "{}")
    if details.get("lastEventId") != reading.last_id:
        raise SceneFailed(
            f"the signal names {details.get('lastEventId')!r}, but the last event read was "
            f"{reading.last_id!r}"
        )
    narrator.say(
        f"the client reads what its socket held: {_span(reading.numbers)}, then "
        f"`resumption-required` naming {_cursor(details.get('lastEventId'))} "
        f"(retry {details.get('retry')} ms), then the connection closed"
    )
    await narrator.pause()
    narrator.say(f"GET with Last-Event-ID {_cursor(reading.last_id)}, as the signal says")
    result = await _resume(session, reading, n)
    if tag in tour.record.cancelled:
        raise SceneFailed("the handler was cancelled: a cut should cost a resume, not the call")
    narrator.ok(
        f"{_span(result.before)} before the cut, {_span(result.after)} after the resume, then "
        "the result: every number exactly once, and the handler never stopped"
    )
    narrator.why(
        "the server never queues without bound for a slow reader. The writer measures how "
        "fast its reader drains; one too slow for too long is cut and told where to resume, "
        "while its events wait in the session's bounded log. Backpressure becomes a signal "
        "to the client, not memory held by the server."
    )
    await narrator.pause()
    return attrs.evolve(result, cut_after=cut_after, signal=details)


# -- the whole tour -----------------------------------------------------------------------------


async def play(
    out: TextIO,
    *,
    pace: float = 4.0,
    port: int = 0,
    inspect_host: str = "127.0.0.1",
    inspect_port: int = 0,
    stay: bool = False,
) -> bool:
    """Start a tour server, tell the person where its page is, and play the four scenes
    against it, pausing ``pace`` seconds where there is something to see. True when every
    scene went as expected; the first that did not is reported, and ends the tour."""
    narrator = Narrator(out, pace)
    stop = trio.Event()
    failure: SceneFailed | None = None
    async with trio.open_nursery() as nursery:
        tour = await open_tour(
            nursery, port=port, inspect_host=inspect_host, inspect_port=inspect_port,
            shutdown_trigger=stop.wait,
        )
        _introduce(narrator, tour)
        await narrator.pause(2.5)
        async with trio.open_nursery() as clients:
            try:
                crowd = await scene_handlers(tour, narrator, clients)
                await scene_delete(tour, narrator, crowd)
                await scene_resume(tour, narrator)
                await scene_stall(tour, narrator)
            except SceneFailed as exc:
                failure = exc
            clients.cancel_scope.cancel()
        if failure is None:
            narrator.heading("The tour is over: each scene went as it should.")
        else:
            narrator.failed(str(failure))
        if stay:
            narrator.say(f"the server and its page stay up at {tour.page}; Ctrl-C ends them")
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
        stop.set()
    return failure is None


def _introduce(narrator: Narrator, tour: Tour) -> None:
    config = TOUR_CONFIG
    narrator.heading("trio-mcp demo tour: structured concurrency, watched live")
    narrator.say(f"The server:     {tour.url}  (tools `wait` and `count`)")
    narrator.say(f"Its task tree:  {tour.page}  <- open this page in a browser now")
    narrator.say("")
    narrator.say(
        "The page is trio's own task tree of this process, redrawn about twice a second. "
        "Runtime.run holds SessionTable.run, whose nursery holds one Session.run task per "
        "session: that session's supervisor. Its handlers and writers run in the supervisor's "
        "nursery; each connection task, under HttpServer.serve, holds a view of one stream."
    )
    narrator.say(
        f"This server cuts a stalled reader after {config.stall_budget:.0f} s below "
        f"{config.min_read_rate / 1024:.0f} KiB/s, to keep scene 4 short."
    )
    if narrator.pace > 0:
        narrator.say(
            f"The first scene starts in {narrator.pace * 2.5:.0f} s; each step then pauses "
            f"{narrator.pace:g} s (--pace)."
        )
