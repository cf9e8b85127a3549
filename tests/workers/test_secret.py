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
