# The live task tree (`trio-mcp serve --inspect PORT`, TM-SEC-INSPECT): the running server as
# trio's own task tree, annotated with what the runtime knows about each task.
#
# The tree is trio's, not a model of it: it is walked from trio.lowlevel.current_root_task()
# through Task.child_nurseries and Nursery.child_tasks, every time a snapshot is taken. The
# runtime says which task is what (Runtime.describe_tree(): a TaskRole for each), and its
# objects describe themselves through read-only `describe()` methods (frozen records of
# trio_mcp.runtime._describe); the inspector renders those records and never walks the
# runtime's own tables. Tasks nobody describes are shown with trio's name for them.
#
# Cost: nothing unless an inspector runs. Then a trio Instrument counts task spawns and exits
# (and remembers when each task was born, for running times), and each connected page gets at
# most two snapshots a second, shared by every page. A snapshot descends only into what it
# shows: a run of similar siblings (1,000 session supervisors) becomes one group node with its
# count and its first members, and the whole document is capped at MAX_NODES nodes.
#
# This is an HTTP edge: it may read the runtime; the runtime never imports it.
from __future__ import annotations

import ipaddress
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Final

import trio

from ...protocol._sse import encode_event, encode_message_event
from ...runtime._describe import (
    Attention,
    DescribedSession,
    ExchangeInfo,
    Judgement,
    ObjectRole,
    RoleKind,
    RuntimeInfo,
    SessionInfo,
    SessionRole,
    TableInfo,
    TaskRole,
    TaskRunInfo,
    ViewEnd,
    ViewInfo,
)
from .._hypercorn import answer_lifespan
from ._inspect_page import PAGE

if TYPE_CHECKING:
    from ...runtime._runtime import Runtime

__all__ = [
    "InspectorApp",
    "TaskCounter",
    "TreeBuilder",
    "check_loopback",
    "render_text",
]

#: Siblings of one kind and name from which on they are shown as one group.
GROUP_AT: Final = 8
#: Members of a group shown in full (those cancelled, cut or stalled first).
GROUP_SHOWN: Final = 12
#: The most nodes one snapshot holds; past it, the rest is counted, not sent.
MAX_NODES: Final = 1500
#: The shortest time between two snapshots, whatever number of pages are open (2 per second).
MIN_INTERVAL: Final = 0.5
#: The most of the server's time snapshots may take: a snapshot that took longer than this
#: share of MIN_INTERVAL makes the next one wait longer (20 ms taken: one a second).
MAX_SHARE: Final = 0.02
#: How much of a session id the inspector shows: enough to tell sessions apart, too little
#: to use one (TM-SEC-INSPECT).
SESSION_ID_SHOWN: Final = 8
#: States that are highlighted, most serious first; a group member in one is shown first.
STATES: Final = tuple(a.value for a in Attention)
#: Hosts whose Host header the inspector answers (a page elsewhere cannot read it through
#: DNS rebinding).
_LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def check_loopback(host: str) -> None:
    """Raise ValueError unless ``host`` is a loopback address (or ``localhost``).

    TM-SEC-INSPECT: the inspector shows what every client's session is doing; it never listens
    beyond the machine.
    """
    name = host.strip("[]")
    if name == "localhost":
        return
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise ValueError(
            f"the inspector serves on loopback only, and {host!r} is not a loopback address: "
            "use 127.0.0.1, ::1 or localhost"
        )


class TaskCounter(trio.abc.Instrument):
    """Counts task spawns and exits, and remembers when each live task was born (trio time).

    Installed only while an inspector runs (``trio.lowlevel.add_instrument``).
    """

    def __init__(self) -> None:
        self.spawned = 0
        self.exited = 0
        self.born: dict[trio.lowlevel.Task, float] = {}

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1
        self.born[task] = trio.current_time()

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.exited += 1
        self.born.pop(task, None)


# -- the tree ------------------------------------------------------------------------------------


def _short(name: str) -> str:
    """trio's task name without its module path: ``HttpServer._connection``."""
    if " " in name or ":" in name:
        return name
    parts = name.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 else name


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} MiB"


class TreeBuilder:
    """Takes snapshots of the running trio tree, annotated from ``runtime``."""

    def __init__(
        self,
        runtime: Runtime,
        counter: TaskCounter | None = None,
        *,
        group_at: int = GROUP_AT,
        group_shown: int = GROUP_SHOWN,
        max_nodes: int = MAX_NODES,
    ) -> None:
        self.runtime = runtime
        self.counter = counter
        self.group_at = group_at
        self.group_shown = group_shown
        self.max_nodes = max_nodes
        # Per snapshot: which task is what, and the sessions described so far.
        self._roles: dict[trio.lowlevel.Task, TaskRole] = {}
        self._sessions: dict[int, SessionInfo] = {}
        self._budget = 0
        self._omitted = 0
        self._now = 0.0

    def _session(self, session: DescribedSession) -> SessionInfo:
        info = self._sessions.get(id(session))
        if info is None:
            info = self._sessions[id(session)] = session.describe()
        return info

    # -- a snapshot ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The tree now, as plain JSON-able data."""
        self._now = trio.current_time()
        self._sessions = {}
        # Which task is what: the runtime's, the table's, each session's supervisor and each
        # connection serving a view. A session's handlers and writers run in its own nursery:
        # they are indexed when its supervisor is shown (``_annotate``), so that a snapshot
        # costs little for sessions it folds.
        tree = self.runtime.describe_tree()
        self._roles = dict(tree.roles)
        self._budget = self.max_nodes
        self._omitted = 0
        root_task = trio.lowlevel.current_root_task()
        assert root_task is not None  # called from within trio.run
        root = self._task(root_task)
        rt = self.runtime
        counter = self.counter
        doc: dict[str, Any] = {
            "format": "trio-mcp/task-tree/1",
            "time": time.time(),
            "server": rt.app.server_info().get("name"),
            "sessions": tree.sessions,
            "modern_requests": tree.modern_requests,
            "task_runs": tree.task_runs,
            "omitted": self._omitted,
            "root": root,
        }
        if counter is not None:
            doc["spawned"] = counter.spawned
            doc["exited"] = counter.exited
        self._roles = {}
        self._sessions = {}
        return doc

    def _task(self, task: trio.lowlevel.Task) -> dict[str, Any]:
        self._budget -= 1
        role = self._roles.get(task)
        node: dict[str, Any] = {
            "id": f"t{id(task):x}",
            "type": "task",
            "name": _short(task.name),
            "kind": role.kind.value if role is not None else "task",
        }
        born = self.counter.born.get(task) if self.counter is not None else None
        if born is not None:
            node["age"] = round(self._now - born, 3)
        children: list[dict[str, Any]] = []
        if role is not None:
            self._annotate(node, role, children)
        for nursery in task.child_nurseries:
            children.append(self._nursery(nursery))
        if children:
            node["children"] = children
        return node

    def _nursery(self, nursery: trio.Nursery) -> dict[str, Any]:
        self._budget -= 1
        node: dict[str, Any] = {"id": f"n{id(nursery):x}", "type": "nursery"}
        if nursery.cancel_scope.cancel_called:
            node["state"] = "cancelled"
        node["children"] = list(self._siblings(node["id"], list(nursery.child_tasks)))
        return node

    def _key(self, task: trio.lowlevel.Task) -> tuple[str, str]:
        role = self._roles.get(task)
        return (role.kind.value if role is not None else "task", task.name)

    def _siblings(
        self, parent: str, tasks: list[trio.lowlevel.Task]
    ) -> Iterator[dict[str, Any]]:
        # A nursery's tasks are a set: in the order they were born (when the counter knows),
        # so that a page shows them in the same order from one snapshot to the next.
        born = self.counter.born if self.counter is not None else {}
        tasks.sort(key=lambda t: born.get(t, -math.inf))
        by_key: dict[tuple[str, str], list[trio.lowlevel.Task]] = {}
        for task in tasks:
            by_key.setdefault(self._key(task), []).append(task)
        for (kind, name), members in sorted(by_key.items()):
            if len(members) < self.group_at:
                for task in members:
                    if self._budget <= 0:
                        self._omitted += 1
                        continue
                    yield self._task(task)
                continue
            yield self._group(f"g{parent}:{kind}:{name}", kind, name, members)

    def _group(
        self, group_id: str, kind: str, name: str, members: list[trio.lowlevel.Task]
    ) -> dict[str, Any]:
        self._budget -= 1
        states: dict[str, int] = {}
        ranked: list[tuple[int, int, trio.lowlevel.Task]] = []
        for n, task in enumerate(members):
            state = self._state_of(task)
            if state is not None:
                states[state.value] = states.get(state.value, 0) + 1
            ranked.append((state.rank if state is not None else len(STATES), n, task))
        ranked.sort(key=lambda r: (r[0], r[1]))
        shown = []
        for _, _, task in ranked[: self.group_shown]:
            if self._budget <= 0:
                break
            shown.append(self._task(task))
        more = len(members) - len(shown)
        node: dict[str, Any] = {
            "id": group_id,
            "type": "group",
            "kind": kind,
            "name": _short(name),
            "count": len(members),
            "children": shown,
            "more": more,
        }
        if states:
            node["states"] = states
        return node

    def _state_of(self, task: trio.lowlevel.Task) -> Attention | None:
        """A task's highlighted state, cheaply (for ranking a group's members): a session's
        is its ``attention()``, which does not describe it (a snapshot of a thousand sessions
        describes only the ones it shows)."""
        role = self._roles.get(task)
        if isinstance(role, SessionRole):
            if role.kind is RoleKind.SESSION:
                return role.session.attention()
            if role.kind is RoleKind.HANDLER:
                for h in self._session(role.session).handlers:
                    if h.request_id == role.part:
                        return Attention.CANCELLED if h.cancel_called else None
        elif isinstance(role, ObjectRole) and role.kind in (RoleKind.EXCHANGE, RoleKind.TASKRUN):
            return Attention.CANCELLED if role.owner.describe().cancel_called else None
        return None

    # -- what each kind of task shows -------------------------------------------------------

    def _annotate(
        self, node: dict[str, Any], role: TaskRole, children: list[dict[str, Any]]
    ) -> None:
        if isinstance(role, SessionRole):
            info = self._session(role.session)
            if role.kind is RoleKind.SESSION:
                self._roles.update(role.session.task_roles())
                self._annotate_session(node, info, children)
            elif role.kind is RoleKind.HANDLER:
                self._annotate_handler(node, info, role.part)
            elif isinstance(role.part, int):
                self._annotate_connection(node, role.kind, info, role.part)
            return
        described = role.owner.describe()
        if isinstance(described, RuntimeInfo):
            node["label"] = f"Runtime.run · {described.server}"
        elif isinstance(described, TableInfo):
            node["label"] = (
                f"SessionTable.run · {described.sessions} / {described.max_sessions} sessions"
            )
            if described.shutting_down:
                node["state"] = Attention.CLOSING.value
        elif isinstance(described, ExchangeInfo):
            node["label"] = (
                f"{described.method} id={json.dumps(described.request_id)} (2026-07-28, "
                f"{'SSE' if described.streaming else 'no stream yet'})"
            )
            node["details"] = {"method": described.method, "id": described.request_id}
            if described.cancel_called:
                node["state"] = Attention.CANCELLED.value
        elif isinstance(described, TaskRunInfo):
            status = "deciding" if described.status is None else described.status.value
            node["label"] = (
                f"task {described.task_id[:SESSION_ID_SHOWN]} {described.method} · {status}"
            )
            node["details"] = {"status": status, "method": described.method}
            if described.cancel_called:
                node["state"] = Attention.CANCELLED.value

    def _annotate_session(
        self, node: dict[str, Any], info: SessionInfo, children: list[dict[str, Any]]
    ) -> None:
        sid = info.session_id[:SESSION_ID_SHOWN]
        log = info.log
        node["label"] = (
            f"session {sid}… · {info.version} · {info.phase.value} · "
            f"{len(info.handlers)} handler(s), {len(info.views)} stream(s) · log "
            f"{log.events}/{log.max_events} events, {_size(log.bytes)}/{_size(log.max_bytes)}"
        )
        node["age"] = round(self._now - info.created_at, 3)
        node["details"] = {
            "session": sid,
            "version": info.version,
            "phase": info.phase.value,
            "log": f"{log.events}/{log.max_events} events, "
            f"{_size(log.bytes)}/{_size(log.max_bytes)}",
            "log_events": log.events,
            "log_max_events": log.max_events,
            "log_bytes": log.bytes,
            "log_max_bytes": log.max_bytes,
            "appended": log.appended,
            "evicted": log.evicted,
        }
        state = _session_state(info)
        if state is not None:
            node["state"] = state.value
        if info.end_reason is not None:
            node["details"]["ended"] = info.end_reason.value
        for cut in info.recent_cuts:
            # A cut view's connection may be gone already: the session remembers it.
            when = "" if cut.ended_at is None else f" {self._now - cut.ended_at:.1f} s ago"
            children.append({
                "id": f"c{id(cut):x}",
                "type": "ended",
                "kind": RoleKind.VIEW.value,
                "name": f"stream {cut.stream}",
                "label": f"view of stream {cut.stream} cut{when} · delivered {cut.delivered}, "
                "told to resume",
                "state": Attention.CUT.value,
                "details": {"stream": cut.stream, "delivered": cut.delivered},
            })

    def _annotate_handler(self, node: dict[str, Any], info: SessionInfo, rid: Any) -> None:
        for h in info.handlers:
            if h.request_id == rid:
                stream = "JSON" if h.stream is None else f"stream {h.stream}"
                node["label"] = f"handler {h.method} id={json.dumps(h.request_id)} → {stream}"
                node["details"] = {
                    "method": h.method,
                    "id": h.request_id,
                    "session": info.session_id[:SESSION_ID_SHOWN],
                    "cancel_called": h.cancel_called,
                }
                if h.cancel_called:
                    node["state"] = Attention.CANCELLED.value
                return

    def _annotate_connection(
        self, node: dict[str, Any], kind: RoleKind, info: SessionInfo, stream: int
    ) -> None:
        view = next((v for v in info.views if v.stream == stream), None)
        if view is None:
            view = next((v for v in reversed(info.recent_cuts) if v.stream == stream), None)
        if view is None:
            return
        sid = info.session_id[:SESSION_ID_SHOWN]
        if kind is RoleKind.VIEW:
            what = "standalone stream" if stream == 0 else f"stream {stream}"
            node["label"] = (
                f"view of session {sid}…'s {what} · cursor {view.cursor}, "
                f"delivered {view.delivered}, lag {view.lag}"
            )
            node["details"] = {
                "session": sid, "stream": stream, "cursor": view.cursor,
                "delivered": view.delivered, "lag": view.lag,
            }
            state = _view_state(view)
            if state is not None:
                node["state"] = state.value
            return
        writer = view.writer
        if writer is None:
            return
        judgement = writer.judgement.value
        node["label"] = (
            f"writer of stream {stream} · {_size(writer.bytes_queued)} queued, "
            f"{_size(writer.bytes_written)} written · {judgement}"
            + (" · paced" if writer.paced else "")
        )
        node["details"] = {
            "stream": stream,
            "bytes_queued": writer.bytes_queued,
            "bytes_written": writer.bytes_written,
            "judgement": judgement,
            "stalled_for": round(writer.stalled_for, 3),
            "paced": writer.paced,
            "probing": writer.probing,
        }
        state = _JUDGED.get(writer.judgement)
        if state is not None:
            node["state"] = state.value


#: What a writer's judgement highlights.
_JUDGED: Final = {Judgement.STALLED: Attention.STALLED, Judgement.SLOW: Attention.SLOW}


def _view_state(view: ViewInfo) -> Attention | None:
    if view.end_reason is ViewEnd.STALLED:
        return Attention.CUT
    if view.writer is not None and view.writer.judgement in _JUDGED:
        return _JUDGED[view.writer.judgement]
    if view.stopping:
        return Attention.CLOSING
    return None


def _session_state(info: SessionInfo) -> Attention | None:
    states = [s for s in map(_view_state, info.views) if s is not None]
    if info.recent_cuts:
        states.append(Attention.CUT)
    if info.closed:
        states.append(Attention.CLOSING)
    if any(h.cancel_called for h in info.handlers):
        states.append(Attention.CANCELLED)
    return min(states, key=lambda a: a.rank) if states else None


# -- the tree as text (trio-mcp tree URL) ---------------------------------------------------------


def _line(node: Mapping[str, Any]) -> str:
    kind = node.get("type")
    if kind == "nursery":
        text = "nursery"
    elif kind == "group":
        states = node.get("states") or {}
        extra = "".join(f", {n} {s}" for s, n in states.items())
        text = f"{node['count']} × {node['kind']} {node['name']}{extra}"
    else:
        text = node.get("label") or node.get("name", "?")
        if "age" in node and node["age"] is not None:
            text += f" · {node['age']:.1f} s"
    state = node.get("state")
    return f"{text}  [{state}]" if state else text


def render_text(doc: Mapping[str, Any]) -> str:
    """The JSON tree of ``/tree.json`` as an indented tree, one task per line."""
    head = (
        f"{doc.get('server')}: {doc.get('sessions')} sessions, "
        f"{doc.get('modern_requests')} modern requests, {doc.get('task_runs')} task runs"
    )
    if "spawned" in doc:
        head += f"; tasks spawned {doc['spawned']}, exited {doc['exited']}"
    lines = [head]

    def walk(node: Mapping[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(prefix + branch + _line(node))
        inner = prefix if top else prefix + ("    " if last else "│   ")
        children = list(node.get("children") or [])
        more = int(node.get("more") or 0)
        for n, child in enumerate(children):
            walk(child, inner, n == len(children) - 1 and not more, False)
        if more:
            lines.append(inner + f"└── … {more} more")

    walk(doc["root"], "", True, True)
    if doc.get("omitted"):
        lines.append(f"({doc['omitted']} tasks not shown: the snapshot is capped)")
    return "\n".join(lines) + "\n"


# -- the HTTP side ------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class InspectorApp:
    """The inspector as an ASGI app: the page at ``/``, the tree at ``/tree.json``, and the
    tree again at ``/events`` as an SSE stream, at most every MIN_INTERVAL seconds, and less
    often when a snapshot takes more than MAX_SHARE of the time between two. Snapshots are
    taken only when a request asks for one, and shared by every request until the next is
    due."""

    def __init__(
        self, builder: TreeBuilder, stopped: trio.Event, *, interval: float = MIN_INTERVAL
    ) -> None:
        self.builder = builder
        self.stopped = stopped
        self.interval = interval
        self._cached: bytes | None = None
        #: When the next snapshot may be taken (trio time).
        self.next_at = -math.inf
        #: Pages reading /events now.
        self.readers = 0

    def tree_json(self) -> bytes:
        """The latest snapshot as JSON: a fresh one once the next is due."""
        now = trio.current_time()
        if self._cached is None or now >= self.next_at:
            started = time.perf_counter()
            self._cached = json.dumps(self.builder.snapshot(), separators=(",", ":")).encode()
            cost = time.perf_counter() - started
            self.next_at = now + max(self.interval, cost / MAX_SHARE)
        return self._cached

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        host = _host_of(scope)
        if host not in _LOOPBACK_NAMES:
            # TM-SEC-INSPECT: a page served from elsewhere, reaching this port through a name
            # that resolves to loopback (DNS rebinding), is not answered.
            await _reply(send, 421, b"text/plain", b"the inspector answers loopback names only\n")
            return
        path = scope.get("path", "/")
        if scope["method"] not in ("GET", "HEAD"):
            await _reply(send, 405, b"text/plain", b"GET only\n")
        elif path == "/":
            await _reply(send, 200, b"text/html; charset=utf-8", PAGE.encode())
        elif path == "/tree.json":
            await _reply(send, 200, b"application/json", self.tree_json())
        elif path == "/events" and scope["method"] == "HEAD":
            # The stream's head alone: HEAD has no body, so a stream would hold the
            # connection without end and send nothing (found by the socket fuzzer).
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/events":
            await self._events(receive, send)
        else:
            await _reply(send, 404, b"text/plain", b"not found\n")

    async def _events(self, receive: Receive, send: Send) -> None:
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")],
        })
        self.readers += 1
        try:
            async with trio.open_nursery() as nursery:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                async def until_stopped() -> None:
                    await self.stopped.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_gone)
                nursery.start_soon(until_stopped)
                await send({"type": "http.response.body", "body": encode_event(retry=2000),
                            "more_body": True})
                while True:
                    event = encode_message_event(data=self.tree_json())
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    await trio.sleep_until(self.next_at)
        finally:
            self.readers -= 1
        if not self.stopped.is_set():
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _host_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            text = bytes(value).decode("latin-1").lower()
            if text.startswith("["):
                return text[: text.find("]") + 1]
            return text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    return ""


async def _reply(send: Send, status: int, content_type: bytes, body: bytes) -> None:
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store")],
    })
    await send({"type": "http.response.body", "body": body})


def fetch_tree(url: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """GET the JSON tree from an inspector: ``url`` is its page or ``/tree.json`` itself."""
    import urllib.request

    if not url.rstrip("/").endswith("/tree.json"):
        url = url.rstrip("/") + "/tree.json"
    if "://" not in url:
        url = "http://" + url
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data

