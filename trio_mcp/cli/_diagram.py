# A recorded timeline (trio_mcp.base._trace) drawn as a sequence diagram, in SVG written by hand:
# SVG is text, and drawing it here keeps the output ours to make deterministic (the same
# trace gives the same bytes) with no dependency the server does not need.
#
# Lifelines, left to right: the client; the connections (HTTP exchanges), each drawn from
# the request that opens it to its end; each session's supervisor task; the handlers, each an
# activation bar from its start to its end; each session's log. A connection or handler
# column is reused once its first holder has ended, so the width follows how many run at
# once, not how many there were. One row per record: the vertical axis is order, not time.
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

import attrs

from ..base._trace import TraceKind, TraceRecord, load_trace

__all__ = ["main", "render_svg"]

# Geometry, in pixels; integers only, so that the output does not depend on float formatting.
ROW = 26
TOP = 64
GAP = 216
#: The room before a column, by what it follows: wide where labels run between two
#: columns (client and first connection, last handler and log), narrow where none do.
TO_FIRST_CONN = 300
TO_NEXT_CONN = 120
TO_SUPERVISOR = 190
TO_HANDLER = 170
TO_LOG = 250
NOTES = 300  # room right of the last lifeline for the notes beside it
LEFT = 84
BOX_H = 20
CHAR_W = 7  # a generous average width of a 12 px sans-serif glyph
BAR_W = 10

CLIENT = "#1a202c"
CONN = "#2b6cb0"
SUPERVISOR = "#2f855a"
HANDLER = "#c05621"
LOG = "#6b46c1"
BAD = "#c53030"
MUTED = "#718096"

#: How a connection's end is told, by why it ended (trio_mcp.runtime.backpressure._view.ViewEnd).
_ENDINGS = {
    "complete": ("stream complete: the response ends it", False, CONN),
    "client-gone": ("dropped: the client went away", True, BAD),
    "detached": ("detached: another connection took the stream", True, MUTED),
    "server-closed": ("closed by the server, with retry", True, MUTED),
    "gap": ("resumption failed: the cursor left the window", True, BAD),
    "stalled": ("cut for stalling: told to resume (resumption-required)", True, BAD),
}


@attrs.define
class _Column:
    """One lifeline's place: x, and who holds it from which row to which."""

    x: int
    colour: str
    header: str | None = None
    """A lifeline drawn from the top, with this name; else each holder has a box."""


@attrs.define
class _Span:
    """One holder of a column: a connection, a handler, a session's supervisor or log."""

    column: int
    name: str
    start: int
    """The row of its box (-1: the header at the top)."""
    end: int | None = None
    cross: str | None = None
    """The colour of the X that ends it, if it ends badly; else a plain end."""
    bar: bool = False


class _Layout:
    """Columns and spans for a trace: the first pass over it."""

    def __init__(self, records: Sequence[TraceRecord]) -> None:
        self.records = records
        conn_slots, handler_slots, sessions = self._count()
        self.client = 0
        self.columns: list[_Column] = [_Column(x=LEFT, colour=CLIENT, header="client")]
        self.conn_columns = self._add(conn_slots, CONN, TO_FIRST_CONN, TO_NEXT_CONN)
        self.supervisor_column = dict(
            zip(sessions, self._add(len(sessions), SUPERVISOR, TO_SUPERVISOR), strict=True)
        )
        self.handler_columns = self._add(handler_slots, HANDLER, TO_HANDLER)
        self.log_column = dict(zip(sessions, self._add(len(sessions), LOG, TO_LOG), strict=True))
        self.width = self.columns[-1].x + NOTES

    def _add(self, count: int, colour: str, first: int, then: int | None = None) -> list[int]:
        """``count`` more columns, ``first`` pixels after the last one, then ``then`` apart."""
        added = []
        for i in range(count):
            x = self.columns[-1].x + (first if i == 0 else then or first)
            added.append(len(self.columns))
            self.columns.append(_Column(x=x, colour=colour))
        return added

    def _count(self) -> tuple[int, int, list[str]]:
        """How many connections and handlers run at once at most, and the sessions."""
        conns: set[str] = set()
        handlers: set[str] = set()
        most_conns = most_handlers = 0
        sessions: list[str] = []
        signalled = {str(r.conn) for r in self.records if r.kind is TraceKind.SIGNAL}
        for rec in self.records:
            if rec.session is not None and rec.session not in sessions:
                sessions.append(rec.session)
            if rec.conn is not None:
                conns.add(str(rec.conn))
                most_conns = max(most_conns, len(conns))
                if _ends_conn(rec) and not _cut_then_signalled(rec, signalled):
                    conns.discard(str(rec.conn))
            if rec.kind is TraceKind.HANDLER_START and rec.request is not None:
                handlers.add(str(rec.request))
                most_handlers = max(most_handlers, len(handlers))
            elif rec.kind is TraceKind.HANDLER_END:
                handlers.discard(str(rec.request))
        return most_conns, most_handlers, sessions


def _cut_then_signalled(rec: TraceRecord, signalled: set[str]) -> bool:
    return rec.detail == "stalled" and str(rec.conn) in signalled


def _ends_conn(rec: TraceRecord) -> bool:
    return rec.kind in (TraceKind.DETACH, TraceKind.REPLY, TraceKind.SIGNAL)


class _Canvas:
    """SVG elements, in drawing order: lifelines and bars below, arrows and text above."""

    def __init__(self) -> None:
        self.back: list[str] = []
        self.front: list[str] = []

    def line(
        self, x1: int, y1: int, x2: int, y2: int, colour: str, *, dashed: bool = False,
        width: int = 1, back: bool = False, arrow: bool = False,
    ) -> None:
        extra = ' stroke-dasharray="5 4"' if dashed else ""
        if arrow:
            extra += f' marker-end="url(#head-{colour[1:]})"'
        (self.back if back else self.front).append(
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" '
            f'stroke-width="{width}"{extra}/>'
        )

    def text(
        self, x: int, y: int, text: str, *, colour: str = CLIENT, anchor: str = "middle",
        bold: bool = False, size: int = 12,
    ) -> None:
        weight = ' font-weight="bold"' if bold else ""
        # A white outline under the glyphs keeps a label legible where it crosses a line.
        self.front.append(
            f'<text x="{x}" y="{y}" fill="{colour}" text-anchor="{anchor}" '
            f'font-size="{size}"{weight} stroke="#ffffff" stroke-width="3" '
            f'paint-order="stroke">{escape(text)}</text>'
        )

    def box(self, x: int, y: int, text: str, colour: str, *, max_width: int) -> int:
        """A lifeline's head centred on (x, y); returns its half width."""
        text = _fit(text, max_width - 12)
        half = (len(text) * CHAR_W + 12) // 2
        self.front.append(
            f'<rect x="{x - half}" y="{y - BOX_H // 2}" width="{2 * half}" height="{BOX_H}" '
            f'rx="4" fill="#ffffff" stroke="{colour}" stroke-width="1.5"/>'
        )
        self.text(x, y + 4, text, colour=colour, bold=True)
        return half

    def cross(self, x: int, y: int, colour: str) -> None:
        for dx in (-7, 7):
            self.front.append(
                f'<line x1="{x - dx}" y1="{y - 7}" x2="{x + dx}" y2="{y + 7}" '
                f'stroke="{colour}" stroke-width="2.5"/>'
            )

    def bar(self, x: int, y1: int, y2: int, colour: str, width: int) -> None:
        self.back.append(
            f'<rect x="{x - width // 2}" y="{y1}" width="{width}" height="{max(y2 - y1, 2)}" '
            f'fill="{colour}" fill-opacity="0.22" stroke="{colour}" stroke-width="1"/>'
        )


def _fit(text: str, width: int) -> str:
    """``text`` cut with an ellipsis to about ``width`` pixels."""
    # 6.5 px a glyph on average (boxes are sized at CHAR_W, more generously).
    most = max(4, 2 * width // 13)
    return text if len(text) <= most else text[: most - 1] + "…"


class _Renderer:
    def __init__(self, title: str | None, records: Sequence[TraceRecord]) -> None:
        self.title = title
        self.records = records
        self.layout = _Layout(records)
        self.canvas = _Canvas()
        self.spans: list[_Span] = []
        self.conn_span: dict[str, _Span] = {}
        self.handler_span: dict[str, _Span] = {}
        self.session_spans: dict[str, tuple[_Span, _Span]] = {}
        self.request_conn: dict[str, str] = {}
        self.labels: dict[tuple[str | None, int], str] = {}
        self.delivered: set[tuple[str | None, int, int]] = set()
        #: Connections that were cut and then took the signal to resume: they end there.
        self.signalled = {str(r.conn) for r in records if r.kind is TraceKind.SIGNAL}

    # -- columns ---------------------------------------------------------------------------

    def _x(self, column: int) -> int:
        return self.layout.columns[column].x

    def _y(self, row: int) -> int:
        return TOP + row * ROW + ROW // 2

    def _free(self, columns: list[int], row: int) -> int:
        busy = {s.column for s in self.spans if s.end is None or s.end >= row}
        return next(c for c in columns if c not in busy)

    def _open(self, columns: list[int], name: str, row: int, *, bar: bool) -> _Span:
        span = _Span(column=self._free(columns, row), name=name, start=row, bar=bar)
        self.spans.append(span)
        return span

    def _session(self, session: str, row: int) -> tuple[_Span, _Span]:
        spans = self.session_spans.get(session)
        if spans is None:
            sup = _Span(self.layout.supervisor_column[session], f"supervisor {session}", row)
            log = _Span(self.layout.log_column[session], f"log of {session}", row)
            self.spans += [sup, log]
            spans = self.session_spans[session] = (sup, log)
        return spans

    def _conn(self, rec: TraceRecord, row: int) -> _Span:
        name = str(rec.conn)
        span = self.conn_span.get(name)
        if span is None or rec.kind is TraceKind.REQUEST:
            span = self.conn_span[name] = self._open(
                self.layout.conn_columns, name, row, bar=True
            )
        return span

    def _edge(self, span: _Span, row: int, towards: int) -> int:
        """Where an arrow meets ``span`` on ``row``: its box's side if its box is there, else
        its bar's side, else its line."""
        x = self._x(span.column)
        if span.start == row:
            half = (len(_fit(self._box_text(span), GAP - 24)) * CHAR_W + 12) // 2
            return x - half if towards < x else x + half
        if span.bar:
            return x - BAR_W // 2 if towards < x else x + BAR_W // 2
        return x

    def _box_text(self, span: _Span) -> str:
        return span.name

    # -- drawing ---------------------------------------------------------------------------

    def arrow(
        self, row: int, src: int | _Span, dst: int | _Span, label: str, colour: str, *,
        dashed: bool = False,
    ) -> None:
        sx = self._x(src if isinstance(src, int) else src.column)
        dx = self._x(dst if isinstance(dst, int) else dst.column)
        x1 = sx if isinstance(src, int) else self._edge(src, row, dx)
        x2 = dx if isinstance(dst, int) else self._edge(dst, row, sx)
        y = self._y(row)
        self.canvas.line(x1, y, x2, y, colour, dashed=dashed, width=1, arrow=True)
        self.canvas.text(
            (x1 + x2) // 2, y - 5, _fit(label, max(abs(x2 - x1), GAP) - 8), colour=colour
        )

    def note(self, row: int, span: _Span | int, label: str, colour: str) -> None:
        """Text beside a lifeline, to its right."""
        x = self._x(span if isinstance(span, int) else span.column)
        self.canvas.text(x + 12, self._y(row) + 4, _fit(label, 2 * GAP), colour=colour,
                         anchor="start")

    def end(self, span: _Span, row: int, cross: str | None) -> None:
        span.end = row
        span.cross = cross

    def render(self) -> str:
        for row, rec in enumerate(self.records):
            self._draw(row, rec)
        return self._svg(len(self.records))

    def _draw(self, row: int, rec: TraceRecord) -> None:
        kind = rec.kind
        session = rec.session
        if session is not None:
            sup, log = self._session(session, -1)
        request = None if rec.request is None else str(rec.request)
        if kind is TraceKind.REQUEST:
            conn = self._conn(rec, row)
            what = rec.detail or ""
            if request is not None:
                self.request_conn[request] = conn.name
                # The request's name goes after its method, before what else it carries.
                method, _, rest = what.partition(" ")
                what = f"{method} {request} {rest}".strip()
            self.arrow(row, self.layout.client, conn, f"{rec.http or ''} {what}".strip(), CLIENT)
        elif kind is TraceKind.SESSION_OPEN and session is not None:
            sup.start = log.start = row
            self.arrow(row, self._conn(rec, row), sup, f"new session {session}", SUPERVISOR)
        elif kind is TraceKind.SESSION_CLOSE and session is not None:
            self.end(sup, row, BAD)
            self.note(row, sup, f"session ends ({rec.detail}): its nursery is cancelled", BAD)
        elif kind is TraceKind.HANDLER_START and request is not None:
            span = self.handler_span[request] = self._open(
                self.layout.handler_columns, f"{rec.method} {request}", row, bar=True
            )
            src: int | _Span = sup if session is not None else self._conn_of(request)
            self.arrow(row, src, span, "start handler task", SUPERVISOR if session else CONN)
        elif kind is TraceKind.HANDLER_END and request in self.handler_span:
            span = self.handler_span.pop(request)
            cancelled = rec.detail == "cancelled"
            self.end(span, row, BAD if cancelled else None)
            if cancelled and session is not None and sup.end is not None:
                # The session's end reached it through the nursery's cancel scope.
                self.arrow(row, sup, span, "cancelled with the nursery", BAD, dashed=True)
            else:
                self.note(row, span, rec.detail or "ended", BAD if cancelled else HANDLER)
        elif kind is TraceKind.CANCEL and request in self.handler_span:
            src = sup if session is not None else self._conn_of(request)
            self.arrow(row, src, self.handler_span[request], "cancel its scope", BAD)
        elif kind is TraceKind.APPEND and session is not None:
            self._append(row, rec, log)
        elif kind is TraceKind.ATTACH and session is not None:
            where = "its start" if rec.seq is None or rec.seq < 0 else f"{rec.stream}.{rec.seq}"
            self.arrow(row, self._conn(rec, row), log,
                       f"read stream {rec.stream} after {where}", CONN, dashed=True)
        elif kind is TraceKind.DELIVER:
            self._deliver(row, rec)
        elif kind is TraceKind.DETACH and _cut_then_signalled(rec, self.signalled):
            # Cut: it reads the log no more, but finishes its write and signals first.
            self.note(row, self._conn(rec, row), "cut for stalling: reads the log no more", BAD)
        elif kind is TraceKind.SIGNAL:
            conn = self._conn(rec, row)
            where = "its start" if rec.seq is None or rec.seq < 0 else f"{rec.stream}.{rec.seq}"
            self.arrow(row, conn, self.layout.client,
                       f"{rec.detail}: resume after {where}", BAD)
            self.end(conn, row, BAD)
        elif kind is TraceKind.DETACH:
            conn = self._conn(rec, row)
            text, crossed, colour = _ENDINGS.get(
                rec.detail or "", (rec.detail or "ends", True, MUTED)
            )
            self.end(conn, row, colour if crossed else None)
            self.note(row, conn, text, colour)
        elif kind is TraceKind.REPLY:
            conn = self._conn(rec, row)
            said = rec.detail or _STATUS.get(rec.status or 0, "")
            self.arrow(row, conn, self.layout.client, f"{rec.status or ''} {said}".strip(),
                       CONN, dashed=True)
            self.end(conn, row, None)
        elif kind is TraceKind.CLIENT:
            self.note(row, self.layout.client, rec.detail or "", CLIENT)
        elif kind is TraceKind.INPUT_REQUIRED and request in self.handler_span:
            self.note(row, self.handler_span[request], f"input_required: {rec.detail}", HANDLER)

    def _conn_of(self, request: str) -> int | _Span:
        span = self.conn_span.get(self.request_conn.get(request, ""))
        return span if span is not None and span.end is None else self.layout.client

    def _append(self, row: int, rec: TraceRecord, log: _Span) -> None:
        request = None if rec.request is None else str(rec.request)
        what = rec.detail if rec.detail is not None else (rec.method or "message")
        if what in ("response",) or what.startswith("error"):
            what = f"{what} to {request}"
        self.labels[(rec.session, rec.seq or 0)] = what
        label = f"{rec.stream}.{rec.seq} {what}"
        if rec.detail == "priming":
            self.note(row, log, f"stream {rec.stream}: priming position {rec.stream}.{rec.seq}",
                      LOG)
            return
        src: _Span | int | None = self.handler_span.get(request or "")
        if src is None and request is not None:
            src = self._conn_of(request)
            if src == self.layout.client:
                src = None
        if src is None:
            self.note(row, log, f"append {label}", LOG)
            return
        self.arrow(row, src, log, label, HANDLER if isinstance(src, _Span) and
                   src.column in self.layout.handler_columns else CONN)

    def _deliver(self, row: int, rec: TraceRecord) -> None:
        conn = self._conn(rec, row)
        seq = rec.seq or 0
        key = (rec.session, rec.stream or 0, seq)
        what = "priming, no data" if rec.detail == "priming" else self.labels.get(
            (rec.session, seq), "message"
        )
        again = key in self.delivered and rec.detail != "priming"
        label = f"id {rec.stream}.{seq} {'again, ' if again else ''}{what}"
        self.delivered.add(key)
        self.arrow(row, conn, self.layout.client, label, CONN)

    # -- output ----------------------------------------------------------------------------

    def _svg(self, rows: int) -> str:
        bottom = TOP + rows * ROW + ROW
        canvas = self.canvas
        layout = self.layout
        # The client's lifeline, and the headers of whole-length lifelines.
        cx = self._x(layout.client)
        canvas.box(cx, TOP - 18, "client", CLIENT, max_width=GAP)
        canvas.line(cx, TOP - 8, cx, bottom, CLIENT, dashed=True, back=True)
        for span in self.spans:
            colour = layout.columns[span.column].colour
            x = self._x(span.column)
            start_y = TOP - 18 if span.start < 0 else self._y(span.start)
            end_y = bottom if span.end is None else self._y(span.end)
            canvas.line(x, start_y + BOX_H // 2, x, end_y, colour, dashed=True, back=True)
            if span.bar:
                canvas.bar(x, start_y + BOX_H // 2, end_y, colour, BAR_W)
            canvas.box(x, start_y, self._box_text(span), colour, max_width=GAP - 12)
            if span.end is not None:
                if span.cross is not None:
                    canvas.cross(x, end_y, span.cross)
                else:
                    canvas.line(x - 8, end_y, x + 8, end_y, colour, width=2)
        height = bottom + 28
        title = self.title or "trio-mcp trace"
        width = max(layout.width, 32 + len(title) * 9)
        colours = sorted({c.colour for c in layout.columns} | {BAD, MUTED, CONN, CLIENT})
        markers = "".join(
            f'<marker id="head-{c[1:]}" viewBox="0 0 10 10" refX="10" refY="5" '
            f'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
            for c in colours
        )
        caption = (
            "One row per recorded event, in order; not to time scale. "
            "Regenerate: python docs/diagrams.py"
        )
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
            f"<title>{escape(title)}</title>",
            f"<defs>{markers}</defs>",
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
            f'<text x="16" y="22" font-size="15" font-weight="bold" fill="{CLIENT}">'
            f"{escape(title)}</text>",
            '<g stroke-linecap="round">',
            *canvas.back,
            '</g><g stroke-linecap="round">',
            *canvas.front,
            "</g>",
            f'<text x="16" y="{height - 10}" font-size="11" fill="{MUTED}">'
            f"{escape(caption)}</text>",
            "</svg>",
        ]
        return "\n".join(parts) + "\n"


_STATUS = {200: "", 202: "Accepted", 204: "No Content"}


def render_svg(records: Iterable[TraceRecord], *, title: str | None = None) -> str:
    """A sequence diagram of ``records`` (anonymised: see trio_mcp.base._trace.anonymise), as the
    text of an SVG file. The same records give the same text."""
    return _Renderer(title, list(records)).render()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trio_mcp.cli._diagram TRACE.jsonl [-o OUT.svg]``: draw a trace file."""
    parser = argparse.ArgumentParser(
        prog="python -m trio_mcp.cli._diagram", description=main.__doc__
    )
    parser.add_argument("trace", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)
    title, records = load_trace(args.trace)
    svg = render_svg(records, title=title)
    if args.output is None:
        sys.stdout.write(svg)
    else:
        args.output.write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
