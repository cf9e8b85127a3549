# The guided tour (`trio-mcp demo-tour`, docs/tour.md): each scene is played here by the same
# function the command plays, against a tour server with its inspector on free loopback ports,
# and its outcome is asserted from what the client got, from the inspector's /tree.json (what
# the page draws) and from what the server's handlers recorded. The last test runs the
# command itself, as a person would, without pauses.
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_mcp.cli._tour import (
    SCENES,
    TOUR_CONFIG,
    Narrator,
    SceneFailed,
    Tour,
    open_tour,
    read_tree,
    scene_delete,
    scene_handlers,
    scene_resume,
    scene_stall,
    session_node,
    tree_nodes,
)

ROOT = Path(__file__).resolve().parents[2]
#: How many stall budgets a stopped reader may take to be cut where the kernel is not asked
#: (trio_mcp.runtime.backpressure._writer.RATE_LOOKBACK); on Linux it is one.
RATE_LOOKBACK = 6


@pytest.fixture
async def tour(nursery: trio.Nursery) -> Tour:
    """A tour server with its inspector, for the length of one test."""
    return await open_tour(nursery)


@pytest.fixture
def narrator() -> Narrator:
    """A narrator that never pauses, writing to a buffer the test can read."""
    return Narrator(io.StringIO(), pace=0)


def told(narrator: Narrator) -> str:
    out = narrator.out
    assert isinstance(out, io.StringIO)
    return out.getvalue()


@pytest.mark.spec("TM-SEC-INSPECT")
async def test_three_handlers_run_at_once_under_their_session_supervisor(
    tour: Tour, narrator: Narrator, nursery: trio.Nursery
) -> None:
    """Scene 1: three calls of one session run at once, and one snapshot of the tree shows
    their three handlers below the session's supervisor, none finished or cancelled."""
    with trio.fail_after(60):
        crowd = await scene_handlers(tour, narrator, nursery)
        doc = await read_tree(tour)

    ids = {c.message["id"] for c in crowd.calls}
    supervisor = session_node(doc, crowd.session.id)
    assert supervisor is not None
    under = {n["details"]["id"] for n in tree_nodes(supervisor) if n.get("kind") == "handler"}
    assert ids == under
    assert ids == {n["details"]["id"] for n in crowd.seen}
    assert {c.tag for c in crowd.calls} == tour.record.started
    assert set() == tour.record.finished | tour.record.cancelled
    assert SCENES[0] in told(narrator)


@pytest.mark.spec("TM-SESS-DELETE", "TM-SEC-INSPECT")
async def test_delete_cancels_every_handler_and_the_session_leaves_the_tree(
    tour: Tour, narrator: Narrator, nursery: trio.Nursery
) -> None:
    """Scene 2: a DELETE of scene 1's session is answered 204; each of its three handlers
    ends with trio.Cancelled, unanswered, their streams are closed, the tree holds neither
    the session nor a handler of it, and the session's id then gets 404."""
    with trio.fail_after(60):
        crowd = await scene_handlers(tour, narrator, nursery)
        deleted = await scene_delete(tour, narrator, crowd)
        doc = await read_tree(tour)

    assert 204 == deleted.status
    assert 404 == deleted.afterwards
    assert {c.tag for c in crowd.calls} == tour.record.cancelled
    assert set() == tour.record.finished
    assert all(c.ended.is_set() and c.reading and not c.reading.answers for c in crowd.calls)
    assert session_node(doc, crowd.session.id) is None
    assert [] == [n for n in tree_nodes(doc["root"]) if n.get("kind") == "handler"]


async def test_a_scene_whose_outcome_differs_says_what_happened(
    tour: Tour, narrator: Narrator, nursery: trio.Nursery
) -> None:
    """A scene checks its own outcome: DELETE played on a session already ended is answered
    404, and the scene fails saying so rather than carrying on."""
    with trio.fail_after(60):
        crowd = await scene_handlers(tour, narrator, nursery)
        await scene_delete(tour, narrator, crowd)

        with pytest.raises(SceneFailed, match="answered 404, not 204"):
            await scene_delete(tour, narrator, crowd)


@pytest.mark.slow
@pytest.mark.spec("T-PSSE-12", "T-RESUME-5")
async def test_dropped_stream_resumes_with_every_number_exactly_once(
    tour: Tour, narrator: Narrator
) -> None:
    """Scene 3: a client drops a counting call's stream after 6 of 20 numbers; the handler
    runs on, and a GET with Last-Event-ID delivers 7 to 20 and the result, each once."""
    with trio.fail_after(60):
        resumed = await scene_resume(tour, narrator)

    assert list(range(1, 7)) == resumed.before
    assert list(range(7, 21)) == resumed.after
    assert "counted to 20" == resumed.answer["result"]["content"][0]["text"]
    [tag] = tour.record.finished
    assert set() == tour.record.cancelled
    assert tag.endswith("-count")
    assert "every number arrived exactly once" in told(narrator)


@pytest.mark.slow
@pytest.mark.spec("TM-BP-STALL", "TM-BP-SIGNAL", "T-RESUME-5", "TM-SEC-INSPECT")
async def test_stalled_reader_is_cut_marked_on_the_page_and_resumes_from_the_signal(
    tour: Tour, narrator: Narrator
) -> None:
    """Scene 4: a client that stops reading after the response head is cut about one stall
    budget later (the tour's 2 s), not before; the tree marks its view cut under its
    session; behind what its socket held it finds one `resumption-required` naming the last
    event it read, with retry; resuming from there delivers the rest and the result, each
    once, and the handler was never cancelled."""
    budget = TOUR_CONFIG.stall_budget
    with trio.fail_after(90):
        resumed = await scene_stall(tour, narrator)
        doc = await read_tree(tour)

    assert resumed.cut_after is not None
    # From the client's view of the head, whose first bytes left just before the writer
    # became busy; and at the latest, RATE_LOOKBACK budgets plus the page's half second.
    assert budget - 0.5 <= resumed.cut_after <= RATE_LOOKBACK * budget + 2.0
    assert resumed.signal is not None
    assert resumed.cursor == resumed.signal["lastEventId"]
    assert TOUR_CONFIG.retry_ms == resumed.signal["retry"]
    assert list(range(1, 81)) == resumed.before + resumed.after
    assert "counted to 80" == resumed.answer["result"]["content"][0]["text"]
    assert set() == tour.record.cancelled
    [supervisor] = [n for n in tree_nodes(doc["root"]) if n.get("kind") == "session"]
    assert "cut" == supervisor.get("state")
    assert [n for n in tree_nodes(supervisor) if n.get("kind") == "view" and
            n.get("state") == "cut"]


@pytest.mark.slow
def test_demo_tour_command_plays_the_four_scenes_and_exits_0() -> None:
    """`trio-mcp demo-tour --pace 0`, run as a person runs it, prints where the page is,
    plays the four scenes under their headings and exits 0."""
    script = Path(sys.executable).with_name("trio-mcp")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "trio_mcp"]

    done = subprocess.run(
        [*command, "demo-tour", "--pace", "0"],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )

    assert 0 == done.returncode, done.stdout + done.stderr
    headings = [line for line in done.stdout.splitlines() if line.startswith("Scene ")]
    assert list(SCENES) == headings
    assert "Its task tree:  http://127.0.0.1:" in done.stdout
    assert "NOT AS EXPECTED" not in done.stdout
