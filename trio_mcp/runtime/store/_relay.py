# Relaying a request to the worker that holds what it names (TM-STORE-STREAMS,
# TM-STORE-TASKS). A stream's log lives in the worker that opened it, and a task in the
# worker that runs it; a client's GET with a Last-Event-ID that names another worker, or a
# tasks/* request for a task another worker runs, is passed to that worker's relay port as
# the client sent it, but for its credentials, and the answer comes back byte for byte: the
# holder answers exactly as it would answer the client itself (a stream re-attached strictly
# after the cursor, exactly once, then live). This worker only carries bytes, at the pace its
# client takes them.
#
# The relay port may listen on a network address (processes started apart), in the clear.
# So a relayed request carries no bearer token (T-AUTH-17): the relaying worker has verified
# it, and says who it spoke for in a header MAC'd with a key derived from the secret the
# workers share (TM-WORK-SECRET), bound to the request and to a time; the holder takes the
# principal from that header, and its relay port serves nothing without one that verifies.
# The seal also names the client's address as the relaying worker resolved it (TM-SEC-UNIT,
# TM-WORK-PEER): without it every relayed request would be one client, the relaying
# worker's address, to the holder's fair shares and rate limits, and a forwarding header
# the relaying worker had rightly ignored could be believed by a holder that trusts it.
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
import h11
import trio

from ...protocol import ErrorCode, HttpRequest, RemoteProtocolError, Reply
from ...protocol._auth import Principal
from ..backpressure._responder import Responder, watching_disconnect

__all__ = ["RELAY_HEADER", "RelaySeal", "relay"]

logger = logging.getLogger("trio_mcp.relay")

#: Marks a request one worker relayed to another, and says who its client is (RelaySeal).
#: A relayed request is never relayed again, so that a stale address (a port now used by
#: another process) cannot make a loop.
RELAY_HEADER: Final = "trio-mcp-relay"
#: Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and the
#: credentials that stay with the worker that verified them (T-AUTH-17).
_NOT_RELAYED = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"content-length",
    b"authorization", RELAY_HEADER.encode(),
    # Read once, by the worker the client reached; the seal says what they came to.
    b"forwarded", b"x-forwarded-for", b"x-real-ip",
})
_HOP_BY_HOP = _NOT_RELAYED - {
    b"authorization", RELAY_HEADER.encode(), b"forwarded", b"x-forwarded-for", b"x-real-ip",
}
#: The most a relayed answer that is not a stream may hold (an error body).
_MAX_REPLY = 64 * 1024
#: What the MAC of a seal covers begins with this, so that a MAC made for anything else
#: under the same key could never pass for a seal.
_SEAL_CONTEXT: Final = b"trio-mcp relay v1\n"
#: The most a seal header may hold: a principal's subject, issuer, client and scopes.
_MAX_SEAL = 8 * 1024


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _seal_blob(principal: Principal | None, address: str | None) -> bytes:
    who: dict[str, object] = {"a": address}
    if principal is not None:
        who.update({"s": principal.subject, "i": principal.issuer, "c": principal.client_id,
                    "sc": sorted(principal.scopes), "e": principal.expires_at})
    return json.dumps(who, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _address_of(raw: dict[str, Any]) -> str | None:
    address = raw["a"]
    if address is None:
        return None
    if not isinstance(address, str) or len(address) > 64:
        raise ValueError("not an address")
    return address


def _principal_of(raw: dict[str, Any]) -> Principal | None:
    if "s" not in raw:
        return None
    client, expires = raw["c"], raw["e"]
    return Principal(
        subject=str(raw["s"]),
        issuer=str(raw["i"]),
        client_id=None if client is None else str(client),
        scopes=frozenset(str(scope) for scope in raw["sc"]),
        expires_at=None if expires is None else float(expires),
    )


@attrs.frozen
class Relayed:
    """What the seal of a relayed request says: whom the relaying worker verified its
    client's token for (None on a server without authorization), and the client's address
    as that worker resolved it (TM-WORK-PEER)."""

    principal: Principal | None
    address: str | None = None


def _refused(why: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"Forbidden: this port serves only requests relayed by the workers of this server "
        f"({why}).",
        code=ErrorCode.INVALID_REQUEST,
        http_status=403,
    )


@attrs.frozen
class RelaySeal:
    """The header a relayed request carries instead of its client's credentials
    (T-AUTH-17, TM-STORE-STREAMS): the principal the relaying worker verified, and when,
    under a MAC bound to the request's method, path, body, session and cursor. ``key``
    derives from the workers' shared secret; a seal is good for ``max_age`` seconds, which
    is the relay's own round trip and the clocks' disagreement between hosts."""

    key: bytes = attrs.field(repr=False)
    max_age: float = 30.0
    #: The client's address of a request this worker relays, as its fair shares read it
    #: (the runtime's ``UnitPolicy.client_address``); by default the connection's peer.
    address_of: Callable[[HttpRequest], str | None] = attrs.field(
        default=lambda request: request.peer_host, repr=False
    )

    def _mac(self, stamp: bytes, blob: bytes, request: HttpRequest) -> bytes:
        parts = [
            stamp, blob, request.method.encode("ascii"), request.path.encode("utf-8"),
            hashlib.sha256(request.body).hexdigest().encode("ascii"),
            (request.headers.get("mcp-session-id") or "").encode("utf-8"),
            (request.headers.get("last-event-id") or "").encode("utf-8"),
        ]
        message = _SEAL_CONTEXT + b"\n".join(len(p).to_bytes(4, "big") + p for p in parts)
        return hmac.new(self.key, message, hashlib.sha256).digest()

    def seal(self, request: HttpRequest, now: float) -> str:
        """The header value for ``request``, relayed now on behalf of its principal."""
        stamp = str(int(now * 1000)).encode("ascii")
        blob = _seal_blob(request.principal, self.address_of(request))
        return f"{stamp.decode()}.{_b64(blob)}.{_b64(self._mac(stamp, blob, request))}"

    def admit(
        self, request: HttpRequest, now: float, *, principal_required: bool
    ) -> HttpRequest:
        """``request``, arrived at the relay port, as its client's (T-AUTH-17,
        TM-WORK-PEER): bound to the principal its seal names and to the client's address
        the relaying worker resolved, marked relayed.

        Raises:
            RemoteProtocolError: 403 as ``open`` does, or when ``principal_required`` (a
                server with authorization) and the seal names nobody.
        """
        relayed = self.open(request, now)
        if principal_required and relayed.principal is None:
            raise RemoteProtocolError(
                "Forbidden: a relayed request names no principal.",
                code=ErrorCode.INVALID_REQUEST,
                http_status=403,
            )
        # The seal names the client's address, not its port: the port here is the relaying
        # worker's connection's, no part of the client's (a span's client.port).
        return attrs.evolve(
            request, principal=relayed.principal, relayed=True, peer_host=relayed.address,
            peer_port=None,
        )

    def open(self, request: HttpRequest, now: float) -> Relayed:
        """Who a request that arrived at the relay port speaks for.

        Raises:
            RemoteProtocolError: 403 when it has no seal, or one that does not verify (made
                under another secret, for another request, or too long ago).
        """
        values = request.headers.get_all(RELAY_HEADER)
        if len(values) != 1 or len(values[0]) > _MAX_SEAL:
            raise _refused("no relay seal")
        parts = values[0].split(".")
        if len(parts) != 3:
            raise _refused("a malformed relay seal")
        stamp_text, blob_text, tag_text = parts
        if not (stamp_text.isascii() and stamp_text.isdigit() and len(stamp_text) <= 16):
            raise _refused("a malformed relay seal")
        try:
            blob, tag = _unb64(blob_text), _unb64(tag_text)
        except (binascii.Error, ValueError):
            raise _refused("a malformed relay seal") from None
        stamp = int(stamp_text)
        expected = self._mac(stamp_text.encode("ascii"), blob, request)
        if not hmac.compare_digest(tag, expected):
            raise _refused("a relay seal that does not verify")
        if abs(now * 1000 - stamp) > self.max_age * 1000:
            raise _refused("a relay seal out of date")
        try:
            raw = json.loads(blob)
            if not isinstance(raw, dict):
                raise TypeError("not an object")
            return Relayed(_principal_of(raw), _address_of(raw))
        except (ValueError, KeyError, TypeError):
            raise _refused("a relay seal naming no principal") from None


def _response_headers(raw: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in raw if k.lower() not in _HOP_BY_HOP
    ]


async def relay(
    address: str,
    request: HttpRequest,
    responder: Responder,
    *,
    seal: str,
    connect_timeout: float,
    write_timeout: float,
    on_answer: Callable[[], None] = lambda: None,
) -> bool:
    """Pass ``request`` (a resume's GET, or a tasks/* POST) to the worker listening at
    ``address`` ("host:port"), with ``seal`` (RelaySeal.seal) in place of its credentials,
    and its answer to ``responder``. False, having sent nothing, when that worker cannot be
    reached; True once an answer began (it may then end early, when either side goes), as
    ``on_answer`` is told when it does."""
    host, _, port = address.rpartition(":")
    try:
        with trio.fail_after(connect_timeout):
            upstream = await trio.open_tcp_stream(host, int(port))
    except (OSError, ValueError, trio.TooSlowError):
        return False
    async with upstream:
        conn = h11.Connection(h11.CLIENT)
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _NOT_RELAYED]
        headers += [(RELAY_HEADER.encode(), seal.encode("ascii")), (b"connection", b"close")]
        if request.body:
            headers.append((b"content-length", str(len(request.body)).encode()))
        if not any(k.lower() == b"host" for k, _ in headers):
            headers.append((b"host", address.encode()))
        try:
            head = h11.Request(method=request.method, target=request.path, headers=headers)
            await upstream.send_all(
                (conn.send(head) or b"")
                + ((conn.send(h11.Data(data=request.body)) or b"") if request.body else b"")
                + (conn.send(h11.EndOfMessage()) or b"")
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        with trio.CancelScope() as scope:
            async with watching_disconnect(responder, scope.cancel):
                return await _carry(conn, upstream, responder, write_timeout, on_answer)
        return True  # the client left: nothing more to carry


async def _next(conn: h11.Connection, upstream: trio.SocketStream) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await upstream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        conn.receive_data(data)


async def _carry(
    conn: h11.Connection,
    upstream: trio.SocketStream,
    responder: Responder,
    write_timeout: float,
    on_answer: Callable[[], None],
) -> bool:
    try:
        head = await _next(conn, upstream)
    except h11.RemoteProtocolError:
        return False
    if not isinstance(head, h11.Response):
        return False
    on_answer()
    headers = _response_headers(head.headers)
    streaming = any(
        k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in headers
    )
    if not streaming:
        body = bytearray()
        while isinstance(event := await _next(conn, upstream), h11.Data):
            body += event.data
            if len(body) > _MAX_REPLY:
                return False
        await responder.reply(Reply(status=head.status_code, headers=tuple(headers),
                                    body=bytes(body)))
        return True
    await responder.start_stream(head.status_code, headers)
    while True:
        try:
            event = await _next(conn, upstream)
        except h11.RemoteProtocolError:
            break  # the holder went mid-stream: the client's stream ends, to be resumed
        if not isinstance(event, h11.Data):
            break
        # A client that takes nothing for this long is let go, as the holder's own stall
        # judgement would (TM-BP-STALL); the holder keeps the stream for a resume.
        with trio.move_on_after(write_timeout):
            await responder.write(bytes(event.data))
            continue
        logger.info("relayed stream: the client took nothing for %.0f s; cut", write_timeout)
        return True
    await responder.end()
    return True
