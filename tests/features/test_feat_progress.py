"""Progress notifications (Context.report_progress), driven in memory."""

from __future__ import annotations

import pytest
import trio

from trio_mcp import Context, Server


def progress_server() -> tuple[Server, list[Context]]:
    server = Server("progress-tests")
    kept: list[Context] = []

    @server.tool()
    async def steps(ctx: Context, values: list[float]) -> str:
        """Reports each value as progress, in order.

        Args:
            values: the progress values.
        """
        kept.append(ctx)
        sent = [await ctx.report_progress(v, total=10, message=f"at {v}") for v in values]
        return ",".join(str(s) for s in sent)

    return server, kept


@pytest.mark.spec("U-PROG-3", "U-PROG-5", "U-PROG-6", "T-PSSE-8")
async def test_progress_goes_on_the_request_stream_before_the_response(autojump_clock, mem):
    """With a progressToken, each report is a notifications/progress carrying that token,
    the progress, total and message (floats allowed), on the request's own stream and
    before its response; nothing of it appears on the standalone GET stream."""
    server, _ = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        get = await s.get()
        answer, before = await s.call(
            "tools/call",
            {
                "name": "steps",
                "arguments": {"values": [0.5, 2.5, 10.0]},
                "_meta": {"progressToken": 7},
            },
        )
        assert answer["result"]["content"][0]["text"] == "True,True,True"
        assert [m["params"] for m in before] == [
            {"progressToken": 7, "progress": 0.5, "total": 10, "message": "at 0.5"},
            {"progressToken": 7, "progress": 2.5, "total": 10, "message": "at 2.5"},
            {"progressToken": 7, "progress": 10, "total": 10, "message": "at 10.0"},
        ]
        assert {m["method"] for m in before} == {"notifications/progress"}
        with trio.move_on_after(1):
            await get.next_message()
            raise AssertionError("a message went to the GET stream")


@pytest.mark.spec("U-PROG-4")
@pytest.mark.parametrize(
    ("values", "sent"),
    [([1, 1], [1]), ([5, 3], [5]), ([0, -1], [0]), ([2, 1, 1, 3, 2.5, 4], [2, 3, 4])],
)
async def test_progress_that_does_not_increase_is_dropped_and_the_call_finishes(
    autojump_clock, mem, caplog, values, sent
):
    """Progress must increase with every notification: a report that does not is dropped
    (it returns False), the call still finishes with its result, only increasing values go
    out, and the server logs one warning for the request, naming the tool and the values."""
    server, _ = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        answer, before = await s.call(
            "tools/call",
            {"name": "steps", "arguments": {"values": values}, "_meta": {"progressToken": "t"}},
        )
    warnings = [
        r.getMessage() for r in caplog.records
        if r.name == "trio_mcp.server" and r.levelname == "WARNING"
    ]

    assert ",".join(str(v in sent and v not in values[:i]) for i, v in enumerate(values)) == (
        answer["result"]["content"][0]["text"]
    )
    assert sent == [m["params"]["progress"] for m in before]
    [warning] = warnings
    assert warning.startswith("tool 'steps' reported progress ")
    assert "progress must increase (U-PROG-4)" in warning


@pytest.mark.spec("U-PROG-4")
async def test_each_request_warns_of_its_own_progress_mistake(autojump_clock, mem, caplog):
    """The warning is once per request: two calls that each report a value that does not
    increase give two warnings, not one per report."""
    server, _ = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        for token in ("a", "b"):
            await s.call(
                "tools/call",
                {"name": "steps", "arguments": {"values": [3, 2, 1, 0]},
                 "_meta": {"progressToken": token}},
            )

    assert 2 == sum("must increase" in r.getMessage() for r in caplog.records)


@pytest.mark.spec("U-PROG-7", "U-PROG-8")
async def test_no_progress_without_a_token(autojump_clock, mem):
    """Without a progressToken in the request's _meta, reports send nothing (and say so)."""
    server, _ = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        answer, before = await s.call(
            "tools/call", {"name": "steps", "arguments": {"values": [1, 2]}}
        )
        assert answer["result"]["content"][0]["text"] == "False,False"
        assert before == []


@pytest.mark.spec("U-PROG-1")
@pytest.mark.parametrize("token", [True, None, 1.5, {"a": 1}])
async def test_a_token_that_is_not_a_string_or_integer_is_no_token(autojump_clock, mem, token):
    """A progressToken that is not a string or an integer is not used."""
    server, _ = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        answer, before = await s.call(
            "tools/call",
            {"name": "steps", "arguments": {"values": [1]}, "_meta": {"progressToken": token}},
        )
        assert answer["result"]["content"][0]["text"] == "False"
        assert before == []


@pytest.mark.spec("U-PROG-11", "U-PROG-7", "U-PROG-10")
async def test_progress_stops_after_completion(autojump_clock, mem):
    """After the request completed, its context sends no more progress (nor logs): the
    token is tracked with its request, so the report returns False and nothing reaches any
    stream."""
    server, kept = progress_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        get = await s.get()
        await s.call(
            "tools/call",
            {"name": "steps", "arguments": {"values": [1]}, "_meta": {"progressToken": 1}},
        )
        [ctx] = kept
        assert await ctx.report_progress(5) is False
        assert await ctx.log("emergency", "late") is False
        with trio.move_on_after(1):
            await get.next_message()
            raise AssertionError("a message went to the GET stream")
        session = ms.table.sessions[s.id]
        assert session.statistics().notifications_dropped >= 1
