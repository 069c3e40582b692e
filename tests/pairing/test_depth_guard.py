"""A deeply nested body is ``too_deep``, never a crash, even after an app raised the limit.

web3 (through py_ecc) raises the recursion limit to 100000; the C decoders then recurse until
the C stack overflows.  Each case runs in a fresh interpreter with that limit, so a crash
shows as the child's exit status (a segfault), not as a dead test runner.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pairwatch.pairing import depth, wire

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.setrecursionlimit(100000)
    from pairwatch.pairing import wire

    out = {}
    deep = "[" * 100000
    out["bytes"] = wire.parse(deep.encode()).unparseable
    out["str"] = wire.parse(deep).unparseable
    out["stdlib"] = wire.parse_stdlib(deep.encode()).unparseable
    out["decode"] = wire.decode(deep.encode())[1]
    balanced = "[" * 50000 + "]" * 50000
    out["balanced"] = wire.parse(balanced.encode(), "result").unparseable
    objects = '{"a":' * 50000 + "1" + "}" * 50000
    out["objects"] = wire.parse(objects.encode()).unparseable
    out["sniff"] = wire.sniff(b'{"jsonrpc":"2.0","id":1,"result":' + deep.encode())
    out["is_jsonrpc"] = wire.is_jsonrpc('[{"jsonrpc":"2.0"},' + balanced + "]")
    # Brackets inside strings are text: a healthy reply carrying them still pairs.
    text = json.dumps({"jsonrpc": "2.0", "id": 3, "result": "[" * 5000 + '\\\\"'})
    parsed = wire.parse(text.encode(), "result")
    out["in_string"] = [parsed.unparseable, [m.key for m in parsed.messages]]
    # A large healthy batch (far more brackets than the cap, all shallow) still decodes.
    big = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "result": [[i]]} for i in range(2000)]
    ).encode()
    parsed = wire.parse(big, "result")
    out["big"] = [parsed.unparseable, parsed.size]
    print(json.dumps(out))
    """
)


def test_deep_bodies_are_too_deep_under_a_raised_recursion_limit() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"child died with {proc.returncode}: {proc.stderr[-2000:]}"
    out = json.loads(proc.stdout)
    assert out == {
        "bytes": "too_deep",
        "str": "too_deep",
        "stdlib": "too_deep",
        "decode": "too_deep",
        "balanced": "too_deep",
        "objects": "too_deep",
        "sniff": False,
        "is_jsonrpc": False,
        "in_string": [None, [3]],
        "big": [None, 2000],
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[" * 600, 600),
        ("[" * 10 + "]" * 10, 10),
        ('["' + "[" * 900 + '"]', 1),  # brackets in a string are text
        ('["\\\\", ' + "[" * 600 + "]" * 600 + "]", 601),  # an escaped backslash ends no string
        ('["\\"' + "[" * 600 + '"]', 1),  # an escaped quote does not end the string
        ('{"a":' * 700 + "1" + "}" * 700, 700),
        ("[" + "[]" * 1000 + "]", 2),  # many brackets, shallow
    ],
)
def test_depth_bound_is_never_below_the_real_nesting(body: str, expected: int) -> None:
    # Beyond the cap the measure stops early: only "deeper than the cap" is known.
    cap = depth.MAX_DEPTH + 1
    assert min(depth._depth_bound(body.encode()), cap) == min(expected, cap)


def test_default_limit_measures_nothing() -> None:
    """Under the default limit the decoders protect themselves: no scan, no cost."""
    assert sys.getrecursionlimit() <= depth.SAFE_RECURSION_LIMIT
    assert depth.too_deep("[" * 100000) is False
    assert wire.parse("[" * 100000).unparseable == "too_deep"  # the decoder's own limit
