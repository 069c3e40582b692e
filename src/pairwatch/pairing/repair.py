"""Repair mode: hand a position-pairing client its batch reply in request order.

Why it exists: many clients pair the i-th response with the i-th request (web3.py after its
sort by id, python-bitcoinrpc's ``batch_``, any ``zip(requests, replies)``).  JSON-RPC 2.0
lets a server reorder a batch reply, and real servers and proxies also drop, duplicate or
mis-echo responses; each of those silently hands one caller a neighbour's value.  Repair
rebuilds the array the client expected: one slot per request, in the order sent, each slot
holding the response whose id is that request's id, or an explicit JSON-RPC error when there
is none.  It never invents a result.

Pure on purpose (decoded JSON and the request ids in, a new array and a tally of what changed
out; no I/O, no OpenTelemetry), so every integration can use it and it is tested by itself.

The rules, applied to a reply to a batch whose requests carried ``ids`` (in order):

* A response pairs with the first still-empty slot whose request id is the same JSON id
  (``1`` and ``1.0`` alike, ``"1"`` not ``1``; :func:`pairwatch.pairing.wire.id_key`).
* Kept responses are placed in request order (``reordered`` once per reply when that moved
  anything).  The kept objects are the client's own objects, not copies.
* A second response for an id whose slot is taken is removed (``removed_duplicate``): the
  first arrival wins.
* A response whose id matches no request, or an element that is not a response object, is
  removed (``removed_unknown``).
* A response with a ``null`` or absent id is removed (``removed_null``), except in the two
  cases where its slot can be determined, where a copy carrying the slot's id is placed:
  a single null-id *error object* sent instead of the whole array (the server rejected the
  batch: every empty slot gets that error, ``filled_batch_error``), and exactly one null-id
  *error* in the array with exactly one empty slot (``placed_null``).  A null-id *result* is
  never placed: placing a value by elimination could hand out a wrong value.
* Every slot still empty gets ``{"jsonrpc": "2.0", "id": <request id>, "error": {"code":
  -32099, "message": "pairwatch: no response for this request"}}`` (``filled_missing``).
  -32099 lies in the range JSON-RPC 2.0 reserves for implementation-defined server errors
  (-32000 to -32099), at the end servers rarely use.
* A single object sent where an array was due becomes an array (``wrapped_single``).

A reply that needs none of this is returned as the same object, untouched.  A reply that is
neither an array nor an object (an unparseable body) is returned as it is: there is nothing
to pair, and so is any reply to a batch without requests (``[]`` or notifications only): the
client expected no array, and the server's error is its to read.  Requests without a usable
id get a slot too (a ``null`` id request is answered with ``id: null``), but can only be
filled by the null-id rules above.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from pairwatch.pairing.wire import RESPONSE_KINDS, IdState, classify_element, id_key

__all__ = [
    "ACTIONS",
    "MISSING_CODE",
    "MISSING_MESSAGE",
    "Repair",
    "missing_error",
    "repair",
    "request_ids",
]

MISSING_CODE: Final = -32099
MISSING_MESSAGE: Final = "pairwatch: no response for this request"

ACTIONS: Final = (
    "reordered",
    "filled_missing",
    "filled_batch_error",
    "placed_null",
    "removed_unknown",
    "removed_duplicate",
    "removed_null",
    "wrapped_single",
)
"""Every value of the ``pairwatch.repair_action`` attribute of ``batch.repaired``."""


class Repair(NamedTuple):
    """The reply to hand the client, and how many of each change it took (empty: none)."""

    value: Any
    actions: dict[str, int]

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def missing_error(request_id: object) -> dict[str, Any]:
    """The error object placed in the slot of a request the server did not answer."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": MISSING_CODE, "message": MISSING_MESSAGE},
    }


def request_ids(sent: object) -> list[object] | None:
    """The ids of the requests of a decoded batch, in order; None when it is not a batch.

    Notifications (no ``id`` member) get no slot: a server never answers them.
    """
    if not isinstance(sent, list):
        return None
    return [e["id"] for e in sent if isinstance(e, dict) and "method" in e and "id" in e]


def _with_id(response: dict[str, Any], request_id: object) -> dict[str, Any]:
    copy = dict(response)
    copy["id"] = request_id
    return copy


def _is_error(element: object) -> bool:
    return isinstance(element, dict) and "error" in element and "result" not in element


def repair(reply: object, ids: Sequence[object]) -> Repair:
    """Align ``reply`` (decoded JSON) to the requests whose ids are ``ids``, in order."""
    if isinstance(reply, list):
        elements: list[Any] = reply
        single = False
    elif isinstance(reply, dict):
        elements = [reply]
        single = True
    else:
        return Repair(reply, {})
    if not ids:
        return Repair(reply, {})  # nothing was due: a reply here is the server's to explain
    keys = [id_key(i)[1] if id_key(i)[0] is IdState.VALID else None for i in ids]
    free: dict[object, list[int]] = {}
    for slot, key in enumerate(keys):
        if key is not None:
            free.setdefault(key, []).append(slot)
    filled: list[Any] = [None] * len(keys)
    taken = [False] * len(keys)
    actions: dict[str, int] = {}

    def count(action: str, n: int = 1) -> None:
        if n:
            actions[action] = actions.get(action, 0) + n

    nulls: list[Any] = []
    order: list[int] = []  # slots in arrival order, to detect reordering
    for element in elements:
        msg = classify_element(element)
        if msg.kind not in RESPONSE_KINDS:
            count("removed_unknown")
            continue
        if msg.id_state is IdState.NULL or msg.id_state is IdState.ABSENT:
            nulls.append(element)
            continue
        slots = free.get(msg.key) if msg.key is not None else None
        if slots:
            slot = slots.pop(0)
            filled[slot], taken[slot] = element, True
            order.append(slot)
        elif msg.key is not None and msg.key in free:
            count("removed_duplicate")
        else:
            count("removed_unknown")
    empty = [s for s in range(len(keys)) if not taken[s]]
    if single and nulls and _is_error(nulls[0]) and empty:
        for s in empty:  # the server rejected the whole batch: that is every slot's answer
            filled[s], taken[s] = _with_id(nulls[0], ids[s]), True
        count("filled_batch_error", len(empty))
        nulls, empty = [], []
    elif len(nulls) == 1 and len(empty) == 1 and _is_error(nulls[0]):
        filled[empty[0]], taken[empty[0]] = _with_id(nulls[0], ids[empty[0]]), True
        count("placed_null")
        nulls, empty = [], []
    count("removed_null", len(nulls))
    for s in empty:
        filled[s] = missing_error(ids[s])
    count("filled_missing", len(empty))
    if order != sorted(order):
        count("reordered")
    if single:
        count("wrapped_single")
    if not actions:
        return Repair(reply, {})
    return Repair(filled, actions)
