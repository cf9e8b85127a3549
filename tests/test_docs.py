"""The documentation stays true: every relative link in README.md and docs/*.md leads to a
file that exists (and to a heading there, for a link with an #anchor), and the client-side
walkthrough of docs/tasks.md, played against the demo server, gets the answers it shows."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import request
from support.docs import SHOWN_URL, code_blocks, curl_request

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 30

_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks (a `# comment` there is no heading)."""
    return _FENCE.sub("", text)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: the heading's text, lower
    case, without punctuation but hyphens and underscores, spaces made hyphens, and -1, -2
    appended to repeats."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.*)$", _prose(path.read_text("utf-8")), flags=re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    """The links of ``page`` that point into this repository (not a URL, not mail)."""
    links = _LINK.findall(_prose(page.read_text("utf-8")))
    return [link for link in links if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def broken(page: Path, link: str) -> str | None:
    """Why ``link`` of ``page`` leads nowhere, or None when it leads somewhere."""
    target, _, anchor = link.partition("#")
    path = (page.parent / target).resolve() if target else page
    if not path.exists():
        return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} does not exist"
    if anchor and path.suffix == ".md" and anchor not in anchors(path):
        return f"{path.relative_to(ROOT)} has no heading #{anchor}"
    return None


def test_anchors_are_githubs() -> None:
    """The anchor rule gives what GitHub gives, on headings with code, punctuation, an em
    dash and a repeat."""
    page = ROOT / "docs" / "architecture.md"

    assert "watching-the-tree-live---inspect" in anchors(page)
    assert "t-sess-7--a-terminated-sessions-id-gets-404" in anchors(ROOT / "spec" / "sessions.md")


def test_a_missing_file_or_heading_is_caught() -> None:
    """The check fails a link to a file that is not there, and one to a heading that is
    not there, and passes the real ones."""
    readme = ROOT / "README.md"

    assert "does not exist" in (broken(readme, "docs/nowhere.md") or "")
    assert "has no heading #nowhere" in (broken(readme, "docs/operating.md#nowhere") or "")
    assert "has no heading" in (broken(readme, "#quick-start") or "")
    assert None is broken(readme, "docs/operating.md#stopping")
    assert None is broken(readme, "#running-the-tests")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    """Every relative link and image of the page names a file or directory that exists,
    and a heading of it when it names an anchor."""
    links = relative_links(page)

    assert [] == [f"{link}: {why}" for link in links if (why := broken(page, link))]


def test_the_readme_links_every_page_of_docs() -> None:
    """No page of docs/ is left out of the README's reach: each is linked from the README or
    from a page the README links."""
    readme = ROOT / "README.md"
    reached = {
        (readme.parent / link.partition("#")[0]).resolve() for link in relative_links(readme)
    }
    for page in list(reached):
        if page.suffix == ".md" and page.parent == ROOT / "docs":
            reached |= {(page.parent / link.partition("#")[0]).resolve()
                        for link in relative_links(page)}

    assert [] == [p.name for p in PAGES[1:] if p.resolve() not in reached]


# -- docs/tasks.md, from the client side ----------------------------------------------------


def _task_commands() -> list[str]:
    """The curl commands of docs/tasks.md, in order."""
    text = (ROOT / "docs" / "tasks.md").read_text("utf-8")
    return [b for b in code_blocks(text, "bash") if "curl" in b]


async def _send(url: str, command: str, task: str = "") -> dict[str, Any]:
    headers, body = curl_request(command.replace("$TASK", task))
    response = await request(url, "POST", headers, body)
    answer: dict[str, Any] = json.loads(response.body)
    return answer


@pytest.mark.spec("TM-TASK-HEADERS", "TK-OPTIN", "TK-GET", "TK-UPDATE")
async def test_the_tasks_walkthrough_gets_the_answers_it_shows(nursery: trio.Nursery) -> None:
    """docs/tasks.md's requests, sent as written to the demo server: the call becomes a
    task; tasks/get with Mcp-Name polls it to completed with the tool's result, and without
    the header is refused with the -32020 message the page shows; the confirm_delete task
    asks, tasks/update answers by key, and it completes."""
    from trio_mcp.demo import server as demo

    [url] = await nursery.start(partial(demo.serve, port=0, announce=False))
    call, poll, confirm, update = _task_commands()
    assert SHOWN_URL in call
    with trio.fail_after(TIMEOUT):
        created = (await _send(url, call))["result"]
        task = created["taskId"]
        polled = (await _send(url, poll, task))["result"]
        while polled["status"] == "working":
            await trio.sleep(created["pollIntervalMs"] / 1000)
            polled = (await _send(url, poll, task))["result"]
        refused = await _send(url, poll.replace('-H "mcp-name: $TASK"', ""), task)

        asking = (await _send(url, confirm))["result"]["taskId"]
        question = (await _send(url, poll, asking))["result"]
        while question["status"] == "working":
            await trio.sleep(0.05)
            question = (await _send(url, poll, asking))["result"]
        acked = (await _send(url, update, asking))["result"]
        done = (await _send(url, poll, asking))["result"]
        while done["status"] != "completed":
            await trio.sleep(0.05)
            done = (await _send(url, poll, asking))["result"]

    text = (ROOT / "docs" / "tasks.md").read_text("utf-8")
    assert ("task", "working") == (created["resultType"], created["status"])
    assert ("complete", "completed") == (polled["resultType"], polled["status"])
    assert [{"type": "text", "text": "job: computed in 2 s"}] == polled["result"]["content"]
    assert '"text":"job: computed in 2 s"' in text
    assert -32020 == refused["error"]["code"]
    shown = json.dumps(refused["error"], separators=(",", ":"))
    assert shown.replace(task, "nXLu8gRJaRsyjORDgDdBzqHQaZnFOigc") in text
    assert "input_required" == question["status"]
    assert ["elicitation-1"] == list(question["inputRequests"])
    assert '"message":"Delete example.txt?"' in text
    assert {"resultType"} == set(acked) - {"_meta"}
    assert [{"type": "text", "text": "Deleted example.txt."}] == done["result"]["content"]
