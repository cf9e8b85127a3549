# What a 2026-07-28 handler's port answers from its request's envelope alone, the same for a
# request on its exchange (ModernExchange) and for one that became a task (TaskRun): who the
# client is, and how the handler asks it for input. There is one way to ask in this era
# (multi round-trip requests, MU-MRTR-*): the answers the request already brings are
# checked and handed over, and a question without one stops the handler with InputRequired;
# only a published task waits for its answers instead (TaskRun, TK-INPUT).
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...base._ports import ClientCapabilityError, InputRequired
from ...protocol import JSON, LocalProtocolError
from ...protocol._era import ModernCall
from ...protocol._methods import INPUT_METHODS
from ...protocol._modern import missing_capability
from ...protocol._mrtr import InputRequest, split_answers

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["EnvelopePort"]


class EnvelopePort:
    """The port's parts that come from the request's ``_meta`` and the server's settings,
    and the asking for input. There is no session in this era, and no stream to close for
    polling (MT-SSE-6)."""

    def __init__(
        self, call: ModernCall, config: ServerConfig, answers: Mapping[str, JSON] | None = None
    ) -> None:
        self._call = call
        self._request = call.request
        self._envelope = call.envelope
        self._config = config
        #: The answers this request can give a question: from its requestState and its
        #: inputResponses (TM-MRTR-RERUN), and for a task from tasks/update too.
        self._answers: dict[str, JSON] = dict(answers or {})
        #: The answers the handler has used so far, to seal into the next requestState.
        self._used: dict[str, JSON] = {}

    def _forget_arguments(self) -> None:
        """The handler is done: keep the request's method and id, not its params, which may
        be megabytes held for a task's whole TTL otherwise (TM-SEC-MEMORY)."""
        if self._request.params is not None:
            self._request = attrs.evolve(self._request, params=None)
            self._call = attrs.evolve(self._call, request=self._request)

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def protocol_version(self) -> str:
        return self._envelope.version

    @property
    def client_info(self) -> Mapping[str, JSON]:
        return self._envelope.client_info or {}

    @property
    def client_capabilities(self) -> Mapping[str, JSON]:
        # TK-INPUT: a task's questions are bounded by its creating request's capabilities.
        return self._envelope.client_capabilities

    @property
    def client_request_timeout(self) -> float:
        return self._config.client_request_timeout

    @property
    def page_size(self) -> int:
        return self._config.page_size

    def engine(self, identifier: str) -> Any:
        """None: a task's run serves tools/call alone, no extension's method (TM-EXT-ENGINE);
        an exchange has its server's engines."""
        return None

    def close_stream(self) -> bool:
        # MT-SSE-6: a modern stream cannot be resumed, so it is never closed for polling.
        return False

    # -- asking the client ---------------------------------------------------------------------

    async def request(
        self, method: str, params: Mapping[str, JSON] | None, *, timeout: float
    ) -> Mapping[str, JSON]:
        # MJ-PAT-1 / MT-GEN-2 (MUST): a modern server sends no requests; input is asked for
        # with an InputRequiredResult.
        raise LocalProtocolError(
            f"Cannot send {method} to a 2026-07-28 client: servers send no requests in this "
            "revision; ask for input with ctx.elicit, ctx.sample or ctx.list_roots."
        )

    async def ask(
        self, requests: Mapping[str, InputRequest], *, timeout: float
    ) -> dict[str, Mapping[str, JSON]]:
        """The answers to ``requests``: those the request brings, each checked before the
        handler sees it (MU-MRTR-4); for the rest, ``_answers_later`` (InputRequired, unless
        a published task waits for them; ``timeout`` does not apply in this era)."""
        if self._request.method not in INPUT_METHODS:
            # MU-MRTR-1: only tools/call, prompts/get and resources/read may ask.
            raise LocalProtocolError(
                f"{self._request.method} cannot ask the client for input (only tools/call, "
                "prompts/get and resources/read can)."
            )
        await trio.lowlevel.checkpoint()
        self._keep_keys(requests)
        got, missing = split_answers(requests, self._answers)
        self._used.update({key: self._answers[key] for key in got})
        if missing:
            got.update(await self._answers_later(missing))
        return got

    def _keep_keys(self, requests: Mapping[str, InputRequest]) -> None:
        """A check of the keys ``requests`` are asked under, before anything is answered
        (a task's: TK-KEYS)."""

    async def _answers_later(
        self, missing: Mapping[str, InputRequest]
    ) -> dict[str, Mapping[str, JSON]]:
        """The answers to the questions the request brings none for."""
        # TM-MRTR-RERUN: the handler stops here; its retry runs it again from the start,
        # with the answers used so far sealed into its requestState.
        raise InputRequired(missing, self._used)

    def capability_error(self, required: Mapping[str, JSON]) -> ClientCapabilityError:
        # ML-META-3: the client learns what it must declare (400 before the first byte; in a
        # task, the task fails with it).
        return missing_capability(required, raised_as=ClientCapabilityError)
