"""The wire layer: classification, id identity and response validation."""

from __future__ import annotations

import json

import pytest

from pairwatch.pairing import wire
from pairwatch.pairing.wire import IdState, Kind


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1.0, True),
        (1, "1", False),
        ("a", "a", True),
        (2**60, float(2**60), True),
        (0, "0", False),
    ],
)
def test_id_identity_follows_json(a, b, same):
    sa, ka = wire.id_key(a)
    sb, kb = wire.id_key(b)
    assert sa is sb is IdState.VALID
    assert (ka == kb and hash(ka) == hash(kb)) is same
    assert (len({ka, kb}) == 1) is same


@pytest.mark.parametrize("bad", [True, False, {}, [], [1], float("nan"), float("inf")])
def test_booleans_containers_and_nonfinite_are_never_ids(bad):
    assert wire.id_key(bad) == (IdState.BAD_TYPE, None)


def test_true_does_not_pair_with_1():
    payload = wire.parse({"jsonrpc": "2.0", "id": True, "result": 1})
    (msg,) = payload.messages
    assert msg.key is None
    assert msg.id_state is IdState.BAD_TYPE
    assert msg.problem == "bad_id_type"


def test_classifies_every_kind():
    body = json.dumps(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "a"},
            {"jsonrpc": "2.0", "method": "note"},
            {"jsonrpc": "2.0", "id": 2, "result": None},
            {"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "x"}},
            {"jsonrpc": "2.0", "id": 4, "result": 1, "error": {"code": 1, "message": "m"}},
            5,
            {"foo": "bar"},
        ]
    )
    p = wire.parse(body.encode())
    assert p.is_batch
    kinds = [m.kind for m in p.messages]
    assert kinds == [
        Kind.REQUEST,
        Kind.NOTIFICATION,
        Kind.RESULT,
        Kind.ERROR,
        Kind.RESPONSE_INVALID,
        Kind.INVALID,
        Kind.INVALID,
    ]
    assert [m.problem for m in p.messages] == [
        None,
        None,
        None,
        None,
        "both_result_and_error",
        "not_an_object",
        "not_jsonrpc",
    ]
    assert p.messages[3].error_code == -32000


@pytest.mark.parametrize(
    ("element", "problem"),
    [
        ({"jsonrpc": "1.0", "id": 1, "result": 1}, "bad_version"),
        ({"id": 1, "result": 1}, "bad_version"),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}},
            "error_code_not_integer",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
            "error_code_not_integer",
        ),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, "error_message_not_string"),
        ({"jsonrpc": "2.0", "id": 1, "error": "boom"}, "error_not_object"),
        ({"jsonrpc": "2.0", "id": 1}, "no_result_or_error"),
        ({"jsonrpc": "2.0", "result": 1}, "id_absent"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "m"}}, None),
    ],
)
def test_response_validation(element, problem):
    (msg,) = wire.parse(element).messages
    assert msg.problem == problem


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"{not json", "not_json"),
        (b"\xff\xfe{}", "not_utf8"),
        ("[" * 100000, "not_json"),
        (b'{"a": NaN', "not_json"),
    ],
)
def test_bad_input_never_raises(raw, reason):
    p = wire.parse(raw)
    assert p.messages == ()
    assert p.unparseable in (reason, "too_deep")


def test_bom_and_whitespace_are_tolerated():
    p = wire.parse(b'\xef\xbb\xbf \n{"jsonrpc":"2.0","id":7,"result":1}')
    assert p.messages[0].key == 7


def test_empty_array_is_an_empty_batch():
    p = wire.parse(b"[]")
    assert p.is_batch
    assert p.empty_batch
    assert p.messages == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"m"}', True),
        (b'  [{"jsonrpc":"2.0"}]', True),
        (b"<html>jsonrpc</html>", False),
        (b'{"query": "graphql"}', False),
        (b"", False),
        (None, False),
        ('{"jsonrpc":"2.0"}', True),
    ],
)
def test_sniff(body, expected):
    assert wire.sniff(body) is expected
