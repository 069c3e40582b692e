"""Name what a closed batch's counters point to.

The rules follow the design notes' "reading the counters together": the combination of
counters, not any single one, tells which side is at fault.  Kept apart from the ledger so
that dashboards, alert annotations, the audit report and the demo all quote the same words.
"""

from __future__ import annotations

from typing import Final

OK: Final = "ok"
DUPLICATE_IDS: Final = "duplicate_ids_suspected"
ID_TYPE_MISMATCH: Final = "id_type_mismatch"
MALFORMED_REQUEST: Final = "malformed_request_element"
RESPONSES_MISSING: Final = "responses_missing"
ID_ECHO_FAULT: Final = "server_id_echo_fault"

ALL: Final = (
    OK,
    DUPLICATE_IDS,
    ID_TYPE_MISMATCH,
    MALFORMED_REQUEST,
    RESPONSES_MISSING,
    ID_ECHO_FAULT,
)

EXPLANATION: Final[dict[str, str]] = {
    OK: "every request was answered exactly once",
    DUPLICATE_IDS: (
        "unknown-id and missing together: the client reuses ids (a shared counter without a "
        "lock, an id reused on retry), so one response is consumed twice and a caller starves"
    ),
    ID_TYPE_MISMATCH: (
        'the server echoed an id with another JSON type ("0" for 0): the lookup misses and '
        "the caller waits until its timeout"
    ),
    MALFORMED_REQUEST: (
        "null-id responses: an element of the request body is not a valid request object"
    ),
    RESPONSES_MISSING: (
        "missing alone: the server dropped requests, took them for notifications, or the "
        "connection broke; the client must time out rather than wait"
    ),
    ID_ECHO_FAULT: "unknown-id alone: the server echoes ids wrongly",
}


def diagnose(*, unknown: int, missing: int, null: int, duplicates: int, type_mismatch: bool) -> str:
    """Return the diagnosis of one batch; the order of the rules is the order of blame."""
    if type_mismatch:
        return ID_TYPE_MISMATCH
    if duplicates or (unknown and missing):
        return DUPLICATE_IDS
    if null:
        return MALFORMED_REQUEST
    if missing:
        return RESPONSES_MISSING
    if unknown:
        return ID_ECHO_FAULT
    return OK
