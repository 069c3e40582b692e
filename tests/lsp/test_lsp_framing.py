"""The one Content-Length frame parser: what real peers send, split and coalesced, bounded."""

from __future__ import annotations

import json
import random
import time

import pytest

from pairwatch.integrations._kit.framing import MAX_HEADER, FrameParser, frame
from pairwatch.pairing.limits import Budget

BODIES = [
    json.dumps({"jsonrpc": "2.0", "id": i, "result": {"text": "é" * i}}).encode() for i in range(20)
]
STREAM = b"".join(frame(b, content_type=i % 2 == 0) for i, b in enumerate(BODIES))


def feed_all(parser: FrameParser, chunks: list[bytes]) -> list[bytes | str]:
    out: list[bytes | str] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_any_split_of_a_stream_gives_the_same_frames(seed: int):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), 40))
    chunks = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True)]
    budget = Budget(1 << 20)
    parser = FrameParser(1 << 20, budget)
    assert feed_all(parser, chunks) == BODIES
    assert parser.held == 0
    assert budget.used == 0


def test_byte_by_byte_and_all_at_once_agree():
    assert feed_all(FrameParser(1 << 20), [bytes([b]) for b in STREAM]) == BODIES
    assert FrameParser(1 << 20).feed(STREAM) == BODIES


def test_header_names_in_any_case_extra_headers_and_blank_lines_between_frames():
    body = b'{"jsonrpc":"2.0","id":1,"result":null}'
    size = b"%d" % len(body)
    wire = (
        b"content-length: "
        + size
        + b"\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n"
        + body
        + b"\r\n"
        + b"X-Other: 1\r\nCONTENT-LENGTH:"
        + size
        + b" \r\n\r\n"
        + body
    )
    assert FrameParser(1 << 20).feed(wire) == [body, body]


def test_a_body_past_the_cap_is_skipped_by_counting_and_the_stream_goes_on():
    small = b'{"jsonrpc":"2.0","id":2,"result":1}'
    budget = Budget(1 << 20)
    parser = FrameParser(100, budget)
    assert parser.feed(b"Content-Length: 5000\r\n\r\n" + b"x" * 1000) == ["body_cap"]
    assert parser.feed(b"x" * 4000 + frame(small)) == [small]
    assert budget.used == 0


def test_a_huge_content_length_holds_nothing_and_is_reported_at_once():
    parser = FrameParser(1 << 20, Budget(1 << 20))
    head = b"Content-Length: 999999999999999999\r\n\r\n"
    assert parser.feed(head + b"x" * 65536) == ["body_cap"]
    assert parser.feed(b"x" * 65536) == []
    assert parser.held == 0
    assert parser.broken is None


def test_an_endless_header_breaks_the_stream_at_its_cap():
    budget = Budget(1 << 20)
    parser = FrameParser(1 << 20, budget)
    for _ in range(100):
        assert parser.feed(b"A" * 1000) == []
    assert parser.broken == "header_too_long"
    assert parser.held == 0
    assert budget.used == 0
    assert parser.feed(frame(b"{}")) == []  # nothing after it can be framed


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (b"Content-Type: x\r\n\r\n", "no_content_length"),
        (b"Content-Length: -1\r\n\r\n", "bad_content_length"),
        (b"Content-Length: 12abc\r\n\r\n", "bad_content_length"),
        (b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", "bad_content_length"),
    ],
)
def test_a_header_that_frames_nothing_breaks_the_stream(header: bytes, reason: str):
    parser = FrameParser(1 << 20)
    assert parser.feed(header + b"{}") == []
    assert parser.broken == reason


def test_held_bytes_are_charged_before_they_are_held_and_a_refusal_skips_the_frame():
    budget = Budget(10)
    parser = FrameParser(1 << 20, budget)
    assert parser.feed(b"Content-Length: 40\r\n\r\n" + b"y" * 8) == []
    assert budget.used == 8 == parser.held
    assert parser.feed(b"y" * 8) == ["body_budget"]  # 16 would not fit: the frame is skipped
    assert parser.feed(b"y" * 24 + frame(b"{}")) == [b"{}"]
    assert budget.used == 0


def test_the_header_cap_is_a_few_kilobytes():
    assert MAX_HEADER == 8192


def test_many_tiny_frames_cost_linear_time():
    """Twice the frames in one chunk take about twice as long, not four times."""
    one = frame(b'{"jsonrpc":"2.0","method":"$/progress"}')

    def seconds(n: int) -> float:
        data = one * n
        start = time.perf_counter()
        assert len(FrameParser(1 << 20).feed(data)) == n
        return time.perf_counter() - start

    seconds(1000)  # warm up
    small, large = min(seconds(20_000) for _ in range(3)), min(seconds(80_000) for _ in range(3))
    assert large < 8 * small, (small, large)


def test_a_large_body_read_whole_is_copied_out_only_when_the_budget_has_room():
    body = b"z" * (2 << 20)
    budget = Budget(1 << 20)
    parser = FrameParser(1 << 24, budget)
    assert parser.feed(frame(body) + frame(b"{}")) == ["body_budget", b"{}"]
    assert budget.used == 0
    assert FrameParser(1 << 24, Budget(4 << 20)).feed(frame(body)) == [body]
