# Multi round-trip requests (2026-07-28, spec/modern.md MU-MRTR-*): how a modern server asks
# its client for input without sending it a request. A handler's questions become an
# InputRequiredResult; the client retries the request with its answers and the requestState
# this module sealed. Pure: keys and clocks come in as arguments.
#
# What the state holds: the answers of earlier rounds, bound to the request they belong to
# (method, tool name or URI, a digest of the arguments, the principal) and to an expiry, under
# an HMAC-SHA256 tag. It is integrity-protected, not secret: the client wrote the answers.
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Final

import attrs

from ._errors import ErrorCode, RemoteProtocolError
from ._jsonrpc import JSON, Request
from ._jsonschema import schema_problems
from ._methods import INPUT_CAPABILITY, NAME_PARAM

__all__ = [
    "Binding",
    "InputRequest",
    "RequestStateCodec",
    "check_input_response",
    "check_legacy_answer",
    "input_required_result",
    "read_input_responses",
    "split_answers",
]

_STATE_VERSION: Final = 1
_DIGEST_SIZE: Final = 32


@attrs.frozen
class InputRequest:
    """One question for the client: a request it would have been sent in a session."""

    method: str
    params: Mapping[str, JSON] | None = None

    def __attrs_post_init__(self) -> None:
        if self.method not in INPUT_CAPABILITY:
            # MU-MRTR-5: only elicitation, sampling and roots requests are input requests.
            raise ValueError(
                f"an input request is one of {', '.join(INPUT_CAPABILITY)}, not {self.method!r}"
            )

    @property
    def capability(self) -> str:
        """The client capability the question needs (MU-MRTR-2)."""
        return INPUT_CAPABILITY[self.method]

    @property
    def features(self) -> tuple[str, ...]:
        """The parts of that capability it needs: the elicitation mode it uses (MU-ELIC-1),
        ``tools`` for sampling with tools (MU-SAMP-1), ``context`` for sampling that
        includes context; () when the capability alone is enough."""
        params = self.params or {}
        if self.method == "elicitation/create":
            mode = params.get("mode", "form")
            return (mode if isinstance(mode, str) else "form",)
        if self.method == "sampling/createMessage":
            wanted = []
            if params.get("tools"):
                wanted.append("tools")
            if params.get("includeContext") not in (None, "none"):
                wanted.append("context")
            return tuple(wanted)
        return ()

    def to_dict(self) -> dict[str, JSON]:
        d: dict[str, JSON] = {"method": self.method}
        if self.params is not None:
            d["params"] = dict(self.params)
        return d


@attrs.frozen
class Binding:
    """What a requestState belongs to: a retry of another request cannot use it."""

    method: str
    target: str
    """The tool or prompt name, or the resource URI."""
    arguments: str
    """A SHA-256 digest of the request's arguments in canonical JSON."""
    principal: str = ""
    """Who made the request, once requests are authenticated ("" without authorization)."""

    @classmethod
    def of(cls, request: Request, principal: str = "") -> Binding:
        params = request.params or {}
        field = NAME_PARAM.get(request.method)
        target = params.get(field) if field is not None else None
        arguments = params.get("arguments")
        canonical = json.dumps(
            arguments if arguments is not None else {},
            sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        )
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
        return cls(
            method=request.method,
            target=target if isinstance(target, str) else "",
            arguments=digest,
            principal=principal,
        )


def _invalid_state(reason: str = "invalid_request_state") -> RemoteProtocolError:
    # MU-MRTR-3 (MUST): requestState is attacker-controlled; one that does not verify, has
    # expired or belongs to another request is refused with -32602, never trusted.
    return RemoteProtocolError(
        "Invalid params: invalid or expired requestState.",
        code=ErrorCode.INVALID_PARAMS,
        data={"reason": reason},
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes of an unpadded base64url text, only in the one form ``_b64`` writes: a
    token the server never issued does not open, even one that decodes to the same bytes."""
    raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(raw) != text:
        raise ValueError("not the canonical encoding")
    return raw


@attrs.frozen
class RequestStateCodec:
    """Seals and opens requestState tokens under one server key (TM-MRTR-STATE)."""

    key: bytes = attrs.field(repr=False)
    ttl: float
    """Seconds a requestState stays valid after it was sealed."""

    def seal(self, binding: Binding, answers: Mapping[str, JSON], now: float) -> str:
        body = json.dumps(
            {
                "v": _STATE_VERSION,
                "m": binding.method,
                "t": binding.target,
                "a": binding.arguments,
                "p": binding.principal,
                "x": int((now + self.ttl) * 1000),
                "r": dict(answers),
            },
            separators=(",", ":"), ensure_ascii=False,
        ).encode("utf-8", "surrogatepass")
        tag = hmac.new(self.key, body, hashlib.sha256).digest()
        return f"{_b64(body)}.{_b64(tag)}"

    def open(self, token: JSON, binding: Binding, now: float) -> dict[str, JSON]:
        """The answers a requestState carries.

        Raises:
            RemoteProtocolError: -32602 for a state that is not a string, does not verify
                under this server's key, has expired, or belongs to another request.
        """
        if not isinstance(token, str):
            raise _invalid_state()
        body_text, dot, tag_text = token.partition(".")
        try:
            body = _unb64(body_text)
            tag = _unb64(tag_text)
        except (binascii.Error, ValueError):
            raise _invalid_state() from None
        expected = hmac.new(self.key, body, hashlib.sha256).digest()
        if not dot or len(tag) != _DIGEST_SIZE or not hmac.compare_digest(tag, expected):
            raise _invalid_state()
        try:
            state = json.loads(body)
        except ValueError:
            raise _invalid_state() from None
        if not isinstance(state, dict) or state.get("v") != _STATE_VERSION:
            raise _invalid_state()
        if state.get("p") != binding.principal:
            # T-AUTH-BIND: another principal's state is refused as if it did not verify, so
            # that it learns nothing of it.
            raise _invalid_state()
        if (state.get("m"), state.get("t"), state.get("a")) != (
            binding.method, binding.target, binding.arguments,
        ):
            # TM-MRTR-STATE: a state is valid only for a retry of the request it was made
            # for: the same method, target, arguments and principal.
            raise _invalid_state("request_state_mismatch")
        expiry = state.get("x")
        if not isinstance(expiry, int) or now * 1000 > expiry:
            raise _invalid_state("request_state_expired")
        answers = state.get("r")
        if not isinstance(answers, dict):
            raise _invalid_state()
        return answers


def read_input_responses(params: Mapping[str, JSON], request_id: str | int) -> dict[str, JSON]:
    """The answers a retry carries in ``params.inputResponses`` ({} when it has none).

    Raises:
        RemoteProtocolError: -32602 for inputResponses that are present but not an object
            (null included: MU-MRTR-4).
    """
    if "inputResponses" not in params:
        return {}
    responses = params["inputResponses"]
    if not isinstance(responses, Mapping):
        raise RemoteProtocolError(
            "Invalid params: inputResponses must be an object of answers by key.",
            code=ErrorCode.INVALID_PARAMS,
            data={"reason": "invalid_input_responses"},
            request_id=request_id,
        )
    return dict(responses)


def _malformed(key: str, why: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"Invalid params: inputResponses[{key!r}] {why}.",
        code=ErrorCode.INVALID_PARAMS,
        data={"reason": "invalid_input_response", "key": key},
    )


def check_input_response(key: str, request: InputRequest, response: JSON) -> Mapping[str, JSON]:
    """The answer to ``request`` if ``response`` is a well-formed one (MU-MRTR-4).

    An elicitation answer is an ElicitResult; accepted content must satisfy the requested
    schema (JSON Schema 2020-12). A sampling answer is a CreateMessageResult with content;
    a roots answer a ListRootsResult.

    Raises:
        RemoteProtocolError: -32602 naming the key, for a malformed answer.
    """
    if not isinstance(response, Mapping):
        raise _malformed(key, f"must be the result of {request.method}, an object")
    if request.method == "elicitation/create":
        action = response.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise _malformed(key, 'needs an action of "accept", "decline" or "cancel"')
        content = response.get("content")
        # A URL-mode answer has no content: the interaction happens at the URL.
        if action == "accept" and (request.params or {}).get("mode") != "url":
            if not isinstance(content, Mapping):
                raise _malformed(key, "accepts without a content object")
            schema = (request.params or {}).get("requestedSchema")
            if isinstance(schema, Mapping):
                problems = schema_problems(content, schema)
                if problems:
                    raise _malformed(key, "does not match the requested schema: " + problems[0])
    elif request.method == "sampling/createMessage":
        content = response.get("content")
        if not isinstance(content, Mapping | list) or not isinstance(response.get("role"), str):
            raise _malformed(key, "needs a role and content")
    else:
        roots = response.get("roots")
        if not isinstance(roots, list) or not all(
            isinstance(r, Mapping) and isinstance(r.get("uri"), str) for r in roots
        ):
            raise _malformed(key, "needs a list of roots, each with a uri")
    return response


def check_legacy_answer(key: str, request: InputRequest, response: JSON) -> None:
    """TM-MRTR-LEGACY: a legacy client's answer to a question asked on its stream. An
    elicitation's is the handler's to see as it came, as before the modern era; any other
    answer is checked as a modern one is (MU-MRTR-4).

    Raises:
        RemoteProtocolError: -32602 naming the key, for a malformed answer.
    """
    if request.method != "elicitation/create":
        check_input_response(key, request, response)


def split_answers(
    requests: Mapping[str, InputRequest], answers: Mapping[str, JSON]
) -> tuple[dict[str, Mapping[str, JSON]], dict[str, InputRequest]]:
    """The questions ``answers`` already answers (each answer checked, MU-MRTR-4), and the
    ones still open. Answers nobody asked for are left alone (MU-MRTR-9)."""
    got: dict[str, Mapping[str, JSON]] = {}
    missing: dict[str, InputRequest] = {}
    for key, question in requests.items():
        if key in answers:
            got[key] = check_input_response(key, question, answers[key])
        else:
            missing[key] = question
    return got, missing


def input_required_result(
    requests: Mapping[str, InputRequest], request_state: str | None
) -> dict[str, JSON]:
    """MU-MRTR-2: an InputRequiredResult with the questions by key, and the state."""
    result: dict[str, JSON] = {"resultType": "input_required"}
    if requests:
        result["inputRequests"] = {key: r.to_dict() for key, r in requests.items()}
    if request_state is not None:
        result["requestState"] = request_state
    return result
