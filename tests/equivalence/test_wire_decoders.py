"""The msgspec path classifies every body exactly as the stdlib path does."""

from __future__ import annotations

import json

import pytest
from components import need
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwatch.pairing import wire

wire_fast = need(
    "pairwatch.pairing._fast", "pip install 'pairwatch[fast]' (msgspec; scripts/bootstrap.sh does)"
)

# The wire test-suite's elements and bodies, as the bytes an integration would hand over.
ELEMENTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "a"},
    {"jsonrpc": "2.0", "method": "note"},
    {"jsonrpc": "2.0", "id": 2, "result": None},
    {"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "x"}},
    {"jsonrpc": "2.0", "id": 4, "result": 1, "error": {"code": 1, "message": "m"}},
    5,
    {"foo": "bar"},
    {"jsonrpc": "1.0", "id": 1, "result": 1},
    {"id": 1, "result": 1},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": 1}},
    {"jsonrpc": "2.0", "id": 1, "error": "boom"},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "result": 1},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "m"}},
    {"jsonrpc": "2.0", "id": True, "result": 1},
    {"jsonrpc": "2.0", "id": 1.0, "result": 1},
    {"jsonrpc": "2.0", "id": 1.5, "method": "m"},
    {"jsonrpc": "2.0", "id": "7", "method": 3},
    {"jsonrpc": "2.0", "id": [1], "method": "m"},
    {"jsonrpc": None, "id": {}, "result": 1},
]
RAW = [
    b"",
    b"   \n",
    b"{not json",
    b"\xff\xfe{}",
    b"[" * 100000,
    b'{"a": NaN',
    b'{"jsonrpc":"2.0","id":NaN,"result":1}',
    b'{"jsonrpc":"2.0","id":1e400,"result":1}',
    b'\xef\xbb\xbf \n{"jsonrpc":"2.0","id":7,"result":1}',
    b"[]",
    b"null",
    b'"jsonrpc"',
    b'{"jsonrpc":"2.0","id":1,"result":"\xff"}',
    b'{"jsonrpc":"2.0","id":1,"result":"\\ud800"}',
    b'{"jsonrpc":"2.0","id":1,"result":' + b"9" * 5000 + b"}",
    b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"result":1}',
    b'{"jsonrpc":"2.0","\\u0069d":1,"result":1}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"result":1}',
    b'{"jsonrpc":"2.0","id":1,"result":1} trailing',
    '{"jsonrpc":"2.0","id":1,"method":"\u00e9"}'.encode(),
    b'[{"jsonrpc":"2.0","id":1,"result":1},[1]]',
]
BODIES = RAW + [json.dumps(e).encode() for e in ELEMENTS] + [json.dumps(ELEMENTS).encode()]


@pytest.mark.parametrize("raw", BODIES, ids=range(len(BODIES)))
def test_both_paths_agree_on_the_wire_cases(raw):
    assert wire.parse(raw) == wire.parse_stdlib(raw)
    text = raw.decode("utf-8", "replace")
    assert wire.parse(text) == wire.parse_stdlib(text)


def test_ordinary_bodies_take_the_fast_path():
    body = json.dumps(ELEMENTS[:4] + ELEMENTS[7:]).encode()
    assert wire_fast.parse_bytes(body) == wire.parse_stdlib(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
member_values = st.one_of(
    json_values, st.sampled_from(["2.0", "1.0", 0, -1, 2**70, 1.0, 0.5, "m", ""])
)
elements = st.one_of(
    st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "result", "error", "params", "x"]),
        member_values,
    ),
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": member_values},
        optional={
            "error": st.fixed_dictionaries({"code": member_values, "message": member_values})
        },
    ),
    json_values,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(elements, st.lists(elements, max_size=6)))
def test_both_paths_agree_on_random_json(value):
    raw = json.dumps(value).encode()
    assert wire.parse(raw) == wire.parse_stdlib(raw)
