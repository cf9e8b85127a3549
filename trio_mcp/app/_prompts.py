# Prompts (spec25/server/prompts.mdx): a registry of prompt functions, whose arguments come
# from their signatures, and the prompts/* methods that serve it.
from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs

from ..protocol import ErrorCode, RemoteProtocolError
from . import _schema
from ._content import CONTENT_TYPES, _Message, message_dict
from ._context import Context
from ._display import Icon, icons_list
from ._invoke import ServerState, call_handler, handler_kind
from ._pagination import list_result

__all__ = ["PromptDef", "PromptRegistry", "PromptResult"]


@attrs.frozen(kw_only=True)
class PromptResult:
    """A prompt's messages with a description of this rendering (overrides the prompt's)."""

    messages: typing.Sequence[Any]
    description: str | None = None


@attrs.frozen(kw_only=True)
class PromptDef:
    name: str
    title: str | None
    description: str
    fn: Callable[..., Any]
    signature: _schema.Signature
    meta: Mapping[str, Any] | None
    is_async: bool = True
    """An ``async def``, or a plain ``def`` run in a worker thread (TM-HAND-THREAD)."""
    icons: tuple[Mapping[str, Any], ...] = ()

    def arguments(self) -> list[dict[str, Any]]:
        out = []
        for p in self.signature.params:
            arg: dict[str, Any] = {"name": p.name}
            if p.description:
                arg["description"] = p.description
            arg["required"] = p.required
            out.append(arg)
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            d["title"] = self.title
        if self.description:
            d["description"] = self.description
        arguments = self.arguments()
        if arguments:
            d["arguments"] = arguments
        if self.icons:
            d["icons"] = [dict(i) for i in self.icons]
        if self.meta:
            d["_meta"] = dict(self.meta)
        return d

    def choices(self, argument: str) -> tuple[str, ...]:
        """The values a ``Literal[...]`` argument allows (for completion), else ()."""
        for p in self.signature.params:
            if p.name == argument:
                schema = self.signature.input_schema["properties"][p.name]
                values = schema.get("enum", ())
                return tuple(v for v in values if isinstance(v, str))
        return ()


def _accepts_text(schema: Mapping[str, Any]) -> bool:
    """Whether a parameter's schema admits a string (prompt arguments are strings)."""
    kind = schema.get("type")
    if kind is None and "enum" in schema:
        return all(isinstance(v, str) for v in schema["enum"])
    if kind is None and "const" in schema:
        return isinstance(schema["const"], str)
    if kind is None:
        subs = schema.get("anyOf") or schema.get("oneOf")
        return subs is None or any(_accepts_text(s) for s in subs)
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def make_prompt(
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    meta: Mapping[str, Any] | None,
    icons: Iterable[Icon] = (),
) -> PromptDef:
    is_async = handler_kind(fn, "prompt")
    sig = _schema.derive_signature(
        fn, name=name, description=description, context_type=Context, structured_output=False
    )
    for p in sig.params:
        if not _accepts_text(sig.input_schema["properties"][p.name]):
            raise TypeError(
                f"prompt {sig.name}: argument {p.name!r} must accept a str (prompt "
                "arguments are strings); annotate it str, str | None or Literal[...]"
            )
    return PromptDef(
        name=sig.name, title=title, description=sig.description, fn=fn, signature=sig, meta=meta,
        is_async=is_async, icons=tuple(icons_list(icons)),
    )


Method = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


class PromptRegistry:
    """The prompts of one server, and the prompts/* methods that serve them."""

    def __init__(self, state: ServerState) -> None:
        self.prompts: dict[str, PromptDef] = {}
        self._state = state
        #: Set at the first registration (the capability stays declared after that).
        self.enabled = False

    @property
    def limiter(self) -> Any:
        """The worker threads' limiter of the server (TM-HAND-THREAD)."""
        return self._state.limiter

    def add(self, prompt: PromptDef, *, replace: bool = False) -> None:
        """Register ``prompt``; a name already taken is refused unless ``replace``."""
        old = self.prompts.get(prompt.name)
        if old is not None and not replace:
            raise _schema.already_registered("prompt", prompt.name, old.fn)
        self.prompts[prompt.name] = prompt
        self.enabled = True

    def remove(self, name: str) -> None:
        del self.prompts[name]

    def methods(self) -> dict[str, Method]:
        return {"prompts/list": self._list, "prompts/get": self._get}

    async def _list(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return list_result(
            "prompts",
            "prompts",
            [(p.name, p.to_dict()) for p in self.prompts.values()],
            params,
            ctx.page_size,
        )

    async def _get(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return await render(self, ctx, params)


def to_messages(value: Any) -> list[dict[str, Any]]:
    """Prompt messages for a prompt function's return value: a str (one user message), a
    UserMessage/AssistantMessage, a content block (a user message), or a list of these."""
    if isinstance(value, (str, _Message, Mapping, *CONTENT_TYPES)):
        return [message_dict(value)]
    if isinstance(value, list | tuple):
        return [message_dict(v) for v in value]
    raise TypeError(
        "a prompt returns a str, a message (UserMessage/AssistantMessage), a content "
        f"block, or a list of them; not {type(value).__name__}"
    )


def _invalid(message: str) -> RemoteProtocolError:
    # U-PROMPT-2 (SHOULD): invalid prompt name or missing arguments are -32602.
    return RemoteProtocolError(f"Invalid params: {message}", code=ErrorCode.INVALID_PARAMS)


async def render(
    registry: PromptRegistry, ctx: Context, params: Mapping[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str):
        raise _invalid("prompts/get needs a prompt name.")
    prompt = registry.prompts.get(name)
    if prompt is None:
        raise _invalid(f"unknown prompt {name!r}.")
    arguments = params.get("arguments")
    if arguments is not None and (
        not isinstance(arguments, Mapping)
        or not all(isinstance(v, str) for v in arguments.values())
    ):
        raise _invalid("prompt arguments must be an object of strings.")
    try:
        kwargs = _schema.convert_arguments(prompt.signature, arguments)
    except _schema.ArgumentError as exc:
        raise _invalid(f"prompt {name}: {exc}.") from None
    if prompt.signature.context_param is not None:
        kwargs[prompt.signature.context_param] = ctx
    value = await call_handler(
        prompt.fn, kwargs, is_async=prompt.is_async, injections=prompt.signature.injections,
        ctx=ctx, limiter=registry.limiter,
    )
    description = prompt.description or None
    if isinstance(value, PromptResult):
        description = value.description if value.description is not None else description
        value = list(value.messages)
    result: dict[str, Any] = {}
    if description:
        result["description"] = description
    result["messages"] = to_messages(value)
    return result
