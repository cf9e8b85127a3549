# Content blocks of tool results and prompt messages (MCP 2025-11-25 schema: TextContent,
# ImageContent, AudioContent, ResourceLink, EmbeddedResource), and the conversion of a
# handler's plain Python return value into them.
from __future__ import annotations

import base64
import json
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

    def to_dict(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@attrs.frozen
class Audio:
    """An audio content block; ``data`` is raw bytes (encoded here) or base64 text."""

    data: bytes | str
    mime_type: str = "audio/wav"

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
    """A resource's contents inside a result: ``text`` or binary ``blob``."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError("an embedded resource has exactly one of text and blob")

    def contents(self) -> dict[str, Any]:
        d: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            d["mimeType"] = self.mime_type
        if self.text is not None:
            d["text"] = self.text
        else:
            assert self.blob is not None
            d["blob"] = _b64(self.blob)
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
