# Recorded timelines (issue 23): what one session does, as a list of records that a sequence
# diagram can be drawn from (trio_mcp.cli._diagram). The runtime calls a Tracer at the points
# that make the story of a session: a request arriving, a handler starting and ending, an
# event appended to the log, a connection attaching to a stream, taking events and leaving.
# With no tracer installed (ServerConfig.tracer is None, the default) each of those points
# costs one attribute check.
#
# The runtime hands over raw identities (the session's random id, the identity of a
# connection's responder, the client's JSON-RPC ids); a TraceRecorder turns them into stable
# names (s1, c1, r1) and writes JSON lines without wall-clock times, so that a trace recorded
# twice from the same scenario is the same file.
from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

__all__ = [
    "TRACE_FORMAT",
    "TraceKind",
    "TraceRecord",
    "TraceRecorder",
    "Tracer",
    "anonymise",
    "dumps_trace",
    "load_trace",
    "loads_trace",
]

#: The first line of a trace file names its format and version.
TRACE_FORMAT = "trio-mcp-trace"
TRACE_VERSION = 1


class TraceKind(enum.Enum):
    """What happened. The fields each kind fills are listed with it."""

    #: An HTTP request reached the session: conn, http (POST, GET, DELETE), request (the
    #: first JSON-RPC request it carries), detail (its JSON-RPC methods, or the
    #: Last-Event-ID as stream.seq).
    REQUEST = "request"
    #: A complete HTTP answer that is no stream a view reads: conn, status, detail.
    REPLY = "reply"
    #: A session was created (its supervisor started): conn of the initialize.
    SESSION_OPEN = "session-open"
    #: A session ended: detail is why (deleted, expired, evicted, shutdown...).
    SESSION_CLOSE = "session-close"
    #: A handler task started for a request: request, method.
    HANDLER_START = "handler-start"
    #: A handler task ended: request, detail (returned, cancelled, input-required).
    HANDLER_END = "handler-end"
    #: An entry went into the log: stream, seq, request (the one it relates to), detail
    #: (priming, response, or the message's method).
    APPEND = "append"
    #: A connection became the reader of a stream: conn, stream, seq (its cursor).
    ATTACH = "attach"
    #: A connection took an event of its stream (the write completed): conn, stream, seq.
    DELIVER = "deliver"
    #: A connection stopped reading its stream: conn, stream, seq (the last event it took),
    #: detail (complete, client-gone, detached, server-closed, gap, stalled).
    DETACH = "detach"
    #: A request was cancelled while its handler ran: request, detail (why).
    CANCEL = "cancel"
    #: A 2026-07-28 handler needs input from the client: request, detail (the keys asked).
    INPUT_REQUIRED = "input-required"
    #: A connection cut for stalling took the signal that tells its client to resume:
    #: conn, stream, seq (the cursor it names), detail (the SSE event's name).
    SIGNAL = "signal"
    #: What the client did that the server cannot see (it read up to an event, it left):
    #: detail. Recorded by whoever drives the client, never by the runtime.
    CLIENT = "client"


RawId = str | int


@attrs.frozen(kw_only=True)
class TraceRecord:
    """One thing that happened. Identities are raw as the runtime gives them, or stable
    names (s1, c1, r1) once a TraceRecorder has anonymised them."""

    kind: TraceKind
    session: str | None = None
    conn: RawId | None = None
    """The HTTP exchange (one request and its response), e.g. a connection's responder."""
    request: RawId | None = None
    """The JSON-RPC request a handler serves or an entry relates to."""
    method: str | None = None
    http: str | None = None
    status: int | None = None
    stream: int | None = None
    seq: int | None = None
    detail: str | None = None
    at: float | None = None
    """Seconds since the trace began; None in traces written without timing."""

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object: its kind first, then the fields it has, in a
        fixed order."""
        out: dict[str, Any] = {"kind": self.kind.value}
        for field in _FIELDS:
            value = getattr(self, field)
            if value is not None:
                out[field] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceRecord:
        unknown = set(data) - {"kind", *_FIELDS}
        if unknown:
            raise ValueError(f"unknown trace fields: {sorted(unknown)}")
        return cls(kind=TraceKind(data["kind"]), **{k: v for k, v in data.items() if k != "kind"})


_FIELDS = (
    "at", "session", "conn", "http", "status", "request", "method", "stream", "seq", "detail",
)


class Tracer(Protocol):
    """What the runtime calls when ServerConfig.tracer is set. It must not block or raise:
    it is called from the middle of the runtime's bookkeeping."""

    def record(self, record: TraceRecord) -> None: ...


#: Kinds that concurrent tasks may record in either order for one cause (a session's end
#: cancels its handlers and stops its views in the same turn of trio's scheduler, in an
#: order trio keeps unspecified). A run of adjacent records of these kinds is put in one
#: canonical order, so that a trace does not depend on that order.
_COMMUTING = {
    TraceKind.CANCEL: 0,
    TraceKind.HANDLER_START: 1,
    TraceKind.HANDLER_END: 2,
    TraceKind.DETACH: 3,
    TraceKind.REPLY: 4,
}


class _Names:
    """Stable names for raw identities, in the order they are first seen."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._names: dict[object, str] = {}
        self._count = 0

    def fresh(self, key: object) -> str:
        """A new name for ``key``, even if it was seen before: an object's identity may be
        reused once it is gone, so a new exchange always gets a new name."""
        self._count += 1
        name = self._names[key] = f"{self._prefix}{self._count}"
        return name

    def __call__(self, key: object) -> str:
        name = self._names.get(key)
        return name if name is not None else self.fresh(key)


def anonymise(records: Iterable[TraceRecord]) -> list[TraceRecord]:
    """The records with stable names: sessions s1, s2...; exchanges c1, c2... and requests
    r1, r2... (per session), a REQUEST always starting a new one, since identities and
    JSON-RPC ids may be reused once their first holder is done. Times are made relative to
    the first record, and runs of commuting records put in canonical order."""
    sessions = _Names("s")
    conns = _Names("c")
    requests = _Names("r")
    out: list[TraceRecord] = []
    start: float | None = None
    for rec in records:
        conn = None
        if rec.conn is not None:
            conn = conns.fresh(rec.conn) if rec.kind is TraceKind.REQUEST else conns(rec.conn)
        request = None
        if rec.request is not None:
            key = (rec.session, rec.request)
            request = requests.fresh(key) if rec.kind is TraceKind.REQUEST else requests(key)
        at = rec.at
        if at is not None:
            start = at if start is None else start
            at = round(at - start, 6)
        out.append(
            attrs.evolve(
                rec,
                session=None if rec.session is None else sessions(rec.session),
                conn=conn,
                request=request,
                at=at,
            )
        )
    return canonical(out)


def _lifeline(rec: TraceRecord) -> tuple[str, str]:
    return (str(rec.conn or ""), str(rec.request or ""))


def canonical(records: Sequence[TraceRecord]) -> list[TraceRecord]:
    """``records`` with each run of adjacent commuting records (see _COMMUTING) sorted by
    kind, then by what it is about; records of one lifeline keep their order."""
    out: list[TraceRecord] = []
    run: list[TraceRecord] = []

    def flush() -> None:
        run.sort(key=lambda r: (_COMMUTING[r.kind], _natural(_lifeline(r))))
        out.extend(run)
        run.clear()

    for rec in records:
        if rec.kind in _COMMUTING:
            run.append(rec)
        else:
            flush()
            out.append(rec)
    flush()
    return out


def _natural(key: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """Sort c2 before c10."""
    parts = []
    for name in key:
        digits = name.lstrip("abcdefghijklmnopqrstuvwxyz")
        parts.append((name[: len(name) - len(digits)], int(digits) if digits.isdigit() else -1))
    return tuple(parts)


def dumps_trace(
    records: Iterable[TraceRecord], *, title: str | None = None, timing: bool = False
) -> str:
    """A trace file: a header line, then one JSON object per record. Without ``timing``
    the times are left out and the order of the lines is the only clock, so that the file
    does not depend on the speed of the machine that recorded it."""
    header: dict[str, Any] = {"format": TRACE_FORMAT, "version": TRACE_VERSION}
    if title is not None:
        header["title"] = title
    lines = [json.dumps(header, separators=(",", ":"))]
    for rec in records:
        if not timing:
            rec = attrs.evolve(rec, at=None)
        lines.append(json.dumps(rec.to_json(), separators=(",", ":")))
    return "\n".join(lines) + "\n"


def loads_trace(text: str) -> tuple[str | None, list[TraceRecord]]:
    """A trace file's title and records (raises ValueError for anything else)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("empty trace")
    header = json.loads(lines[0])
    if header.get("format") != TRACE_FORMAT or header.get("version") != TRACE_VERSION:
        raise ValueError(f"not a {TRACE_FORMAT} v{TRACE_VERSION} file: {lines[0][:80]}")
    title = header.get("title")
    return (title if isinstance(title, str) else None), [
        TraceRecord.from_json(json.loads(line)) for line in lines[1:]
    ]


def load_trace(path: str | Path) -> tuple[str | None, list[TraceRecord]]:
    return loads_trace(Path(path).read_text(encoding="utf-8"))


@attrs.define(eq=False)
class TraceRecorder:
    """A Tracer that keeps what it is given, stamped by ``clock`` (``trio.current_time``
    in a trio program). ``paused`` drops records: a scenario sets up before it records."""

    clock: Callable[[], float] | None = None
    raw: list[TraceRecord] = attrs.field(factory=list)
    paused: bool = False

    def record(self, record: TraceRecord) -> None:
        if self.paused:
            return
        if self.clock is not None:
            record = attrs.evolve(record, at=self.clock())
        self.raw.append(record)

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.raw)

    def kinds(self) -> list[TraceKind]:
        return [r.kind for r in self.raw]

    def trace(self) -> list[TraceRecord]:
        """What was recorded, with stable names (see anonymise)."""
        return anonymise(self.raw)

    def dumps(self, *, title: str | None = None, timing: bool = False) -> str:
        return dumps_trace(self.trace(), title=title, timing=timing)
