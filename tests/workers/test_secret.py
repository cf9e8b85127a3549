# TM-WORK-SECRET without processes: what two servers given one secret share, and what they do
# not.
from __future__ import annotations

import pytest

from trio_mcp import ServerConfig
from trio_mcp.protocol import Cursor, CursorCodec

SECRET = bytes(range(32))


@pytest.mark.spec("TM-WORK-SECRET")
def test_servers_with_one_secret_verify_each_others_cursors() -> None:
    """Event ids made under a key derived from the shared secret verify in another process
    given the same secret, and in none given another."""
    one = CursorCodec(ServerConfig(secret=SECRET).derived_key("cursor"))
    two = CursorCodec(ServerConfig(secret=SECRET).derived_key("cursor"))
    other = CursorCodec(ServerConfig(secret=bytes(32)).derived_key("cursor"))
    event_id = one.encode("session", Cursor(stream=3, seq=17))
    assert Cursor(3, 17) == two.decode("session", event_id)
    assert other.decode("session", event_id) is None


@pytest.mark.spec("TM-WORK-SECRET")
def test_each_purpose_gets_its_own_key_and_no_secret_gets_a_random_one() -> None:
    """The cursor key and the requestState key differ though they come from one secret; and
    without a secret each server draws keys of its own."""
    config = ServerConfig(secret=SECRET)
    assert config.derived_key("cursor") != config.derived_key("request-state")
    assert config.derived_key("cursor") == ServerConfig(secret=SECRET).derived_key("cursor")
    assert ServerConfig().derived_key("cursor") != ServerConfig().derived_key("cursor")


def test_a_secret_shorter_than_32_bytes_is_refused() -> None:
    """A shared secret is at least 32 bytes."""
    with pytest.raises(ValueError, match="32 bytes"):
        ServerConfig(secret=b"short")


@pytest.mark.spec("TM-WORK-SECRET")
def test_the_environment_gives_the_secret_the_store_and_the_worker_count() -> None:
    """ServerConfig.from_environment reads $TRIO_MCP_SECRET (hex), $TRIO_MCP_STORE and
    $TRIO_MCP_WORKERS; settings passed win; a secret that is not hex is refused."""
    env = {"TRIO_MCP_SECRET": SECRET.hex(), "TRIO_MCP_STORE": "redis://r:1/0",
           "TRIO_MCP_WORKERS": "3"}
    config = ServerConfig.from_environment(env)
    assert (SECRET, "redis://r:1/0", 3) == (config.secret, config.store, config.workers)
    assert 1 == ServerConfig.from_environment(env, workers=1).workers
    assert ServerConfig.from_environment({}).secret is None
    with pytest.raises(ValueError, match="hex"):
        ServerConfig.from_environment({"TRIO_MCP_SECRET": "not hex"})


@pytest.mark.spec("TM-WORK-SECRET")
def test_the_relay_key_is_its_own_and_a_relay_seal_binds_its_request() -> None:
    """The relay seal's key is derived for its own purpose; a seal verifies for the request
    it was made for, within its age, under the same secret only, and says whom for."""
    import time

    from trio_mcp.protocol import HttpRequest, RemoteProtocolError
    from trio_mcp.protocol._auth import Principal
    from trio_mcp.protocol._headers import Headers
    from trio_mcp.runtime.store._relay import RELAY_HEADER, RelaySeal

    config = ServerConfig(secret=SECRET)
    key = config.derived_key("relay")
    assert key not in (config.derived_key("cursor"), config.derived_key("request-state"))
    who = Principal(subject="alice", issuer="https://as", scopes=frozenset({"mcp"}))
    request = HttpRequest(method="POST", path="/mcp", headers=Headers([]), body=b"{}",
                          principal=who)
    now = time.time()
    seal = RelaySeal(key).seal(request, now)

    def sealed(value: str, body: bytes = b"{}") -> HttpRequest:
        return HttpRequest(method="POST", path="/mcp", body=body,
                           headers=Headers([(RELAY_HEADER.encode(), value.encode())]))

    opened = RelaySeal(key).open(sealed(seal), now + 1)
    assert who == opened.principal
    refusals = [
        (RelaySeal(key), sealed(seal, b"{ }"), now),
        (RelaySeal(key), sealed(seal), now + 31),
        (RelaySeal(ServerConfig(secret=bytes(32)).derived_key("relay")), sealed(seal), now),
        (RelaySeal(key), sealed(seal + "x"), now),
        (RelaySeal(key), sealed("1.2"), now),
        (RelaySeal(key), sealed("１２.e30.AAAA"), now),
        (RelaySeal(key), HttpRequest(method="POST", path="/mcp", headers=Headers([])), now),
    ]
    for codec, req, at in refusals:
        with pytest.raises(RemoteProtocolError) as info:
            codec.open(req, at)
        assert 403 == info.value.http_status


@pytest.mark.spec("TM-WORK-PROCESSES")
def test_a_worker_that_keeps_dying_waits_half_a_second_then_twice_as_long_each_time() -> None:
    """A worker is started again half a second after its first death in a row, then after
    1, 2, 4 ... seconds while it keeps dying young, at most 30 s; one that ran a minute or
    more before it died counts as a first death again."""
    from trio_mcp.cli._workers import restart_delay

    delays: list[float] = []
    last = None
    for _ in range(9):
        last = restart_delay(last, ran=0.1)
        delays.append(last)
    assert [0.5, 1, 2, 4, 8, 16, 30, 30, 30] == delays
    assert 0.5 == restart_delay(30.0, ran=60.0)
