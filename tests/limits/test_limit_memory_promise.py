# The README's memory promise, checked both ways: it and docs/operating.md's paragraph on memory
# name exactly the budgets that ServerConfig.memory_bound() adds up (and the default total they
# state is that sum), and a server attacked on every one of them at once, from several
# addresses, stays under the sum.
from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Final

import attrs
import h11
import pytest
import trio
from support.client import dumps, open_stream, post_headers, request, rpc_request
from support.modern import call_tool, modern_headers
from support.served import Served, served

from trio_mcp import ServerConfig
from trio_mcp.base._config import (
    CONNECTION_BUFFERS,
    DECODE_ON_LOOP,
    DECODING_FACTOR,
    MemoryBound,
)
from trio_mcp.protocol import Retention

ROOT = Path(__file__).resolve().parents[2]
MiB: Final = 1024 * 1024
TASKS: Final = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
#: Which ServerConfig fields each part of the bound is made of (MemoryBound's docstrings).
PARTS: Final = {
    "sessions": ("max_sessions", "retention.max_bytes"),
    "requests": ("request_memory",),
    "bodies": ("max_body_memory",),
    "tasks": ("max_task_results_memory",),
    "connections": ("http_max_connections",),
    "decoding": ("max_body_bytes",),
}


def promise(name: str) -> str:
    """The paragraph of ``name`` (README.md, docs/operating.md) that makes the memory
    promise."""
    text = (ROOT / name).read_text(encoding="utf-8")
    start = text.index("Memory is bounded")
    start = text.rfind("\n\n", 0, start) + 2
    return text[start:text.index("\n\n", start)]


def _total_gib(paragraph: str) -> float:
    found = re.search(r"([\d.]+) GiB with the\s+defaults", paragraph)
    assert found is not None, paragraph
    return float(found[1])


@pytest.mark.spec("TM-SEC-MEMORY")
def test_the_readme_promises_the_bound_the_server_computes() -> None:
    """The README says what the bound is made of and its default total, which is
    ServerConfig().memory_bound(); docs/operating.md names every ServerConfig field the bound
    is made of, states the same total, and the connections' and decoding's shares it states
    are CONNECTION_BUFFERS, DECODE_ON_LOOP and DECODING_FACTOR."""
    readme = promise("README.md")
    paragraph = promise("docs/operating.md")
    named = set(re.findall(r"`([a-z_.]+)`", paragraph))
    bound = ServerConfig().memory_bound()
    total_gib = _total_gib(paragraph)

    assert "`ServerConfig.memory_bound()`" in readme
    assert "six budgets" in readme and "six budgets" in paragraph
    assert len(attrs.fields(MemoryBound)) == 6
    assert _total_gib(readme) == total_gib
    for part in ("sessions' windows", "requests being served", "bodies", "ended tasks",
                 "connections", "body being decoded"):
        assert part in readme.replace("\n", " "), part
    assert {f.name for f in attrs.fields(MemoryBound)} == set(PARTS)
    for fields in PARTS.values():
        assert set(fields) <= named, (fields, named)
    assert "request_memory_per_client" in named
    assert round(bound.total / 2**30, 1) == total_gib
    assert f"× {CONNECTION_BUFFERS // 1024} KiB" in paragraph
    assert f"(`max_body_bytes` + {DECODE_ON_LOOP // 1024} KiB) × {DECODING_FACTOR}" in paragraph
    assert "sessions × window" not in paragraph


def _settings() -> dict[str, object]:
    return {
        "max_sessions": 64,
        "retention": {"max_events": 256, "max_bytes": 64 * 1024},
        "request_memory": 32 * MiB,
        "request_memory_per_client": 8 * MiB,
        "request_memory_per_session": 4 * MiB,
        "max_body_memory": 8 * MiB,
        "max_task_results_memory": 8 * MiB,
        "http_max_connections": 256,
        "max_streams": 64,
        "http_body_timeout": 4.0,
        "task_ttl": 6.0,
        "session_idle_ttl": 6.0,
        "uninitialized_ttl": 6.0,
        # The held calls never return: their sessions end as abandoned.
        "abandoned_ttl": 6.0,
        "http_header_timeout": 4.0,
    }


#: What an attacker may meet and go on: its connection closed for another client's
#: (TM-SEC-FAIR), or refused.
CUT: Final = (trio.BrokenResourceError, OSError, h11.RemoteProtocolError)


async def _attack(srv: Served, local: str, held_turn: trio.Lock) -> None:
    """Every budget at once, from ``local``: sessions whose logs fill their windows, calls
    holding 2 MB arguments until refused, bodies that stop arriving, tasks with 1 MB results,
    and idle connections. Connections the server closes (for another client, or past a
    budget) are shrugged off."""
    argument = "y" * 2_000_000
    for n in range(16):
        with contextlib.suppress(*CUT):
            init = await request(srv.url, "POST", post_headers(),
                                 dumps(rpc_request("initialize", {
                                     "protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "x", "version": "0"}})),
                                 local=local)
            sid = init.header("mcp-session-id")
            if init.status != 200 or sid is None:
                continue
            # The first four sessions hold calls until a budget refuses one (the session's,
            # at the second: each is charged its 2 MB argument, and its body's while sent).
            # One attacker at a time: eight 2 MB bodies at once would meet the bodies' budget
            # (TM-SEC-BODIES) first, and this is about the budgets past it.
            async with held_turn:
                for _ in range(4 if n < 4 else 0):
                    call = rpc_request("tools/call", {"name": "hold",
                                                      "arguments": {"data": argument}})
                    async with open_stream(srv.url, "POST", post_headers(session_id=sid),
                                           dumps(call), local=local) as stream:
                        if stream.status != 200:
                            break
            chatter = rpc_request("tools/call", {"name": "chatter",
                                                 "arguments": {"n": 200, "size": 2000}})
            async with open_stream(srv.url, "POST", post_headers(session_id=sid),
                                   dumps(chatter), local=local):
                pass  # the head came; the rest goes to the log
    for _ in range(4):
        message = call_tool("job", {"seconds": 0, "size": 1_000_000}, capabilities=TASKS)
        with contextlib.suppress(*CUT):
            await request(srv.url, "POST", modern_headers(message), dumps(message), local=local)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(_partial_body, srv.port, local)
        for _ in range(16):
            nursery.start_soon(_idle_connection, srv.port, local)


async def _partial_body(port: int, local: str) -> None:
    """A POST declaring 4 MB that sends 3 MB and stops, until the server ends it."""
    with contextlib.suppress(*CUT):
        await _send_partial(port, local)


async def _send_partial(port: int, local: str) -> None:
    sock = await trio.open_tcp_stream("127.0.0.1", port, local_address=local)
    async with sock:
        head = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json"
                "\r\naccept: application/json, text/event-stream\r\ncontent-length: 4000000"
                "\r\n\r\n").encode()
        try:
            await sock.send_all(head + b"[" * 3_000_000)
            while await sock.receive_some(65536):
                pass
        except (trio.BrokenResourceError, OSError):
            pass


async def _idle_connection(port: int, local: str) -> None:
    """A connection that sends nothing until the server closes it."""
    with contextlib.suppress(*CUT):
        sock = await trio.open_tcp_stream("127.0.0.1", port, local_address=local)
        async with sock:
            while await sock.receive_some(1024):
                pass


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.spec("TM-SEC-MEMORY", "TM-SEC-FAIR")
async def test_an_attack_on_every_budget_at_once_stays_under_the_stated_bound(
    tmp_path: Path,
) -> None:
    """Eight addresses attack every budget at once on small settings whose bound is 287.25
    MiB (sessions' windows 4 MiB, requests 32 MiB, bodies 8 MiB, ended tasks 8 MiB,
    connections 24 MiB, a 4 MiB body and a 64 KiB one decoded 211.25 MiB): the server's
    resident size stays under its start plus the bound, with the decoding term taken for
    what these bodies decode to (strings: three times their 2 MB, not the densest JSON's 52
    times 4 MiB); and once the attack has
    ended (sessions expired, tasks past their TTL, bodies timed out) it is back within 10% of
    its start."""
    settings = _settings()
    config = ServerConfig(**{**settings, "retention": Retention(**settings["retention"])})  # type: ignore[arg-type]
    bound = config.memory_bound()
    assert 287.25 * MiB == bound.total
    async with served(tmp_path, settings) as srv:
        await srv.released()
        before = srv.rss_kib()
        peak = before
        with trio.fail_after(180):
            held_turn = trio.Lock()
            async with trio.open_nursery() as nursery:
                for k in range(8):
                    nursery.start_soon(_attack, srv, f"127.0.4.{k + 1}", held_turn)
                while nursery.child_tasks:
                    peak = max(peak, srv.rss_kib())
                    await trio.sleep(0.1)
            stats = await srv.stats()
            await srv.until(lambda s: s["sessions_open"] == 0 and s["tasks_alive"] == 0
                            and s["request_memory_held"] == 0, poll=0.5)
            await srv.released()
            await trio.sleep(0.5)
            after = srv.rss_kib()

    shown = (f"before {before} KiB, peak {peak} KiB, after {after} KiB;"
             f" bound {bound.total // 1024} KiB")
    print(shown)
    # Every budget was reached.
    assert stats["sessions_evicted"] + stats["sessions_refused"] >= 1, stats
    assert sum(stats[f"{budget}_refused"] for budget in (
        "request_memory", "request_memory_per_client", "request_memory_per_session")) >= 1
    assert stats["bodies_refused"] >= 1, stats
    # The bound's decoding term is for the densest JSON; these bodies are strings, whose
    # decoding takes their bytes, their text and their value: three times the largest, and
    # as much of a small one decoded on the loop meanwhile (TM-SEC-DECODE).
    decoding = 3 * (2_000_000 + DECODE_ON_LOOP)
    assert peak - before <= (bound.total - bound.decoding + decoding) // 1024, shown
    assert after - before <= before // 10, shown
