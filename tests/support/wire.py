"""Raw HTTP/1.1 exchanges over loopback, for the tests of the HTTP edge (tests/http/,
tests/e2e/test_e2e_socket_fuzz.py): bytes written by hand, whatever the server answers read
to its close, and the answer cut into responses by h11 as a client reads them."""

from __future__ import annotations

import contextlib

import attrs
import h11
import trio

__all__ = ["Answer", "Exchange", "exchange", "responses"]


@attrs.frozen
class Answer:
    """One response as a client reads it."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)


@attrs.frozen
class Exchange:
    """What came back on one connection: its bytes, and whether the server ended it (a
    close or a reset) before the client gave up."""

    data: bytes
    closed: bool
    reset: bool = False

    @property
    def answers(self) -> list[Answer]:
        return responses(self.data)

    @property
    def statuses(self) -> list[int]:
        return [a.status for a in self.answers]


async def exchange(
    port: int,
    raw: bytes | list[bytes],
    *,
    half_close: bool = False,
    timeout: float = 5.0,
    pause: float = 0.0,
) -> Exchange:
    """Connect to 127.0.0.1:``port``, write ``raw`` (pieces ``pause`` seconds apart), with
    ``half_close`` then shut the writing side, and read until the server closes or
    ``timeout`` passes."""
    pieces = [raw] if isinstance(raw, bytes) else raw
    got = bytearray()
    closed = reset = False
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        with trio.move_on_after(timeout):
            async with trio.open_nursery() as nursery:

                async def write() -> None:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        for i, piece in enumerate(pieces):
                            if i and pause:
                                await trio.sleep(pause)
                            await stream.send_all(piece)
                        if half_close:
                            await stream.send_eof()

                nursery.start_soon(write)
                while True:
                    try:
                        data = await stream.receive_some(65536)
                    except trio.BrokenResourceError:
                        closed = reset = True
                        break
                    if not data:
                        closed = True
                        break
                    got += data
                nursery.cancel_scope.cancel()
    finally:
        await trio.aclose_forcefully(stream)
    return Exchange(bytes(got), closed, reset)


def responses(data: bytes) -> list[Answer]:
    """The responses at the start of ``data``, read as a client reads them (interim ones
    left out), up to the first that h11 cannot read whole."""
    parser = h11.Connection(h11.CLIENT)
    parser.receive_data(data)
    parser.receive_data(b"")
    out: list[Answer] = []
    while True:
        if parser.our_state is h11.DONE and parser.their_state is h11.DONE:
            parser.start_next_cycle()
        if parser.our_state is h11.IDLE:
            # h11 expects a response only to a request it sent: it is told of one.
            parser.send(h11.Request(method="POST", target="/", headers=[("host", "h")]))
            parser.send(h11.EndOfMessage())
        status = 0
        headers: tuple[tuple[str, str], ...] = ()
        body = bytearray()
        try:
            while True:
                event = parser.next_event()
                if isinstance(event, h11.Response):
                    status = event.status_code
                    headers = tuple(
                        (k.decode("latin-1").lower(), v.decode("latin-1"))
                        for k, v in event.headers
                    )
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    out.append(Answer(status, headers, bytes(body)))
                    break
                elif not isinstance(event, h11.InformationalResponse):
                    return out  # the end (NEED_DATA, ConnectionClosed, PAUSED)
        except h11.RemoteProtocolError:
            return out
