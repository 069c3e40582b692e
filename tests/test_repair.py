"""repair.py on its own: exact rules, and a property test over random server misbehaviour."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pairwatch.pairing.repair import (
    MISSING_CODE,
    MISSING_MESSAGE,
    missing_error,
    repair,
    request_ids,
)


def res(i, value=None):
    return {"jsonrpc": "2.0", "id": i, "result": f"r{i}" if value is None else value}


def err(i, code=-32600):
    return {"jsonrpc": "2.0", "id": i, "error": {"code": code, "message": "Invalid request"}}


def test_in_order_reply_is_the_same_object():
    reply = [res(0), res(1)]
    out = repair(reply, [0, 1])
    assert out.value is reply
    assert not out.changed


def test_reorder_keeps_the_clients_objects():
    a, b, c = res(0), res(1), res(2)
    out = repair([c, a, b], [0, 1, 2])
    assert out.value == [a, b, c]
    assert all(x is y for x, y in zip(out.value, [a, b, c], strict=True))
    assert out.actions == {"reordered": 1}


def test_drop_fills_an_explicit_error_in_its_slot():
    out = repair([res(1), res(2)], [0, 1, 2])
    assert out.value == [missing_error(0), res(1), res(2)]
    assert out.value[0]["error"] == {"code": MISSING_CODE, "message": MISSING_MESSAGE}
    assert out.actions == {"filled_missing": 1}


def test_duplicate_and_unknown_are_removed():
    out = repair([res(0), res(0, "again"), res(-1), 7, res(1)], [0, 1])
    assert out.value == [res(0), res(1)]
    assert out.actions == {"removed_duplicate": 1, "removed_unknown": 2}


def test_ids_compare_by_json_identity():
    out = repair([res(1.0), res("0")], [0, 1])
    assert out.value == [missing_error(0), res(1.0)]
    assert out.actions == {"removed_unknown": 1, "filled_missing": 1}
    assert repair([res(True)], [1]).actions == {"removed_unknown": 1, "filled_missing": 1}


def test_null_result_is_never_placed():
    out = repair([res(None, "x"), res(1)], [0, 1])
    assert out.value == [missing_error(0), res(1)]
    assert out.actions == {"removed_null": 1, "filled_missing": 1}


def test_single_null_error_goes_to_the_only_empty_slot():
    out = repair([err(None), res(1)], [0, 1])
    assert out.value == [err(0), res(1)]
    assert out.actions == {"placed_null": 1}


def test_null_errors_are_removed_when_the_slot_is_ambiguous():
    out = repair([err(None), err(None), res(2)], [0, 1, 2])
    assert out.value == [missing_error(0), missing_error(1), res(2)]
    assert out.actions == {"removed_null": 2, "filled_missing": 2}


def test_single_error_object_for_a_batch_answers_every_slot():
    out = repair(err(None), [3, 4])
    assert out.value == [err(3), err(4)]
    assert out.actions == {"filled_batch_error": 2, "wrapped_single": 1}


def test_single_response_for_a_batch_is_wrapped():
    out = repair(res(4), [3, 4])
    assert out.value == [missing_error(3), res(4)]
    assert out.actions == {"filled_missing": 1, "wrapped_single": 1}


def test_nothing_to_pair_is_left_alone():
    assert repair(err(None), []).value == err(None)
    assert repair(None, [1]).value is None
    assert not repair("garbage", [1]).changed


def test_request_ids_skip_notifications():
    sent = [
        {"jsonrpc": "2.0", "method": "a", "id": 5},
        {"jsonrpc": "2.0", "method": "n"},
        {"jsonrpc": "2.0", "method": "b", "id": "x"},
    ]
    assert request_ids(sent) == [5, "x"]
    assert request_ids({"jsonrpc": "2.0", "method": "a", "id": 1}) is None


# ------------------------------------------------------------------ property
ids_strategy = st.lists(
    st.one_of(st.integers(0, 50), st.text("abc", min_size=1, max_size=2)),
    min_size=1,
    max_size=12,
    unique=True,
)
faults = st.lists(
    st.sampled_from(["permute", "drop", "duplicate", "unknown", "null_result", "null_error"]),
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(ids_strategy, faults, st.integers(0, 2**32))
def test_output_is_aligned_by_id_to_the_request_order(ids, actions, seed):
    rng = random.Random(seed)
    truth = {i: res(i) for i in ids}
    reply = [truth[i] for i in ids]
    for action in actions:
        if action == "permute":
            rng.shuffle(reply)
        elif action == "drop" and reply:
            reply.pop(rng.randrange(len(reply)))
        elif action == "duplicate" and reply:
            reply.insert(rng.randrange(len(reply) + 1), dict(rng.choice(reply)))
        elif action == "unknown":
            reply.insert(rng.randrange(len(reply) + 1), res(f"never-{rng.random()}"))
        elif action == "null_result":
            reply.insert(rng.randrange(len(reply) + 1), res(None, "stray"))
        else:
            reply.insert(rng.randrange(len(reply) + 1), err(None))
    present = {r["id"] for r in reply if r.get("id") in truth}
    out = repair(reply, ids).value
    assert len(out) == len(ids)
    for request_id, got in zip(ids, out, strict=True):
        assert got["id"] == request_id
        if request_id in present:
            assert got == truth[request_id]  # its own value, never a neighbour's
        else:
            assert "result" not in got  # an explicit error, never a value
            assert got["error"]["code"] in (MISSING_CODE, -32600)
