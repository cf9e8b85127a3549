"""The floor of trio-mcp's own HTTP server: trio's ``serve_tcp`` and h11, nothing else.

The same answers as ``bare_hypercorn.py``, without an ASGI server: every POST gets a fixed
JSON-RPC result, as application/json (``--json-response``, with a Content-Length) or as a
text/event-stream with that one event (the default; chunked, the event in one chunk, then
the end), and ``POST /stream?n=N&size=S`` streams N progress events of S bytes of padding,
one write each, then the result. Keep-alive: a connection serves requests until the client
closes it or either side says ``Connection: close``. No parsing of the body, no session, no
protocol: what is left is trio, its sockets and h11, the parts trio-mcp's own server
(trio_mcp/edges/_http.py) is built of.

    python benchmarks/servers/bare_h11.py --port 8000 [--json-response]
"""

from __future__ import annotations

import argparse
import signal
from functools import partial
from urllib.parse import parse_qs, urlsplit

import h11
import trio

RESULT = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],'
    b'"isError":false}}'
)
READ_SIZE = 65536
JSON_HEADERS = [(b"content-type", b"application/json"),
                (b"content-length", str(len(RESULT)).encode())]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def next_event(conn: h11.Connection, stream: trio.SocketStream) -> object:
    """h11's next event, reading from the socket as long as it needs more data."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await stream.receive_some(READ_SIZE))


async def serve_one(json_response: bool, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)

    async def send(event: h11.Event) -> None:
        data = conn.send(event)
        if data:
            await stream.send_all(data)

    try:
        while True:
            request = await next_event(conn, stream)
            if not isinstance(request, h11.Request):
                return  # ConnectionClosed, or the client left between requests
            while not isinstance(await next_event(conn, stream), h11.EndOfMessage):
                pass  # the body is not read
            target = urlsplit(request.target.decode("latin-1"))
            if target.path == "/stream":
                query = parse_qs(target.query)
                n, size = int(query["n"][0]), int(query["size"][0])
                await send(h11.Response(status_code=200, headers=SSE_HEADERS, reason=b"OK"))
                pad = "x" * size
                for i in range(n):
                    event = (
                        f'id: 1.{i}\ndata: {{"jsonrpc":"2.0","method":"notifications/progress",'
                        f'"params":{{"progressToken":1,"progress":{i + 1},"message":"{i}:{pad}"}}}}'
                        "\n\n"
                    ).encode()
                    await send(h11.Data(data=event))
                await send(h11.Data(data=b"data: " + RESULT + b"\n\n"))
            elif json_response:
                await send(h11.Response(status_code=200, headers=JSON_HEADERS, reason=b"OK"))
                await send(h11.Data(data=RESULT))
            else:
                await send(h11.Response(status_code=200, headers=SSE_HEADERS, reason=b"OK"))
                await send(h11.Data(data=b"data: " + RESULT + b"\n\n"))
            await send(h11.EndOfMessage())
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(
                    trio.serve_tcp, partial(serve_one, args.json_response), args.port,
                    host=args.host, backlog=1024,
                ))
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

    trio.run(run)


if __name__ == "__main__":
    main()
