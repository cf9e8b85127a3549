# The stores a configuration may name by URL (``--store``, $TRIO_MCP_STORE): the serving layer
# maps the URL to the store's factory before it builds a runtime, so that the runtime itself
# knows only the store contract (trio_mcp.runtime.store._store), never a particular store.
from __future__ import annotations

import attrs

from ...base._config import ServerConfig
from ._redis import redis_store

__all__ = ["with_store"]

#: URL schemes, and the store each names.
SCHEMES = ("redis", "rediss", "unix")


def with_store(config: ServerConfig) -> ServerConfig:
    """``config``, its ``store`` URL (if it is one) replaced by the factory of the store it
    names (raises ValueError for a scheme no store answers to)."""
    url = config.store
    if not isinstance(url, str):
        return config
    scheme = url.partition("://")[0]
    if scheme not in SCHEMES:
        raise ValueError(f"a store URL is redis://, rediss:// or unix://, not {url!r}")
    return attrs.evolve(config, store=redis_store(url))
