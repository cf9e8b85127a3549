# HTTP header rules of the Streamable HTTP transport (spec/transport.md, spec/security.md):
# case-insensitive lookup, Accept and Content-Type checks, Origin and Host validation.
# No I/O: headers come in as a list of (name, value) byte pairs, as ASGI gives them.
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import urlsplit

import attrs

from ._errors import ErrorCode, RemoteProtocolError

__all__ = [
    "Headers",
    "OriginPolicy",
    "accepts",
    "check_content_type",
    "is_loopback_host",
]

SESSION_ID: Final = "mcp-session-id"
PROTOCOL_VERSION: Final = "mcp-protocol-version"
LAST_EVENT_ID: Final = "last-event-id"

_LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


@attrs.frozen
class Headers:
    """Request headers with case-insensitive names (MT-HDR-13; RFC 9110 §5.1)."""

    raw: Sequence[tuple[bytes, bytes]]
    _index: dict[bytes, list[bytes]] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # One pass over the raw headers, instead of one per lookup: a request is looked up
        # half a dozen times on its way in.
        index: dict[bytes, list[bytes]] = {}
        for k, v in self.raw:
            index.setdefault(k.lower(), []).append(v)
        object.__setattr__(self, "_index", index)

    def get(self, name: str) -> str | None:
        """The value of ``name``, several values joined with ", ", or None when absent."""
        values = self._index.get(name.lower().encode("latin-1"))
        if not values:
            return None
        if len(values) == 1:
            return values[0].decode("latin-1")
        return ", ".join(v.decode("latin-1") for v in values)

    def raw_values(self, name: bytes) -> Sequence[bytes]:
        """Every value of ``name`` (lower-case bytes), as sent, in order."""
        return self._index.get(name, ())

    def get_all(self, name: str) -> list[str]:
        return [v.decode("latin-1") for v in self._index.get(name.lower().encode("latin-1"), ())]


def _media_ranges(value: str) -> list[tuple[str, float]]:
    ranges = []
    for part in value.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if not media:
            continue
        q = 1.0
        for f in fields[1:]:
            if f.lower().startswith("q="):
                try:
                    q = float(f[2:])
                except ValueError:
                    q = 0.0
        ranges.append((media, q))
    return ranges


#: Answers of ``accepts`` for Accept values seen before: a client sends the same one on every
#: request, and parsing it was 2% of a request's time. Bounded in entries and in the length of
#: what is kept, since the values come from clients.
_ACCEPTS: dict[tuple[str, str], bool] = {}
_ACCEPTS_MAX = 64
_ACCEPTS_LONGEST = 256


def accepts(accept: str | None, media_type: str) -> bool:
    """Whether an ``Accept`` header admits ``media_type`` (wildcards count; q=0 refuses)."""
    if accept is None:
        return False
    key = (accept, media_type)
    known = _ACCEPTS.get(key)
    if known is not None:
        return known
    answer = _accepts(accept, media_type)
    if len(accept) <= _ACCEPTS_LONGEST:
        if len(_ACCEPTS) >= _ACCEPTS_MAX:
            _ACCEPTS.clear()
        _ACCEPTS[key] = answer
    return answer


def _accepts(accept: str, media_type: str) -> bool:
    main = media_type.split("/")[0]
    # RFC 9110 §12.5.1: the most specific matching range decides, so "application/json;q=0"
    # refuses JSON even beside "*/*".
    best: tuple[int, float] | None = None
    for media, q in _media_ranges(accept):
        specificity = {media_type: 2, f"{main}/*": 1, "*/*": 0}.get(media)
        if specificity is None:
            continue
        if best is None or specificity > best[0] or (specificity == best[0] and q > best[1]):
            best = (specificity, q)
    return best is not None and best[1] > 0


def check_post_accept(accept: str | None) -> None:
    """T-POST-2: a POST lists both application/json and text/event-stream in Accept.

    The spec puts the MUST on the client and says nothing of the server's answer; we answer
    406 Not Acceptable, because either content type may be the one we must reply with.
    """
    if not (accepts(accept, "application/json") and accepts(accept, "text/event-stream")):
        raise RemoteProtocolError(
            "Not Acceptable: the Accept header must list both application/json and "
            "text/event-stream.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=406,
        )


def check_get_accept(accept: str | None) -> None:
    """T-GET-2: a GET lists text/event-stream in Accept; else 406."""
    if not accepts(accept, "text/event-stream"):
        raise RemoteProtocolError(
            "Not Acceptable: the Accept header must list text/event-stream.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=406,
        )


def check_content_type(content_type: str | None) -> None:
    """A POST body is JSON: ``application/json``, charset UTF-8 if one is named; else 415."""
    if content_type is not None:
        fields = [f.strip() for f in content_type.split(";")]
        media = fields[0].lower()
        charset_ok = all(
            not f.lower().startswith("charset=") or f[8:].strip('"').lower() in ("utf-8", "utf8")
            for f in fields[1:]
        )
        if media == "application/json" and charset_ok:
            return
    raise RemoteProtocolError(
        "Unsupported Media Type: the body must be application/json in UTF-8.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=415,
    )


def _host_name(host: str) -> str:
    """The host part of a Host header value (drops the port; keeps IPv6 brackets off)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_host(host: str) -> bool:
    """Whether a bind address or Host header names this machine's loopback interface."""
    name = _host_name(host)
    return name in _LOOPBACK_NAMES or _is_loopback_ipv4(name)


def _is_loopback_ipv4(name: str) -> bool:
    """Whether ``name`` is an IPv4 literal in 127.0.0.0/8.

    Not a prefix test: "127.0.0.1.nip.io" is a DNS name that resolves wherever its owner
    likes, so counting it as loopback would reopen T-SEC-1's DNS rebinding attack.
    """
    try:
        return ipaddress.IPv4Address(name).is_loopback
    except ValueError:
        return False


@attrs.frozen(kw_only=True)
class OriginPolicy:
    """Which ``Origin`` and ``Host`` values a server accepts.

    Attributes:
        allowed_origins: exact origins (``scheme://host[:port]``) that are accepted, besides
            loopback origins when ``allow_loopback_origins`` is set. ``"*"`` accepts any.
        allow_loopback_origins: accept ``http(s)://localhost|127.x|[::1][:port]``.
        allowed_hosts: when not None, the ``Host`` header must name one of these host
            names (any port). Set for loopback binds, against DNS rebinding.
    """

    allowed_origins: frozenset[str] = frozenset()
    allow_loopback_origins: bool = True
    allowed_hosts: frozenset[str] | None = None

    @classmethod
    def for_bind(
        cls, bind_hosts: Iterable[str], extra_origins: Iterable[str] = ()
    ) -> OriginPolicy:
        """The default policy for a server bound to ``bind_hosts``.

        Bound only to loopback, the Host header must name loopback too (T-SEC-1's DNS
        rebinding attack reaches a local server under a foreign host name).
        """
        hosts = list(bind_hosts)
        loopback_only = bool(hosts) and all(is_loopback_host(h) for h in hosts)
        allowed_hosts = (
            frozenset({"localhost", "127.0.0.1", "::1"}) if loopback_only else None
        )
        return cls(
            allowed_origins=frozenset(extra_origins),
            allow_loopback_origins=True,
            allowed_hosts=allowed_hosts,
        )

    def check(self, headers: Headers) -> None:
        """Raise 403 for a present, disallowed Origin and 421 for a disallowed Host."""
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            # T-SEC-1 / T-SEC-2 (MUST): validate Origin on all incoming connections; present
            # and invalid gets 403 Forbidden. An absent Origin (non-browser client) passes.
            # The message names where the allowed values come from (the server's settings),
            # so that a developer seeing it in a browser knows what to change.
            loopback = "loopback ones and " if self.allow_loopback_origins else ""
            raise RemoteProtocolError(
                f"Forbidden: Origin {origin[:60]!r} is not allowed; accepted are {loopback}"
                "ServerConfig.allowed_origins (--allow-origin).",
                code=ErrorCode.INVALID_REQUEST,
                http_status=403,
            )
        if self.allowed_hosts is not None:
            host = headers.get("host")
            name = _host_name(host) if host is not None else ""
            if name not in self.allowed_hosts and not (
                "127.0.0.1" in self.allowed_hosts and _is_loopback_ipv4(name)
            ):
                # TM-SEC-HOST: a loopback server refuses foreign Host names (DNS rebinding).
                # 421 Misdirected Request: this server is not the one that name points at.
                raise RemoteProtocolError(
                    f"Misdirected Request: Host {(host or '')[:60]!r} is not served here; "
                    "a server bound to loopback answers only "
                    f"{', '.join(sorted(self.allowed_hosts))}.",
                    code=ErrorCode.INVALID_REQUEST,
                    http_status=421,
                )

    def origin_allowed(self, origin: str) -> bool:
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        if not self.allow_loopback_origins:
            return False
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
            _ = parts.port  # a malformed port raises ValueError
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or hostname is None:
            return False
        return is_loopback_host(hostname)
