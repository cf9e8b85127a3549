# The live task tree (TM-SEC-INSPECT) over real sockets: `serve(inspect_port=...)` on loopback,
# its JSON at /tree.json and /events, and `trio-mcp tree` printing it. The page itself is
# tested in a browser (test_inspect_browser.py).
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import dumps as json_body
from support.client import open_session, open_stream, request, rpc_request
from support.fixtures import wait_until
from support.modern import call_tool, post
from support.process import start_until
from support.slow import make_server

from trio_mcp import Server, ServerConfig, serve
from trio_mcp.cli._cli import main
from trio_mcp.edges.observe._inspect import GROUP_SHOWN, render_text

pytestmark = pytest.mark.spec("TM-SEC-INSPECT")


async def start(
    nursery: trio.Nursery, server: Server, config: ServerConfig | None = None
) -> tuple[str, str]:
    """Serve ``server`` with an inspector on free loopback ports: (MCP URL, inspector URL)."""
    urls: list[str] = await nursery.start(
        lambda task_status: serve(
            server, port=0, config=config, inspect_port=0, task_status=task_status
        )
    )
    assert urls[-1].endswith("/")
    return urls[0], urls[-1]


async def tree(inspector: str) -> dict[str, Any]:
    response = await request(inspector + "tree.json", "GET")
    assert 200 == response.status
    data: dict[str, Any] = json.loads(response.body)
    return data


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("children") or ():
        yield from nodes(child)


def of_kind(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [n for n in nodes(doc["root"]) if n.get("kind") == kind and n["type"] != "group"]


def under(node: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [n for n in nodes(node) if n.get("kind") == kind and n is not node]


async def test_session_supervisor_shows_its_running_handler_until_it_ends(
    nursery: trio.Nursery,
) -> None:
    """A session appears as its supervisor task under the session table, a running
    request as a handler task in the supervisor's nursery (method, id, cancel state), and
    the handler is gone from the tree once it has answered."""
    server, record = make_server()
    url, inspector = await start(nursery, server)
    session = await open_session(url)
    with trio.fail_after(30):
        message = rpc_request("tools/call", {"name": "wait", "arguments": {"seconds": -1,
                                                                           "tag": "w"}})
        async with open_stream(url, "POST", session.headers(), json_body(message)):
            await wait_until(lambda: "w" in record.started)
            doc = await tree(inspector)
            [table] = of_kind(doc, "table")
            [supervisor] = under(table, "session")
            assert session.id[:8] in supervisor["label"]
            [handler] = under(supervisor, "handler")
            assert "tools/call" in handler["label"]
            assert {"method": "tools/call", "id": message["id"], "cancel_called": False} == {
                k: handler["details"][k] for k in ("method", "id", "cancel_called")
            }
            [view] = of_kind(doc, "view")
            assert session.id[:8] in view["label"]
            [writer] = under(supervisor, "writer")
            assert writer["details"]["judgement"] in ("idle", "draining")
        # The client left: the handler goes on (T-PSSE-12) until the session ends.
        await session.delete()
        await wait_until(lambda: "w" in record.cancelled)
        # Polling: the tree is read over HTTP, as a page reads it.
        while of_kind(await tree(inspector), "handler"):  # noqa: ASYNC110
            await trio.sleep(0.1)
        assert not of_kind(await tree(inspector), "session")


async def test_session_ids_are_shown_cut_short(nursery: trio.Nursery) -> None:
    """The tree names a session by the first 8 characters of its id, never the whole id:
    a page that could read the tree could not use a session with it."""
    server, _ = make_server()
    url, inspector = await start(nursery, server)
    session = await open_session(url)

    response = await request(inspector + "tree.json", "GET")

    assert session.id[:8].encode() in response.body
    assert session.id.encode() not in response.body


async def test_many_similar_siblings_become_one_group(nursery: trio.Nursery) -> None:
    """Thirty session supervisors in the table's nursery are sent as one group with
    their count, of which only the first few are described in full."""
    server, _ = make_server()
    url, inspector = await start(nursery, server)
    for _ in range(30):
        await open_session(url)

    doc = await tree(inspector)

    [group] = [n for n in nodes(doc["root"]) if n["type"] == "group" and n["kind"] == "session"]
    assert 30 == group["count"]
    assert GROUP_SHOWN == len(group["children"])
    assert 30 - GROUP_SHOWN == group["more"]
    assert 30 == doc["sessions"]


async def test_events_stream_sends_the_tree(nursery: trio.Nursery) -> None:
    """/events is an SSE stream whose events each carry the tree as JSON."""
    server, _ = make_server()
    url, inspector = await start(nursery, server)
    await open_session(url)
    with trio.fail_after(30):
        async with open_stream(inspector + "events", "GET") as stream:
            assert stream.content_type.startswith("text/event-stream")
            event = await stream.next_event(comments=False)
            while event is not None and not event.data:
                event = await stream.next_event(comments=False)
    assert event is not None
    doc = json.loads(event.data)
    assert 1 == doc["sessions"]
    assert of_kind(doc, "session")


async def test_inspector_answers_loopback_host_names_only(nursery: trio.Nursery) -> None:
    """A request whose Host header is not a loopback name (a page reaching the port through
    DNS rebinding) gets 421 and no tree."""
    server, _ = make_server()
    _, inspector = await start(nursery, server)

    response = await request(inspector + "tree.json", "GET", [("host", "evil.example")])

    assert 421 == response.status


async def test_inspector_refuses_a_host_beyond_loopback() -> None:
    """serve() with an inspector host that is not loopback raises before binding anything,
    and says why."""
    server, _ = make_server()

    with pytest.raises(ValueError, match="loopback only"):
        await serve(server, port=0, inspect_port=0, inspect_host="0.0.0.0")


def test_command_line_refuses_inspect_beyond_loopback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`trio-mcp serve --inspect 0.0.0.0:PORT` stops with a usage error naming the rule."""
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--inspect", "0.0.0.0:9999"], own_command_line=False)

    assert 2 == stop.value.code
    assert "loopback only" in capsys.readouterr().err


async def test_tree_command_prints_the_tree_indented(
    nursery: trio.Nursery, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trio-mcp tree URL` prints the inspector's tree, one task per line, indented with
    box-drawing branches."""
    server, _ = make_server()
    url, inspector = await start(nursery, server)
    session = await open_session(url)

    await trio.to_thread.run_sync(lambda: main(["tree", inspector], own_command_line=False))

    out = capsys.readouterr().out
    assert out.startswith("bp-tests: 1 sessions")
    [line] = [line for line in out.splitlines() if session.id[:8] in line]
    assert line.lstrip("│ ").startswith(("├── ", "└── "))
    assert "SessionTable.run" in out


def test_text_tree_folds_groups_with_a_count() -> None:
    """A group prints as its count, its members shown, and a line for the rest."""
    doc = {
        "server": "s", "sessions": 3, "modern_requests": 0, "task_runs": 0, "omitted": 0,
        "root": {"type": "task", "name": "root", "children": [{
            "type": "group", "kind": "session", "name": "Session.run", "count": 3, "more": 2,
            "states": {"cut": 1},
            "children": [{"type": "task", "name": "x", "label": "session a", "state": "cut"}],
        }]},
    }

    assert render_text(doc).splitlines()[1:] == [
        "root",
        "└── 3 × session Session.run, 1 cut",
        "    ├── session a  [cut]",
        "    └── … 2 more",
    ]


def test_command_line_serves_the_inspector_and_tree_prints_it() -> None:
    """`trio-mcp serve --port 0 --inspect 0` prints where the live task tree is served, and
    `trio-mcp tree URL`, another process, prints that tree with the session table in it."""
    root = Path(__file__).resolve().parents[2]
    proc, match, _ = start_until(
        [sys.executable, "-m", "trio_mcp", "serve", "--port", "0", "--inspect", "0"],
        r"serving the live task tree at (http://127\.0\.0\.1:\d+/)", cwd=root,
    )
    try:
        printed = subprocess.run(
            [sys.executable, "-m", "trio_mcp", "tree", match.group(1)],
            capture_output=True, text=True, timeout=60, cwd=root, check=True,
        )
    finally:
        proc.terminate()
        proc.wait(30)

    assert printed.stdout.startswith("trio-mcp-demo: 0 sessions")
    assert "SessionTable.run · 0 / 10000 sessions" in printed.stdout


async def test_modern_request_shows_as_its_exchange_on_its_connection(
    nursery: trio.Nursery,
) -> None:
    """A 2026-07-28 request running its handler shows as the connection task that runs it,
    named by its method and id; it is gone once its client leaves (MT-CANCEL-2)."""
    server, record = make_server()
    url, inspector = await start(nursery, server)
    message = call_tool("wait", {"seconds": -1, "tag": "m"})
    with trio.fail_after(30):
        async with trio.open_nursery() as client:
            client.start_soon(post, url, message)
            await wait_until(lambda: "m" in record.started)
            doc = await tree(inspector)
            client.cancel_scope.cancel()

        [exchange] = of_kind(doc, "exchange")
        assert exchange["label"].startswith(f"tools/call id={message['id']} (2026-07-28")
        assert 0 == doc["sessions"]
        assert 1 == doc["modern_requests"]
        await wait_until(lambda: "m" in record.cancelled)
        # Polling: the tree is read over HTTP, as a page reads it.
        while of_kind(await tree(inspector), "exchange"):  # noqa: ASYNC110
            await trio.sleep(0.1)
