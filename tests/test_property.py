"""The ledger against a small independent reference model, over random server behaviour."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonrpc_build import dumps, note, req, res
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch import Options

ids = st.one_of(st.integers(0, 6), st.sampled_from(["a", "b", "c"]))
behaviours = st.lists(
    st.sampled_from(["permute", "drop", "duplicate", "null", "corrupt", "retype"]),
    max_size=4,
)


def reference(request_ids, reply_ids, cancelled=()):
    """Count by definition: a multiset of pending ids, answered in arrival order.  Each
    cancelled id first withdraws the oldest request pending under it; a reply that then
    finds no request pending under a withdrawn id came after the withdrawal (once per id)."""
    pending: dict[object, list[int]] = {}
    for index, key in enumerate(request_ids):
        pending.setdefault(key, []).append(index)
    withdrawn = 0
    withdrawn_keys: set[object] = set()
    for key in cancelled:
        if pending.get(key):
            pending[key].pop(0)
            withdrawn += 1
            withdrawn_keys.add(key)
    paired = null = after = 0
    unknown_ids: list[object] = []
    high = -1
    out_of_order = False
    for key in reply_ids:
        if key is None:
            null += 1
        elif pending.get(key):
            index = pending[key].pop(0)
            paired += 1
            if index < high:
                out_of_order = True
            high = max(high, index)
        elif key in withdrawn_keys:
            withdrawn_keys.discard(key)
            after += 1
        else:
            unknown_ids.append(key)
    requests = len(request_ids)
    unknown = len(unknown_ids)
    missing_ids = [k for k, left in pending.items() for _ in left]
    return {
        "diagnosis": reference_diagnosis(request_ids, unknown_ids, null, missing_ids),
        "batch.requests": requests,
        "batch.duplicate_id": requests - len(set(request_ids)),
        "batch.unknown_id_response": unknown,
        "batch.null_id_response": null,
        "batch.missing_response": requests - paired - withdrawn,
        "batch.withdrawn_request": withdrawn,
        "batch.reply_after_withdrawal": after,
        "batch.response_count_mismatch": int(paired + unknown != requests - withdrawn),
        "batch.out_of_order": int(out_of_order),
        "paired": paired,
    }


def reference_diagnosis(request_ids, unknown_ids, null, missing_ids):
    """The DESIGN table, first match wins, from what was sent and what came back.

    Every request element here is valid (no null or fractional ids), so a null-id reply is
    the server's; a type mismatch is an unknown reply id whose text is a missing id's text
    under another JSON type; no batch times out, so nothing is late.
    """
    if len(set(request_ids)) < len(request_ids):
        return "client_duplicate_ids"
    retyped = any(
        type(u) is not type(m) and str(u) == str(m) for u in unknown_ids for m in missing_ids
    )
    unknown = len(unknown_ids)
    if unknown and retyped:
        return "id_type_mismatch"
    if null:
        return "server_null_id"
    if unknown:
        return "server_id_echo_fault"
    if missing_ids:
        return "responses_missing"
    return "ok"


def misbehave(request_ids, actions, rng):
    reply = list(request_ids)
    for action in actions:
        if not reply:
            break
        i = rng.randrange(len(reply))
        if action == "permute":
            rng.shuffle(reply)
        elif action == "drop":
            reply.pop(i)
        elif action == "duplicate":
            reply.insert(rng.randrange(len(reply) + 1), reply[i])
        elif action == "null":
            reply[i] = None
        elif action == "corrupt":
            reply[i] = 1000 + i
        elif action == "retype":
            key = reply[i]
            reply[i] = str(key) if isinstance(key, int) else key
    return reply


@settings(max_examples=300, deadline=None)
@given(
    st.lists(ids, min_size=1, max_size=12),
    st.integers(0, 3),
    behaviours,
    st.randoms(),
    st.lists(ids, max_size=3),
)
def test_ledger_matches_reference_model(request_ids, notes, actions, rnd, cancelled):
    rng = random.Random(rnd.random())
    reply_ids = misbehave(request_ids, actions, rng)
    otel, clock = Otel(), FakeClock()
    channel = pairwatch.open_channel(
        bound=True, options=Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    )
    body = [req(k) for k in request_ids]
    for _ in range(notes):  # notifications anywhere, requests keep their order
        body.insert(rng.randrange(len(body) + 1), note())
    # The caller withdraws some ids (MCP's notifications/cancelled) in the same write, after
    # the requests: one exchange, as over HTTP.
    body += [cancel(k) for k in cancelled]
    channel.sent(dumps(body))
    clock.advance(0.01)
    channel.received(dumps([res(k) for k in reply_ids]))
    channel.close("body_end")

    expected = reference(request_ids, reply_ids, cancelled)
    got = otel.counters()
    diagnosis = expected.pop("diagnosis")
    assert otel.value("batch.closed", pairwatch__diagnosis=diagnosis) == 1, (
        diagnosis,
        request_ids,
        reply_ids,
        cancelled,
    )
    for name, value in expected.items():
        if name != "paired":
            assert got.get(name, 0) == value, (name, request_ids, reply_ids, cancelled)
    assert otel.hist("batch.pair_latency")[0] == expected["paired"]
    # The books balance: paired + missing + withdrawn == requests sent.
    missing = got.get("batch.missing_response", 0)
    withdrawn = got.get("batch.withdrawn_request", 0)
    assert expected["paired"] + missing + withdrawn == len(request_ids)
    assert otel.hist("batch.size") == (1, len(body))


def cancel(key: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key}}
