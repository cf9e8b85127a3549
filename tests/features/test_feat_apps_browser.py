# The demo's MCP Apps page in a real browser: headless Chromium (tests/support/webdriver.py)
# opens a test host page, which renders the page the demo serves in a sandboxed iframe under the
# CSP the spec tells hosts to build from its `_meta.ui`, and plays the host's side of the bridge
# (JSON-RPC over postMessage: ui/initialize, the tool's input and result). The test is the rest
# of the host: it reads the page and calls the tool over HTTP as a client that declared the
# extension, and forwards the page's own tools/call to the server.
#
# Chromium missing is a failure, not a skip: .ci/run installs it.
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session
from support.fixtures import start_live
from support.webdriver import Browser, find_chromium, open_browser

from trio_mcp.app._apps import APP_MIME_TYPE, APPS_EXTENSION

pytestmark = [pytest.mark.spec("TM-APPS-DEMO", "UI-TOOL-META", "UI-RES-MIME"), pytest.mark.slow]

UI_CAPS: dict[str, Any] = {"extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}

#: The host page's script: arguments are the page's HTML, its _meta.ui, the tools the page may
#: call (visibility includes "app"), the tool's input and its result. It keeps what the page
#: sent in ``window.bridge``; ``window.answerApp(id, result)`` answers a forwarded call.
HOST = r"""
const [html, ui, appTools, toolInput, toolResult] = arguments;
const bridge = { log: [], calls: [], initialized: false, refused: [] };
window.bridge = bridge;
// The policy of the spec's Security Implications section, from the page's declared origins
// (none declared: the restrictive default).
const csp = (ui && ui.csp) || {};
const list = (k) => (csp[k] || []).join(" ");
const policy = [
  "default-src 'none'",
  `script-src 'self' 'unsafe-inline' ${list("resourceDomains")}`,
  `style-src 'self' 'unsafe-inline' ${list("resourceDomains")}`,
  `connect-src 'self' ${list("connectDomains")}`,
  `img-src 'self' data: ${list("resourceDomains")}`,
  `font-src 'self' ${list("resourceDomains")}`,
  `media-src 'self' data: ${list("resourceDomains")}`,
  `frame-src ${list("frameDomains") || "'none'"}`,
  "object-src 'none'",
  `base-uri ${list("baseUriDomains") || "'self'"}`,
].join("; ");
const meta = `<meta http-equiv="Content-Security-Policy" content="${policy}">`;
const frame = document.createElement("iframe");
frame.id = "app";
frame.setAttribute("sandbox", "allow-scripts");
frame.style.cssText = "width: 640px; height: 480px; border: 1px solid #999";
frame.srcdoc = html.replace(/<head>/i, "<head>" + meta);
const post = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
window.answerApp = (id, result) => post({ id, result });
window.addEventListener("message", (event) => {
  if (event.source !== frame.contentWindow) return;
  const msg = event.data;
  bridge.log.push(msg);
  if (msg.method === "ui/initialize") {
    post({ id: msg.id, result: {
      protocolVersion: "2026-01-26",
      hostInfo: { name: "trio-mcp test host", version: "1.0.0" },
      hostCapabilities: { serverTools: {}, logging: {} },
      hostContext: { theme: "light", displayMode: "inline" },
    } });
  } else if (msg.method === "ui/notifications/initialized") {
    bridge.initialized = true;
    post({ method: "ui/notifications/tool-input", params: { arguments: toolInput } });
    post({ method: "ui/notifications/tool-result", params: toolResult });
  } else if (msg.method === "tools/call") {
    // A host refuses a page's call to a tool whose visibility leaves the page out.
    if (appTools.includes(msg.params && msg.params.name)) bridge.calls.push(msg);
    else {
      bridge.refused.push(msg);
      post({ id: msg.id, error: { code: -32000, message: "not callable from the app" } });
    }
  } else if (msg.id !== undefined && msg.method) {
    post({ id: msg.id, error: { code: -32601, message: "Method not found" } });
  }
});
document.body.appendChild(frame);
"""

APP_FRAME = 'return document.getElementById("app");'

#: What the page shows, read inside its frame.
SHOWN = """
return {
  status: document.getElementById("status").dataset.state,
  statusText: document.getElementById("status").textContent,
  rolls: document.getElementById("dice").dataset.rolls || null,
  total: document.getElementById("total").textContent,
  history: Array.from(document.querySelectorAll("#history li")).map((li) => li.textContent),
  rollEnabled: !document.getElementById("roll").disabled,
};
"""


async def in_browser(browser: Browser, call: Callable[[], Any]) -> Any:
    return await trio.to_thread.run_sync(call)


async def until(browser: Browser, script: str, holds: Callable[[Any], bool], *args: Any) -> Any:
    """Run ``script`` until its value ``holds``; that value."""
    while True:
        value = await in_browser(browser, lambda: browser.run(script, *args))
        if holds(value):
            return value
        await trio.sleep(0.1)


async def in_app(browser: Browser, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """What the page shows, once ``holds`` of it, read inside its iframe."""
    frame = await in_browser(browser, lambda: browser.run(APP_FRAME))
    await in_browser(browser, lambda: browser.frame(frame))
    try:
        shown: dict[str, Any] = await until(browser, SHOWN, holds)
    finally:
        await in_browser(browser, browser.parent_frame)
    return shown


def rolls_of(result: dict[str, Any]) -> str:
    return ",".join(map(str, result["structuredContent"]["rolls"]))


async def test_the_demo_app_renders_and_calls_its_tool_through_the_host(
    nursery: trio.Nursery,
) -> None:
    """In headless Chromium, the demo's dice page, read from the server as
    text/html;profile=mcp-app and rendered in a sandboxed iframe under the spec's default CSP,
    opens the bridge with ui/initialize (its appInfo and appCapabilities), says it is
    initialized, shows the roll the host passes it as the tool result, and, when its button is
    pressed, calls roll_dice through the host; the call forwarded to the server over HTTP
    comes back to the page, which shows the new roll."""
    try:
        find_chromium()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    live = await start_live(nursery, http_server="trio-mcp")
    session: McpSession = await open_session(live.url, capabilities=UI_CAPS)
    tools = {t["name"]: t for t in (await session.result("tools/list"))["tools"]}
    ui = tools["roll_dice"]["_meta"]["ui"]
    # The tools the page may call: app tools whose visibility (by default both) has "app".
    app_tools = [
        name for name, tool in tools.items()
        if "app" in tool.get("_meta", {}).get("ui", {}).get("visibility", ["model"])
    ]
    [page] = (await session.result("resources/read", {"uri": ui["resourceUri"]}))["contents"]
    assert page["mimeType"] == APP_MIME_TYPE
    arguments = {"sides": 6, "count": 2}
    first = await session.result("tools/call", {"name": "roll_dice", "arguments": arguments})

    with open_browser(width=900, height=700) as browser, trio.fail_after(120):
        await in_browser(browser, lambda: browser.get("about:blank"))
        await in_browser(browser, lambda: browser.run(
            HOST, page["text"], page.get("_meta", {}).get("ui"), app_tools, arguments, first
        ))
        log = await until(browser, "return window.bridge.initialized && window.bridge.log;", bool)
        init = log[0]
        assert init["method"] == "ui/initialize"
        assert init["params"]["appInfo"]["name"]
        assert "appCapabilities" in init["params"]
        opening = [m.get("method") for m in log[:2]]
        assert opening == ["ui/initialize", "ui/notifications/initialized"]

        # The tool result the host passed is on the page.
        shown = await in_app(browser, lambda s: s["rolls"] is not None and s["rollEnabled"])
        assert shown["status"] == "ready" and "trio-mcp test host" in shown["statusText"]
        assert shown["rolls"] == rolls_of(first)
        assert shown["total"] == f"Total {first['structuredContent']['total']} on 2d6"

        # The page's button calls the tool through the host.
        frame = await in_browser(browser, lambda: browser.run(APP_FRAME))
        await in_browser(browser, lambda: browser.frame(frame))
        await in_browser(browser, lambda: browser.run('document.getElementById("roll").click();'))
        await in_browser(browser, browser.parent_frame)
        [call] = await until(browser, "return window.bridge.calls;", bool)
        assert call["method"] == "tools/call"
        assert call["params"] == {"name": "roll_dice", "arguments": arguments}

        # The host forwards it to the server, and the answer to the page.
        second = await session.result("tools/call", call["params"])
        await in_browser(browser, lambda: browser.run(
            "window.answerApp(arguments[0], arguments[1]);", call["id"], second
        ))
        shown = await in_app(browser, lambda s: len(s["history"]) == 2)
        assert shown["rolls"] == rolls_of(second)
        assert shown["status"] == "ready"
        refused = await in_browser(browser, lambda: browser.run("return window.bridge.refused;"))
        assert refused == []
