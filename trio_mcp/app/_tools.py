# Tools (spec/tools.md, spec/modern.md MU-TOOL-*): a registry of tool functions whose names,
# descriptions and input schemas come from their signatures, and the tools/* methods that
# serve it. Era-neutral: a tool runs the same for a legacy session and a modern request.
from __future__ import annotations

import logging
import secrets
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs

from ..protocol import ErrorCode, LocalProtocolError, RemoteProtocolError
from ..protocol._jsonrpc import non_finite_at
from ..protocol._jsonschema import Schema
from ..protocol._modern import param_headers
from ..protocol._tasks import TaskSupport
from . import _schema
from ._content import CONTENT_TYPES, ToolResult, is_content, json_text, to_content_list
from ._context import Context
from ._display import Icon, ToolAnnotations, annotations_dict, icons_list
from ._invoke import ServerState, call_handler, handler_kind
from ._pagination import list_result

__all__ = ["ToolDef", "ToolError", "ToolRegistry", "make_tool"]

logger = logging.getLogger("trio_mcp.server")

Method = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


class ToolError(Exception):
    """Raise from a tool to return a tool error (``isError: true``) with this message.

    U-TOOL-7: errors that come from the tool are results, not protocol errors.
    """


@attrs.frozen(kw_only=True)
class ToolDef:
    name: str
    title: str | None
    description: str
    fn: Callable[..., Any]
    signature: _schema.Signature
    annotations: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    input_schema: Mapping[str, Any]
    requires: Mapping[str, Any]
    """Client capabilities the tool needs to run (ML-META-3: -32021 before it runs)."""
    mirrored: Mapping[str, tuple[str, ...]]
    """Parameters mirrored into Mcp-Param headers, by header name: their paths (MT-HDR-7)."""
    task: TaskSupport = TaskSupport.FORBIDDEN
    """Whether a call may run as a task (TM-TASK-DECIDE)."""
    is_async: bool = True
    """An ``async def`` (awaited) or a plain ``def`` (run in a worker thread,
    TM-HAND-THREAD)."""
    icons: tuple[Mapping[str, Any], ...] = ()
    """The ``icons`` listed with the tool (TM-HAND-DISPLAY)."""
    explicit_schema: bool = False
    """Whether ``input_schema`` was given as written (arguments are validated against it,
    besides the conversion the signature asks for)."""
    input_check: Schema | None = attrs.field(
        default=attrs.Factory(
            lambda self: Schema(self.input_schema) if self.explicit_schema else None,
            takes_self=True,
        ),
        init=False, eq=False, repr=False,
    )
    """The schema as written, compiled once (TM-TOOL-INPUT); None for a derived one, which
    ``signature`` holds."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }
        if self.title is not None:
            d["title"] = self.title
        if self.signature.output_schema is not None:
            d["outputSchema"] = self.signature.output_schema
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        if self.icons:
            d["icons"] = [dict(i) for i in self.icons]
        if self.meta:
            d["_meta"] = dict(self.meta)
        return d


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    annotations: Mapping[str, Any] | ToolAnnotations | None,
    structured_output: bool | None,
    input_schema: Mapping[str, Any] | None,
    meta: Mapping[str, Any] | None,
    requires: Mapping[str, Any] | None,
    headers: Mapping[str, str] | None = None,
    task: TaskSupport | str = TaskSupport.FORBIDDEN,
    icons: Iterable[Icon] = (),
) -> ToolDef:
    """Check ``fn`` and describe it as a tool (raises TypeError/ValueError)."""
    task = TaskSupport(task)
    is_async = handler_kind(fn, "tool")
    if structured_output is None and _returns_content(fn):
        # Content blocks are the result itself, not structured data with a schema.
        structured_output = False
    sig = _schema.derive_signature(
        fn,
        name=name,
        description=description,
        context_type=Context,
        structured_output=structured_output,
    )
    _check_tool_name(sig.name)
    if input_schema is not None and (
        not isinstance(input_schema, Mapping) or input_schema.get("type") != "object"
    ):
        # U-TOOL-3 (MUST): inputSchema is a valid JSON Schema object (not null); MCP
        # arguments are an object, so the schema must describe one.
        raise TypeError(f"tool {sig.name}: input_schema must be a JSON Schema of type object")
    if not sig.description and description is None:
        logger.warning("tool %s has no description (give it a docstring)", sig.name)
    schema = input_schema if input_schema is not None else sig.input_schema
    if headers:
        schema = _with_headers(sig.name, schema, headers)
    try:
        mirrored = param_headers(schema)
    except ValueError as exc:
        raise ValueError(f"tool {sig.name}: {exc}") from None
    return ToolDef(
        name=sig.name,
        title=title,
        description=sig.description,
        fn=fn,
        signature=sig,
        annotations=annotations_dict(annotations),
        meta=meta,
        input_schema=schema,
        requires=dict(requires or {}),
        mirrored=mirrored,
        task=task,
        is_async=is_async,
        icons=tuple(icons_list(icons)),
        explicit_schema=input_schema is not None,
    )



def _with_headers(
    tool: str, schema: Mapping[str, Any], headers: Mapping[str, str]
) -> dict[str, Any]:
    """``schema`` with ``x-mcp-header`` set on the parameters ``headers`` names."""
    properties = dict(schema.get("properties") or {})
    for param, header in headers.items():
        if not isinstance(properties.get(param), Mapping):
            raise ValueError(f"tool {tool}: headers names {param!r}, which is no parameter")
        properties[param] = {**properties[param], "x-mcp-header": header}
    return {**schema, "properties": properties}


class ToolRegistry:
    """The tools of one server, and the tools/* methods that serve them."""

    def __init__(self, state: ServerState) -> None:
        self.tools: dict[str, ToolDef] = {}
        self._state = state

    def add(self, tool: ToolDef, *, replace: bool = False) -> None:
        """Register ``tool``; a name already taken is refused unless ``replace`` (U-TOOL-13)."""
        old = self.tools.get(tool.name)
        if old is not None and not replace:
            raise _schema.already_registered("tool", tool.name, old.fn)
        self.tools[tool.name] = tool

    def remove(self, name: str) -> None:
        del self.tools[name]

    def methods(self) -> dict[str, Method]:
        return {"tools/list": self._list, "tools/call": self._call}

    async def _list(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        # MU-TOOL-3 (SHOULD): a deterministic order (by name: list_result sorts).
        return list_result(
            "tools", "tools", [(t.name, t.to_dict()) for t in self.tools.values()], params,
            ctx.page_size,
        )

    async def _call(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RemoteProtocolError(
                "Invalid params: tools/call needs a tool name.", code=ErrorCode.INVALID_PARAMS
            )
        tool = self.tools.get(name)
        if tool is None:
            # U-TOOL-7: an unknown tool is a protocol error (-32602), not a tool error.
            raise RemoteProtocolError(f"Unknown tool: {name}", code=ErrorCode.INVALID_PARAMS)
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise RemoteProtocolError(
                "Invalid params: arguments must be an object.", code=ErrorCode.INVALID_PARAMS
            )
        problems = (
            tool.input_check.messages(arguments or {}) if tool.input_check is not None else []
        )
        if problems:
            # TM-TOOL-INPUT: a schema given as written is the one arguments must meet.
            return {
                "content": to_content_list(
                    f"Invalid arguments for tool {name}: " + "; ".join(problems)
                ),
                "isError": True,
            }
        try:
            kwargs = _schema.convert_arguments(tool.signature, arguments)
        except _schema.ArgumentError as exc:
            # U-TOOL-7 / U-TOOL-8: input validation failures are tool errors the model can
            # read.
            return {
                "content": to_content_list(f"Invalid arguments for tool {name}: {exc}"),
                "isError": True,
            }
        if tool.signature.context_param is not None:
            kwargs[tool.signature.context_param] = ctx
        try:
            value = await call_handler(
                tool.fn, kwargs, is_async=tool.is_async, injections=tool.signature.injections,
                ctx=ctx, limiter=self._state.limiter,
            )
        except ToolError as exc:
            return {"content": to_content_list(str(exc)), "isError": True}
        except (LocalProtocolError, RemoteProtocolError):
            raise
        except Exception:
            # TM-TOOL-RAISE / U-TOOL-8: the model learns that the tool failed, not what the
            # exception says (it may hold paths, queries or secrets); the log has it all, under
            # a reference the result names.
            reference = secrets.token_hex(4)
            logger.exception("tool %s raised (reference %s)", name, reference)
            return {
                "content": to_content_list(
                    f"Tool {name} failed with an unexpected error (reference {reference})."
                ),
                "isError": True,
            }
        result = _tool_result(tool, value)
        where = non_finite_at(result)
        if where is not None:
            # TM-TOOL-FINITE: NaN and the infinities are not JSON; written out, they would
            # make the whole response unreadable to a JavaScript client.
            logger.warning("tool %s returned a non-finite number at %s", name, where)
            return {
                "content": to_content_list(
                    f"Tool {name} returned a number JSON cannot carry (NaN or an infinity)."
                ),
                "isError": True,
            }
        return result


def _returns_content(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s return annotation is made of content blocks (or a ToolResult)."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:
        return False
    if hint is None:
        return False
    stack = [hint]
    seen_any = False
    while stack:
        t = stack.pop()
        args = typing.get_args(t)
        if args:
            stack.extend(a for a in args if a is not type(None) and a is not Ellipsis)
            continue
        if isinstance(t, type) and issubclass(t, (*CONTENT_TYPES, ToolResult)):
            seen_any = True
            continue
        return False
    return seen_any


def _check_tool_name(name: str) -> None:
    # U-TOOL-4 (SHOULD): 1-128 characters of A-Z a-z 0-9 _ - . ; checked when registering, so
    # a bad name is the application's error, not the client's.
    ok = 1 <= len(name) <= 128 and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name)
    if not ok:
        raise ValueError(f"tool name {name!r}: use 1-128 characters of A-Z a-z 0-9 _ - .")


def _check_output(tool: ToolDef, structured: Any) -> None:
    assert tool.signature.output_check is not None
    problems = tool.signature.output_check.messages(structured)
    if problems:
        # U-TOOL-6 (MUST): structured results conform to the outputSchema. A tool that
        # breaks its own schema is a server bug: an internal error, not a tool result.
        raise LocalProtocolError(
            f"Tool {tool.name} returned a value that does not match its outputSchema: "
            + "; ".join(problems[:3])
        )


def _tool_result(tool: ToolDef, value: Any) -> dict[str, Any]:
    sig = tool.signature
    if isinstance(value, ToolResult):
        result = value.to_dict()
        if value.structured is not None and not value.is_error:
            if sig.output_schema is not None:
                _check_output(tool, value.structured)
            if not value.content:
                # U-TOOL-5 (SHOULD): structured content also goes out as JSON text.
                result["content"] = to_content_list(json_text(value.structured))
        return result
    if sig.output_schema is None or is_content(value):
        return {"content": to_content_list(value)}
    data = _schema.dump_value(value)
    structured = {"result": data} if sig.wrap_output else data
    _check_output(tool, structured)
    # U-TOOL-5 (SHOULD): structured content also goes out as serialized JSON text.
    # TM-TOOL-WRAP: a value that is no object is wrapped for structuredContent only; the
    # text is the value itself (5, not {"result": 5}; a string as it is).
    if sig.wrap_output:
        text = data if isinstance(data, str) else json_text(data)
    else:
        text = json_text(structured)
    return {"content": to_content_list(text), "structuredContent": structured}
