"""trio_mcp: a spec-faithful reference server for MCP's Streamable HTTP transport.

Layers, each importing only the ones before it:

- ``trio_mcp.protocol``: the rules of both eras as pure code (no I/O, no trio, no hypercorn);
- ``trio_mcp._ports`` and ``trio_mcp._config``: the interfaces between the application and
  the runtime, and the settings;
- ``trio_mcp._trio``: the runtime: legacy sessions (a supervisor task each), modern
  requests and listeners, and the Runtime that routes each request to its era;
- ``trio_mcp._asgi`` and ``trio_mcp._serve``: the HTTP edges (the ASGI adapter, hypercorn);
- the user API: ``Server``, ``Context``, the method table (``_dispatch``), schemas, content;
- ``trio_mcp._cli``: the command line.
"""

# The public names are imported lazily (PEP 562), so that `import trio_mcp.protocol`, the
# pure layer, loads neither trio nor hypercorn (tests/test_layering.py checks it).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Completion": "._completion",
    "CompletionRef": "._completion",
    "AuthConfig": "._config",
    "IntrospectionVerifier": "._trio._auth",
    "InvalidToken": ".protocol._auth",
    "JWTVerifier": "._trio._auth",
    "Principal": ".protocol._auth",
    "TokenVerifier": "._ports",
    "HttpParser": "._config",
    "ResponseMode": "._config",
    "ServerConfig": "._config",
    "AssistantMessage": "._content",
    "Audio": "._content",
    "Blob": "._content",
    "EmbeddedResource": "._content",
    "Image": "._content",
    "ResourceLink": "._content",
    "Text": "._content",
    "ToolResult": "._content",
    "UserMessage": "._content",
    "ClientCapabilityError": "._context",
    "ClientTimeoutError": "._context",
    "Context": "._context",
    "ElicitationResult": "._context",
    "Root": "._context",
    "SamplingResult": "._context",
    "SessionContext": "._context",
    "PromptResult": "._prompts",
    "ResourceNotFound": "._resources",
    "serve": "._serve",
    "Server": "._server",
    "ToolError": "._tools",
    "Retention": ".protocol",
    "CacheHint": ".protocol",
    "CacheScope": ".protocol",
    "InputRequest": ".protocol",
    "TaskSupport": ".protocol._tasks",
    "elicitation_request": "._context",
    "sampling_request": "._context",
    "roots_request": "._context",
    "use_allocator": "._allocator",
    "use_collector_threshold": "._collector",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trio_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*globals(), *__all__]


if TYPE_CHECKING:
    from ._allocator import use_allocator as use_allocator
    from ._collector import use_collector_threshold as use_collector_threshold
    from ._completion import Completion as Completion
    from ._completion import CompletionRef as CompletionRef
    from ._config import AuthConfig as AuthConfig
    from ._config import HttpParser as HttpParser
    from ._config import ResponseMode as ResponseMode
    from ._config import ServerConfig as ServerConfig
    from ._content import AssistantMessage as AssistantMessage
    from ._content import Audio as Audio
    from ._content import Blob as Blob
    from ._content import EmbeddedResource as EmbeddedResource
    from ._content import Image as Image
    from ._content import ResourceLink as ResourceLink
    from ._content import Text as Text
    from ._content import ToolResult as ToolResult
    from ._content import UserMessage as UserMessage
    from ._context import ClientCapabilityError as ClientCapabilityError
    from ._context import ClientTimeoutError as ClientTimeoutError
    from ._context import Context as Context
    from ._context import ElicitationResult as ElicitationResult
    from ._context import Root as Root
    from ._context import SamplingResult as SamplingResult
    from ._context import SessionContext as SessionContext
    from ._context import elicitation_request as elicitation_request
    from ._context import roots_request as roots_request
    from ._context import sampling_request as sampling_request
    from ._ports import TokenVerifier as TokenVerifier
    from ._prompts import PromptResult as PromptResult
    from ._resources import ResourceNotFound as ResourceNotFound
    from ._serve import serve as serve
    from ._server import Server as Server
    from ._tools import ToolError as ToolError
    from ._trio._auth import IntrospectionVerifier as IntrospectionVerifier
    from ._trio._auth import JWTVerifier as JWTVerifier
    from .protocol import CacheHint as CacheHint
    from .protocol import CacheScope as CacheScope
    from .protocol import InputRequest as InputRequest
    from .protocol import Retention as Retention
    from .protocol._auth import InvalidToken as InvalidToken
    from .protocol._auth import Principal as Principal
    from .protocol._tasks import TaskSupport as TaskSupport
