# The inspector's page in a real browser: headless Chromium, driven through chromedriver
# (tests/support/webdriver.py), opens the page of a server started with an inspector on free
# loopback ports, while the test drives sessions over HTTP and reads the rendered DOM. It takes
# a screenshot; with TRIO_MCP_WRITE_DOCS=1 in the environment it writes it over the one
# docs/architecture.md shows (docs/inspect.png), which is otherwise left alone, so that a run of the
# tests leaves the git tree as it was.
#
# Chromium missing is a failure, not a skip: .ci/run installs it.
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, open_stream, rpc_request
from support.client import dumps as json_body
from support.fixtures import wait_until
from support.slow import make_server, open_slow
from support.webdriver import Browser, find_chromium, open_browser

from trio_mcp import ServerConfig, serve

pytestmark = [pytest.mark.spec("TM-SEC-INSPECT"), pytest.mark.slow]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "inspect.png"
#: Set to 1 to write the screenshot to docs/inspect.png (SCREENSHOT).
WRITE_DOCS = "TRIO_MCP_WRITE_DOCS"

#: Labels of the rendered nodes of a kind (`li[data-kind=...]`), and their highlighted state.
NODES = """
return Array.from(document.querySelectorAll(`li[data-kind="${arguments[0]}"]`))
  .filter(li => li.dataset.type !== "group")
  .map(li => [li.querySelector(".label").textContent, li.dataset.state || null]);
"""


async def in_page(browser: Browser, script: str, *args: Any) -> Any:
    return await trio.to_thread.run_sync(lambda: browser.run(script, *args))


async def until_page(
    browser: Browser, kind: str, holds: Callable[[list[list[Any]]], bool]
) -> list[list[Any]]:
    """Poll the page's nodes of ``kind`` until ``holds(nodes)``; the nodes then."""
    while True:
        found: list[list[Any]] = await in_page(browser, NODES, kind)
        if holds(found):
            return found
        await trio.sleep(0.1)


async def call(session: McpSession, tool: str, arguments: dict[str, Any]) -> None:
    message = rpc_request("tools/call", {"name": tool, "arguments": arguments})
    async with open_stream(session.url, "POST", session.headers(), json_body(message)) as s:
        await s.read_body()


async def test_page_shows_sessions_handlers_and_cut_views_live(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """In headless Chromium, the inspector's page shows a new session's supervisor; a
    running handler appears under it and disappears once it has answered; a reader that
    stops reading is cut and its view is marked cut; the page's screenshot is a PNG, which
    goes to docs/inspect.png only with TRIO_MCP_WRITE_DOCS=1."""
    try:
        find_chromium()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    server, record = make_server("inspect-demo")
    # A short stall budget, so that the stopped reader is cut within a few seconds.
    config = ServerConfig(stall_budget=1.0)
    urls: list[str] = await nursery.start(
        lambda task_status: serve(
            server, port=0, config=config, inspect_port=0, task_status=task_status
        )
    )
    url, page = urls[0], urls[-1]
    with open_browser(width=1400, height=1500) as browser:
        with trio.fail_after(120):
            await trio.to_thread.run_sync(lambda: browser.get(page))
            await wait_until_live(browser)

            # A session appears.
            first = await open_session(url)
            await until_page(browser, "session", lambda ns: any(first.id[:8] in n[0] for n in ns))

            # Its handler appears while it runs, and disappears when it has answered.
            async with trio.open_nursery() as calls:
                calls.start_soon(call, first, "wait", {"seconds": 3.0, "tag": "short"})
                found = await until_page(browser, "handler", lambda ns: bool(ns))
                assert any("tools/call" in label for label, _ in found)
            assert "short" in record.finished
            await until_page(browser, "handler", lambda ns: not ns)

            # A reader that stops reading is cut, and its view is marked.
            stalled = await open_session(url)
            message = rpc_request(
                "tools/call", {"name": "stream", "arguments": {"n": 400, "size": 2000}}
            )
            host, port = url.split("//")[1].split("/")[0].split(":")
            async with open_slow(
                (host, int(port)), "POST", "/mcp", stalled.headers(), json_body(message)
            ) as reader:
                await reader.read_head()
                views = await until_page(
                    browser, "view", lambda ns: any(state == "cut" for _, state in ns)
                )
                assert any("cut" in label for label, state in views if state == "cut")

            # Something to look at: more sessions (a group), one handler that keeps running.
            for _ in range(9):
                await open_session(url)
            nursery.start_soon(call, first, "wait", {"seconds": -1, "tag": "long"})
            await wait_until(lambda: "long" in record.started)
            await until_page(browser, "handler", lambda ns: bool(ns))
            await in_page(browser, EXPAND_SESSIONS)
            await trio.sleep(1.0)  # one more snapshot, drawn with the group unfolded
            png = await trio.to_thread.run_sync(browser.screenshot)
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), png[:16]
    (tmp_path / SCREENSHOT.name).write_bytes(png)
    if os.environ.get(WRITE_DOCS) == "1":
        SCREENSHOT.parent.mkdir(exist_ok=True)
        SCREENSHOT.write_bytes(png)


async def wait_until_live(browser: Browser) -> None:
    # Polling: the page is in another process, with no event to wait on.
    while not await in_page(  # noqa: ASYNC110
        browser, 'return !!document.querySelector("#status.live");'
    ):
        await trio.sleep(0.1)


#: Unfold the group of sessions (it starts folded), as a click on its arrow does.
EXPAND_SESSIONS = """
for (const tw of document.querySelectorAll('li[data-type="group"] > .row > .tw')) tw.click();
"""
