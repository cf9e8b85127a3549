"""The floor of trio-mcp under hypercorn: hypercorn's trio worker serving a trivial ASGI app.

Every POST gets a fixed JSON-RPC result, as application/json (``--json-response``) or as a
text/event-stream with that one event (the default), streamed the way trio-mcp streams
(response start, the event with more_body, then the end). No parsing, no session, no
protocol: what is left is hypercorn, h11 and trio. ``POST /stream?n=N&size=S`` streams N
events of S bytes of padding instead, the floor of the stream benchmark.

    python benchmarks/servers/bare_hypercorn.py --port 8000 [--json-response]
"""

from __future__ import annotations

import argparse
import logging
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

RESULT = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],'
    b'"isError":false}}'
)


def make_app(json_response: bool) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/stream":
            query = parse_qs(scope.get("query_string", b"").decode())
            n, size = int(query["n"][0]), int(query["size"][0])
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            pad = "x" * size
            for i in range(n):
                event = (
                    f'id: 1.{i}\ndata: {{"jsonrpc":"2.0","method":"notifications/progress",'
                    f'"params":{{"progressToken":1,"progress":{i + 1},"message":"{i}:{pad}"}}}}'
                    "\n\n"
                ).encode()
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b"data: " + RESULT + b"\n\n"})
            return
        if json_response:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(RESULT)).encode())]})
            await send({"type": "http.response.body", "body": RESULT})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"),
                                (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": b"data: " + RESULT + b"\n\n",
                    "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = Config()
    config.bind = [f"{args.host}:{args.port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    app: Any = make_app(args.json_response)

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def stop() -> None:
                async for _ in signals:
                    return

            await serve(app, config, shutdown_trigger=stop)

    trio.run(run)


if __name__ == "__main__":
    main()
