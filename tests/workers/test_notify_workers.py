# Change notifications across workers (spec/workers.md, TM-STORE-NOTIFY): two servers in this
# process on loopback, each with its own copy of the application, its own runtime and
# session table, sharing one Redis and one secret, as two `--workers` processes do. A change
# made in one worker's application reaches the clients whose streams are at the other: a
# legacy session's standalone GET stream, and a 2026-07-28 subscriptions/listen stream.
from __future__ import annotations

import secrets
from typing import Any

import attrs
import coredis
import pytest
import trio
from support.client import McpSession, SSEStream, open_session
from support.fixtures import LiveServer, StartServer, wait_until
from support.modern import META_SUBSCRIPTION_ID, modern_request, open_modern

from trio_mcp import Server, ServerConfig
from trio_mcp.runtime.store._announce import announced
from trio_mcp.runtime.store._store import Control, ControlKind

TIMEOUT = 15
SECRET = bytes(range(32))


def _app() -> Server:
    """Tools, a prompt and two subscribable resources: every kind of change can be told."""
    server = Server("notify-workers")

    @server.tool()
    async def quick() -> str:
        """Answers at once."""
        return "quick"

    @server.prompt()
    async def greet() -> str:
        """A prompt."""
        return "hello"

    @server.resource("demo://thing")
    async def thing() -> str:
        return "a thing"

    @server.resource("demo://other")
    async def other() -> str:
        return "another thing"

    return server


async def _added() -> str:
    """A tool or prompt added while the server runs."""
    return "added"


async def _two_workers(live_server: StartServer, redis_url: str) -> tuple[LiveServer, LiveServer]:
    """Two workers on one Redis, under a prefix of this test's own; both listening on the
    control channel before this returns (a message published before that is not theirs)."""
    prefix = f"notify-{secrets.token_hex(4)}"
    workers = []
    for _ in range(2):
        config = ServerConfig(store=redis_url, secret=SECRET, workers=2, store_prefix=prefix)
        workers.append(await live_server(server=_app(), config=config))
    channel = f"{prefix}:control"
    async with coredis.Redis.from_url(redis_url) as redis:
        # Polling: Redis tells no one when a subscriber arrives.
        while (await redis.pubsub_numsub(channel)).get(channel.encode(), 0) < 2:  # noqa: ASYNC110
            await trio.sleep(0.01)
    return workers[0], workers[1]


def _at(session: McpSession, worker: LiveServer) -> McpSession:
    """The same session, its requests sent to ``worker``."""
    return attrs.evolve(session, url=worker.url)


def _listen(rid: str, **notifications: Any) -> dict[str, Any]:
    return modern_request("subscriptions/listen", {"notifications": notifications}, id=rid)


async def _primed(get: SSEStream) -> None:
    """Read the GET stream's priming event: from then on, the stream is attached."""
    assert 200 == get.status
    priming = await get.next_event(comments=False)
    assert priming is not None and priming.id and not priming.data, priming


async def _acked(listen: SSEStream) -> None:
    assert 200 == listen.status
    ack = await listen.next_message()
    assert "notifications/subscriptions/acknowledged" == ack["method"], ack


def _what(message: dict[str, Any]) -> tuple[str, str | None]:
    return message["method"], (message.get("params") or {}).get("uri")


@pytest.mark.spec("TM-STORE-NOTIFY")
async def test_a_tool_added_at_one_worker_reaches_a_legacy_get_stream_at_the_other(
    live_server: StartServer, redis_url: str
) -> None:
    """A list change made at worker A goes on the standalone stream a session has at B."""
    a, b = await _two_workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        async with _at(session, b).open_get() as get:
            await _primed(get)
            a.server.add_tool(_added, name="added")
            told = await get.next_message()
    assert "notifications/tools/list_changed" == told["method"]
    assert "id" not in told
    assert 1 == b.stats()["controls_received"]


@pytest.mark.spec("TM-STORE-NOTIFY", "MU-SUB-1", "MU-SUB-3")
async def test_a_tool_added_at_one_worker_reaches_a_listen_stream_at_the_other(
    live_server: StartServer, redis_url: str
) -> None:
    """A list change made at worker A goes on a 2026-07-28 listen stream open at B, naming
    its subscription; a listener that did not ask for it gets nothing of it."""
    a, b = await _two_workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        async with (
            open_modern(b.url, _listen("tools", toolsListChanged=True)) as tools,
            open_modern(b.url, _listen("prompts", promptsListChanged=True)) as prompts,
        ):
            await _acked(tools)
            await _acked(prompts)
            await wait_until(lambda: 2 == len(b.app.runtime.listeners.live))
            a.server.add_tool(_added, name="added")
            told = await tools.next_message()
            # The prompts listener's next message is the prompt change: the tool change,
            # made first, never reached it.
            a.server.add_prompt(_added, name="added")
            to_prompts = await prompts.next_message()
    assert "notifications/tools/list_changed" == told["method"]
    assert "tools" == told["params"]["_meta"][META_SUBSCRIPTION_ID]
    assert "notifications/prompts/list_changed" == to_prompts["method"]
    assert "prompts" == to_prompts["params"]["_meta"][META_SUBSCRIPTION_ID]


@pytest.mark.spec("TM-STORE-NOTIFY", "TM-STORE-RECORD")
async def test_a_resource_update_at_one_worker_reaches_only_the_sessions_subscribed_to_it(
    live_server: StartServer, redis_url: str
) -> None:
    """notifications/resources/updated made at A reaches, at B, the legacy sessions and the
    listeners subscribed to that URI and no other, though the sessions subscribed at A."""
    a, b = await _two_workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        # Created at B, subscribed at A: B learns of the subscriptions from the store.
        thing, other, none = [await open_session(b.url) for _ in range(3)]
        await _at(thing, a).result("resources/subscribe", {"uri": "demo://thing"})
        await _at(other, a).result("resources/subscribe", {"uri": "demo://other"})
        async with (
            thing.open_get() as thing_get,
            other.open_get() as other_get,
            none.open_get() as none_get,
            open_modern(b.url, _listen("thing", resourceSubscriptions=["demo://thing"],
                                       toolsListChanged=True)) as thing_listen,
            open_modern(b.url, _listen("other", resourceSubscriptions=["demo://other"],
                                       toolsListChanged=True)) as other_listen,
        ):
            for get in (thing_get, other_get, none_get):
                await _primed(get)
            for listen in (thing_listen, other_listen):
                await _acked(listen)
            await wait_until(lambda: 2 == len(b.app.runtime.listeners.live))

            a.server.notify_resource_updated("demo://thing")
            got_thing = await thing_get.next_message()
            got_thing_listen = await thing_listen.next_message()
            # A change every client takes: the next message of those not subscribed.
            a.server.add_tool(_added, name="added")
            got = [
                await s.next_message()
                for s in (thing_get, other_get, none_get, thing_listen, other_listen)
            ]
    assert ("notifications/resources/updated", "demo://thing") == _what(got_thing)
    assert ("notifications/resources/updated", "demo://thing") == _what(got_thing_listen)
    assert "thing" == got_thing_listen["params"]["_meta"][META_SUBSCRIPTION_ID]
    assert 5 * [("notifications/tools/list_changed", None)] == [_what(m) for m in got]


@pytest.mark.spec("TM-STORE-NOTIFY", "TM-STORE-CONTROL")
async def test_a_worker_delivers_its_own_change_once_and_publishes_nothing_it_received(
    live_server: StartServer, redis_url: str
) -> None:
    """A change made at A reaches A's own clients once (never again through Redis), and B,
    which delivers it, does not publish it again: A then receives B's change alone."""
    a, b = await _two_workers(live_server, redis_url)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        async with (
            session.open_get() as get,
            open_modern(a.url, _listen("l", toolsListChanged=True,
                                       promptsListChanged=True)) as listen,
        ):
            await _primed(get)
            await _acked(listen)
            await wait_until(lambda: 1 == len(a.app.runtime.listeners.live))
            a.server.add_tool(_added, name="added")
            first = [await get.next_message(), await listen.next_message()]
            # B has it; had A been handed its own message back, or B published it again, it
            # would reach A before B's own change, published after this.
            await wait_until(lambda: 1 == b.stats()["controls_received"])
            b.server.add_prompt(_added, name="added")
            then = [await get.next_message(), await listen.next_message()]
    assert 2 * [("notifications/tools/list_changed", None)] == [_what(m) for m in first]
    assert 2 * [("notifications/prompts/list_changed", None)] == [_what(m) for m in then]
    assert 1 == a.stats()["controls_received"]
    assert 1 == b.stats()["controls_received"]


@pytest.mark.spec("TM-STORE-NOTIFY")
@pytest.mark.parametrize(
    ("method", "delivered"),
    [
        ("notifications/tools/list_changed", True),
        ("notifications/resources/updated", True),
        # The server's notifications about one request, or about a task (which stays in the
        # worker running it), are never another worker's to deliver.
        ("notifications/message", False),
        ("notifications/progress", False),
        ("notifications/tasks", False),
        ("notifications/made/up", False),
        ("tools/call", False),
    ],
)
def test_a_worker_delivers_from_the_store_only_the_tables_broadcasts(
    method: str, delivered: bool
) -> None:
    """What arrives on the control channel is delivered to this worker's clients only when
    the method table says the server broadcasts it, whoever wrote it to the store."""
    control = Control(ControlKind.NOTIFY, "", {"method": method, "params": {"uri": "x"}})
    notification = announced(control)
    assert delivered == (notification is not None)
    if notification is not None:
        assert method == notification.method
