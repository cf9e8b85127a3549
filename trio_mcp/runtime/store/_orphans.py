# A request stream whose worker is gone, resumed from its copy in the shared store
# (TM-STORE-STREAMS): read strictly after the cursor, and ended. The store's claim gives the
# copied messages, and for each request without a response an ``unanswered`` event; the error
# that answers such a request, and the signal of a gap, are protocol's (protocol._resume).
from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ...protocol import Cursor, dumps, encode_comment, encode_event
from ...protocol._resume import (
    HOLDER_GONE,
    holder_gone_error,
    resumption_failed_event,
    stream_lost_error,
)
from ...protocol._transport import SSE_HEADERS, Reply
from ._store import Claim, ClaimKind

if TYPE_CHECKING:
    from ..backpressure._responder import Responder
    from ..legacy._session import Session

__all__ = ["resume_from_copy"]


async def resume_from_copy(
    session: Session, cursor: Cursor, last_event_id: str, claim: Claim, responder: Responder
) -> bool:
    """Answer a resume of ``session``'s request stream from ``claim`` (the store's claim of
    its copy); False, having sent nothing, when the store has nothing of it."""
    if claim.kind is ClaimKind.UNKNOWN:
        return False
    details = {"stream": cursor.stream, "lastEventId": last_event_id[:200], "reason": HOLDER_GONE}
    if claim.kind is ClaimKind.GAP:
        # TM-RES-STALE, as for a stream held here: said, and each request not answered at or
        # before the cursor fails.
        body = resumption_failed_event(
            {**details, "reason": "events after this cursor have left the server's replay window"}
        )
        for rid in claim.requests:
            at = claim.answered.get(rid)
            if at is None or at > cursor.seq:
                body += encode_event(data=dumps(stream_lost_error(rid, details)).decode())
    else:
        body = encode_comment(f"attached stream={cursor.stream} after={cursor.seq}")
        body += b"".join(
            session.out.encode(
                cursor.stream, e.seq,
                e.data if e.unanswered is None else dumps(holder_gone_error(e.unanswered)),
                origin=cursor.origin,
            )
            for e in claim.events
        )
    session.heard()
    # Within the stall budget, as any stream's writes are; the copy stays to resume.
    with trio.move_on_after(session.config.stall_budget):
        await responder.reply(Reply(status=200, headers=SSE_HEADERS, body=body))
    return True
