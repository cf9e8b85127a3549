# 2026-07-28 as a client speaks it (spec/client.md): every request a POST of its own that
# carries its envelope in params._meta and the routing headers that mirror it; the answer
# JSON or an SSE stream with no ids (nothing to resume: a drop fails the call, TM-CLIENT-GAP);
# closing the POST cancels the request (TM-CLIENT-CANCEL); an input_required result is
# answered by the application's callbacks and retried with its requestState under a new id.
from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

import httpx2
import trio

from ..protocol import _tasks as _tasks  # the tasks extension's rows: Mcp-Name (TK-HEADERS)
from ..protocol._era import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    header_text,
)
from ..protocol._methods import NAME_PARAM
from ..protocol._modern import META_SUBSCRIPTION_ID, mirror_params, param_headers
from ..protocol._versions import MODERN_VERSIONS
from ._errors import ConnectionLost, ErrorAnswer, HttpStatusError
from ._events import read_incoming
from ._inbound import Answerer, Notification
from ._ledger import Call, Ledger, ProgressCallback

__all__ = ["MAX_ROUNDS", "ModernClient", "Probe"]

#: input_required rounds one request may take before the client gives up on it.
MAX_ROUNDS: Final = 16
_ACCEPT: Final = "application/json, text/event-stream"


class Probe:
    """What server/discover said, or why it said nothing modern."""

    def __init__(self, result: Mapping[str, Any] | None) -> None:
        self.result = dict(result) if result is not None else None

    @property
    def modern(self) -> bool:
        versions = (self.result or {}).get("supportedVersions")
        return isinstance(versions, list) and any(v in MODERN_VERSIONS for v in versions)


def _header_value(text: str) -> str:
    """A header's value for ``text``: itself, or its ``=?base64?…?=`` form when it holds
    what a header cannot (MT-HDR-21)."""
    if header_text(text) and text == text.strip(" \t") and not text.startswith("=?base64?"):
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


class ModernClient:
    """The Client's era object for 2026-07-28: stateless, a POST per request."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        url: str,
        ledger: Ledger,
        answerer: Answerer,
        deliver: Callable[[str, Mapping[str, Any]], Any],
        *,
        version: str = MODERN_VERSIONS[0],
        client_info: Mapping[str, Any],
    ) -> None:
        self._http = http
        self._url = url
        self._ledger = ledger
        self._answerer = answerer
        self._deliver = deliver
        self.version = version
        self._client_info = dict(client_info)
        self.log_level: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        #: The Mcp-Param headers of each tool seen in a listing (MT-HDR-12).
        self._mirrored: dict[str, dict[str, tuple[str, ...]]] = {}

    def adopt(self, probe: Probe) -> None:
        result = probe.result or {}
        self.capabilities = dict(result.get("capabilities") or {})
        meta = result.get("_meta")
        info = meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, Mapping) else None
        self.server_info = dict(info) if isinstance(info, Mapping) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None

    def learn_tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Remember which arguments of each listed tool go in headers too; the tools, less
        those whose ``x-mcp-header`` annotations are invalid, which a client must exclude
        (MT-HDR-8: such a tool cannot be called correctly)."""
        kept = []
        for tool in tools:
            name = tool.get("name")
            schema = tool.get("inputSchema")
            if not isinstance(name, str):
                continue
            try:
                self._mirrored[name] = param_headers(schema if isinstance(schema, Mapping)
                                                     else {})
            except ValueError:
                self._mirrored.pop(name, None)
                continue
            kept.append(tool)
        return kept

    def _meta(self, progress_token: Any = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.version,
            META_CLIENT_INFO: self._client_info,
            META_CLIENT_CAPABILITIES: self._answerer.capabilities(),
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        if progress_token is not None:
            meta["progressToken"] = progress_token
        return meta

    def _headers(self, method: str, params: Mapping[str, Any]) -> dict[str, str]:
        headers = {
            "accept": _ACCEPT,
            "content-type": "application/json",
            "mcp-protocol-version": self.version,
            "mcp-method": method,
        }
        field = NAME_PARAM.get(method)
        if field is not None and isinstance(params.get(field), str):
            headers["mcp-name"] = _header_value(params[field])
        if method == "tools/call":
            arguments = params.get("arguments")
            arguments = arguments if isinstance(arguments, Mapping) else {}
            headers.update(
                mirror_params(self._mirrored.get(str(params.get("name")), {}), arguments)
            )
        return headers

    # -- requests -----------------------------------------------------------------------

    async def discover(self) -> Probe:
        """POST server/discover; a JSON-RPC error or a 4xx with no answer is a server that
        does not speak 2026-07-28 (the fallback of the SDK clients); 401, 403, 5xx and
        network errors are raised."""
        try:
            result = await self.request("server/discover", {})
        except ErrorAnswer:
            return Probe(None)
        except HttpStatusError as error:
            if 400 <= error.status < 500 and error.status not in (401, 403):
                return Probe(None)
            raise
        return Probe(result)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        base = dict(params or {})
        previous: Call | None = None
        answers: dict[str, Any] | None = None
        state: Any = None
        renegotiated = False
        for _ in range(MAX_ROUNDS):
            call = self._ledger.open(method, on_progress, after=previous)
            try:
                body_params = dict(base)
                body_params["_meta"] = {**base.get("_meta", {}),
                                        **self._meta(call.token if on_progress else None)}
                if answers is not None:
                    body_params["inputResponses"] = answers
                if state is not None:
                    body_params["requestState"] = state
                await self._exchange(call, {"jsonrpc": "2.0", "id": call.id, "method": method,
                                            "params": body_params})
                result = call.outcome()
            except ErrorAnswer as error:
                # TM-CLIENT-ERA: -32022 naming a version both sides speak: once, again in it.
                mutual = self._mutual(error)
                if renegotiated or mutual is None:
                    raise
                renegotiated = True
                self.version = mutual
                continue
            finally:
                self._ledger.close(call)
            if result.get("resultType") != "input_required":
                return result
            requests = result.get("inputRequests")
            answers = await self._answerer.input_responses(
                requests if isinstance(requests, Mapping) else {})
            state = result.get("requestState")
            previous = call
        raise ErrorAnswer(-32603, f"{method}: more than {MAX_ROUNDS} input_required rounds")

    @staticmethod
    def _mutual(error: ErrorAnswer) -> str | None:
        """The version a -32022 error's ``data.supported`` shares with this client."""
        if error.code != -32022 or not isinstance(error.data, Mapping):
            return None
        supported = error.data.get("supported")
        if not isinstance(supported, list):
            return None
        return next((v for v in MODERN_VERSIONS if v in supported), None)

    async def _exchange(self, call: Call, body: Mapping[str, Any]) -> None:
        params = body["params"]
        assert isinstance(params, Mapping)
        async with self._http.stream(
            "POST", self._url, content=_dumps(body), headers=self._headers(call.method, params),
        ) as response:
            status = response.status_code
            if status != 200 and not (
                400 <= status < 500
                and response.headers.get("content-type", "").startswith("application/json")
            ):
                text = (await response.aread()).decode("utf-8", errors="replace")
                raise HttpStatusError(status, text)
            async for item in read_incoming(response):
                if item.message is not None:
                    await self._apply(item.message)
                if call.done.is_set():
                    return
            if not call.done.is_set():
                if 400 <= status < 500:
                    raise HttpStatusError(status, "")
                call.fail(ConnectionLost(f"{call.method}: the response ended before its "
                                         "answer; a 2026-07-28 request cannot be resumed"))

    async def _apply(self, message: Mapping[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message:
                self._ledger.answer(message)
            return
        if "id" in message:
            return  # MU: a server never asks on a 2026-07-28 stream; nothing to answer.
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        if method == "notifications/progress":
            await self._ledger.progress(params)
        else:
            await self._deliver(method, params)

    async def listen(self, filters: Mapping[str, Any]) -> AsyncIterator[Notification]:
        """subscriptions/listen: the stream's notifications, the acknowledgement first."""
        call = self._ledger.open("subscriptions/listen")
        params = {"notifications": dict(filters), "_meta": self._meta()}
        body = {"jsonrpc": "2.0", "id": call.id, "method": "subscriptions/listen",
                "params": params}
        try:
            async with self._http.stream(
                "POST", self._url, content=_dumps(body),
                headers=self._headers("subscriptions/listen", params),
            ) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode("utf-8", errors="replace")
                    _raise_in_band(text)
                    raise HttpStatusError(response.status_code, text)
                async for item in read_incoming(response):
                    message = item.message
                    if message is None:
                        continue
                    method = message.get("method")
                    if isinstance(method, str) and "id" not in message:
                        got = message.get("params")
                        note = dict(got) if isinstance(got, Mapping) else {}
                        meta = note.get("_meta")
                        if isinstance(meta, Mapping) and meta.get(META_SUBSCRIPTION_ID) not in (
                            None, call.id):
                            continue
                        yield Notification(method, note)
                    elif message.get("id") == call.id:
                        self._ledger.answer(message)
                        call.outcome()  # an error ends the listen with it
                        return
        finally:
            self._ledger.close(call)
        await trio.lowlevel.checkpoint()


def _raise_in_band(text: str) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        return
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        raise ErrorAnswer(error["code"], str(error.get("message", "")), error.get("data"))


def _dumps(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
