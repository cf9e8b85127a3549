# Content blocks of tool results and prompt messages (MCP 2025-11-25 schema: TextContent,
# ImageContent, AudioContent, ResourceLink, EmbeddedResource), and the conversion of a
# handler's plain Python return value into them.
from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeAlias

import attrs

__all__ = [
    "AssistantMessage",
    "Audio",
    "Blob",
    "Content",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "Text",
    "ToolResult",
    "UserMessage",
    "message_dict",
    "to_content_list",
]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


#: RFC 6838 §4.2: a media type is a type and a subtype of restricted-name characters, with
#: optional parameters after ";".
_RESTRICTED_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(rf"{_RESTRICTED_NAME}/{_RESTRICTED_NAME}(?:\s*;.*)?")
#: RFC 3986 §3: a scheme (a letter, then letters, digits, "+", "-", "."), then characters a
#: URI may hold: no space, control or the characters RFC 3986 leaves out (they are
#: percent-encoded).
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f<>\"\\^`|{}]*")


def check_media_type(mime_type: str, kind: str | None = None) -> None:
    """Refuse a MIME type that is not one (U-PROMPT-5, U-PROMPT-6): ``type/subtype``, and of
    the top-level ``kind`` when given ("image", "audio")."""
    if not isinstance(mime_type, str) or not _MEDIA_TYPE.fullmatch(mime_type):
        raise ValueError(f"{mime_type!r} is not a MIME type (type/subtype)")
    if kind is not None and mime_type.split("/", 1)[0].lower() != kind:
        raise ValueError(f"{mime_type!r} is not an {kind}/* MIME type")


def check_base64(data: bytes | str) -> None:
    """Refuse text given as base64 data that is not base64 (U-PROMPT-5, U-PROMPT-6)."""
    if isinstance(data, str):
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("data given as text must be base64") from None


def check_uri(uri: str) -> None:
    """Refuse what is not a URI (U-PROMPT-7, U-RES-6: RFC 3986 §3): a scheme, then no space,
    control character or character RFC 3986 excludes."""
    if not isinstance(uri, str) or not _URI.fullmatch(uri):
        raise ValueError(
            f"{uri!r} is not a URI (RFC 3986): a scheme, as in test://x, and no spaces or "
            "characters a URI cannot hold (percent-encode them)"
        )


@attrs.frozen
class Text:
    """A text content block."""

    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@attrs.frozen
class Image:
    """An image content block; ``data`` is raw bytes (encoded here) or base64 text."""

    data: bytes | str
    mime_type: str = "image/png"

    def __attrs_post_init__(self) -> None:
        check_base64(self.data)
        check_media_type(self.mime_type, "image")

    def to_dict(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@attrs.frozen
class Audio:
    """An audio content block; ``data`` is raw bytes (encoded here) or base64 text."""

    data: bytes | str
    mime_type: str = "audio/wav"

    def __attrs_post_init__(self) -> None:
        check_base64(self.data)
        check_media_type(self.mime_type, "audio")

    def to_dict(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the client may read with resources/read."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description is not None:
            d["description"] = self.description
        if self.mime_type is not None:
            d["mimeType"] = self.mime_type
        return d


@attrs.frozen(kw_only=True)
class Blob:
    """Binary resource contents (``blob`` is base64 on the wire, U-RES-3)."""

    uri: str
    data: bytes
    mime_type: str | None = "application/octet-stream"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"uri": self.uri, "blob": _b64(self.data)}
        if self.mime_type is not None:
            d["mimeType"] = self.mime_type
        return d


@attrs.frozen(kw_only=True)
class EmbeddedResource:
    """A resource's contents inside a result: ``text`` or binary ``blob``, with its URI and
    MIME type (``text/plain`` or ``application/octet-stream`` unless given)."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None
    meta: Mapping[str, Any] | None = None
    """The contents' ``_meta`` (an MCP Apps page carries its ``ui`` settings there)."""

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError("an embedded resource has exactly one of text and blob")
        check_uri(self.uri)
        if self.mime_type is not None:
            check_media_type(self.mime_type)

    def contents(self) -> dict[str, Any]:
        # U-PROMPT-7 (MUST): an embedded resource carries the appropriate MIME type.
        default = "text/plain" if self.text is not None else "application/octet-stream"
        d: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type or default}
        if self.text is not None:
            d["text"] = self.text
        else:
            assert self.blob is not None
            d["blob"] = _b64(self.blob)
        if self.meta:
            d["_meta"] = dict(self.meta)
        return d

    def to_dict(self) -> dict[str, Any]:
        return {"type": "resource", "resource": self.contents()}


Content: TypeAlias = Text | Image | Audio | ResourceLink | EmbeddedResource
CONTENT_TYPES = (Text, Image, Audio, ResourceLink, EmbeddedResource)


@attrs.frozen
class _Message:
    """One message of a prompt (prompts/get) or of a sampling request: a role and one content
    block. A plain ``str`` is a text block."""

    content: str | Content
    role: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        block = Text(self.content) if isinstance(self.content, str) else self.content
        if not isinstance(block, CONTENT_TYPES):
            raise TypeError(f"a message's content is a str or a content block, not {block!r}")
        return {"role": self.role, "content": block.to_dict()}


@attrs.frozen
class UserMessage(_Message):
    """A message from the user: ``UserMessage("Summarize this")``."""

    role: ClassVar[str] = "user"


@attrs.frozen
class AssistantMessage(_Message):
    """A message from the assistant (the model)."""

    role: ClassVar[str] = "assistant"


Message: TypeAlias = UserMessage | AssistantMessage


def message_dict(value: Any) -> dict[str, Any]:
    """The wire form of one message: a message helper, a str (a user message), a content
    block (a user message with it), or an already-built ``{role, content}`` mapping."""
    if isinstance(value, _Message):
        return value.to_dict()
    if isinstance(value, (str, *CONTENT_TYPES)):
        return UserMessage(value).to_dict()
    if isinstance(value, Mapping) and value.get("role") in ("user", "assistant"):
        content = value.get("content")
        if isinstance(content, Mapping) and isinstance(content.get("type"), str):
            return {"role": value["role"], "content": dict(content)}
        if isinstance(content, (str, *CONTENT_TYPES)):
            return {"role": value["role"], "content": UserMessage(content).to_dict()["content"]}
    raise TypeError(
        "a message is a UserMessage, an AssistantMessage, a str, a content block or a "
        f"{{role, content}} mapping, not {value!r}"
    )


@attrs.frozen(kw_only=True)
class ToolResult:
    """A tool result spelled out: content blocks, optional structured content, error flag."""

    content: Sequence[Content] = ()
    structured: Any = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"content": [c.to_dict() for c in self.content]}
        if self.structured is not None:
            d["structuredContent"] = self.structured
        if self.is_error:
            d["isError"] = True
        return d


def is_content(value: Any) -> bool:
    return isinstance(value, CONTENT_TYPES) or (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(v, CONTENT_TYPES) for v in value)
    )


def to_content_list(value: Any) -> list[dict[str, Any]]:
    """Content blocks for a plain return value: str is text, content objects are themselves,
    None is no content, anything else is its JSON text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Text(value).to_dict()]
    if isinstance(value, CONTENT_TYPES):
        return [value.to_dict()]
    if isinstance(value, list | tuple) and all(isinstance(v, (*CONTENT_TYPES, str)) for v in value):
        return [Text(v).to_dict() if isinstance(v, str) else v.to_dict() for v in value]
    return [Text(json_text(value)).to_dict()]


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_default)


def _default(obj: Any) -> Any:
    if attrs.has(type(obj)):
        return attrs.asdict(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, bytes):
        return _b64(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")
