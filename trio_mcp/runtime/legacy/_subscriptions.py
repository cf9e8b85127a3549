# A legacy session's resource subscriptions (resources/subscribe, TM-SEC-STATE, TM-STORE-SUBS):
# each URI is kept for the session's life, so the URIs and their number are bounded, and what
# they take counts against the session's window (TM-RES-WINDOW). With a shared store, the
# store holds them, one change at a time; ``version`` counts the changes, so that a worker
# knows whether the set it holds is the store's.
from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from ...protocol import JSON, ErrorCode, RemoteProtocolError

if TYPE_CHECKING:
    from ...base._config import ServerConfig
    from ...protocol import EventLog

__all__ = ["Subscriptions"]


def _size(uris: Set[str]) -> int:
    return sum(len(u.encode("utf-8")) for u in uris)


class Subscriptions:
    """The URIs one session is subscribed to, charged to its ``log``'s window."""

    def __init__(self, config: ServerConfig, log: EventLog) -> None:
        self._config = config
        self._log = log
        self.uris: set[str] = set()
        #: The version of them last read from a shared store (TM-STORE-SUBS).
        self.version = 0
        #: Subscriptions refused for their URI's length or their number (TM-SEC-STATE).
        self.refused = 0

    def __contains__(self, uri: object) -> bool:
        return uri in self.uris

    def check(self, uri: str, *, full: bool = False) -> None:
        """TM-SEC-STATE: refuse ``uri`` when it is too long, or the session has the most
        subscriptions the server keeps (``full``: the store says it has them already)."""
        cfg = self._config
        if len(uri.encode("utf-8")) > cfg.max_uri_bytes:
            self.refused += 1
            raise RemoteProtocolError(
                f"Invalid params: the uri is longer than {cfg.max_uri_bytes} bytes.",
                code=ErrorCode.INVALID_PARAMS,
            )
        if full or (uri not in self.uris and len(self.uris) >= cfg.max_subscriptions):
            self.refused += 1
            held = cfg.max_subscriptions if full else len(self.uris)
            raise RemoteProtocolError(
                f"Invalid params: this session already has {held} "
                "subscriptions, the most this server keeps; unsubscribe from one first.",
                code=ErrorCode.INVALID_PARAMS,
            )

    def change(self, uri: str, *, added: bool, version: int | None = None) -> None:
        """One subscription added or removed, here or at another worker (``version``: the
        subscriptions' version after it, TM-STORE-SUBS)."""
        if added and uri not in self.uris:
            self.uris.add(uri)
            self._log.reserve(_size({uri}))
        elif not added and uri in self.uris:
            self.uris.discard(uri)
            self._log.reserve(-_size({uri}))
        if version is not None:
            self.version = version

    def take_change(self, change: JSON) -> bool:
        """One subscription added or removed at another worker (TM-STORE-SUBS: ``uri``,
        ``added``, ``version``), taken if it is the next after the version held here, or
        seen already; False when the set must be read again from the store."""
        if not isinstance(change, dict):
            return False
        uri, added, version = change.get("uri"), change.get("added"), change.get("version")
        if not (isinstance(uri, str) and isinstance(added, bool) and isinstance(version, int)):
            return False
        if version == self.version + 1:
            self.change(uri, added=added, version=version)
        return version <= self.version

    def replace(self, uris: Set[str], version: int) -> None:
        """The whole set, as the store holds it at ``version`` (TM-STORE-SUBS)."""
        if uris != self.uris:
            self._log.reserve(_size(uris) - _size(self.uris))
            self.uris = set(uris)
        self.version = version
