# The legacy endpoint (spec/transport.md, spec/sessions.md): a validated HTTP request of a
# 2025 session, POST, GET or DELETE, turned into a plan by trio_mcp.protocol, then into calls
# of the session it names. Every protocol decision is made by trio_mcp.protocol; the sessions
# live in the table (trio_mcp.runtime.legacy._table); what the other workers must do is the peers'
# (trio_mcp.runtime.store._peers).
#
# A POST makes three calls of its session: ``receive`` (the lifecycle table, notifications and
# responses), ``start`` (its requests' handlers, and the stream their responses go to), then
# one that answers: the stream sent whole (TM-POST-ATONCE), a View of it, or the JSON wait.
from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ...base._config import ResponseMode
from ...base._trace import TraceKind, TraceRecord
from ...protocol import (
    STANDALONE_STREAM,
    CursorCodec,
    Entry,
    ErrorCode,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
)
from ...protocol._fair import Unit, UnitPolicy
from ...protocol._jsonrpc import dumps_json
from ...protocol._lifecycle import initialize_result
from ...protocol._resume import holder_gone, holder_gone_event, unknown_cursor
from ...protocol._transport import (
    SSE_HEADERS,
    GetPlan,
    HttpRequest,
    PostPlan,
    Reply,
    check_batch,
    json_reply,
    method_not_allowed,
    plan_delete,
    plan_get,
    plan_legacy_post,
    session_not_found,
)
from ...protocol._versions import effective_version, negotiate
from .._describe import SessionEnd
from .._pools import Charge, Pool, pool_busy
from .._stats import counter
from ..backpressure._responder import Responder
from ..backpressure._view import View
from ..store._peers import Resumed
from ..store._store import SessionRecord
from ._handlers import answered_at_once
from ._session import Session

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...base._ports import App
    from ..store._peers import Peers
    from ._table import SessionTable

__all__ = ["EndpointStatistics", "LegacyEndpoint"]


@attrs.frozen
class EndpointStatistics:
    """What the legacy endpoint counted (TM-BP-COUNTERS)."""

    sessions_created: int = counter()
    sessions_deleted: int = counter()
    streams_opened: int = counter()
    sessions_refused: int = counter()
    """Initialize requests answered 503: the table was full and their client held its fair
    share of it or more, with no idle session of its own to give up (TM-SESS-CAP), or the
    shared store was (TM-STORE-BOUND)."""
    client_state_refused: int = counter()
    """Initialize requests refused for the size of their clientInfo and capabilities
    (TM-SEC-STATE)."""


@attrs.define
class _Counts:
    sessions_created: int = 0
    sessions_deleted: int = 0
    streams_opened: int = 0
    sessions_refused: int = 0
    client_state_refused: int = 0


class LegacyEndpoint:
    """Serves the legacy requests of one runtime's sessions."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        table: SessionTable,
        peers: Peers,
        codec: CursorCodec,
        streams: Pool[Any],
        units: UnitPolicy,
    ) -> None:
        self.app = app
        self.config = config
        #: Every session's event ids are sealed under this one key.
        self.codec = codec
        self.table = table
        self.peers = peers
        #: TM-SEC-FAIR: the long-lived streams of both eras; legacy GET streams are entered.
        self.streams = streams
        #: TM-SEC-UNIT: who a client is, for the fair shares.
        self.units = units
        self._counts = _Counts()

    async def serve(
        self, request: HttpRequest, responder: Responder, *, unit: Unit | None = None
    ) -> None:
        """Serve a legacy GET or DELETE (or refuse another method); the Runtime checked
        Origin and Host, and the era, and says whose the request is, ``unit`` (raises
        RemoteProtocolError)."""
        if request.method == "GET":
            await self._get(request, responder, unit or self._unit_of(request))
        elif request.method == "DELETE":
            await self._delete(request, responder)
        else:
            raise method_not_allowed()

    async def _lookup(self, session_id: str, request: HttpRequest) -> Session:
        session = await self.peers.find(session_id)
        if session is None or session.creator.principal != _principal_key(request):
            # T-AUTH-BIND: another principal's session is one it has never heard of: 404,
            # as for an id that does not exist (a 403 would confirm that it does).
            raise session_not_found()
        return session

    def _unit_of(self, request: HttpRequest) -> Unit:
        return self.units.of_request(_principal_key(request), request.peer_host, request.headers)

    # -- POST -----------------------------------------------------------------------------

    async def post(
        self,
        request: HttpRequest,
        body: Any,
        responder: Responder,
        *,
        unit: Unit | None = None,
        charge: Charge | None = None,
    ) -> None:
        """Serve a legacy POST whose body the Runtime decoded, charged with ``charge`` to
        its client ``unit`` (raises RemoteProtocolError)."""
        plan = plan_legacy_post(request.headers, body)
        if plan.is_initialize and plan.session_id is None:
            await self._initialize(plan, request, responder, unit or self._unit_of(request))
            return
        assert plan.session_id is not None
        session = await self._lookup(plan.session_id, request)
        # The client showed itself: its session is the table's last to evict (the session's
        # own clocks are set by ``receive``).
        self.table.used(session)
        if self.config.tracer is not None:
            self._trace_post(session, plan, responder)
        # Checked for validity; the session's negotiated version rules behaviour.
        effective_version(plan.version_header, session.version)
        check_batch(plan, session.version)
        received = session.receive(plan.messages)
        if received.changed:
            # notifications/initialized: stored before it is acknowledged (TM-STORE-RECORD).
            await self.peers.save(session)
        if not received.requests:
            # T-POST-4 (MUST): accepted notifications and responses get 202 with no body.
            await responder.reply(Reply(status=202))
            if self.config.tracer is not None:
                self._trace(TraceKind.REPLY, session, responder, status=202)
            return
        if self.config.response_mode is ResponseMode.JSON:
            await self._answer_json(session, received.requests, plan, responder, request, charge)
            return
        started = session.start(
            received.requests, sse=True, principal=request.principal, charge=charge,
            peer=self.units.client_address(request.peer_host, request.headers),
        )
        assert started.stream is not None
        # Handlers that answer without waiting on anything have done so after two turns of
        # the scheduler (trio runs a batch in either order). Their stream is then complete
        # before its first byte goes out, and needs no view, writer or watcher.
        if await answered_at_once(started.flights):
            await self._send_whole(session, started.stream, started.priming, responder)
        else:
            await self._serve_view(session, started.stream, -1, responder,
                                   priming=started.priming)

    async def _answer_json(
        self,
        session: Session,
        requests: tuple[Request, ...],
        plan: PostPlan,
        responder: Responder,
        request: HttpRequest,
        charge: Charge | None,
    ) -> None:
        peer = self.units.client_address(request.peer_host, request.headers)
        flights = session.start(requests, sse=False, principal=request.principal, peer=peer,
                                charge=charge).flights
        # The POST waits for its handlers (Handlers.wait_json); a client that leaves gets
        # nothing (T-PSSE-12: the handlers finish, their results dropped).
        if not await session.handlers.wait_json(flights, responder):
            return
        outcomes = [f.outcome for f in flights if f.outcome is not None]
        if not outcomes and session.closed:
            # T-SESS-7 (MUST): the session ended (DELETE, expiry, eviction) before any
            # answer; its id now gets 404, so the client knows to start a new session.
            raise session_not_found()
        if not outcomes:
            # TM-CANCEL-JSON: every request was cancelled by the client. U-CANCEL-4
            # (SHOULD) asks for no response, and T-POST-7 (MUST) for a JSON body or a
            # stream, in any mode: a stream that ends with no response keeps both.
            await responder.reply(Reply(status=200, headers=SSE_HEADERS))
            return
        body: Any = [o.to_dict() for o in outcomes] if plan.batch else outcomes[0].to_dict()
        await responder.reply(json_reply(200, body))

    async def _initialize(
        self, plan: PostPlan, request: HttpRequest, responder: Responder, unit: Unit
    ) -> None:
        [message] = plan.messages
        assert isinstance(message, Request)
        params = message.params or {}
        requested = params.get("protocolVersion")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo", {})
        if not isinstance(requested, str) or not isinstance(caps, Mapping) or not isinstance(
            info, Mapping
        ):
            # TM-LIFE-INIT: an in-band JSON-RPC error (HTTP 200, application/json): it needs
            # no session, and a 4xx would send dual-transport clients to the old transport.
            raise RemoteProtocolError(
                "Invalid params: initialize needs protocolVersion (string), capabilities "
                "(object) and clientInfo (object).",
                code=ErrorCode.INVALID_PARAMS,
                http_status=200,
                request_id=message.id,
            )
        refusal = self.peers.legacy_refusal(requested, message.id)
        if refusal is not None:
            raise refusal
        state_bytes = len(dumps_json(caps)) + len(dumps_json(info))
        if state_bytes > self.config.max_client_state_bytes:
            # TM-SEC-STATE: the session would keep them for its whole life.
            self._counts.client_state_refused += 1
            raise RemoteProtocolError(
                f"Invalid params: clientInfo and capabilities take {state_bytes} bytes; "
                f"this server keeps at most {self.config.max_client_state_bytes}.",
                code=ErrorCode.INVALID_PARAMS,
                http_status=200,
                request_id=message.id,
            )
        if plan.version_header is not None:
            effective_version(plan.version_header, None)
        if not self.table.admit(unit.key):
            # TM-SESS-CAP / TM-SEC-FAIR: the table is full, and this client holds its share.
            self._counts.sessions_refused += 1
            raise pool_busy("sessions", retry_after=5, request_id=message.id)
        version = negotiate(requested)
        # T-SESS-2 / T-SEC-9 / T-SEC-10: 192 bits from the OS CSPRNG; T-SESS-3: base64url is
        # visible ASCII.
        record = SessionRecord(
            id=secrets.token_urlsafe(24), version=version, client_info=info,
            client_capabilities=caps, server_capabilities=self.app.capabilities(),
            client_state_bytes=state_bytes, principal=_principal_key(request), unit=unit.key,
            peer=self.units.client_address(request.peer_host, request.headers),
        )
        session = self.table.make(record)
        self.table.hold(session)
        try:
            # TM-STORE-RECORD / TM-STORE-BOUND: kept, and counted, where every worker finds
            # it before the client learns its id.
            created = await self.peers.create(record)
        except BaseException:
            self.table.give_up(session)
            raise
        if not created:
            self.table.give_up(session)
            self._counts.sessions_refused += 1
            raise RemoteProtocolError(
                "Service Unavailable: every session is busy; retry later.",
                code=ErrorCode.SERVER_BUSY,
                http_status=503,
                headers=(("retry-after", "5"),),
                request_id=message.id,
            )
        if not await self.table.enter(session):
            # Taken for another client's while it started (TM-SEC-FAIR): as if refused.
            self._counts.sessions_refused += 1
            raise pool_busy("sessions", retry_after=5, request_id=message.id)
        self._counts.sessions_created += 1
        if self.config.tracer is not None:
            self._trace_post(session, plan, responder)
            self._trace(TraceKind.SESSION_OPEN, session, responder)
        result = initialize_result(
            version,
            capabilities=record.server_capabilities,
            server_info=self.app.server_info(),
            instructions=self.app.instructions,
        )
        response = Response(id=message.id, result=result)
        # T-SESS-1: the session id rides the HTTP response that carries the InitializeResult.
        extra = (("mcp-session-id", session.id),)
        if self.config.response_mode is ResponseMode.JSON:
            body = dumps(response)
            await responder.reply(Reply(
                status=200, headers=(("content-type", "application/json"), *extra), body=body,
            ))
            return
        stream, priming = session.out.open((message.id,))
        session.out.append(
            stream, dumps(response), answers=message.id, request=message.id, detail="response"
        )
        # TM-POST-ATONCE: the stream is complete already. Sent whole, it needs no view, and on
        # trio-mcp's own server no reader task for the rest of the connection's life.
        await self._send_whole(session, stream, priming, responder, extra)

    # -- SSE ------------------------------------------------------------------------------

    async def _send_whole(
        self,
        session: Session,
        stream: int,
        priming: Entry | None,
        responder: Responder,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """A stream that has ended, sent as one response when it is small (TM-POST-ATONCE),
        else through a View."""
        if await session.out.send_whole(stream, priming, responder, headers):
            self._counts.streams_opened += 1
            return
        await self._serve_view(session, stream, -1, responder, priming=priming, headers=headers)

    async def _serve_view(
        self,
        session: Session,
        stream: int,
        after: int,
        responder: Responder,
        *,
        priming: Entry | None = None,
        attached_comment: bool = False,
        headers: tuple[tuple[str, str], ...] = (),
        preface: bytes = b"",
        pooled: str | None = None,
    ) -> None:
        """Serve ``stream`` on a View; a GET's holds a slot of the streams for client
        ``pooled`` until it ends (TM-SEC-FAIR)."""
        view = View(session=session.out, stream=stream, cursor=after, responder=responder)
        if pooled is not None:
            self.streams.add(pooled, view)
        self._counts.streams_opened += 1
        # The endpoint's own work is done before the stream is handed to the session's
        # StreamOut: one switch into the session, and one back when the view ends.
        session.out.attach(view)
        try:
            await view.run(
                priming=priming, attached_comment=attached_comment, headers=headers,
                preface=preface,
            )
        finally:
            self.streams.discard(view)

    # -- GET ------------------------------------------------------------------------------

    async def _get(self, request: HttpRequest, responder: Responder, unit: Unit) -> None:
        plan = plan_get(request)
        session = await self._lookup(plan.session_id, request)
        effective_version(plan.version_header, session.version)
        session.heard()
        if plan.last_event_id is not None:
            await self._resume(session, plan, responder, request, unit.key)
            return
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="GET")
        await self.serve_standalone(session, responder, unit.key)

    async def serve_standalone(
        self, session: Session, responder: Responder, unit: str, *, preface: bytes = b""
    ) -> None:
        """TM-GET-ONE: a fresh GET takes the standalone stream over, as a resume does
        (TM-RES-TAKEOVER): the older connection is detached (T-MULTI-2), and every GET is
        answered with a stream (T-GET-3). TM-GET-FRESH: it delivers what no connection has
        taken yet, and replays nothing; ``preface`` goes first."""
        state = session.log.stream(STANDALONE_STREAM)
        assert state is not None
        # What left the window unsent is lost either way; starting after it keeps a fresh
        # GET from reporting an old loss forever instead of delivering what is new.
        after = max(state.written_through, state.lost_through)
        pooled = self._stream_slot(session, STANDALONE_STREAM, unit)
        await self._serve_view(
            session, STANDALONE_STREAM, after, responder,
            priming=session.out.prime(STANDALONE_STREAM, carry=True), preface=preface,
            pooled=pooled,
        )

    def _stream_slot(self, session: Session, stream: int, unit: str) -> str:
        """TM-SEC-FAIR: a slot of the long-lived streams for a GET on ``stream`` of client
        ``unit``: the slot of the connection it takes the stream over from, when that one
        holds one (a client reconnecting is never refused for its own old connection), else
        one the pool admits (raises RemoteProtocolError 503 when it does not)."""
        old = session.views.get(stream)
        if old is not None and old in self.streams:
            self.streams.discard(old)
        elif not self.streams.admit(unit):
            # Every long-lived stream is in use, and this client holds its share or more.
            raise pool_busy("streams")
        return unit

    async def _resume(
        self, session: Session, plan: GetPlan, responder: Responder, request: HttpRequest,
        unit: str,
    ) -> None:
        assert plan.last_event_id is not None
        cursor = self.codec.decode(session.id, plan.last_event_id)
        if cursor is None:
            # TM-RES-MALFORMED: a cursor this server did not issue for this session.
            raise unknown_cursor(plan.last_event_id)
        if cursor.origin != self.codec.origin:
            # TM-STORE-STREAMS: the stream is held by another worker; a holder that is gone
            # (or a request relayed already) is an explicit failure, never a replay from
            # nothing.
            resumed = await self.peers.resume_elsewhere(
                session, cursor, plan.last_event_id, request, responder
            )
            if resumed is Resumed.LOST:
                raise holder_gone(plan.last_event_id)
            if resumed is Resumed.STANDALONE:
                preface = holder_gone_event(cursor.stream, plan.last_event_id)
                await self.serve_standalone(session, responder, unit, preface=preface)
            return
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="GET",
                        detail=f"Last-Event-ID {cursor.stream}.{cursor.seq}")
        # T-RESUME-5 / T-RESUME-6: re-attach to the cursor's own stream, after the cursor.
        pooled = self._stream_slot(session, cursor.stream, unit)
        session.handlers.stream_event(cursor.stream, "mcp.stream.reattach", cursor.seq)
        await self._serve_view(
            session, cursor.stream, cursor.seq, responder, attached_comment=True, pooled=pooled
        )

    # -- DELETE ---------------------------------------------------------------------------

    async def _delete(self, request: HttpRequest, responder: Responder) -> None:
        plan = plan_delete(request)
        session = await self._lookup(plan.session_id, request)
        effective_version(plan.version_header, session.version)
        # TM-STORE-CONTROL: gone from a shared store first, so that no worker takes it up
        # again; then every worker holding it ends its part.
        await self.peers.delete(session)
        if self.config.tracer is not None:
            self._trace(TraceKind.REQUEST, session, responder, http="DELETE")
        # T-SESS-9: the client ends its session; every later request with its id gets 404.
        session.close(SessionEnd.DELETED)
        self._counts.sessions_deleted += 1
        await responder.reply(Reply(status=204))
        if self.config.tracer is not None:
            self._trace(TraceKind.REPLY, session, responder, status=204)

    # -- recorded timelines (trio_mcp.base._trace) ---------------------------------------------

    def _trace(
        self, kind: TraceKind, session: Session, responder: Responder | None = None,
        **fields: Any,
    ) -> None:
        """Tell the tracer (there is one: callers check) what happened in ``session``."""
        assert self.config.tracer is not None
        conn = None if responder is None else id(responder)
        self.config.tracer.record(TraceRecord(kind=kind, session=session.id, conn=conn, **fields))

    def _trace_post(self, session: Session, plan: PostPlan, responder: Responder) -> None:
        """A POST as a trace tells it: its first request, and the methods it carries."""
        first = next((m for m in plan.messages if isinstance(m, Request)), None)
        what = ", ".join(
            m.method if isinstance(m, Request | Notification) else "response"
            for m in plan.messages
        )
        self._trace(TraceKind.REQUEST, session, responder, http="POST",
                    request=None if first is None else first.id, detail=what)

    def statistics(self) -> EndpointStatistics:
        return EndpointStatistics(**attrs.asdict(self._counts))


def _principal_key(request: HttpRequest) -> str:
    """Who a request's session must belong to: "" without authorization."""
    return request.principal.key if request.principal is not None else ""
