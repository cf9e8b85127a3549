# The inspector's page (trio_mcp.edges.observe._inspect): one self-contained HTML document, its
# style and
# script inline, nothing fetched from elsewhere. It reads the tree from /events (SSE) and
# draws it as nested lists; what a snapshot says is cancelled, cut, stalled or slow is
# highlighted. Groups of similar siblings start folded; any node folds and unfolds on a click,
# and keeps its state across updates (by the node's id).
from __future__ import annotations

from typing import Final

__all__ = ["PAGE"]

PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>trio-mcp · live task tree</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { --fg: #1d2125; --muted: #6a737d; --line: #d0d7de; --bg: #fff;
          --cut: #d1242f; --stalled: #d1242f; --cancelled: #bc4c00; --slow: #9a6700;
          --closing: #6a737d; }
  body { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
         color: var(--fg); background: var(--bg); margin: 0; }
  header { position: sticky; top: 0; background: #f6f8fa; border-bottom: 1px solid var(--line);
           padding: 8px 14px; display: flex; gap: 18px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 14px; margin: 0; }
  #status.live::before { content: "● "; color: #1a7f37; }
  #status.down::before { content: "● "; color: var(--cut); }
  .legend span { margin-right: 10px; }
  main { padding: 8px 14px 40px; }
  ul { list-style: none; margin: 0; padding-left: 18px; border-left: 1px dotted var(--line); }
  main > ul { border-left: none; padding-left: 0; }
  li { margin: 1px 0; }
  li.folded > ul { display: none; }
  .row { cursor: default; white-space: nowrap; }
  .row .tw { display: inline-block; width: 1.2em; color: var(--muted); cursor: pointer; }
  .row .name { color: var(--muted); }
  .row .age { color: var(--muted); }
  li[data-type="nursery"] > .row .label { color: var(--muted); font-style: italic; }
  li[data-type="group"] > .row .label { font-weight: 600; }
  li[data-kind="session"] > .row .label { font-weight: 600; }
  li[data-kind="handler"] > .row .label { color: #0550ae; }
  li[data-kind="view"] > .row .label { color: #116329; }
  li[data-kind="writer"] > .row .label { color: #6639ba; }
  .badge { border-radius: 3px; padding: 0 4px; color: #fff; font-size: 11px; margin-left: 6px; }
  [data-state="cut"] > .row { background: #ffebe9; }
  [data-state="stalled"] > .row { background: #ffebe9; }
  [data-state="cancelled"] > .row { background: #fff1e5; }
  [data-state="slow"] > .row { background: #fff8c5; }
  [data-state="closing"] > .row { opacity: .7; }
  .badge.cut, .badge.stalled { background: var(--cut); }
  .badge.cancelled { background: var(--cancelled); }
  .badge.slow { background: var(--slow); }
  .badge.closing { background: var(--closing); }
  .more { color: var(--muted); font-style: italic; }
  li[data-type="ended"] > .row .label { text-decoration: line-through; }
</style>
</head>
<body>
<header>
  <h1>trio-mcp · live task tree</h1>
  <span id="status" class="down">connecting</span>
  <span id="summary"></span>
  <span class="legend">
    <span class="badge cancelled">cancelled</span><span class="badge cut">cut</span>
    <span class="badge stalled">stalled</span><span class="badge slow">slow</span>
  </span>
</header>
<main><ul id="tree"></ul><p id="omitted" class="more"></p></main>
<script>
"use strict";
// Folded or not, by node id: what the user chose; groups start folded, the rest unfolded.
const choice = new Map();
let last = null;

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"})[c]);
}

function isFolded(node) {
  if (choice.has(node.id)) return choice.get(node.id);
  return node.type === "group";
}

function label(node) {
  if (node.type === "nursery") return "nursery";
  if (node.type === "group") {
    const states = Object.entries(node.states || {}).map(([s, n]) => `${n} ${s}`).join(", ");
    return `${node.count} × ${node.kind} ${node.name}` + (states ? ` (${states})` : "");
  }
  return node.label || node.name;
}

function render(node, out) {
  const kids = node.children || [];
  const folded = kids.length && isFolded(node);
  out.push(`<li data-id="${esc(node.id)}" data-type="${esc(node.type)}"` +
    ` data-kind="${esc(node.kind || node.type)}"` +
    (node.state ? ` data-state="${esc(node.state)}"` : "") +
    (folded ? ` class="folded"` : "") + ">");
  const title = Object.entries(node.details || {}).map(([k, v]) => `${k}: ${v}`).join("\\n");
  out.push(`<div class="row" title="${esc(title)}">` +
    `<span class="tw">${kids.length ? (folded ? "▸" : "▾") : ""}</span>`);
  out.push(`<span class="label">${esc(label(node))}</span>`);
  if (node.type === "task" && node.label && node.name) {
    out.push(` <span class="name">${esc(node.name)}</span>`);
  }
  if (typeof node.age === "number") out.push(` <span class="age">${node.age.toFixed(1)} s</span>`);
  if (node.state) out.push(`<span class="badge ${esc(node.state)}">${esc(node.state)}</span>`);
  out.push("</div>");
  if (kids.length || node.more) {
    out.push("<ul>");
    for (const kid of kids) render(kid, out);
    if (node.more) out.push(`<li class="more">… ${node.more} more not shown</li>`);
    out.push("</ul>");
  }
  out.push("</li>");
}

function draw(doc) {
  last = doc;
  const out = [];
  render(doc.root, out);
  document.getElementById("tree").innerHTML = out.join("");
  const bits = [`${doc.server}`, `${doc.sessions} sessions`,
    `${doc.modern_requests} modern requests`, `${doc.task_runs} task runs`];
  if ("spawned" in doc) bits.push(`tasks spawned ${doc.spawned}, exited ${doc.exited}`);
  document.getElementById("summary").textContent = bits.join(" · ");
  document.getElementById("omitted").textContent =
    doc.omitted ? `${doc.omitted} tasks not shown: the snapshot is capped` : "";
}

document.getElementById("tree").addEventListener("click", ev => {
  const tw = ev.target.closest(".tw");
  if (!tw) return;
  const li = tw.closest("li");
  const folded = !li.classList.contains("folded");
  choice.set(li.dataset.id, folded);
  li.classList.toggle("folded", folded);
  tw.textContent = folded ? "▸" : "▾";
});

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource("events");
  source.onopen = () => { status.className = "live"; status.textContent = "live"; };
  source.onmessage = ev => { draw(JSON.parse(ev.data)); };
  source.onerror = () => { status.className = "down"; status.textContent = "reconnecting"; };
}
connect();
</script>
</body>
</html>
"""
