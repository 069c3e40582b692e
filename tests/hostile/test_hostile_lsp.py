"""A hostile language server's stdout: bounded memory, linear time, exact books.

Each case runs in a child under an address-space limit (``child.py``, case ``lsp``), bare and
instrumented through ``pairwatch.instrument_streams``: a plain client reads a pipe the
hostile peer writes, in 64 KiB chunks, to its end.  The caller must read the same bytes;
pairwatch may hold no more than a few MiB beyond bare, however long the header or the body.
"""

from __future__ import annotations

from typing import Any

from hostile_support import MIB, both, run_child

SLACK = 16 * MIB
"""What pairwatch may hold beyond bare here: one header block, its books, no body."""


def compare(what: str, **spec: Any) -> dict[str, Any]:
    bare, seen = both({"case": "lsp", "what": what, **spec})
    assert seen["seen"] == bare["seen"], "the caller read something else"
    assert "Traceback" not in seen["stderr"]
    extra = seen["rss"] - bare["rss"]
    assert extra <= SLACK, f"pairwatch held {extra / MIB:.1f} MiB more than bare"
    return seen


def test_an_endless_header_line_breaks_the_framing_at_8_kib():
    """256 MiB without a line end: the stream cannot be framed; what waits is unchecked."""
    seen = compare("header")
    assert seen["counters"] == {
        "batch.requests": 1,
        "batch.closed[unchecked]": 1,
        "batch.unchecked_request[framing]": 1,
    }


def test_a_huge_content_length_is_skipped_by_counting():
    """Content-Length 10^15, then 256 MiB of it: nothing held, the request unchecked at
    once (the body that might answer it cannot be read), never missing."""
    seen = compare("length")
    assert seen["counters"] == {
        "batch.requests": 1,
        "batch.closed[unchecked]": 1,
        "batch.unchecked_request[body_cap]": 1,
    }


def test_many_tiny_frames_cost_linear_time_and_the_reply_still_pairs():
    """200,000 ``$/progress`` frames coalesced in 64 KiB reads, then the reply."""
    seen = compare("tiny", frames=200_000)
    assert seen["counters"] == {"batch.requests": 1, "batch.closed[complete]": 1}
    half = run_child({"case": "lsp", "what": "tiny", "frames": 100_000, "mode": "instrumented"})
    assert seen["seconds"] <= 3 * half["seconds"] + 0.5, (half["seconds"], seen["seconds"])
