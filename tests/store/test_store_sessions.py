# 2025-11-25 sessions in a shared store, served by two workers: two servers in this process on
# loopback, each with its own runtime and session table, sharing one store and one secret,
# as two `--workers` processes do. Each request of a session goes to either worker; what one
# worker must know of the other's requests (a cancellation, the client's answer, the end of
# the session) travels through the store. Every test runs against each store (a real Redis,
# and the in-process store: tests/support/stores.py).
from __future__ import annotations

import json
import random
import time
from typing import Any

import attrs
import pytest
import trio
from support.client import (
    McpSession,
    open_session,
    open_stream,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.fixtures import LiveServer, StartServer, wait_until
from support.stores import StoreBackend

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import HttpRequest, Notification
from trio_mcp.protocol._headers import Headers
from trio_mcp.runtime.store._relay import RELAY_HEADER

TIMEOUT = 15
SECRET = bytes(range(32))


def _app() -> Server:
    server = Server("store-tests")
    server.held = trio.Event()  # type: ignore[attr-defined]
    server.cancelled = 0  # type: ignore[attr-defined]

    @server.tool()
    async def quick(text: str = "") -> str:
        """Answers at once."""
        return f"quick {text}"

    @server.tool()
    async def hold(ctx: Context) -> str:
        """Runs until cancelled."""
        try:
            server.held.set()  # type: ignore[attr-defined]
            await trio.sleep_forever()
        except trio.Cancelled:
            server.cancelled += 1  # type: ignore[attr-defined]
            raise
        return "never"

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks the client for a name, and answers with it."""
        answer = await ctx.elicit(
            "Your name?",
            {"type": "object", "properties": {"name": {"type": "string"}},
             "required": ["name"]},
        )
        return f"hello {answer.content['name'] if answer.content else '?'}"

    @server.tool()
    async def count(ctx: Context, n: int = 6, pause: float = 0.02) -> str:
        """Logs n numbered lines, ``pause`` seconds apart, then answers."""
        for i in range(n):
            await ctx.log("info", f"line {i}")
            await trio.sleep(pause)
        return f"counted {n}"

    @server.resource("demo://thing")
    async def thing() -> str:
        return "a thing"

    return server


def _config(store: StoreBackend, **extra: Any) -> ServerConfig:
    return store.config(secret=SECRET, workers=2, **extra)


async def _two_workers(
    live_server: StartServer, store: StoreBackend, **extra: Any
) -> tuple[LiveServer, LiveServer]:
    a = await live_server(server=_app(), config=_config(store, **extra))
    b = await live_server(server=_app(), config=_config(store, **extra))
    return a, b


def _at(session: McpSession, worker: LiveServer) -> McpSession:
    """The same session, its requests sent to ``worker``."""
    return attrs.evolve(session, url=worker.url)


def _tool_call(name: str, rid: int | str, arguments: dict[str, Any] | None = None) -> bytes:
    message = rpc_request("tools/call", {"name": name, "arguments": arguments or {}}, id=rid)
    return json.dumps(message).encode()


@pytest.mark.spec("TM-STORE-RECORD")
async def test_each_request_of_a_session_may_reach_either_worker(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A session created at one worker is served by the other: forty requests alternating
    between the two workers are all answered, each over a fresh connection."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        answers = []
        for i in range(40):
            worker = (a, b)[i % 2]
            result = await _at(session, worker).result(
                "tools/call", {"name": "quick", "arguments": {"text": str(i)}}
            )
            answers.append(result["content"][0]["text"])
    assert [f"quick {i}" for i in range(40)] == answers
    assert 1 == b.stats()["sessions_adopted"]


@pytest.mark.spec("TM-STORE-RECORD")
async def test_what_one_worker_learns_of_a_session_the_other_knows_at_its_next_request(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """notifications/initialized, the log level and a subscription, each sent to one worker,
    hold at the other from the next request on."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url, send_initialized=False)
        assert 202 == (await _at(session, b).notify("notifications/initialized")).status
        await _at(session, b).result("logging/setLevel", {"level": "error"})
        await _at(session, b).result("resources/subscribe", {"uri": "demo://thing"})
        await _at(session, a).result("tools/list")
    here = a.table.sessions[session.id]
    assert "operating" == here.phase.value
    assert "error" == here.log_level
    assert {"demo://thing"} == here.subscriptions


@pytest.mark.spec("TM-STORE-CONTROL", "T-SESS-9")
async def test_a_delete_at_one_worker_ends_the_session_and_its_handlers_at_the_other(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """DELETE at worker B cancels the handler running at worker A and ends the session
    there; every later request, at either worker, gets 404."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        headers = session.headers()
        async with open_stream(a.url, "POST", headers, _tool_call("hold", 7)) as stream:
            await a.server.held.wait()  # type: ignore[attr-defined]
            assert 204 == (await _at(session, b).delete()).status
            await wait_until(lambda: a.server.cancelled == 1)  # type: ignore[attr-defined]
            assert (await stream.read_body()) is not None
        for worker in (a, b):
            response = await _at(session, worker).post(rpc_request("ping", id=9))
            assert 404 == response.status, response.body
    assert session.id not in a.table.sessions


@pytest.mark.spec("TM-STORE-CONTROL", "U-CANCEL-4")
async def test_a_cancellation_sent_to_the_other_worker_cancels_the_request(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """notifications/cancelled posted to worker B cancels the request running at worker A:
    its handler is cancelled, and its stream ends with no response."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        headers = session.headers()
        async with open_stream(a.url, "POST", headers, _tool_call("hold", "h1")) as stream:
            await a.server.held.wait()  # type: ignore[attr-defined]
            ack = await _at(session, b).notify(
                "notifications/cancelled", {"requestId": "h1", "reason": "changed my mind"}
            )
            assert 202 == ack.status
            await wait_until(lambda: a.server.cancelled == 1)  # type: ignore[attr-defined]
            body = await stream.read_body()
    assert b'"id"' not in body.replace(b'"id":""', b"")  # no response on the stream
    assert 1 == a.stats()["controls_received"]


@pytest.mark.spec("TM-STORE-CONTROL")
async def test_the_clients_answer_to_a_server_request_may_reach_the_other_worker(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """The handler at worker A asks the client; the client posts its answer to worker B;
    the handler gets it and completes."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url, capabilities={"elicitation": {}})
        headers = session.headers()
        async with open_stream(a.url, "POST", headers, _tool_call("ask", 3)) as stream:
            question = await stream.next_message()
            assert "elicitation/create" == question["method"]
            answer = {"jsonrpc": "2.0", "id": question["id"],
                      "result": {"action": "accept", "content": {"name": "Ada"}}}
            assert 202 == (await _at(session, b).post(answer)).status
            final = await stream.next_message()
    assert 3 == final["id"]
    assert "hello Ada" == final["result"]["content"][0]["text"]


@pytest.mark.spec("TM-STORE-STREAMS", "T-RESUME-5", "T-RESUME-6")
async def test_a_stream_resumed_at_the_other_worker_continues_there_exactly_once(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A POST's stream at worker A dropped after two messages and resumed at worker B
    continues strictly after the cursor, then live to its response: every message once,
    in order, relayed from A, which holds the stream."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, seen = await _drop_after(a.url, session, _tool_call("count", 4), 2)
        async with open_stream(
            b.url, "GET", session.headers([("last-event-id", cursor)])
        ) as resumed:
            assert 200 == resumed.status
            while "result" not in seen[-1]:
                seen.append(await resumed.next_message())
    lines = [m["params"]["data"] for m in seen if m.get("method") == "notifications/message"]
    assert [f"line {i}" for i in range(6)] == lines
    assert "counted 6" == seen[-1]["result"]["content"][0]["text"]
    assert 1 == b.stats()["resumes_relayed"]


@pytest.mark.spec("TM-STORE-STREAMS", "TM-STORE-RECORD", "T-RESUME-5")
async def test_a_session_created_at_one_worker_called_at_another_resumes_at_a_third(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """Three workers: the session is created at A, its call is POSTed to B and dropped,
    and the stream is resumed at C, which relays it to B: every message once, in order,
    then the result."""
    a, b = await _two_workers(live_server, shared_store)
    c = await live_server(server=_app(), config=_config(shared_store))
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, seen = await _drop_after(
            b.url, session, _tool_call("count", 4, {"n": 6, "pause": 0.02}), 2
        )
        async with open_stream(
            c.url, "GET", session.headers([("last-event-id", cursor)])
        ) as resumed:
            assert 200 == resumed.status
            while "result" not in seen[-1]:
                seen.append(await resumed.next_message())
    assert [f"line {i}" for i in range(6)] == _lines(seen)
    assert "counted 6" == seen[-1]["result"]["content"][0]["text"]
    assert (0, 1, 1) == tuple(w.stats()["sessions_adopted"] for w in (a, b, c))
    assert 1 == c.stats()["resumes_relayed"]


@pytest.mark.spec("TM-STORE-STREAMS")
async def test_a_resume_is_relayed_once_and_a_gone_holder_is_an_explicit_failure(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A resume already relayed once (it reaches B's relay port, sealed by a worker, yet
    names A's stream: a stale address) is not relayed again, and one whose holder is gone
    with no copy of its stream in the store: both get 409 and -31001 (holder-gone), never
    a replay from nothing. A client's own relay header on the public port changes
    nothing: its resume is relayed to A and served."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        response = await session.post(rpc_request("tools/call", {"name": "quick"}, id=5))
        event_id = next(
            line.split(":", 1)[1].strip()
            for line in response.body.decode().splitlines() if line.startswith("id:")
        )
        resume = session.headers([("last-event-id", event_id)])
        sealed = HttpRequest(
            method="GET", path="/mcp",
            headers=Headers([(k.encode(), v.encode()) for k, v in resume]),
        )
        seal = b.runtime.relay_seal.seal(sealed, time.time())
        b_relay = await b.cluster.store.locate(b.cluster.store.origin)
        looped = await request(f"http://{b_relay}/mcp", "GET", [*resume, (RELAY_HEADER, seal)])
        claimed = await request(b.url, "GET", [*resume, (RELAY_HEADER, seal)])
        # A's relay port, as the store knows it, becomes one nobody listens on; and the
        # cursor names a stream of A of which the store has no copy.
        await a.cluster.store.advertise("127.0.0.1:1", 5.0)
        uncopied = a.runtime.codec.event_id(session.id, 999, 5)
        gone = await request(b.url, "GET", session.headers([("last-event-id", uncopied)]))
    assert 200 == claimed.status, claimed.body
    for refused in (looped, gone):
        assert 409 == refused.status, refused.body
        error = refused.json()["error"]
        assert -31001 == error["code"]
        assert "holder-gone" == error["data"]["reason"]


async def _drop_after(
    url: str, session: McpSession, body: bytes, messages: int
) -> tuple[str, list[dict[str, Any]]]:
    """POST ``body``, read ``messages`` messages, drop the connection: the last event id
    read, and the messages."""
    seen: list[dict[str, Any]] = []
    cursor = None
    async with open_stream(url, "POST", session.headers(), body) as stream:
        while len(seen) < messages:
            event = await stream.next_event(comments=False)
            assert event is not None
            cursor = event.id or cursor
            if event.data:
                seen.append(json.loads(event.data))
        await stream.aclose()
    assert cursor is not None
    return cursor, seen


async def _holder_gone(worker: LiveServer) -> None:
    """Once the changes it has made are copied, ``worker`` is unreachable for the others:
    its relay address, as the store knows it, is one nobody listens on."""
    mirror = worker.cluster.mirror
    assert mirror is not None
    await wait_until(lambda: mirror.pending == 0, poll=0.01)
    await trio.sleep(0.05)  # the round trip under way
    await worker.cluster.store.advertise("127.0.0.1:1", 5.0)


async def _ended_then_gone(worker: LiveServer, session_id: str) -> None:
    """Once every request stream of the session at ``worker`` has ended (its handlers have
    answered), ``worker`` is gone for the others (``_holder_gone``)."""
    state = worker.table.sessions[session_id].log.streams
    await wait_until(lambda: all(st.ended for n, st in state.items() if n), poll=0.01)
    await _holder_gone(worker)


def _lines(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]


@pytest.mark.spec("TM-STORE-STREAMS", "T-RESUME-5")
async def test_a_stream_whose_worker_is_gone_is_read_from_its_copy_then_its_request_fails(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A POST stream whose worker cannot be reached is resumed at the other worker from its
    copy in the store: what follows the cursor, once, then an error response for the request
    (-32603, holder-gone); a second resume reads the same; the holder, still running,
    copies nothing more of the claimed stream."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, seen = await _drop_after(
            a.url, session, _tool_call("count", 7, {"n": 40, "pause": 0.05}), 2
        )
        await wait_until(lambda: _copied_lines(a) >= 5, poll=0.01)
        await _holder_gone(a)
        first = await request(b.url, "GET", session.headers([("last-event-id", cursor)]))
        again = await request(b.url, "GET", session.headers([("last-event-id", cursor)]))
        mirror = a.cluster.mirror
        assert mirror is not None
        await wait_until(lambda: mirror.refused > 0, poll=0.01)
        # Counted once the resume's response has ended, which its client may see first
        # (under hypercorn, once in CI, the count was read a moment before).
        await wait_until(lambda: b.stats()["resumes_from_store"] >= 2, poll=0.01)
    assert 200 == first.status, first.body
    messages = [json.loads(e.data) for e in first.events() if e.data]
    lines = _lines(seen + messages)
    assert [f"line {i}" for i in range(len(lines))] == lines
    assert len(lines) >= 5
    final = messages[-1]
    assert 7 == final["id"] and -32603 == final["error"]["code"]
    assert "holder-gone" == final["error"]["data"]["reason"]
    assert [e.data for e in first.events() if e.data] == [e.data for e in again.events() if e.data]
    assert 2 == b.stats()["resumes_from_store"]


def _copied_lines(worker: LiveServer) -> int:
    """How many log lines the sessions of ``worker`` have appended (copied soon after)."""
    return sum(s.log.appended for s in worker.table.sessions.values()) - 1


@pytest.mark.spec("TM-STORE-STREAMS")
async def test_a_response_copied_before_its_worker_went_is_delivered_from_the_copy(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A call that finished after its client dropped the stream, its worker then gone: the
    resume at the other worker gets the rest of the stream and the call's own result, not
    an error."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, seen = await _drop_after(
            a.url, session, _tool_call("count", 8, {"n": 4, "pause": 0.02}), 1
        )
        await _ended_then_gone(a, session.id)
        resumed = await request(b.url, "GET", session.headers([("last-event-id", cursor)]))
    messages = [json.loads(e.data) for e in resumed.events() if e.data]
    assert ["line 0", "line 1", "line 2", "line 3"] == _lines(seen + messages)
    assert "counted 4" == messages[-1]["result"]["content"][0]["text"]


@pytest.mark.spec("TM-STORE-STREAMS", "TM-RES-STALE", "TM-RES-WINDOW")
async def test_a_copy_keeps_the_window_and_a_cursor_before_it_reads_a_gap(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A stream's copy is trimmed as its holder's window is (at most max_events messages
    here); a resume, from the copy, whose cursor is older than the window is told so and
    the request fails (-31001), as at the holder itself."""
    from trio_mcp.protocol import Retention

    a, b = await _two_workers(
        live_server, shared_store, retention=Retention(max_events=4)
    )
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, _ = await _drop_after(
            a.url, session, _tool_call("count", 9, {"n": 12, "pause": 0.01}), 1
        )
        await _ended_then_gone(a, session.id)
        lengths = shared_store.copy_lengths()
        resumed = await request(b.url, "GET", session.headers([("last-event-id", cursor)]))
    assert lengths and max(lengths) <= 4
    events = resumed.events()
    assert "resumption-failed" == events[0].event
    error = json.loads(events[-1].data)
    assert 9 == error["id"] and -31001 == error["error"]["code"]


@pytest.mark.spec("TM-STORE-STREAMS", "TM-RES-STALE")
async def test_the_standalone_stream_of_a_gone_worker_says_so_and_goes_on_at_the_other(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A GET stream resumed after its worker went: the client is told that what followed
    its cursor is lost (resumption-failed, holder-gone), and the stream goes on live at
    the worker it reached."""
    a, b = await _two_workers(live_server, shared_store)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        async with open_stream(a.url, "GET", session.headers()) as get:
            priming = await get.next_event(comments=False)
            assert priming is not None and priming.id
            await get.aclose()
        await _holder_gone(a)
        async with open_stream(
            b.url, "GET", session.headers([("last-event-id", priming.id)])
        ) as resumed:
            assert 200 == resumed.status
            told = await resumed.next_event(comments=False)
            assert told is not None
            await wait_until(lambda: bool(b.table.sessions), poll=0.01)
            for held in list(b.table.sessions.values()):
                held.send(Notification(method="notifications/tools/list_changed"))
            live = await resumed.next_message()
    assert "resumption-failed" == told.event
    assert "holder-gone" in json.loads(told.data)["reason"]
    assert "notifications/tools/list_changed" == live["method"]


@pytest.mark.spec("TM-STORE-STREAMS", "TM-STORE-DOWN", "TM-RES-STALE")
async def test_changes_made_while_the_store_stalls_are_a_gap_for_a_resume_from_before_them(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """The store pausing writes for longer than store_timeout in the middle of a call: the
    changes it did not take are counted lost; once the holder is gone, a resume from
    before them reads a gap and the request's failure (-31001), not the lines after it."""
    a, b = await _two_workers(live_server, shared_store, store_timeout=0.2)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        cursor, _ = await _drop_after(
            a.url, session, _tool_call("count", 3, {"n": 60, "pause": 0.03}), 1
        )
        # The first copy that fails may hold only what the cursor covers; the mirror tries
        # again 0.5 s later, with lines made after the cursor, and the pause outlasts that.
        shared_store.pause_writes(1.5)
        await _ended_then_gone(a, session.id)
        resumed = await request(b.url, "GET", session.headers([("last-event-id", cursor)]))
    assert a.stats()["stream_copies_lost"] > 0
    events = resumed.events()
    assert "resumption-failed" == events[0].event, resumed.body
    error: dict[str, Any] = json.loads(events[-1].data)
    assert 3 == error["id"] and -31001 == error["error"]["code"]


@pytest.mark.slow
@pytest.mark.spec("TM-STORE-RECORD", "T-RESUME-6")
async def test_a_cursor_from_before_a_worker_let_a_session_go_names_nothing_it_took_up_again(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A worker lets an idle session go while another keeps it alive, then takes it up
    again: a cursor from its first replica names no message of the second (its streams
    and seqs are numbered apart), and its resume is told of a gap, never served the newer
    stream's messages."""
    a, b = await _two_workers(live_server, shared_store, session_idle_ttl=1.0)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        first = await session.post(rpc_request("tools/call", {"name": "quick"}, id=1))
        old = next(e.id for e in first.events() if e.id)
        while a.stats()["sessions_released"] == 0:
            assert 200 == (await _at(session, b).post(rpc_request("ping", id=9))).status
            await trio.sleep(0.2)
        # The new replica's first two streams, numbered as the old one's were without a base.
        assert 200 == (await session.post(rpc_request("ping", id=2))).status
        again = await session.post(json.loads(_tool_call("count", 3, {"n": 3, "pause": 0})))
        assert 200 == again.status
        resumed = await request(a.url, "GET", session.headers([("last-event-id", old)]))
    events = [e for e in resumed.events() if e.comment is None]
    assert "resumption-failed" == events[0].event, resumed.body
    assert not any(e.data and "line" in e.data for e in events)


@pytest.mark.spec("TM-STORE-DOWN")
async def test_a_store_down_is_503_with_a_retry_hint_and_the_server_recovers_by_itself(
    live_server: StartServer, own_store: StoreBackend
) -> None:
    """While the store is down, requests whose session must be read (held here longer than
    store_recheck) and new sessions get 503, Retry-After and -31004; nothing is
    acknowledged. When it is back (empty: it kept nothing), the old session is 404 and a new
    one is served, with no restart."""
    a, _ = await _two_workers(live_server, own_store, store_recheck=0.2)
    with trio.fail_after(TIMEOUT * 2):
        session = await open_session(a.url)
        own_store.stop()
        await trio.sleep(0.3)
        down = await session.post(rpc_request("ping", id=1))
        fresh = await request(
            a.url, "POST", post_headers(),
            json.dumps(rpc_request("initialize", {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}, id=2)).encode(),
        )
        own_store.start()
        after = await session.post(rpc_request("ping", id=3))
        again = await open_session(a.url)
        assert {} == await again.result("ping")
    for refused in (down, fresh):
        assert 503 == refused.status, refused.body
        assert refused.header("retry-after") is not None
        assert -31004 == refused.json()["error"]["code"]
    assert fresh.header("mcp-session-id") is None
    assert 404 == after.status
    assert a.stats()["store_failures"] >= 2


@pytest.mark.spec("TM-STORE-DOWN", "TM-STORE-STREAMS")
async def test_a_stream_under_way_when_the_store_stops_runs_to_its_response(
    live_server: StartServer, own_store: StoreBackend
) -> None:
    """The store stopped and started again in the middle of a call's stream: the stream, held
    by its worker, goes on to its response with every line, and the worker serves again
    once the store is back, with no restart."""
    a, _ = await _two_workers(live_server, own_store, store_recheck=0.2)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        body = _tool_call("count", 9, {"n": 10, "pause": 0.05})
        seen: list[dict[str, Any]] = []
        async with open_stream(a.url, "POST", session.headers(), body) as stream:
            seen.append(await stream.next_message())
            own_store.stop()
            seen.append(await stream.next_message())
            own_store.start()
            while "result" not in seen[-1]:
                seen.append(await stream.next_message())
        again = await open_session(a.url)
        pong = await again.result("ping")
    lines = [m["params"]["data"] for m in seen if m.get("method") == "notifications/message"]
    assert [f"line {i}" for i in range(10)] == lines
    assert "counted 10" == seen[-1]["result"]["content"][0]["text"]
    assert {} == pong


@pytest.mark.slow
@pytest.mark.spec("TM-STORE-RECORD", "TM-SESS-IDLE")
async def test_an_idle_session_expires_in_the_store_and_a_busy_one_is_kept_alive(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """The record's expiry is the session's idle time to live: an idle session is gone for
    both workers after it; one whose handler runs at a worker is renewed by that worker."""
    a, b = await _two_workers(live_server, shared_store, session_idle_ttl=1.0)
    with trio.fail_after(TIMEOUT * 2):
        idle = await open_session(a.url)
        busy = await open_session(a.url)
        headers = busy.headers()
        async with open_stream(a.url, "POST", headers, _tool_call("hold", 1)):
            await a.server.held.wait()  # type: ignore[attr-defined]
            await trio.sleep(3.0)
            gone = await _at(idle, b).post(rpc_request("ping", id=2))
            alive = await _at(busy, b).post(rpc_request("ping", id=3))
    assert 404 == gone.status
    assert 200 == alive.status
    assert any("result" in m for m in rpc_messages(alive))


@pytest.mark.spec("TM-STORE-RECORD", "TM-STORE-CONTROL")
async def test_a_session_ended_with_its_message_lost_is_404_within_the_recheck_time(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """A record removed with no word on the control channel (as when the message is lost)
    is noticed by the worker holding the session at its next request after store_recheck:
    404 then, and the session's handlers end there."""
    a, _ = await _two_workers(live_server, shared_store, store_recheck=0.2)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        assert shared_store.end_silently(session.id)
        await trio.sleep(0.3)
        response = await session.post(rpc_request("ping", id=1))
    assert 404 == response.status
    assert session.id not in a.table.sessions


@pytest.mark.slow
@pytest.mark.spec("TM-STORE-STREAMS", "T-RESUME-5", "T-RESUME-6")
async def test_random_drops_resumed_at_random_workers_lose_and_repeat_nothing(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """Issue 21's check: calls whose streams are dropped at random points, each time
    resumed at a randomly chosen worker, over at least 1,000 drop points: every line of
    every call arrives exactly once, in order, and every call's response arrives."""
    a, b = await _two_workers(live_server, shared_store)
    rng = random.Random(21)
    lines_per_call = 40
    drops = calls = 0
    with trio.fail_after(600):
        session = await open_session(a.url)
        while drops < 1000:
            calls += 1
            body = _tool_call("count", calls, {"n": lines_per_call, "pause": 0.001})
            start = rng.choice((a, b))
            seen: list[str] = []
            final: dict[str, Any] | None = None
            cursor: str | None = None
            opener = open_stream(start.url, "POST", session.headers(), body)
            while final is None:
                async with opener as stream:
                    assert 200 == stream.status, (calls, drops)
                    budget = rng.randint(0, 6)  # events to take before dropping
                    while final is None:
                        event = await stream.next_event(comments=False)
                        if event is None:
                            break
                        cursor = event.id or cursor
                        if event.data:
                            message = json.loads(event.data)
                            if "result" in message:
                                final = message
                            else:
                                seen.append(message["params"]["data"])
                        if budget == 0 and final is None:
                            drops += 1
                            await stream.aclose()
                            break
                        budget -= 1
                if final is None:
                    assert cursor is not None
                    worker = rng.choice((a, b))
                    opener = open_stream(
                        worker.url, "GET", session.headers([("last-event-id", cursor)])
                    )
            assert [f"line {i}" for i in range(lines_per_call)] == seen, (calls, drops)
            assert f"counted {lines_per_call}" == final["result"]["content"][0]["text"]
    assert drops >= 1000
    assert a.stats()["resumes_relayed"] + b.stats()["resumes_relayed"] > 0
