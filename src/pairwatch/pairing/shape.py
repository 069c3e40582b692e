"""Is a reply the shape its request allows?  Array for array, object for object, nothing
for notifications, and for ``[]`` the one null-id error the spec requires.

Kept apart from the pairing loop because these rules judge the payload as a whole, once per
reply, against the batch it answers, and name each breach as a protocol violation.
"""

from __future__ import annotations

from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.wire import Payload

__all__ = ["judge"]


def judge(payload: Payload, target: Batch | None, spec_reply: bool) -> Tally | None:
    """A tally holding the reply's whole-payload breaches; None when it has none (nearly
    every reply) or there is nothing to count at all (an empty body where no reply was due).

    ``spec_reply``: the payload is the spec's answer to the ``[]`` that ``target`` is.
    """
    tally: Tally | None = None
    if payload.unparseable is not None:
        if payload.unparseable != "empty":
            tally = Tally()
            tally.add_invalid("unparseable")
        elif target is None or not target.expected_nothing:
            return None
    elif (
        not payload.size and payload.empty_batch and (target is None or not target.expected_nothing)
    ):
        tally = Tally()
        tally.add_violation("empty_array_reply")
    if target is None:
        return tally
    breach = None
    if payload.unparseable is None:
        if target.is_batch and not payload.is_batch and not target.expected_nothing:
            breach = "single_reply_to_batch"
        elif payload.is_batch and not target.is_batch:
            breach = "batch_reply_to_single"
    if breach is not None:
        tally = tally or Tally()
        tally.add_violation(breach)
    if target.expected_nothing and (payload.size or payload.empty_batch) and not spec_reply:
        tally = tally or Tally()
        tally.add_violation(
            "reply_to_empty_batch" if target.size == 0 else "reply_to_notifications"
        )
    return tally
