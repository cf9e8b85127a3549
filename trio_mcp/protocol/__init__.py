"""trio_mcp.protocol: the Streamable HTTP rulebook as pure code.

Nothing here does I/O or imports trio, hypercorn or h11 (tests/test_layering.py checks).
The runtime in ``trio_mcp.runtime`` executes what this layer decides.
"""

from ._errors import ErrorCode as ErrorCode
from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import ProtocolError as ProtocolError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._eventid import Cursor as Cursor
from ._eventid import CursorCodec as CursorCodec
from ._eventlog import ENTRY_OVERHEAD as ENTRY_OVERHEAD
from ._eventlog import STANDALONE_STREAM as STANDALONE_STREAM
from ._eventlog import Entry as Entry
from ._eventlog import EntryKind as EntryKind
from ._eventlog import EventLog as EventLog
from ._eventlog import Gap as Gap
from ._eventlog import Retention as Retention
from ._eventlog import StreamClosedError as StreamClosedError
from ._headers import Headers as Headers
from ._headers import OriginPolicy as OriginPolicy
from ._jsonrpc import JSON as JSON
from ._jsonrpc import ErrorResponse as ErrorResponse
from ._jsonrpc import Message as Message
from ._jsonrpc import Notification as Notification
from ._jsonrpc import Request as Request
from ._jsonrpc import RequestId as RequestId
from ._jsonrpc import Response as Response
from ._jsonrpc import dumps as dumps
from ._jsonrpc import parse_message as parse_message
from ._lifecycle import Phase as Phase
from ._modern import CacheHint as CacheHint
from ._modern import CacheScope as CacheScope
from ._mrtr import InputRequest as InputRequest
from ._sse import SSEDecoder as SSEDecoder
from ._sse import SSEEvent as SSEEvent
from ._sse import encode_comment as encode_comment
from ._sse import encode_event as encode_event
from ._transport import HttpRequest as HttpRequest
from ._transport import Reply as Reply
from ._versions import LATEST_LEGACY_VERSION as LATEST_LEGACY_VERSION
from ._versions import LEGACY_VERSIONS as LEGACY_VERSIONS
from ._versions import MODERN_VERSIONS as MODERN_VERSIONS
