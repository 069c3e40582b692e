"""Name what a closed batch's evidence shows, and say it in words with numbers.

pairwatch saw every id the client sent, so a diagnosis is not read from counters that happen
to rise together (the old "unknown-id and missing together: the client reuses ids" rule blamed
the client for a server that re-addressed one reply).  Each rule below needs its own evidence,
and the first rule whose evidence is present wins; the order is the order of blame in the
design notes.  Kept apart from the ledger so that the channel's log line, spans, the live view,
the audit report and the runbook all quote the same names and words.

:func:`evidence` states what was seen (counts, ids, seconds) and never a cause pairwatch did
not see: "1 reply came back with id null although all 3 request elements were valid", not
"the server is broken".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pairwatch.pairing.intake import retyped
from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.wire import IdKey

OK: Final = "ok"
CLIENT_DUPLICATE_IDS: Final = "client_duplicate_ids"
MALFORMED_REQUEST: Final = "malformed_request_element"
ID_TYPE_MISMATCH: Final = "id_type_mismatch"
SERVER_NULL_ID: Final = "server_null_id"
LATE_RESPONSE: Final = "late_response"
ID_ECHO_FAULT: Final = "server_id_echo_fault"
RESPONSES_MISSING: Final = "responses_missing"

ALL: Final = (
    OK,
    CLIENT_DUPLICATE_IDS,
    MALFORMED_REQUEST,
    ID_TYPE_MISMATCH,
    SERVER_NULL_ID,
    LATE_RESPONSE,
    ID_ECHO_FAULT,
    RESPONSES_MISSING,
)
"""Every diagnosis, ``ok`` first, then in the order of blame (first match wins)."""

EXPLANATION: Final[dict[str, str]] = {
    OK: "every request was answered exactly once",
    CLIENT_DUPLICATE_IDS: (
        "the client sent an id that was still pending (in the same batch or another open "
        "batch of the channel), or reused the id of a request that had just closed as missing "
        "by timeout; one reply can only answer one of them"
    ),
    MALFORMED_REQUEST: (
        "null-id replies to a request body in which pairwatch saw an invalid element "
        "(or an id null): the server answered what it could not read"
    ),
    ID_TYPE_MISMATCH: (
        'a reply carried a pending id written as another JSON type ("0" for 0); '
        "the lookup by id misses it and that request closes as missing"
    ),
    SERVER_NULL_ID: (
        "null-id replies although every request element was valid: the server did not "
        "echo the id it was sent"
    ),
    LATE_RESPONSE: (
        "replies for ids whose requests had already closed as missing by timeout: the server "
        "answered after the client's timeout, not wrongly"
    ),
    ID_ECHO_FAULT: (
        "replies carried ids that were never sent or already answered, and no request "
        "explains them: the server rewrote, invented or repeated ids"
    ),
    RESPONSES_MISSING: (
        "requests closed without a reply, and nothing else was wrong: dropped by the server, "
        "taken for notifications, or the connection ended"
    ),
}

_NOT_EXPLAINING_NULL: Final = frozenset({"fractional_id"})
"""Request problems that are legal and echo fine, so they explain no null-id reply."""


def diagnose(
    *,
    duplicates: int,
    invalid_elements: int,
    null: int,
    type_mismatch: int,
    late: int,
    unknown: int,
    missing: int,
) -> str:
    """Return one batch's diagnosis; the order of the rules is the order of blame."""
    if duplicates:
        return CLIENT_DUPLICATE_IDS
    if null and invalid_elements:
        return MALFORMED_REQUEST
    if type_mismatch:
        return ID_TYPE_MISMATCH
    if null:
        return SERVER_NULL_ID
    if late:
        return LATE_RESPONSE
    if unknown:
        return ID_ECHO_FAULT
    if missing:
        return RESPONSES_MISSING
    return OK


def invalid_elements(batch: Batch) -> int:
    """Request elements that could draw a null-id reply: invalid ones, and ids sent as null."""
    found = batch.invalid_requests
    if not found:
        return 0
    return sum(n for reason, n in found.items() if reason not in _NOT_EXPLAINING_NULL)


def diagnose_batch(batch: Batch) -> str:
    """:func:`diagnose` on a closed batch's own fields."""
    if batch.rare is None:  # every field below still reads as its default (zero)
        return OK
    return diagnose(
        duplicates=batch.duplicates_in + batch.duplicates_cross + batch.reused_timed_out,
        invalid_elements=invalid_elements(batch),
        null=batch.null,
        type_mismatch=batch.type_mismatch,
        late=batch.late,
        unknown=batch.unknown,
        missing=batch.missing,
    )


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _ids(keys: Sequence[IdKey | None], limit: int = 3) -> str:
    shown = ", ".join(_id_text(k) for k in keys[:limit])
    return shown + (", ..." if len(keys) > limit else "")


def _id_text(key: IdKey | None) -> str:
    if key is None:
        return "null"
    if isinstance(key, str):
        return '"' + (key if len(key) <= 40 else key[:37] + "...") + '"'
    return str(key)


def _late_words(late: int, keys: Sequence[IdKey], lateness: Sequence[float]) -> str:
    if late == 1 and keys and lateness:
        return (
            f"1 reply for id {_id_text(keys[0])} came {lateness[0]:.1f} s after it closed "
            "as missing by timeout"
        )
    worst = f" (up to {max(lateness):.1f} s)" if lateness else ""
    replies = _n(late, "reply", "replies")
    return f"{replies} came after their requests closed as missing by timeout{worst}"


def evidence(batch: Batch) -> str:
    """What one closed batch shows, in words with numbers; only what pairwatch saw.

    Every non-zero piece of evidence is stated (not only the one that named the diagnosis),
    so a reader sees, for instance, both the duplicate ids and the missing reply they caused.
    """
    parts: list[str] = []
    if batch.duplicates_in:
        parts.append(f"{_n(batch.duplicates_in, 'id was', 'ids were')} sent twice in this batch")
    if batch.duplicates_cross:
        parts.append(
            f"{_n(batch.duplicates_cross, 'id was', 'ids were')} sent while still pending in "
            "another open batch"
        )
    if batch.reused_timed_out:
        parts.append(
            f"{_n(batch.reused_timed_out, 'id was', 'ids were')} reused from requests that had "
            "closed as missing by timeout"
        )
    if batch.null:
        bad = invalid_elements(batch)
        replies = _n(batch.null, "reply", "replies")
        if batch.size == 0 and batch.is_batch:
            parts.append(f"{replies} with id null answered an empty batch []")
        elif bad:
            elements = _n(bad, "request element was", "request elements were")
            parts.append(f"{replies} came back with id null; {elements} invalid or had id null")
        else:
            n = batch.size
            valid = "the request element was" if n == 1 else f"all {n} request elements were"
            parts.append(f"{replies} came back with id null although {valid} valid")
    retyped_keys: list[IdKey] = []
    if batch.type_mismatch:
        missing = set(missing_keys(batch))
        retyped_keys = [k for k in batch.unknown_keys if any(alt in missing for alt in retyped(k))]
        parts.append(
            f"{_n(batch.type_mismatch, 'reply', 'replies')} carried a pending id as another JSON "
            f"type ({_ids(retyped_keys)})"
        )
    if batch.late:
        parts.append(_late_words(batch.late, batch.late_keys, batch.lateness))
    other_unknown = batch.unknown - batch.late - batch.type_mismatch
    if other_unknown > 0:
        keys = [k for k in batch.unknown_keys if k not in batch.late_keys and k not in retyped_keys]
        shown = f" ({_ids(keys)})" if keys else ""
        parts.append(
            f"{_n(other_unknown, 'reply', 'replies')} carried an id that matched no pending "
            f"request{shown}"
        )
    if batch.missing:
        parts.append(
            f"{_n(batch.missing, 'request', 'requests')} of {batch.requests} closed without a "
            f"reply ({batch.close_reason})"
        )
    if not parts:
        return f"all {_n(batch.requests, 'request')} answered exactly once"
    return "; ".join(parts)


def tally_evidence(tally: Tally) -> str:
    """What replies that no open batch could absorb show (a late reply on a stream)."""
    parts: list[str] = []
    if tally.late:
        parts.append(_late_words(tally.late, tally.late_keys, tally.lateness))
    other = tally.unknown - tally.late
    if other > 0:
        parts.append(
            f"{_n(other, 'reply', 'replies')} carried an id that matched no pending request"
        )
    if tally.null:
        parts.append(f"{_n(tally.null, 'reply', 'replies')} came back with id null")
    return "; ".join(parts)


# ---------------------------------------------------------------- both sides of one batch
LOST_IN_TRANSIT: Final = "lost_in_transit"
"""Requests the client closed as missing although the server's own books show it answered
them: the reply left the server and never reached the client (a network fault, a proxy, a
dropped stream).  Not in :data:`ALL`: no single side's books can show it."""

CROSS_SIDE: Final = (LOST_IN_TRANSIT,)
"""Diagnoses that need the client's and the server's books of the same batch."""

CROSS_EXPLANATION: Final[dict[str, str]] = {
    LOST_IN_TRANSIT: (
        "requests closed without a reply at the client although the server's books show it "
        "answered them: the reply was lost between the two (network, proxy or a dropped "
        "stream), not by the server"
    ),
}


def answered_keys(batch: Batch) -> set[IdKey]:
    """The ids a batch paired: on the server side, the requests the application answered."""
    return {
        k
        for k, at in zip(batch.keys, batch.received, strict=True)
        if at is not None and k is not None
    }


def missing_keys(batch: Batch) -> list[IdKey]:
    """The ids a batch closed without a reply and not withdrawn or unchecked, in send order."""
    return [
        k
        for i, (k, at) in enumerate(zip(batch.keys, batch.received, strict=True))
        if at is None and k is not None and batch.excused_for(i) is None
    ]


def across_sides(client: Batch, server: Batch | None) -> str:
    """One batch's diagnosis from both ends' books (the client's, and the server's of the
    same request body, or ``None`` when the server kept none).

    Missing at the client but answered at the server is ``lost_in_transit``; missing on
    both stays the client's own diagnosis (``responses_missing``: the server did not answer).
    Any other evidence the client saw keeps its place in the order of blame: a duplicate id
    or a rewritten id explains a missing reply before transit does.
    """
    own = client.diagnosis or diagnose_batch(client)
    if server is None or own not in (OK, RESPONSES_MISSING):
        return own
    answered = answered_keys(server)
    if any(k in answered for k in missing_keys(client)):
        return LOST_IN_TRANSIT
    return own


def transit_evidence(client: Batch, server: Batch) -> str:
    """What the two books of one batch show together, in words with numbers."""
    missing = missing_keys(client)
    answered = answered_keys(server)
    lost = [k for k in missing if k in answered]
    unanswered = [k for k in missing if k not in answered]
    parts: list[str] = []
    if lost:
        parts.append(
            f"{_n(len(lost), 'request')} of {client.requests} closed without a reply at the "
            f"client ({client.close_reason}) although the server answered "
            f"{'it' if len(lost) == 1 else 'them'} ({_ids(lost)})"
        )
    if unanswered:
        parts.append(
            f"{_n(len(unanswered), 'request')} went unanswered on both sides ({_ids(unanswered)})"
        )
    return "; ".join(parts) if parts else evidence(client)
