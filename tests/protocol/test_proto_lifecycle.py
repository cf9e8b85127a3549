# Unit tests for trio_mcp.protocol._lifecycle: which client message is admitted in which
# session phase, checked against a table written here from the spec, independently of _TABLE.

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    ErrorCode,
    ErrorResponse,
    Message,
    Notification,
    Phase,
    RemoteProtocolError,
    Request,
    Response,
)
from trio_mcp.protocol._lifecycle import Admission, MessageClass, admit, classify, transitions

AWAIT, OPER, CLOSED = Phase.AWAITING_INITIALIZED, Phase.OPERATING, Phase.CLOSED
M = MessageClass
REJECT = "reject"

#: What the spec asks of each (phase, message class); REJECT means a 400 error naming the id.
EXPECTED: dict[tuple[Phase, MessageClass], Admission | str] = {
    (AWAIT, M.INITIALIZE): REJECT,
    (OPER, M.INITIALIZE): REJECT,
    (AWAIT, M.INITIALIZED): Admission.HANDLE_AND_OPERATE,
    (OPER, M.INITIALIZED): Admission.IGNORE,
    (AWAIT, M.PING): Admission.HANDLE,
    (OPER, M.PING): Admission.HANDLE,
    (AWAIT, M.REQUEST): Admission.HANDLE,
    (OPER, M.REQUEST): Admission.HANDLE,
    (AWAIT, M.NOTIFICATION): Admission.HANDLE,
    (OPER, M.NOTIFICATION): Admission.HANDLE,
    (AWAIT, M.RESPONSE): Admission.HANDLE,
    (OPER, M.RESPONSE): Admission.HANDLE,
}

_ids = st.one_of(st.integers(), st.text(max_size=10))
_params = st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
_other_methods = st.text(min_size=1, max_size=30).filter(
    lambda m: m not in ("initialize", "ping", "notifications/initialized")
)

MESSAGES: dict[MessageClass, st.SearchStrategy[Message]] = {
    M.INITIALIZE: st.builds(Request, id=_ids, method=st.just("initialize"), params=_params),
    M.INITIALIZED: st.builds(
        Notification, method=st.just("notifications/initialized"), params=_params
    ),
    M.PING: st.builds(Request, id=_ids, method=st.just("ping"), params=_params),
    M.REQUEST: st.builds(Request, id=_ids, method=_other_methods, params=_params),
    M.NOTIFICATION: st.builds(
        Notification,
        method=_other_methods | st.sampled_from(["initialize", "ping"]),
        params=_params,
    ),
    M.RESPONSE: st.one_of(
        st.builds(Response, id=_ids, result=st.just({})),
        st.builds(
            ErrorResponse, id=st.none() | _ids, code=st.integers(), message=st.text(max_size=5)
        ),
    ),
}


@st.composite
def _class_and_message(draw: st.DrawFn) -> tuple[MessageClass, Message]:
    cls = draw(st.sampled_from(list(MessageClass)))
    return cls, draw(MESSAGES[cls])


def test_table_covers_every_live_phase_and_class() -> None:
    """The table has one answer for every (live phase, message class) pair."""
    assert {(p, m) for p in (AWAIT, OPER) for m in MessageClass} == set(transitions())


@pytest.mark.spec("L-INIT-1", "L-INIT-4", "L-PING-1", "TM-LIFE-EARLY")
def test_table_matches_the_spec() -> None:
    """The code's table says what the spec says, entry by entry."""
    expected = {k: Admission.REJECT_REINITIALIZE if v == REJECT else v for k, v in EXPECTED.items()}

    assert expected == transitions()


@given(cm=_class_and_message())
def test_classify_puts_each_message_in_its_class(cm: tuple[MessageClass, Message]) -> None:
    """initialize/ping requests, the initialized notification and responses are told apart
    by kind and method; a notification named "initialize" or "ping" is just a notification."""
    cls, message = cm

    assert cls == classify(message)


@pytest.mark.spec("L-INIT-1", "L-INIT-4", "L-PING-1", "TM-LIFE-EARLY", "TM-LIFE-REINIT")
@given(phase=st.sampled_from([AWAIT, OPER]), cm=_class_and_message())
def test_admit_follows_the_table(phase: Phase, cm: tuple[MessageClass, Message]) -> None:
    """For every live phase and every message, admit() gives the table's answer, and a
    second initialize is refused with 400 / -32600 naming the request's id."""
    cls, message = cm
    expected = EXPECTED[(phase, cls)]

    if expected == REJECT:
        assert isinstance(message, Request)
        with pytest.raises(RemoteProtocolError) as info:
            admit(phase, message)
        assert (400, ErrorCode.INVALID_REQUEST, message.id) == (
            info.value.http_status,
            info.value.code,
            info.value.request_id,
        )
    else:
        assert expected == admit(phase, message)


@pytest.mark.spec("T-SESS-7")
@given(cm=_class_and_message())
def test_closed_session_refuses_everything_with_404(cm: tuple[MessageClass, Message]) -> None:
    """Once a session has ended, every message sent to it gets 404 Not Found."""
    with pytest.raises(RemoteProtocolError) as info:
        admit(CLOSED, cm[1])

    assert 404 == info.value.http_status


@pytest.mark.spec("L-INIT-1", "TM-LIFE-REINIT")
def test_second_initialize_error_carries_request_id() -> None:
    """The refusal of a second initialize answers that initialize's id."""
    with pytest.raises(RemoteProtocolError) as info:
        admit(OPER, Request(id="init-2", method="initialize", params={}))

    assert "init-2" == info.value.request_id
    assert 400 == info.value.http_status


@pytest.mark.spec("TM-LIFE-EARLY")
def test_request_before_initialized_notification_is_served() -> None:
    """A request that overtakes the initialized notification is handled, not refused."""
    assert Admission.HANDLE == admit(AWAIT, Request(id=1, method="tools/list"))


@pytest.mark.spec("L-INIT-4")
def test_initialized_notification_starts_operation_once() -> None:
    """The first initialized notification moves to OPERATING; a repeat is ignored."""
    note = Notification(method="notifications/initialized")

    assert [Admission.HANDLE_AND_OPERATE, Admission.IGNORE] == [
        admit(AWAIT, note),
        admit(OPER, note),
    ]


@pytest.mark.spec("L-PING-1")
@pytest.mark.parametrize("phase", [AWAIT, OPER])
def test_ping_is_answered_in_every_live_phase(phase: Phase) -> None:
    """ping is handled before and after the initialized notification."""
    assert Admission.HANDLE == admit(phase, Request(id=0, method="ping"))
