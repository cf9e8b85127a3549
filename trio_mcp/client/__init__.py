"""trio_mcp.client: an MCP client on trio for any Streamable HTTP server, and for a
``trio_mcp.Server`` in this process (``Client(server)``, no socket). See ``Client``."""

from ._client import Client, ClientEra, Listening
from ._errors import ClientError, ConnectionLost, ErrorAnswer, HttpStatusError, ResumptionFailed
from ._inbound import Notification
from ._ledger import Tally
from ._oauth import AuthorizationFailed, OAuth

__all__ = [
    "AuthorizationFailed",
    "Client",
    "ClientEra",
    "ClientError",
    "ConnectionLost",
    "ErrorAnswer",
    "HttpStatusError",
    "Listening",
    "Notification",
    "OAuth",
    "ResumptionFailed",
    "Tally",
]
