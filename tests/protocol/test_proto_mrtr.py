# Unit tests for trio_mcp.protocol._mrtr (multi round-trip requests: the sealed requestState,
# the answers a retry carries, the InputRequiredResult) and trio_mcp.protocol._jsonschema
# (the validation of elicited content, with no network).

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from trio_mcp.protocol import ErrorCode, InputRequest, RemoteProtocolError, Request
from trio_mcp.protocol._jsonschema import DIALECTS, schema_problems
from trio_mcp.protocol._mrtr import (
    Binding,
    RequestStateCodec,
    check_input_response,
    input_required_result,
    read_input_responses,
)

KEY = b"k" * 32
TTL = 600.0
NOW = 1_800_000_000.0
CODEC = RequestStateCodec(key=KEY, ttl=TTL)
CALL = Request(
    id=1,
    method="tools/call",
    params={"name": "book", "arguments": {"city": "Paris", "nights": 2}},
)
BINDING = Binding.of(CALL, principal="alice")
ANSWERS = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}


def _refused(token: Any, binding: Binding = BINDING, now: float = NOW + 1) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        CODEC.open(token, binding, now)
    return info.value


def _reason(err: RemoteProtocolError) -> tuple[int, str]:
    return err.code, err.data["reason"]


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


INVALID = (ErrorCode.INVALID_PARAMS, "invalid_request_state")
MISMATCH = (ErrorCode.INVALID_PARAMS, "request_state_mismatch")
EXPIRED = (ErrorCode.INVALID_PARAMS, "request_state_expired")


# -- Binding --------------------------------------------------------------------------------


@pytest.mark.spec("MU-MRTR-7", "TM-MRTR-STATE")
def test_binding_names_method_target_argument_digest_and_principal() -> None:
    """A tool call binds its name; a resource read its URI; the arguments by digest."""
    read = Request(id=2, method="resources/read", params={"uri": "test://a", "name": "x"})

    assert ("tools/call", "book", "alice") == (
        BINDING.method,
        BINDING.target,
        BINDING.principal,
    )
    assert ("resources/read", "test://a", "") == (
        Binding.of(read).method,
        Binding.of(read).target,
        Binding.of(read).principal,
    )
    assert 64 == len(BINDING.arguments)


@pytest.mark.spec("MU-MRTR-7")
def test_argument_digest_ignores_key_order_and_the_retry_fields() -> None:
    """The retry of a request binds as the request did: same arguments in any key order,
    whatever its id, inputResponses and requestState."""
    retry = Request(
        id=99,
        method="tools/call",
        params={
            "arguments": {"nights": 2, "city": "Paris"},
            "name": "book",
            "inputResponses": ANSWERS,
            "requestState": "x",
        },
    )

    assert BINDING == Binding.of(retry, principal="alice")


@pytest.mark.spec("MU-MRTR-7")
def test_missing_arguments_bind_as_empty_arguments() -> None:
    """A call without arguments binds as one with {} (the suite resends arguments: {})."""
    bare = Request(id=1, method="tools/call", params={"name": "t"})
    empty = Request(id=2, method="tools/call", params={"name": "t", "arguments": {}})

    assert Binding.of(bare) == Binding.of(empty)


# -- RequestStateCodec ----------------------------------------------------------------------


@pytest.mark.spec("TM-MRTR-STATE", "MU-MRTR-3")
def test_sealed_state_opens_to_its_answers() -> None:
    """A requestState this server sealed opens, for the same request, to the same answers."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)

    assert ANSWERS == CODEC.open(token, BINDING, NOW + 1)


@pytest.mark.spec("TM-MRTR-STATE")
def test_sealed_state_is_readable_json_of_the_binding() -> None:
    """The state is integrity-protected, not secret: JSON of the binding, expiry and answers."""
    body = json.loads(_unb64(CODEC.seal(BINDING, ANSWERS, NOW).split(".")[0]))

    assert {
        "m": "tools/call",
        "t": "book",
        "a": BINDING.arguments,
        "p": "alice",
        "x": int((NOW + TTL) * 1000),
        "r": ANSWERS,
    } == {k: body[k] for k in "mtapxr"}


# Any text a client can send in JSON, lone surrogates ("\ud800") included.
_json_text = st.text(st.characters(exclude_categories=()))
_answers = st.dictionaries(
    st.text(max_size=10),
    st.recursive(
        st.none() | st.booleans() | st.integers() | _json_text,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=10,
    ),
    max_size=4,
)


@pytest.mark.spec("TM-MRTR-STATE", "MU-MRTR-3")
@given(answers=_answers, principal=_json_text, target=_json_text)
def test_any_answers_round_trip(answers: dict[str, Any], principal: str, target: str) -> None:
    """Whatever JSON the answers hold (lone surrogates included), the state opens to them."""
    binding = Binding(method="prompts/get", target=target, arguments="d", principal=principal)

    assert answers == CODEC.open(CODEC.seal(binding, answers, NOW), binding, NOW)


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-STATE")
def test_state_with_a_changed_body_is_refused() -> None:
    """Changing a byte of the sealed body (here: answers the client did not give) is refused."""
    body_text, tag_text = CODEC.seal(BINDING, ANSWERS, NOW).split(".")
    forged = _unb64(body_text).replace(b"Alice", b"Mallory")

    assert INVALID == _reason(_refused(f"{_b64(forged)}.{tag_text}"))


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-STATE")
def test_state_with_a_changed_tag_is_refused() -> None:
    """Flipping a bit of the tag is refused."""
    body_text, tag_text = CODEC.seal(BINDING, ANSWERS, NOW).split(".")
    tag = bytearray(_unb64(tag_text))
    tag[0] ^= 1

    assert INVALID == _reason(_refused(f"{body_text}.{_b64(bytes(tag))}"))


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-STATE")
def test_state_sealed_under_another_key_is_refused() -> None:
    """A state made with another key (another server, or a forger) does not verify."""
    token = RequestStateCodec(key=b"other-key", ttl=TTL).seal(BINDING, ANSWERS, NOW)

    assert INVALID == _reason(_refused(token))


@pytest.mark.spec("MU-MRTR-3")
def test_state_with_the_suites_tamper_suffix_is_refused() -> None:
    """requestState + "-TAMPERED" (the suite's tampered-state scenario) gets an error."""
    token = CODEC.seal(BINDING, ANSWERS, NOW) + "-TAMPERED"

    assert INVALID == _reason(_refused(token))


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-ERRORS")
@pytest.mark.parametrize(
    "token", [None, 12345, True, {"state": "x"}, ["x"], "", ".", "abc", "abc.", ".abc", "!!!.!!!"]
)
def test_non_string_or_malformed_state_is_refused(token: Any) -> None:
    """A state that is not a string, or not two Base64 parts, is -32602 invalid_request_state."""
    assert INVALID == _reason(_refused(token))


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-STATE")
@given(data=st.data())
def test_any_change_to_a_sealed_state_is_refused(data: st.DataObject) -> None:
    """A requestState this server did not issue is refused: changing, inserting or deleting
    any character of a sealed one gives a token that does not open."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)
    index = data.draw(st.integers(0, len(token)), label="index")
    edit = data.draw(st.sampled_from(["replace", "insert", "delete"]), label="edit")
    char = data.draw(
        st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=.+/! "),
        label="char",
    )
    if edit == "insert":
        changed = token[:index] + char + token[index:]
    elif edit == "replace":
        changed = token[:index] + char + token[index + 1 :]
    else:
        changed = token[:index] + token[index + 1 :]
    assume(changed != token)

    with pytest.raises(RemoteProtocolError):
        CODEC.open(changed, BINDING, NOW + 1)


@pytest.mark.spec("MU-MRTR-3", "TM-MRTR-STATE")
@pytest.mark.parametrize("edit", ["prefix-!", "tag+==", "tag-last-bits"])
def test_state_in_another_encoding_is_refused(edit: str) -> None:
    """Examples of the property above: a character outside Base64, padding added, or the
    unused bits of the last character changed make a token this server did not issue."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)
    body_text, tag_text = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(tag_text[-1])
    changed = {
        "prefix-!": "!" + token,
        "tag+==": token + "==",
        "tag-last-bits": f"{body_text}.{tag_text[:-1]}{alphabet[last ^ 1]}",
    }[edit]

    assert INVALID == _reason(_refused(changed))


@pytest.mark.spec("MU-MRTR-7", "TM-MRTR-STATE")
def test_expired_state_is_refused() -> None:
    """A state presented after its expiry is -32602 request_state_expired."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)

    assert ANSWERS == CODEC.open(token, BINDING, NOW + TTL - 1)
    assert EXPIRED == _reason(_refused(token, now=NOW + TTL + 1))


@pytest.mark.spec("MU-MRTR-7", "TM-MRTR-STATE")
@pytest.mark.parametrize(
    "other",
    [
        Binding.of(Request(id=1, method="prompts/get", params=CALL.params), "alice"),
        Binding.of(
            Request(id=1, method="tools/call", params={**CALL.params, "name": "x"}), "alice"
        ),
        Binding.of(
            Request(
                id=1,
                method="tools/call",
                params={**CALL.params, "arguments": {"city": "Rome", "nights": 2}},
            ),
            "alice",
        ),
    ],
    ids=["method", "target", "arguments"],
)
def test_state_presented_on_another_request_is_refused(other: Binding) -> None:
    """A state is valid only on a retry of its own request."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)

    assert MISMATCH == _reason(_refused(token, binding=other))


@pytest.mark.spec("MU-MRTR-7", "MT-SEC-7", "TM-MRTR-STATE", "TM-AUTH-BIND")
@pytest.mark.parametrize(
    "other", [Binding.of(CALL, principal="mallory"), Binding.of(CALL)],
    ids=["principal", "no-principal"],
)
def test_state_presented_by_another_principal_is_refused_as_if_forged(other: Binding) -> None:
    """A state presented by another principal (or by none) is refused with the reason a
    forged one gets, so that it learns nothing of whose state it holds."""
    token = CODEC.seal(BINDING, ANSWERS, NOW)

    assert INVALID == _reason(_refused(token, binding=other))


# -- inputResponses -------------------------------------------------------------------------


@pytest.mark.spec("MU-MRTR-4", "MU-MRTR-9")
@pytest.mark.parametrize(
    ("params", "answers"),
    [
        ({}, {}),
        ({"name": "t"}, {}),
        ({"inputResponses": {}}, {}),
        ({"inputResponses": ANSWERS}, ANSWERS),
    ],
)
def test_input_responses_are_read_as_an_object(
    params: dict[str, Any], answers: dict[str, Any]
) -> None:
    """A retry's answers are the object it carries; a request without any has none."""
    assert answers == read_input_responses(params, 1)


@pytest.mark.spec("MU-MRTR-4", "MJ-ERR-1")
@pytest.mark.parametrize("value", [None, [], [ANSWERS], "x", 12345])
def test_input_responses_that_are_not_an_object_are_invalid_params(value: Any) -> None:
    """inputResponses present but not an object (null included) gets -32602 with the id."""
    with pytest.raises(RemoteProtocolError) as info:
        read_input_responses({"inputResponses": value}, "r-7")

    assert (ErrorCode.INVALID_PARAMS, "r-7") == (info.value.code, info.value.request_id)


@pytest.mark.spec("TM-MRTR-ERRORS")
@pytest.mark.parametrize("value", [None, []])
def test_malformed_input_responses_name_a_reason(value: Any) -> None:
    """Malformed inputResponses are answered -32602 with data.reason, as a refused
    requestState is."""
    with pytest.raises(RemoteProtocolError) as info:
        read_input_responses({"inputResponses": value}, 1)

    data = info.value.data
    assert isinstance(data, dict)
    assert isinstance(data.get("reason"), str)


# -- check_input_response -------------------------------------------------------------------


ELICIT = InputRequest(
    "elicitation/create",
    {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
        },
    },
)
SAMPLE = InputRequest("sampling/createMessage", {"messages": [], "maxTokens": 10})
ROOTS = InputRequest("roots/list")


def _malformed(key: str, question: InputRequest, response: Any) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        check_input_response(key, question, response)
    return info.value


@pytest.mark.spec("MU-MRTR-4", "TM-MRTR-VALIDATE")
@pytest.mark.parametrize(
    ("question", "response"),
    [
        (ELICIT, {"action": "accept", "content": {"name": "Alice"}}),
        (ELICIT, {"action": "decline"}),
        (ELICIT, {"action": "cancel"}),
        (
            InputRequest("elicitation/create", {"message": "ok?"}),
            {"action": "accept", "content": {}},
        ),
        (
            SAMPLE,
            {
                "role": "assistant",
                "content": {"type": "text", "text": "Paris"},
                "model": "m",
                "stopReason": "endTurn",
            },
        ),
        (SAMPLE, {"role": "assistant", "content": [{"type": "text", "text": "Paris"}]}),
        (ROOTS, {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}),
        (ROOTS, {"roots": []}),
    ],
    ids=[
        "accept",
        "decline",
        "cancel",
        "no-schema",
        "sampling",
        "sampling-list",
        "roots",
        "no-roots",
    ],
)
def test_well_formed_answers_are_accepted(question: InputRequest, response: Any) -> None:
    """An answer of the right result type, with valid content where accepted, passes as is."""
    assert response == check_input_response("k", question, response)


@pytest.mark.spec("MU-MRTR-4", "TM-MRTR-VALIDATE", "TM-MRTR-ERRORS")
@pytest.mark.parametrize(
    ("question", "response"),
    [
        (ELICIT, 12345),
        (ELICIT, None),
        (ELICIT, "accept"),
        (ELICIT, []),
        (ELICIT, {}),
        (ELICIT, {"action": "maybe"}),
        (ELICIT, {"action": "ACCEPT", "content": {"name": "A"}}),
        (ELICIT, {"action": "accept"}),
        (ELICIT, {"action": "accept", "content": "Alice"}),
        (ELICIT, {"action": "accept", "content": {}}),
        (ELICIT, {"action": "accept", "content": {"name": 5}}),
        (ELICIT, {"action": "accept", "content": {"name": ""}}),
        (SAMPLE, 12345),
        (SAMPLE, {"content": {"type": "text", "text": "x"}}),
        (SAMPLE, {"role": "assistant"}),
        (SAMPLE, {"role": "assistant", "content": "x"}),
        (SAMPLE, {"role": 1, "content": {"type": "text", "text": "x"}}),
        (ROOTS, 12345),
        (ROOTS, {}),
        (ROOTS, {"roots": "file:///"}),
        (ROOTS, {"roots": [{"name": "no uri"}]}),
        (ROOTS, {"roots": [{"uri": 5}]}),
        (ROOTS, {"roots": ["file:///"]}),
    ],
)
def test_malformed_answers_are_invalid_params_naming_the_key(
    question: InputRequest, response: Any
) -> None:
    """An answer that is not its request's result, or whose accepted content breaks the
    requested schema, gets -32602 naming the key."""
    err = _malformed("user_name", question, response)

    assert (ErrorCode.INVALID_PARAMS, {"reason": "invalid_input_response", "key": "user_name"}) == (
        err.code,
        err.data,
    )


@pytest.mark.spec("TM-MRTR-VALIDATE")
def test_schema_violation_is_worded_in_the_error() -> None:
    """The error says what in the content breaks the schema."""
    err = _malformed("k", ELICIT, {"action": "accept", "content": {"name": 5}})

    assert "name: 5 is not of type 'string'" in err.message


# -- InputRequest and InputRequiredResult ---------------------------------------------------


@pytest.mark.spec("MU-MRTR-5", "MU-MRTR-12")
@pytest.mark.parametrize(
    "method", ["ping", "tools/call", "elicitation/complete", "notifications/message"]
)
def test_input_requests_are_only_elicitation_sampling_and_roots(method: str) -> None:
    """An InputRequiredResult may hold only elicitation, sampling and roots requests."""
    with pytest.raises(ValueError):
        InputRequest(method)


@pytest.mark.spec("MU-MRTR-5", "MU-MRTR-2")
def test_input_request_names_the_capability_it_needs() -> None:
    """Each input request needs its client capability."""
    assert ["elicitation", "sampling", "roots"] == [
        ELICIT.capability,
        SAMPLE.capability,
        ROOTS.capability,
    ]


@pytest.mark.spec("MU-MRTR-2", "MJ-RES-4", "MU-CACHE-4", "MU-MRTR-6")
def test_input_required_result_holds_requests_by_key_and_the_state() -> None:
    """An InputRequiredResult: resultType input_required, the requests by key, the state,
    and no caching hints."""
    out = input_required_result({"user_name": ELICIT, "client_roots": ROOTS}, "state-1")

    assert {
        "resultType": "input_required",
        "inputRequests": {
            "user_name": {"method": "elicitation/create", "params": dict(ELICIT.params or {})},
            "client_roots": {"method": "roots/list"},
        },
        "requestState": "state-1",
    } == out


@pytest.mark.spec("MU-MRTR-2")
@pytest.mark.parametrize(
    ("requests", "state", "keys"),
    [
        ({"k": ROOTS}, None, {"resultType", "inputRequests"}),
        ({}, "s", {"resultType", "requestState"}),
    ],
)
def test_input_required_result_leaves_out_what_it_lacks(
    requests: dict[str, InputRequest], state: str | None, keys: set[str]
) -> None:
    """inputRequests or requestState alone is a valid InputRequiredResult."""
    assert keys == set(input_required_result(requests, state))


# -- schema_problems ------------------------------------------------------------------------


OBJECT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}


@pytest.mark.spec("TM-MRTR-VALIDATE", "MJ-SCHEMA-2")
def test_valid_instance_has_no_problems() -> None:
    """An instance the schema accepts has no problems."""
    assert [] == schema_problems({"name": "A", "age": 3}, OBJECT)


@pytest.mark.spec("TM-MRTR-VALIDATE")
def test_invalid_instance_gets_messages_with_their_paths() -> None:
    """Each problem is worded with the path to it, at most `limit` of them."""
    problems = schema_problems({"age": -1}, OBJECT)

    assert ["'name' is a required property", "age: -1 is less than the minimum of 0"] == problems
    assert 1 == len(schema_problems({"age": -1}, OBJECT, limit=1))


@pytest.mark.spec("MJ-SCHEMA-2")
def test_schema_without_dialect_is_2020_12() -> None:
    """A schema with no $schema is read as JSON Schema 2020-12 (prefixItems applies)."""
    schema = {"type": "array", "prefixItems": [{"type": "integer"}]}

    assert 1 == len(schema_problems(["x"], schema))


@pytest.mark.spec("MJ-SCHEMA-2")
def test_schema_is_validated_by_its_declared_dialect() -> None:
    """A draft-07 schema is read as draft-07 (array-form items applies)."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "integer"}],
    }

    assert 1 == len(schema_problems(["x"], schema))


@pytest.mark.spec("MJ-SCHEMA-2")
def test_unsupported_dialect_is_a_problem() -> None:
    """A $schema naming a dialect the validator does not know is reported as unsupported,
    not silently read as 2020-12."""
    schema = {"$schema": "https://example.com/my-own-dialect", "type": "object"}

    problems = schema_problems({}, schema)

    assert 1 == len(problems)
    assert "dialect" in problems[0] or "$schema" in problems[0]


@pytest.mark.spec("MJ-SCHEMA-4")
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_every_documented_dialect_is_served_and_named_in_the_documentation(name: str) -> None:
    """Each dialect trio_mcp documents (DIALECTS) is named in Server.tool's documentation,
    and a schema naming it is validated by it, not refused as unknown: documentation and
    code say the same."""
    from trio_mcp import Server

    schema = {"$schema": DIALECTS[name], "type": "integer"}

    assert name in " ".join((Server.tool.__doc__ or "").split())
    assert [] == schema_problems(3, schema)
    assert 1 == len(schema_problems("x", schema))
    assert "2020-12" in DIALECTS


@pytest.mark.spec("TM-MRTR-VALIDATE")
def test_invalid_schema_is_a_problem_not_an_exception() -> None:
    """A schema that is not valid JSON Schema is reported, not raised."""
    assert ["the schema itself is invalid"] == [
        p.split(":")[0] for p in schema_problems({}, {"type": 12})
    ]


@pytest.mark.spec("MJ-SCHEMA-1")
def test_local_ref_is_resolved() -> None:
    """A $ref into the schema's own $defs is followed."""
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/count"}},
        "$defs": {"count": {"type": "integer"}},
    }

    assert ([], 1) == (schema_problems({"n": 1}, schema), len(schema_problems({"n": "x"}, schema)))


def _forbid_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make every way out to the network record the attempt and fail."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.mark.spec("MJ-SCHEMA-1", "TM-MRTR-VALIDATE")
@pytest.mark.parametrize(
    "ref", ["https://example.com/schemas/name.json", "http://127.0.0.1:9/schema.json"]
)
def test_network_ref_is_never_fetched_and_is_a_problem(
    ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A $ref to a network URI is not dereferenced (no connection is even attempted) and the
    schema is rejected rather than treated as permissive."""
    attempts = _forbid_network(monkeypatch)
    schema = {"type": "object", "properties": {"name": {"$ref": ref}}}

    problems = schema_problems({"name": "x"}, schema)

    assert [] == attempts
    assert [f"the schema refers to what it does not hold: Unresolvable: {ref}"] == problems


@pytest.mark.spec("MJ-SCHEMA-1")
def test_metaschema_ref_resolves_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A $ref to the 2020-12 metaschema resolves from the bundled copy, with no connection."""
    attempts = _forbid_network(monkeypatch)
    schema = {"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}

    assert ([], [], True) == (
        attempts,
        schema_problems({"s": {"type": "string"}}, schema),
        bool(schema_problems({"s": "not a schema"}, schema)),
    )


@pytest.mark.spec("MU-ELIC-1", "MU-SAMP-1")
def test_a_question_names_every_part_of_its_capability_it_uses() -> None:
    """A question needs its elicitation mode (form by default), and sampling with tools and
    with included context needs both sampling.tools and sampling.context."""
    message = {"messages": [], "maxTokens": 1}

    assert [("form",), ("url",), (), ("tools", "context"), ("context",), ()] == [
        InputRequest("elicitation/create", {"message": "m", "requestedSchema": {}}).features,
        InputRequest("elicitation/create", {"mode": "url", "url": "https://x"}).features,
        InputRequest("sampling/createMessage", message).features,
        InputRequest(
            "sampling/createMessage",
            {**message, "tools": [{"name": "t"}], "includeContext": "thisServer"},
        ).features,
        InputRequest(
            "sampling/createMessage", {**message, "includeContext": "allServers"}
        ).features,
        InputRequest("roots/list").features,
    ]
