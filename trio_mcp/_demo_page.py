# The demo's MCP Apps page (trio_mcp/demo.py, `roll_dice`): an HTML document a host renders in
# a sandboxed iframe. It speaks the ext-apps bridge (SEP-1865, "Communication Protocol"):
# JSON-RPC 2.0 over postMessage with its parent, the host. It opens with `ui/initialize`, says
# `ui/notifications/initialized`, shows the tool input and result the host sends it, and calls
# `roll_dice` again through the host (`tools/call`) when its button is pressed. No library, no
# network: everything it needs is inline, so the host's default CSP lets it run.
from __future__ import annotations

from typing import Final

__all__ = ["DICE_PAGE"]

DICE_PAGE: Final = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Dice</title>
<style>
  :root { --fg: var(--color-text-primary, #171717); --bg: var(--color-background-primary, #fff); }
  body { font-family: var(--font-sans, system-ui, sans-serif); color: var(--fg);
         background: var(--bg); margin: 1rem; }
  #dice { font-size: 2.5rem; letter-spacing: .3rem; min-height: 3rem; }
  button { font-size: 1rem; padding: .3rem .9rem; }
  #status { color: #666; font-size: .85rem; }
</style>
</head>
<body>
<h1>Dice</h1>
<div id="dice" aria-live="polite">&hellip;</div>
<p id="total"></p>
<label>Sides <input id="sides" type="number" min="2" max="1000" value="6"></label>
<label>Dice <input id="count" type="number" min="1" max="20" value="2"></label>
<button id="roll" disabled>Roll again</button>
<p id="status" data-state="connecting">connecting to the host&hellip;</p>
<ol id="history"></ol>
<script>
"use strict";
const pending = new Map();
let nextId = 1;
const $ = (id) => document.getElementById(id);

function send(message) { window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*"); }
function request(method, params) {
  const id = nextId++;
  send({ id, method, params });
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
function notify(method, params) { send({ method, params: params || {} }); }
function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function show(result) {
  const data = result && result.structuredContent;
  if (result && result.isError) {
    setStatus("error", "the tool failed: " + (result.content || []).map((c) => c.text).join(" "));
    return;
  }
  if (!data || !Array.isArray(data.rolls)) return;
  const faces = ["", "\\u2680", "\\u2681", "\\u2682", "\\u2683", "\\u2684", "\\u2685"];
  const face = (r) => (data.sides === 6 ? faces[r] : "[" + r + "]");
  $("dice").textContent = data.rolls.map(face).join(" ");
  $("dice").dataset.rolls = data.rolls.join(",");
  $("total").textContent = "Total " + data.total + " on " + data.rolls.length + "d" + data.sides;
  const li = document.createElement("li");
  li.textContent = data.rolls.join(" + ") + " = " + data.total;
  $("history").appendChild(li);
}

window.addEventListener("message", (event) => {
  // Only the host speaks to this page, and only JSON-RPC 2.0.
  if (event.source !== window.parent) return;
  const msg = event.data;
  if (!msg || msg.jsonrpc !== "2.0") return;
  if (msg.id !== undefined && !msg.method) {
    const waiter = pending.get(msg.id);
    if (!waiter) return;
    pending.delete(msg.id);
    if (msg.error) waiter.reject(new Error(msg.error.message || "error " + msg.error.code));
    else waiter.resolve(msg.result);
    return;
  }
  switch (msg.method) {
    case "ui/notifications/tool-input": {
      const args = (msg.params && msg.params.arguments) || {};
      if (args.sides) $("sides").value = args.sides;
      if (args.count) $("count").value = args.count;
      break;
    }
    case "ui/notifications/tool-result": show(msg.params); break;
    case "ui/notifications/tool-cancelled": setStatus("cancelled", "the roll was cancelled"); break;
    case "ui/resource-teardown": send({ id: msg.id, result: {} }); break;
    case "ping": send({ id: msg.id, result: {} }); break;
    default:
      if (msg.id !== undefined) {
        send({ id: msg.id, error: { code: -32601, message: "Method not found" } });
      }
  }
});

$("roll").addEventListener("click", async () => {
  $("roll").disabled = true;
  try {
    const args = { sides: Number($("sides").value), count: Number($("count").value) };
    show(await request("tools/call", { name: "roll_dice", arguments: args }));
  } catch (err) {
    setStatus("error", "the host refused the call: " + err.message);
  } finally {
    $("roll").disabled = false;
  }
});

request("ui/initialize", {
  protocolVersion: "2026-01-26",
  appInfo: { name: "trio-mcp dice", version: "1.0.0" },
  appCapabilities: { availableDisplayModes: ["inline"] },
}).then((init) => {
  const host = (init && init.hostInfo && init.hostInfo.name) || "the host";
  setStatus("ready", "connected to " + host);
  $("roll").disabled = false;
  notify("ui/notifications/initialized");
  notify("ui/notifications/size-changed", {
    width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
  });
}, (err) => setStatus("error", "ui/initialize failed: " + err.message));
</script>
</body>
</html>
"""
