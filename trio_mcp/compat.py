"""The names of the official Python SDK's ``MCPServer`` and of FastMCP, over trio-mcp's
Server (spec/handlers.md TM-HAND-COMPAT-SERVER on, docs/server-guide.md "From the SDK or FastMCP"):
a server written against either is served by changing its imports to this module::

    from trio_mcp.compat import Context, MCPServer          # mcp.server.mcpserver
    from trio_mcp.compat import FastMCP, Middleware, Depends  # fastmcp

What trio-mcp cannot honour raises ``Unsupported``, naming what to use instead.
"""

from __future__ import annotations

from .app._compat import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    CurrentContext,
    DeclinedElicitation,
    FastMCP,
    MCPServer,
    Middleware,
    MiddlewareContext,
    ReadResourceContents,
    RequestContext,
    Unsupported,
)
from .app._content import AssistantMessage, Audio, Image, UserMessage
from .app._depends import Depends
from .app._display import Icon, ToolAnnotations
from .app._middleware import McpError
from .app._tools import ToolError

__all__ = [
    "AcceptedElicitation", "AssistantMessage", "Audio", "CancelledElicitation", "Context",
    "CurrentContext", "DeclinedElicitation", "Depends", "FastMCP", "Icon", "Image", "MCPServer",
    "McpError", "Middleware", "MiddlewareContext", "ReadResourceContents", "RequestContext",
    "ToolAnnotations", "ToolError", "Unsupported", "UserMessage",
]
