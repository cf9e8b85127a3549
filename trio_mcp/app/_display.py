# What a client shows of a server and its primitives (MCP 2025-11-25 schema: Icon,
# Implementation.websiteUrl, ToolAnnotations; spec/handlers.md TM-HAND-DISPLAY): icons on the
# server, tools, resources, templates and prompts, and tool annotations as a typed record
# rather than a mapping a typo passes through.
from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

__all__ = ["Icon", "ToolAnnotations", "check_website", "icons_list"]

#: Where an icon may come from: the web, or inline (RFC 2397). A file: or javascript: URI
#: would make a client read the user's disk or run code to show a picture.
_ICON_SCHEMES = frozenset({"https", "http", "data"})


@attrs.frozen(kw_only=True)
class Icon:
    """An icon a client may show: ``Icon(src="https://example.com/icon.png",
    mime_type="image/png", sizes=("48x48",))``. ``src`` is an https, http or data URI."""

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    """``"48x48"``, ``"any"`` (for a scalable image)..."""
    theme: Literal["light", "dark"] | None = None
    """The background the icon is drawn for, when it suits only one."""

    def __attrs_post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.src).scheme.lower()
        if scheme not in _ICON_SCHEMES:
            raise ValueError(f"an icon's src is an https, http or data URI, not {self.src[:60]!r}")
        if self.theme not in (None, "light", "dark"):
            raise ValueError(f"an icon's theme is 'light' or 'dark', not {self.theme!r}")
        if isinstance(self.sizes, str):
            raise TypeError('sizes is a tuple of sizes: ("48x48",), not one string')

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"src": self.src}
        if self.mime_type is not None:
            d["mimeType"] = self.mime_type
        if self.sizes:
            d["sizes"] = list(self.sizes)
        if self.theme is not None:
            d["theme"] = self.theme
        return d


def icons_list(icons: Iterable[Icon]) -> list[dict[str, Any]]:
    """The ``icons`` array, each checked to be an Icon."""
    out = []
    for icon in icons:
        if not isinstance(icon, Icon):
            raise TypeError(f"icons are trio_mcp.Icon values, not {type(icon).__name__}")
        out.append(icon.to_dict())
    return out


@attrs.frozen(kw_only=True)
class ToolAnnotations:
    """Hints about a tool for the client (they are hints: a client must not trust them from
    a server it does not trust). ``None`` leaves a hint out, so the spec's default holds."""

    title: str | None = None
    read_only_hint: bool | None = None
    """The tool changes nothing (default False)."""
    destructive_hint: bool | None = None
    """It may destroy or overwrite (default True; meaningful when not read-only)."""
    idempotent_hint: bool | None = None
    """Calling it twice with the same arguments does no more (default False)."""
    open_world_hint: bool | None = None
    """It reaches beyond the server, to the web or other systems (default True)."""

    def to_dict(self) -> dict[str, Any]:
        fields = {
            "title": self.title, "readOnlyHint": self.read_only_hint,
            "destructiveHint": self.destructive_hint, "idempotentHint": self.idempotent_hint,
            "openWorldHint": self.open_world_hint,
        }
        return {k: v for k, v in fields.items() if v is not None}


def annotations_dict(
    annotations: ToolAnnotations | Mapping[str, Any] | None,
) -> Mapping[str, Any] | None:
    """A tool's annotations as the wire carries them (a mapping is taken as written)."""
    if isinstance(annotations, ToolAnnotations):
        return annotations.to_dict()
    return annotations


def check_website(url: str | None) -> str | None:
    """``websiteUrl``: an https or http URL."""
    if url is not None and urllib.parse.urlsplit(url).scheme.lower() not in ("https", "http"):
        raise ValueError(f"website_url is an https or http URL, not {url[:60]!r}")
    return url
