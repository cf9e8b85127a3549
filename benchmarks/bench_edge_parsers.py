"""What reading a request head costs on trio-mcp's own server (issue 34), per request and per
hostile head, in CPU time on this process (no sockets): the readers of trio_mcp.edges._h1
(httptools, h11) each followed by the edge plan (protocol._edge.plan_head), and, given a
checkout of the code before issue 34 (``--before DIR``, e.g. one of commit 158b216), the
hand-written ``read_plain`` it replaced followed by the checks the edge made then.

    python benchmarks/bench_edge_parsers.py [--before /tmp/before] [--out FILE.json]

Per request: the head the benchmark's client sends with a tools/call body (benchmarks/
client.py), the best of several rounds of many reads. Hostile heads: 16 and 64 KiB of
spaces in one field value followed by a byte a header may not hold (a control byte, NUL, VT,
a CR not before an LF, obs-text), arriving whole and (16 KiB) a byte at a time; each reader
is fed as the server feeds it, until it refuses the head. Figures in microseconds (per
request) and milliseconds (per head), minimum of the rounds (the least disturbed by the
machine's other load).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from trio_mcp.edges._h1 import BadRequest, H11Reader, HttptoolsReader, RequestHead  # noqa: E402
from trio_mcp.protocol import Headers, OriginPolicy  # noqa: E402
from trio_mcp.protocol._edge import plan_head  # noqa: E402

BODY = (b'{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo",'
        b'"arguments":{"text":"hello"}}}')
HEAD = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
    b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    b"Content-Type: application/json\r\nMcp-Session-Id: 3f1c5e0d9a2b4c6e8f7a1b2c3d4e5f60\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY)
)
REQUEST = HEAD + BODY
MAX_HEAD = 16 * 1024
MAX_BODY = 4 * 1024 * 1024
POLICY = OriginPolicy.for_bind(["127.0.0.1"])


def best(fn: Callable[[], object], n: int, rounds: int = 7) -> float:
    """Seconds per call of ``fn``: the fastest of ``rounds`` rounds of ``n`` calls."""
    times = []
    for _ in range(rounds):
        began = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - began) / n)
    return min(times)


def plan(head: RequestHead) -> object:
    return plan_head(
        http_version=head.http_version.decode("latin-1"), method=head.method.decode("latin-1"),
        target=head.target.decode("latin-1"), headers=Headers(head.headers), policy=POLICY,
        endpoint="/mcp", max_body=MAX_BODY,
    )


def httptools_request() -> object:
    reader = HttptoolsReader(max_head=MAX_HEAD, max_body=MAX_BODY)
    reader.receive_data(REQUEST)
    head = reader.next_event()
    assert isinstance(head, RequestHead) and head.body == BODY
    return plan(head)


def h11_request() -> object:
    reader = H11Reader(max_head=MAX_HEAD)
    reader.receive_data(REQUEST)
    head = reader.next_event()
    assert isinstance(head, RequestHead)
    data = reader.next_event()
    assert data == BODY
    return plan(head)


def before_request(old: Any) -> Callable[[], object]:
    """read_plain and the checks _http._serve_request made before issue 34."""

    def read() -> object:
        plain, _size = old.read_plain(REQUEST, max_head=MAX_HEAD, max_body=MAX_BODY)
        headers = Headers(list(plain.headers))
        target = plain.target.decode("latin-1")
        path = target.split("?", 1)[0]
        assert plain.http_version in (b"1.0", b"1.1")
        POLICY.check(headers)
        assert path.rstrip("/") == "/mcp"
        declared = headers.get("content-length")
        assert declared is not None and declared.isdigit() and int(declared) <= MAX_BODY
        return plain

    return read


def hostile_heads() -> dict[str, bytes]:
    heads = {}
    for size in (16, 64):
        for name, bad in (("control", b"\x01"), ("NUL", b"\x00"), ("VT", b"\x0b"),
                          ("lone CR", b"\r"), ("obs-text", b"\x80")):
            pad = b" " * (size * 1024 - 24)
            heads[f"{size} KiB, {name}"] = b"POST /mcp HTTP/1.1\r\nX:" + pad + bad + b"\r\n\r\n"
    return heads


def feed(make: Callable[[], Any], pieces: list[bytes]) -> None:
    """Feed ``pieces`` to a fresh reader as the server does, until it refuses or reads."""
    reader = make()
    for piece in pieces:
        reader.receive_data(piece)
        try:
            event = reader.next_event()
        except BadRequest:
            return
        if isinstance(event, RequestHead):
            return


def feed_plain(old: Any, pieces: list[bytes]) -> None:
    """The hand-written reader before issue 34, as its server fed it: the whole buffer
    again at each read, until it took the request or left it to h11 (None)."""
    data = bytearray()
    for piece in pieces:
        data += piece
        got = old.read_plain(data, max_head=MAX_HEAD * 4 + 1, max_body=MAX_BODY)
        if got is not old.INCOMPLETE:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code before issue 34")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"per_request_us": {}, "hostile_head_ms": {}}
    per = results["per_request_us"]
    per["httptools + plan"] = best(httptools_request, 20_000) * 1e6
    per["h11 + plan"] = best(h11_request, 5_000) * 1e6
    if args.before is not None:
        spec = importlib.util.spec_from_file_location(
            "before_h1", args.before / "trio_mcp/edges/_h1.py"
        )
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        per["read_plain + checks (before)"] = best(before_request(old), 20_000) * 1e6
    readers: dict[str, Callable[[], Any]] = {
        "httptools": lambda: HttptoolsReader(max_head=MAX_HEAD * 4 + 1, max_body=MAX_BODY),
        "h11": lambda: H11Reader(max_head=MAX_HEAD * 4 + 1),
    }
    for label, head in hostile_heads().items():
        for name, make in readers.items():
            rounds = 3 if name == "h11" and "64" in label else 5
            results["hostile_head_ms"][f"{name}: {label}"] = (
                best(lambda make=make, head=head: feed(make, [head]), 1, rounds) * 1e3
            )
    if args.before is not None:
        for label, head in hostile_heads().items():
            results["hostile_head_ms"][f"read_plain (before): {label}"] = best(
                lambda head=head: feed_plain(old, [head]), 1, 3
            ) * 1e3
    slow = hostile_heads()["16 KiB, control"]
    if args.before is not None:
        results["hostile_head_ms"]["read_plain (before): 16 KiB, control, byte by byte"] = best(
            lambda: feed_plain(old, [slow[i : i + 1] for i in range(len(slow))]), 1, 3
        ) * 1e3
    for name, make in readers.items():
        results["hostile_head_ms"][f"{name}: 16 KiB, control, byte by byte"] = (
            best(lambda make=make: feed(make, [slow[i : i + 1] for i in range(len(slow))]), 1, 3)
            * 1e3
        )
    text = json.dumps(results, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
