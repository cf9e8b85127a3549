# Argument completion (spec25/server/utilities/completion.mdx): completion/complete offers
# values for a prompt argument or a resource template variable as the user types.
from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from ..protocol import ErrorCode, RemoteProtocolError
from ._context import Context
from ._prompts import PromptRegistry
from ._resources import ResourceRegistry

__all__ = ["Completion", "CompletionRef", "CompletionRegistry"]

#: The schema's limit on ``completion.values``.
MAX_VALUES: Final = 100


@attrs.frozen(kw_only=True)
class CompletionRef:
    """What is being completed: a prompt (``name``) or a resource template (its URI)."""

    type: Literal["prompt", "resource"]
    name: str
    """The prompt's name, or the resource template's URI template."""


@attrs.frozen(kw_only=True)
class Completion:
    """Completion values, with the total number of matches when known."""

    values: Sequence[str]
    total: int | None = None
    has_more: bool | None = None


SpecificHandler = Callable[..., Awaitable[Sequence[str] | Completion]]
GenericHandler = Callable[
    [CompletionRef, str, str, Mapping[str, str]], Awaitable[Sequence[str] | Completion | None]
]


@attrs.frozen(kw_only=True)
class _Specific:
    fn: SpecificHandler
    wants_arguments: bool
    context_param: str | None


Method = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


class CompletionRegistry:
    """The completion handlers of one server, and completion/complete, which looks up the
    prompts and resource templates they complete."""

    def __init__(self, prompts: PromptRegistry, resources: ResourceRegistry) -> None:
        self.specific: dict[tuple[str, str, str], _Specific] = {}
        self.generic: GenericHandler | None = None
        self._prompts = prompts
        self._resources = resources

    def methods(self) -> dict[str, Method]:
        return {"completion/complete": self._complete}

    async def _complete(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        ref, argument, value, given = _parse(params)
        choices: tuple[str, ...] = ()
        if ref.type == "prompt":
            prompt = self._prompts.prompts.get(ref.name)
            if prompt is None:
                raise _invalid(f"unknown prompt {ref.name!r}.")
            choices = prompt.choices(argument)
        elif ref.name not in self._resources.templates and ref.name not in self._resources.fixed:
            raise _invalid(f"unknown resource template {ref.name!r}.")
        specific = self.specific.get((ref.type, ref.name, argument))
        if specific is not None:
            kwargs: dict[str, Any] = {}
            if specific.wants_arguments:
                kwargs["arguments"] = given
            if specific.context_param is not None:
                kwargs[specific.context_param] = ctx
            return _result(await specific.fn(value, **kwargs))
        if self.generic is not None:
            answer = await self.generic(ref, argument, value, given)
            if answer is not None:
                return _result(answer)
        # No handler: a Literal[...] prompt argument completes from its choices, anything
        # else has no suggestions (an empty list is a valid answer).
        return _result([c for c in choices if c.startswith(value)])

    @property
    def enabled(self) -> bool:
        return bool(self.specific) or self.generic is not None

    def add(
        self, ref_type: Literal["prompt", "resource"], name: str, argument: str, fn: SpecificHandler
    ) -> None:
        if ref_type not in ("prompt", "resource"):
            raise ValueError(f'ref_type is "prompt" or "resource", not {ref_type!r}')
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"completion handler {fn!r} must be an async function")
        params = inspect.signature(fn).parameters
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:
            raise TypeError(f"cannot resolve the type hints of {fn!r}: {exc}") from exc
        context_param = next(
            (
                name
                for name in params
                if isinstance(hints.get(name), type) and issubclass(hints[name], Context)
            ),
            None,
        )
        self.specific[(ref_type, name, argument)] = _Specific(
            fn=fn, wants_arguments="arguments" in params, context_param=context_param
        )

    def set_generic(self, fn: GenericHandler) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"completion handler {fn!r} must be an async function")
        self.generic = fn


def _invalid(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"Invalid params: {message}", code=ErrorCode.INVALID_PARAMS)


def _parse(params: Mapping[str, Any]) -> tuple[CompletionRef, str, str, dict[str, str]]:
    ref = params.get("ref")
    if not isinstance(ref, Mapping):
        raise _invalid("completion/complete needs a ref object.")
    if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
        cref = CompletionRef(type="prompt", name=ref["name"])
    elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
        cref = CompletionRef(type="resource", name=ref["uri"])
    else:
        raise _invalid('ref is {"type": "ref/prompt", "name"} or {"type": "ref/resource", "uri"}.')
    argument = params.get("argument")
    if (
        not isinstance(argument, Mapping)
        or not isinstance(argument.get("name"), str)
        or not isinstance(argument.get("value"), str)
    ):
        raise _invalid("argument must be an object with string name and value.")
    context = params.get("context")
    given: dict[str, str] = {}
    if isinstance(context, Mapping) and isinstance(context.get("arguments"), Mapping):
        given = {k: v for k, v in context["arguments"].items() if isinstance(v, str)}
    return cref, argument["name"], argument["value"], given


def _result(answer: Sequence[str] | Completion) -> dict[str, Any]:
    if isinstance(answer, str):
        raise TypeError("a completion handler returns a list of strings, not a str")
    total: int | None = None
    has_more: bool | None = None
    if isinstance(answer, Completion):
        total, has_more = answer.total, answer.has_more
        answer = answer.values
    values = [str(v) for v in answer]
    if len(values) > MAX_VALUES:
        # The schema caps values at 100: the rest is announced (total, hasMore), not sent.
        total = len(values) if total is None else total
        values = values[:MAX_VALUES]
        has_more = True
    completion: dict[str, Any] = {"values": values}
    if total is not None:
        completion["total"] = total
    if has_more is not None:
        completion["hasMore"] = has_more
    return {"completion": completion}

