"""Applying faults: the correct reply in, the faulty reply and a record out.

One small function per fault kind, each returning what it touched (or None
when the fault does not apply to this reply, e.g. reordering a single
element), so the record never claims a fault the client could not see.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .faults import Element, Fault, Injected, Outgoing, Reply

WRONG_ID_OFFSET = 1_000_000_007
_NUMERIC = re.compile(r"-?[0-9]+")
_BYTE_LEVEL = ("unparseable", "cut", "delay")

Note = tuple[tuple[Any, ...], str] | None
Apply = Callable[[Outgoing, Fault, random.Random], Note]


def apply_faults(
    reply: Reply, faults: Sequence[Fault], rng: random.Random, exchange: int = 0
) -> tuple[Outgoing, list[Injected]]:
    """Turn the correct reply into the faulty one; report only what took effect."""
    out = Outgoing(
        elements=[Element(copy.deepcopy(r)) for r in reply.responses],
        as_array=reply.batch and bool(reply.responses),
        expected_silence=not reply.responses and reply.raw is None,
        raw=reply.raw,
    )
    done: list[Injected] = []
    for fault in faults:
        if out.raw is not None and fault.kind not in _BYTE_LEVEL:
            continue  # bytes that are not JSON have no elements to edit
        note = _APPLY[fault.kind](out, fault, rng)
        if note is not None:
            ids, detail = note
            done.append(Injected(exchange, fault.kind, ids, detail))
    return out, done


def _ids(elements: Sequence[Element], picks: Iterable[int]) -> tuple[Any, ...]:
    return tuple(
        e.value.get("id") if isinstance(e.value, dict) else None
        for e in (elements[i] for i in picks)
    )


def _dicts(out: Outgoing) -> list[int]:
    return [i for i, e in enumerate(out.elements) if isinstance(e.value, dict)]


def _targets(fault: Fault, eligible: list[int], n: int, rng: random.Random) -> list[int]:
    """Positions to hit: explicit indices, else a fraction or a count, seeded."""
    if fault.indices is not None:
        wanted = {i % n for i in fault.indices if -n <= i < n} if n else set()
        return sorted(wanted.intersection(eligible))
    if fault.fraction is not None:
        k = max(1, round(fault.fraction * len(eligible))) if fault.fraction > 0 else 0
    else:
        k = fault.count
    return sorted(rng.sample(eligible, min(k, len(eligible))))


def _error_object(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


def _drop(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    els = out.elements
    picks = _targets(f, list(range(len(els))), len(els), rng)
    if not picks:
        return None
    ids = _ids(els, picks)
    out.elements = [e for i, e in enumerate(els) if i not in picks]
    return ids, f"dropped positions {picks}"


def _duplicate(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    els = out.elements
    picks = _targets(f, list(range(len(els))), len(els), rng)
    if not picks:
        return None
    new: list[Element] = []
    for i, e in enumerate(els):
        new.append(e)
        if i in picks:  # the copy follows its original, as a double write would
            new.append(Element(copy.deepcopy(e.value), e.delay))
    out.elements = new
    return _ids(els, picks), f"duplicated positions {picks}"


def _id_type_swap(value: Any) -> tuple[bool, Any]:
    """The same id in another JSON type: 0 -> "0", "7" -> 7; others have none."""
    if isinstance(value, bool):
        return False, value
    if isinstance(value, (int, float)):
        return True, str(value)
    if isinstance(value, str) and _NUMERIC.fullmatch(value):
        return True, int(value)
    return False, value


def _wrong(value: Any) -> Any:
    """An id of the same type that the client did not send."""
    if isinstance(value, str):
        return value + "-wrong"
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, int) and not isinstance(value, bool):
        return value + WRONG_ID_OFFSET
    return WRONG_ID_OFFSET


def _edit_ids(kind: str) -> Apply:
    def edit(out: Outgoing, f: Fault, rng: random.Random) -> Note:
        els = out.elements
        if kind == "null_id":
            eligible = [i for i in _dicts(out) if els[i].value.get("id") is not None]
        elif kind == "id_type":
            eligible = [i for i in _dicts(out) if _id_type_swap(els[i].value.get("id"))[0]]
        else:
            eligible = _dicts(out)
        picks = _targets(f, eligible, len(els), rng)
        if not picks:
            return None
        ids = _ids(els, picks)
        for i in picks:
            old = els[i].value.get("id")
            if kind == "null_id":
                els[i].value["id"] = None
            elif kind == "wrong_id":
                els[i].value["id"] = _wrong(old)
            else:
                els[i].value["id"] = _id_type_swap(old)[1]
        return ids, f"{kind} at positions {picks}"

    return edit


def _both_result_error(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    picks = _targets(f, _dicts(out), len(out.elements), rng)
    for i in picks:
        v = out.elements[i].value
        if "result" in v:
            v["error"] = {"code": -32603, "message": "chaos: result and error"}
        else:
            v["result"] = None
    return (_ids(out.elements, picks), f"positions {picks}") if picks else None


def _bad_version(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    picks = _targets(f, _dicts(out), len(out.elements), rng)
    for i in picks:
        if f.version is None:
            out.elements[i].value.pop("jsonrpc", None)
        else:
            out.elements[i].value["jsonrpc"] = f.version
    return (_ids(out.elements, picks), f"jsonrpc={f.version!r} at {picks}") if picks else None


def _reorder(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    els = out.elements
    if len(els) < 2:
        return None
    mode = f.mode or "reverse"
    before = list(els)
    if mode == "reverse":
        els.reverse()
    elif mode == "rotate":
        els.append(els.pop(0))
    else:
        rng.shuffle(els)
        if all(a is b for a, b in zip(before, els, strict=True)):
            els.append(els.pop(0))  # a shuffle that changes nothing is not a fault
    where = {id(e): i for i, e in enumerate(before)}
    order = [where[id(e)] for e in els]
    return _ids(before, range(len(before))), f"{mode} -> positions {order}"


def _single_for_batch(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    if not out.as_array:
        return None
    ids = _ids(out.elements, range(len(out.elements)))
    if (f.mode or "error") == "first" and out.elements:
        out.elements = [out.elements[0]]
    else:
        out.elements = [Element(_error_object("chaos: single object for a batch"))]
    out.as_array = False
    return ids, f"mode={f.mode or 'error'}"


def _reply_to_notifications(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    if not out.expected_silence or out.elements or out.as_array:
        return None
    if (f.mode or "empty") == "empty":
        out.as_array = True
    else:
        out.elements = [Element(_error_object("chaos: reply to notifications"))]
    return (), f"mode={f.mode or 'empty'}"


def _delay(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    els = out.elements
    for i, e in enumerate(els):
        if f.delays is not None:
            e.delay = f.delays[i] if i < len(f.delays) else 0.0
        else:
            e.delay = f.seconds * (i + 1)
    return _ids(els, range(len(els))), "delays " + ",".join(f"{e.delay:g}" for e in els)


def _cut(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    if out.silent:
        out.cut_fraction, out.cut_events = 0.0, 0
        return (), "closed without reply"
    out.cut_fraction = 0.5 if f.fraction is None else f.fraction
    out.cut_events = f.count
    return (), f"fraction={out.cut_fraction:g} events={f.count}"


def _unparseable(out: Outgoing, f: Fault, rng: random.Random) -> Note:
    out.raw = f.data
    return _ids(out.elements, range(len(out.elements))), f"{len(f.data)} garbage bytes"


_APPLY: dict[str, Apply] = {
    "drop": _drop,
    "duplicate": _duplicate,
    "null_id": _edit_ids("null_id"),
    "wrong_id": _edit_ids("wrong_id"),
    "id_type": _edit_ids("id_type"),
    "both_result_error": _both_result_error,
    "bad_version": _bad_version,
    "reorder": _reorder,
    "single_for_batch": _single_for_batch,
    "reply_to_notifications": _reply_to_notifications,
    "delay": _delay,
    "cut": _cut,
    "unparseable": _unparseable,
}
