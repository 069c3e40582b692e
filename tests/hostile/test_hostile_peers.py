"""A hostile peer costs bounded memory and linear time, and the caller sees what it sees bare.

Each case runs twice in a child process under an address-space limit (``child.py``), bare
and instrumented, against the hostile peer (``peer.py``) on loopback.  Each asserts that the
caller saw the same bytes or the same exception, that pairwatch's peak RSS and time stay
within a bound relative to bare, and pairwatch's exact counters: a body past its caps is
*unchecked*, never missing.

CI runs 256 MiB bombs and a 10^5-element batch; ``PAIRWATCH_HOSTILE_BOMB_MIB=1024`` and
``PAIRWATCH_HOSTILE_BATCH=1000000`` run the issue's full sizes.
"""

from __future__ import annotations

from typing import Any

import pytest
from components import need
from hostile_support import MIB, both
from peer import BATCH, ENCODINGS, Peer

RSS_SLACK = 128 * MIB
"""What pairwatch may hold beyond bare: one 64 MiB body at most, one decoding step, books."""

UNCHECKED_CAP = {
    "batch.requests": 1,
    "batch.closed[unchecked]": 1,
    "batch.unchecked_request[body_cap]": 1,
}

LIBRARIES = ("httpx", "requests", "aiohttp")


def run(peer: Peer, path: str, **spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    need(spec.get("library", "httpx"), f"pip install 'pairwatch[{spec.get('library')}]'")
    bare, seen = both({"case": "client", "url": peer.url + path, **spec})
    assert seen["seen"] == bare["seen"], "the caller saw something else"
    assert "Traceback" not in seen["stderr"]
    return bare, seen


def within_memory(bare: dict[str, Any], seen: dict[str, Any]) -> None:
    extra = seen["rss"] - bare["rss"]
    assert extra <= RSS_SLACK, f"pairwatch held {extra / MIB:.0f} MiB more than bare"


RAW_READS = [
    ("httpx", "iter_raw"),
    ("requests", "raw"),
    ("requests", "raw_read"),  # raw.read(decode_content=False): the whole body at once
    ("aiohttp", "raw"),
    ("aiohttp", "raw_read"),  # auto_decompress=False, then read()
]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(("library", "style"), RAW_READS)
def test_a_bomb_read_raw_costs_one_capped_body(peer: Peer, library: str, style: str, encoding: str):
    """The caller reads the compressed bytes; pairwatch decodes its own copy a bounded step
    at a time and stops at the body cap: unchecked, not missing."""
    bare, seen = run(peer, f"/bomb/{encoding}", library=library, style=style)
    within_memory(bare, seen)
    assert seen["counters"] == UNCHECKED_CAP


@pytest.mark.parametrize(
    ("library", "style", "encoding"),
    [
        ("httpx", "read", "gzip"),
        ("httpx", "json", "zstd"),
        ("httpx", "iter_bytes", "br"),
        ("requests", "content", "gzip"),
        ("requests", "iter_content", "deflate"),
        ("aiohttp", "read", "gzip"),
    ],
)
def test_a_bomb_the_client_decodes_adds_at_most_one_capped_body(
    peer: Peer, library: str, style: str, encoding: str
):
    bare, seen = run(peer, f"/bomb/{encoding}", library=library, style=style)
    within_memory(bare, seen)
    assert seen["counters"] == UNCHECKED_CAP


@pytest.mark.parametrize(
    ("library", "style"),
    [("httpx", "iter_lines"), ("httpx", "iter_bytes"), ("requests", "iter_content"),
     ("aiohttp", "chunks")],
)  # fmt: skip
def test_one_long_event_line_is_parsed_in_linear_time(peer: Peer, library: str, style: str):
    """One 16 MB ``data:`` line, read chunk by chunk: pairwatch's parser scans each byte
    once, so it costs at most 3x bare + 1 s, and the reply in it pairs."""
    bare, seen = run(peer, "/sse-line", library=library, style=style)
    assert seen["seconds"] <= 3 * bare["seconds"] + 1.0, (bare["seconds"], seen["seconds"])
    within_memory(bare, seen)
    assert seen["counters"] == {"batch.requests": 1, "batch.closed[stream_end]": 1}


@pytest.mark.parametrize(
    ("library", "style"),
    [("httpx", "iter_bytes"), ("requests", "iter_content"), ("aiohttp", "chunks")],
)
def test_an_event_line_that_never_ends_is_dropped_at_the_cap(peer: Peer, library: str, style: str):
    bare, seen = run(peer, "/sse-endless", library=library, style=style)
    within_memory(bare, seen)
    assert seen["counters"] == UNCHECKED_CAP


@pytest.mark.parametrize(("library", "style"), [("httpx", "json"), ("requests", "json"),
                                                ("aiohttp", "json")])  # fmt: skip
def test_a_reply_that_trickles_in_pairs(peer: Peer, library: str, style: str):
    _bare, seen = run(peer, "/trickle", library=library, style=style)
    assert seen["counters"] == {"batch.requests": 1, "batch.closed[body_end]": 1}


@pytest.mark.parametrize(("library", "style"), [("httpx", "json"), ("requests", "json"),
                                                ("aiohttp", "json")])  # fmt: skip
def test_a_huge_batch_is_paired_whole(peer: Peer, library: str, style: str):
    bare, seen = run(peer, "/batch", library=library, style=style, batch=BATCH)
    within_memory(bare, seen)
    cap = 65536  # max_pending_ids: requests past it are never tracked, and count evicted
    expected = {"batch.requests": BATCH, "batch.closed[body_end]": 1}
    if cap < BATCH:  # their replies are unknown ids; as many replies as requests: no mismatch
        expected["batch.missing_response[evicted]"] = BATCH - cap
        expected["batch.unknown_id_response"] = BATCH - cap
    assert seen["counters"] == expected


@pytest.mark.parametrize(("library", "style"), [("httpx", "json"), ("requests", "json"),
                                                ("aiohttp", "json")])  # fmt: skip
def test_deep_nesting_is_one_unparseable_reply(peer: Peer, library: str, style: str):
    _bare, seen = run(peer, "/nested", library=library, style=style)
    assert seen["counters"] == {
        "batch.requests": 1,
        "batch.closed[body_end]": 1,
        "batch.missing_response[body_end]": 1,
        "batch.invalid_response[unparseable]": 1,  # refused before the decoder recurses
        "batch.response_count_mismatch": 1,
    }


@pytest.mark.parametrize("style", ["json", "read"])
@pytest.mark.parametrize("library", LIBRARIES)
def test_invalid_utf8_in_every_field(peer: Peer, library: str, style: str):
    style = "content" if (library, style) == ("requests", "read") else style
    _bare, seen = run(peer, "/bad-utf8", library=library, style=style, batch=3)
    # Ids 0, 1, 2 sent; replies: an id that is not UTF-8 (unknown, and a bad "jsonrpc"),
    # 1 and 2 (paired: bad bytes inside a string are read as the client reads them).
    assert seen["counters"] == {
        "batch.requests": 3,
        "batch.closed[body_end]": 1,
        "batch.missing_response[body_end]": 1,
        "batch.unknown_id_response": 1,
        "batch.invalid_response[bad_version]": 1,
    }
